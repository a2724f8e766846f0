"""The inspector's Context, Forks, Sessions-count and Memory-history views over plain
HTTP: the context's items with their provenance and reasons, a too-small budget, the
lineage tree both ways with its bounds, the count of the sessions the filters match,
the working-memory versions and the shared documents."""

from __future__ import annotations

import html
import re

from fastapi.testclient import TestClient
from ui_support import Inspector, log_in

from agentsession.ui import lineage


def _rows(html: str) -> list[str]:
    """The decisions of the Context view's rows, in order."""
    return re.findall(r'<tr class="decision-(\w+)">', html)


def test_the_context_view_explains_every_item(client: TestClient, inspector: Inspector) -> None:
    log_in(client, inspector.alice)
    sid = inspector.seeded.alice_session
    ctx = inspector.manager.build_context(
        session_id=sid, user_id="alice", budget_tokens=8000, explain=True
    )
    assert ctx.explanation is not None
    page = client.get(f"/ui/sessions/{sid}/context")
    assert page.status_code == 200
    assert _rows(page.text) == [i.decision for i in ctx.explanation]
    assert "its tool call, result or reasoning successor is not in the window" in page.text
    assert f"working memory v{ctx.explanation[0].memory_version}" in page.text
    assert f"{ctx.total_tokens} of 8000 tokens" in page.text
    # A new user message lets the summary of 1..4 stand in for them.
    inspector.manager.append_message(
        session_id=sid, user_id="alice", message={"role": "user", "content": "next"}
    )
    summed = client.get(f"/ui/sessions/{sid}/context").text
    assert "summary #1" in summed and "covered by the summary sent" in summed
    assert _rows(summed)[:3] == ["kept", "kept", "summarised"]
    tight = client.get(f"/ui/sessions/{sid}/context?budget=130")
    small = inspector.manager.build_context(
        session_id=sid, user_id="alice", budget_tokens=130, explain=True
    )
    assert small.explanation is not None and "dropped" in _rows(tight.text)
    assert _rows(tight.text) == [i.decision for i in small.explanation]
    assert "older than the oldest cut that fits the budget" in tight.text
    refused = client.get(f"/ui/sessions/{sid}/context?budget=1")
    assert refused.status_code == 200 and "they need" in refused.text
    other = client.get(f"/ui/sessions/{inspector.seeded.bob_session}/context")
    assert other.status_code == 404


def test_the_forks_view_shows_ancestors_and_descendants(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    sm, sid = inspector.manager, inspector.seeded.alice_session
    a = {"user_id": "alice"}
    child = inspector.seeded.fork_session
    grandchild = sm.fork_session(**a, session_id=child, at_seq=1).session_id
    root_page = client.get(f"/ui/sessions/{sid}/forks").text
    assert child in root_page and grandchild in root_page
    leaf_page = client.get(f"/ui/sessions/{grandchild}/forks").text.split('class="lineage"')[1]
    assert leaf_page.index(sid) < leaf_page.index(child) < leaf_page.index(grandchild)
    for _ in range(lineage.WIDTH):
        sm.fork_session(**a, session_id=sid, at_seq=1)
    wide = client.get(f"/ui/sessions/{sid}/forks").text
    assert f'href="/ui/?parent={sid}"' in wide  # the "more" link: 11 forks, 10 shown
    assert client.get(f"/ui/sessions/{inspector.seeded.bob_session}/forks").status_code == 404
    assert inspector.seeded.bob_session not in client.get(f"/ui/sessions/{sid}/forks").text


def test_the_sessions_view_counts_what_the_filters_match(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    assert "2 sessions match these filters" in client.get("/ui/").text
    sid = inspector.seeded.alice_session
    assert "1 session matches" in client.get(f"/ui/?parent={sid}").text
    assert "0 sessions match" in client.get("/ui/?agent=nobody").text
    client.cookies.clear()
    log_in(client, inspector.admin)
    assert "3 sessions match" in client.get("/ui/").text


def test_a_fork_whose_messages_name_the_parents_runs_opens(
    client: TestClient, inspector: Inspector
) -> None:
    """A fork copies its messages with their run ids; the runs stay the parent's, and
    the fork's timeline shows the messages without them (it was a 404)."""
    log_in(client, inspector.alice)
    sm, sid = inspector.manager, inspector.seeded.alice_session
    fork = sm.fork_session(session_id=sid, user_id="alice", at_seq=3)
    page = client.get(f"/ui/sessions/{fork.session_id}")
    assert page.status_code == 200 and 'id="seq-3"' in page.text


def test_the_memory_view_lists_versions_and_shared_memory(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    sm, sid = inspector.manager, inspector.seeded.alice_session
    a = {"session_id": sid, "user_id": "alice"}
    page = client.get(f"/ui/sessions/{sid}/memory").text
    count = sm.get_session(**a).message_count
    versions = {sm.get_working_memory(**a, at_seq=n).version for n in range(count + 1)}
    listed = re.findall(r">version (\d+)</a>", page)
    assert sorted(int(x) for x in listed) == sorted(versions)
    assert "shared_memory:&lt;script&gt;" in page and "needs an admin key" in page
    client.cookies.clear()
    log_in(client, inspector.admin)
    admin_page = client.get(f"/ui/sessions/{sid}/memory").text
    assert "App document of agent" in admin_page and "shared_memory:&lt;script&gt;" in admin_page


def test_the_memory_view_pages_its_versions_through_the_listing(
    client: TestClient, inspector: Inspector
) -> None:
    """Ten versions a page, newest first, from ``list_memory_versions``; "Older
    versions" follows its cursor to the rest."""
    log_in(client, inspector.alice)
    sm = inspector.manager
    sid = sm.create_session(user_id="alice", working_memory={"n": 0}).session_id
    a = {"session_id": sid, "user_id": "alice"}
    for n in range(1, 15):
        sm.append_message(**a, message={"role": "user", "content": "x"})
        sm.update_working_memory(**a, patch={"n": n})
    want = [str(v.version) for v in sm.list_memory_versions(**a, limit=100)]
    first = client.get(f"/ui/sessions/{sid}/memory").text
    assert re.findall(r">version (\d+)</a>", first) == want[:10]
    [older] = re.findall(r'href="([^"]+)">Older versions', first)
    rest = client.get(html.unescape(older)).text
    assert re.findall(r">version (\d+)</a>", rest) == want[10:]
    assert "Older versions" not in rest
