"""The inspector's writes over plain HTTP: each action through its confirm page, the
confirm step required, CSRF, a stale page refused without writing, a double submit
writing once, the audit events, and read-only for a key that is not the owner's."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from ui_support import SESSION_PAGES, Inspector, log_in

from agentsession import SessionNotFound, SessionStatus

_HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')


def confirm(client: TestClient, sid: str, action: str, **query: Any) -> dict[str, str]:
    """Open the confirm page of ``action`` (as the session page links it) and return
    the fields its form posts."""
    page = client.get(f"/ui/sessions/{sid}/do/{action}", params=query)
    assert page.status_code == 200, page.text
    return dict(_HIDDEN.findall(page.text))


def post(client: TestClient, sid: str, action: str, form: dict[str, str]) -> httpx.Response:
    return client.post(f"/ui/sessions/{sid}/do/{action}", data=form, follow_redirects=False)


def test_the_session_page_links_each_action_to_its_confirm_page(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    sid = inspector.seeded.alice_session
    s = inspector.manager.get_session(session_id=sid, user_id="alice")
    page = client.get(f"/ui/sessions/{sid}").text
    for action in ("close", "expire", "delete"):
        assert f"/ui/sessions/{sid}/do/{action}?v={s.version}" in page
    assert f"/do/fork?v={s.version}&amp;seq=1" in page
    assert f"/do/rewind?v={s.version}&amp;seq=1" in page


def test_close_needs_the_confirm_step_and_csrf_then_writes_once(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    sm, sid = inspector.manager, inspector.seeded.alice_session
    a = {"session_id": sid, "user_id": "alice"}
    before = sm.get_session(**a)
    form = confirm(client, sid, "close", v=before.version)
    assert form["expected_version"] == str(before.version) and form["confirmed"] == "yes"
    unconfirmed = post(client, sid, "close", {**form, "confirmed": ""})
    assert unconfirmed.status_code == 200 and "Yes, close" in unconfirmed.text
    forged = post(client, sid, "close", {**form, "csrf": "0" * 64})
    assert forged.status_code == 403
    assert sm.get_session(**a).version == before.version  # nothing written yet
    first, second = post(client, sid, "close", form), post(client, sid, "close", form)
    assert first.status_code == second.status_code == 303
    assert first.headers["location"] == second.headers["location"] == f"/ui/sessions/{sid}"
    after = sm.get_session(**a)
    assert after.status == SessionStatus.CLOSED and after.version == before.version + 1
    third = post(client, sid, "close", form)
    assert third.status_code == 303 and sm.get_session(**a) == after
    [event] = [e for e in sm.get_audit_log(**a, limit=100) if e.version_after == after.version]
    assert event.action == "session.closed" and event.request_id


def test_a_stale_page_is_refused_and_nothing_is_written(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    sm, sid = inspector.manager, inspector.seeded.alice_session
    a = {"session_id": sid, "user_id": "alice"}
    loaded = sm.get_session(**a)
    forms = {
        "close": confirm(client, sid, "close", v=loaded.version),
        "rewind": confirm(client, sid, "rewind", v=loaded.version, seq=2),
        "fork": confirm(client, sid, "fork", v=loaded.version, seq=2),
        "delete": confirm(client, sid, "delete", v=loaded.version),
    }
    sm.append_message(**a, message={"role": "user", "content": "meanwhile"})
    now = sm.get_session(**a)
    forks = sm.count_sessions(user_id="alice", parent_session_id=sid)
    for action, form in forms.items():
        r = post(client, sid, action, form)
        assert r.status_code == 409, action
        assert "changed since you loaded it" in r.text and "Nothing was written" in r.text
    assert sm.get_session(**a) == now
    assert sm.count_sessions(user_id="alice", parent_session_id=sid) == forks


def test_fork_and_rewind_here_write_once(client: TestClient, inspector: Inspector) -> None:
    log_in(client, inspector.alice)
    sm, sid = inspector.manager, inspector.seeded.alice_session
    a = {"session_id": sid, "user_id": "alice"}
    v = sm.get_session(**a).version
    forks = sm.count_sessions(user_id="alice", parent_session_id=sid)
    form = confirm(client, sid, "fork", v=v, seq=3)
    first, second = post(client, sid, "fork", form), post(client, sid, "fork", form)
    assert first.headers["location"] == second.headers["location"]
    fork_id = first.headers["location"].rsplit("/", 1)[1]
    fork = sm.get_session(session_id=fork_id, user_id="alice")
    assert (fork.parent_session_id, fork.fork_seq) == (sid, 3)
    assert sm.count_sessions(user_id="alice", parent_session_id=sid) == forks + 1
    form = confirm(client, sid, "rewind", v=v, seq=5)
    assert post(client, sid, "rewind", form).status_code == 303
    assert post(client, sid, "rewind", form).status_code == 303
    after = sm.get_session(**a)
    assert after.message_count == 5 and after.version == v + 1
    assert len(sm.list_rewinds(**a, limit=100)) == 2  # the seeded one and this one


def test_expire_restore_and_delete(client: TestClient, inspector: Inspector) -> None:
    log_in(client, inspector.alice)
    sm, sid = inspector.manager, inspector.seeded.alice_session
    a = {"session_id": sid, "user_id": "alice"}
    for action, status in (("expire", SessionStatus.EXPIRED), ("restore", SessionStatus.ACTIVE)):
        form = confirm(client, sid, action, v=sm.get_session(**a).version)
        assert post(client, sid, action, form).status_code == 303
        assert post(client, sid, action, form).status_code == 303  # the double submit
        assert sm.get_session(**a).status == status
    form = confirm(client, sid, "delete", v=sm.get_session(**a).version)
    for _ in range(2):
        r = post(client, sid, "delete", form)
        assert r.status_code == 303 and r.headers["location"] == "/ui/"
    with pytest.raises(SessionNotFound):
        sm.get_session(**a)


def test_a_key_not_the_owners_is_read_only(client: TestClient, inspector: Inspector) -> None:
    sm, sid = inspector.manager, inspector.seeded.alice_session
    a = {"session_id": sid, "user_id": "alice"}
    log_in(client, inspector.alice)
    form = confirm(client, sid, "close", v=sm.get_session(**a).version)
    client.cookies.clear()
    log_in(client, inspector.admin)
    page = client.get(f"/ui/sessions/{sid}").text
    assert "Read-only" in page and "/do/" not in page
    assert client.get(f"/ui/sessions/{sid}/do/close?v=1").status_code == 403
    admin_csrf = re.findall(r'name="csrf" value="([^"]*)"', page)[0]
    assert post(client, sid, "close", {**form, "csrf": admin_csrf}).status_code == 403
    assert sm.get_session(**a).status == SessionStatus.ACTIVE
    client.cookies.clear()
    log_in(client, inspector.bob)
    assert client.get(f"/ui/sessions/{sid}/do/close?v=1").status_code == 404
    assert post(client, sid, "close", form).status_code in (403, 404)
    assert sm.get_session(**a).status == SessionStatus.ACTIVE


def test_a_read_key_sees_every_page_and_writes_nothing(
    client: TestClient, inspector: Inspector
) -> None:
    """A ``read`` key of the owner signs in, sees the session's pages, and is offered no
    write; a forged write is refused and changes nothing."""
    sm, sid = inspector.manager, inspector.seeded.alice_session
    a = {"session_id": sid, "user_id": "alice"}
    read_key = inspector.app.state.services.keys.create(user_id="alice", scope="read")[1]
    log_in(client, inspector.alice)
    form = confirm(client, sid, "close", v=sm.get_session(**a).version)
    client.cookies.clear()
    assert log_in(client, read_key).status_code == 303
    for page in SESSION_PAGES:
        assert client.get(f"/ui/sessions/{sid}{page}").status_code == 200, page
    page = client.get(f"/ui/sessions/{sid}").text
    assert "Read-only" in page and "/do/" not in page
    assert client.get(f"/ui/sessions/{sid}/do/close?v=1").status_code == 403
    csrf = re.findall(r'name="csrf" value="([^"]*)"', page)[0]
    assert post(client, sid, "close", {**form, "csrf": csrf}).status_code == 403
    assert sm.get_session(**a).status == SessionStatus.ACTIVE
