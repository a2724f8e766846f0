"""The live tail's two routes over plain HTTP: the tail fragment (the messages after a
seq and the element that goes on from the last one; a history cut back below it is
said), and the event stream's refusals (not signed in, another user's session, a bad
cursor: 204, which stops the browser's reconnects)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from ui_support import Inspector, log_in


def test_the_tail_fragment_goes_on_from_the_last_message(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    sm, sid = inspector.manager, inspector.seeded.alice_session
    a = {"session_id": sid, "user_id": "alice"}
    count = sm.get_session(**a).message_count
    page = client.get(f"/ui/sessions/{sid}").text
    assert f'hx-get="/ui/sessions/{sid}/tail?after={count}"' in page
    assert f'sse-connect="/ui/sessions/{sid}/live' in page
    assert client.get(f"/ui/sessions/{sid}/tail?after={count}").text.count("<article") == 0
    sm.append_message(**a, message={"role": "user", "content": "<script>window.__xss=1</script>"})
    fragment = client.get(f"/ui/sessions/{sid}/tail?after={count}").text
    assert re.findall(r'id="seq-(\d+)"', fragment) == [str(count + 1)]
    assert "<script>window" not in fragment and "&lt;script&gt;" in fragment
    assert f"/tail?after={count + 1}" in fragment
    sm.truncate_messages(**a, after_seq=count - 1)
    cut = client.get(f"/ui/sessions/{sid}/tail?after={count + 1}").text
    assert "cut back" in cut and "hx-get" not in cut


def test_the_stream_refuses_with_204(client: TestClient, inspector: Inspector) -> None:
    sid, bob = inspector.seeded.alice_session, inspector.seeded.bob_session
    assert client.get(f"/ui/sessions/{sid}/live").status_code == 204  # not signed in
    log_in(client, inspector.alice)
    assert client.get(f"/ui/sessions/{bob}/live").status_code == 204
    assert client.get("/ui/sessions/nope/live").status_code == 204
    assert client.get(f"/ui/sessions/{sid}/live?after=garbage").status_code == 204
    assert client.get(f"/ui/sessions/{bob}/tail").status_code == 404
