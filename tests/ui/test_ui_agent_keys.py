"""The inspector signed in with a key limited to an agent: its pages list and open only
that agent's sessions; another agent's session is 404, as a missing one."""

from __future__ import annotations

from fastapi.testclient import TestClient
from ui_support import build, log_in


def test_c31_the_inspector_shows_only_the_keys_agents_sessions() -> None:
    inspector = build()
    sm = inspector.manager
    mine = sm.create_session(user_id="alice", agent="support", title="support one")
    theirs = inspector.seeded.alice_session  # of another agent of alice
    with TestClient(inspector.app) as client:
        keys = inspector.app.state.services.keys
        log_in(client, keys.create(user_id="alice", agents=["support"])[1])
        listed = client.get("/ui/")
        assert listed.status_code == 200, listed.text
        assert mine.session_id in listed.text and theirs not in listed.text
        assert client.get(f"/ui/sessions/{mine.session_id}").status_code == 200
        hidden = client.get(f"/ui/sessions/{theirs}")
        missing = client.get("/ui/sessions/ses_" + "a" * 26)
        assert hidden.status_code == missing.status_code == 404
    with TestClient(inspector.app) as client:  # an unlimited key of alice sees both
        log_in(client, inspector.alice)
        listed = client.get("/ui/").text
        assert mine.session_id in listed and theirs in listed
