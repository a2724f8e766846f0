"""``agentsession changes``: a page of the change feed, JSON lines, the cursor that
continues it, ``--session``, and ``--follow`` printing a change committed by another
process's manager while it runs."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from typer.testing import CliRunner

from agentsession import SessionManager
from agentsession.cli.app import build_app

MSG = {"role": "user", "content": "hi"}


def _store(tmp_path: Path) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as m:
        sid = m.create_session(user_id="alice").session_id
        m.append_message(session_id=sid, user_id="alice", message=MSG)
        m.create_session(user_id="bob")
    return url, sid


def test_changes_prints_a_page_and_how_to_go_on(tmp_path: Path) -> None:
    url, sid = _store(tmp_path)
    runner = CliRunner()
    base = ["--url", url, "changes", "--user", "alice"]
    plain = runner.invoke(build_app(), base)
    assert plain.exit_code == 0, plain.output
    lines = plain.stdout.splitlines()
    assert [line.split()[4] for line in lines] == ["session.created", "message.appended"]
    assert all(sid in line for line in lines)
    assert "next: --after 2" in plain.stderr
    as_json = runner.invoke(build_app(), [*base, "--json", "--limit", "1"])
    first = json.loads(as_json.stdout)
    assert first["action"] == "session.created" and first["session_id"] == sid
    rest = runner.invoke(build_app(), [*base, "--json", "--after", first["cursor"]])
    assert [json.loads(x)["action"] for x in rest.stdout.splitlines()] == ["message.appended"]
    one = runner.invoke(build_app(), [*base, "--session", sid, "--json"])
    assert len(one.stdout.splitlines()) == 2
    refused = runner.invoke(build_app(), [*base, "--all-users"])
    assert refused.exit_code != 0 and "admin" in refused.output


def test_changes_follow_prints_new_commits(tmp_path: Path) -> None:
    url, sid = _store(tmp_path)

    def later() -> None:
        with SessionManager.from_url(url) as other:
            other.close_session(session_id=sid, user_id="alice")

    writer = threading.Timer(0.3, later)
    writer.start()
    args = ["--url", url, "changes", "--user", "alice", "--follow", "--timeout", "2", "--json"]
    followed = CliRunner().invoke(build_app(), args)
    writer.join()
    assert followed.exit_code == 0, followed.output
    actions = [json.loads(x)["action"] for x in followed.stdout.splitlines()]
    assert actions == ["session.created", "message.appended", "session.closed"]
