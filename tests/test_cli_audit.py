"""``agentsession audit verify``: exit 0 on an intact store, 1 naming the first broken
link once an audit row was changed in the database behind the service's back."""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa
from typer.testing import CliRunner

from agentsession import SessionManager
from agentsession.cli.app import build_app
from agentsession.ids import new_id

MSG = {"role": "user", "content": "hi"}


def test_verify_exits_1_naming_a_changed_event(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as m:
        sid = m.create_session(user_id="alice").session_id
        m.append_message(session_id=sid, user_id="alice", message=MSG)
    runner = CliRunner()
    ok = runner.invoke(build_app(), ["--url", url, "audit", "verify"])
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.startswith("intact: 1 sessions, 2 audit events")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE audit_events SET actor = 'mallory' WHERE version_after = 2")
    engine.dispose()
    bad = runner.invoke(build_app(), ["--url", url, "audit", "verify", "--session", sid])
    assert bad.exit_code == 1, bad.output
    assert f"broken: session {sid}, version 2: changed" in bad.stdout
    as_json = runner.invoke(build_app(), ["--url", url, "audit", "verify", "--json"])
    assert as_json.exit_code == 1
    broken = json.loads(as_json.stdout)["broken"]
    assert (broken["session_id"], broken["version"], broken["problem"]) == (sid, 2, "changed")


def test_f2_verify_of_a_session_never_seen_is_not_found(tmp_path: Path) -> None:
    """``--session`` of an id with no row, event or session-chain link: an error."""
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as m:
        m.create_session(user_id="alice")
    missing = new_id("ses")
    got = CliRunner().invoke(build_app(), ["--url", url, "audit", "verify", "--session", missing])
    assert got.exit_code == 3, got.output
    assert "not found" in got.output.lower(), got.output


def test_f3_a_missing_link_is_named_with_its_session(tmp_path: Path) -> None:
    """The newest session-chain link removed: the line names the link and its session."""
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as m:
        m.create_session(user_id="alice")
        sid = m.create_session(user_id="alice").session_id
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM session_chain WHERE seq = 2")
    engine.dispose()
    got = CliRunner().invoke(build_app(), ["--url", url, "audit", "verify"])
    assert got.exit_code == 1, got.output
    assert got.stdout.startswith(f"broken: the session chain, link 2 (session {sid}): removed")
