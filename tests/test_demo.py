"""`agentsession demo`: workspace safety (fast) and the real two-process run (slow), on
SQLite and against a running `agentsession serve` (``--server``)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agentsession import RunStatus, SessionStatus
from agentsession.client import SessionClient
from agentsession.demo import DemoError
from agentsession.demo.runner import _Backend, _look_again
from agentsession.demo.workspace import use_project
from service import running_service


def test_demo_refuses_to_empty_a_directory_it_did_not_make(tmp_path: Path) -> None:
    """A non-empty --workdir without the demo's marker is left alone."""
    (tmp_path / "precious.txt").write_text("keep me")
    project = tmp_path.parent / f"{tmp_path.name}-project"
    project.mkdir()
    with pytest.raises(DemoError, match="not made by the demo"):
        use_project(tmp_path, project, "python app.py")
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_demo_refuses_a_project_inside_the_workdir(tmp_path: Path) -> None:
    """--project inside --workdir would be deleted, so it is refused."""
    (tmp_path / "proj").mkdir()
    with pytest.raises(DemoError, match="must not be inside"):
        use_project(tmp_path, tmp_path / "proj", "python app.py")


def test_a_run_that_does_not_use_the_store_keeps_it(tmp_path: Path) -> None:
    """`demo --server` keeps .demo/sessions.db of an earlier local run; a local run
    starts from a fresh one."""
    workdir, project = tmp_path / "demo", tmp_path / "project"
    project.mkdir()
    use_project(workdir, project, "python app.py")
    for name in ("sessions.db", "sessions.db-wal", "other.txt"):
        (workdir / name).write_text("x")
    use_project(workdir, project, "python app.py", keep_store=True)
    assert sorted(p.name for p in workdir.iterdir()) == [
        ".agentsession-demo",
        "sessions.db",
        "sessions.db-wal",
    ]
    use_project(workdir, project, "python app.py")
    assert [p.name for p in workdir.iterdir()] == [".agentsession-demo"]


def test_demo_command_rejects_project_without_cmd(tmp_path: Path) -> None:
    """--project without --cmd is a usage error (exit 2), reported on one line."""
    from typer.testing import CliRunner

    from agentsession.cli.app import build_app

    result = CliRunner().invoke(build_app(), ["demo", "--project", str(tmp_path)])
    assert result.exit_code == 2 and result.stderr.startswith("error: --project needs --cmd")


def test_demo_server_without_api_key_says_how_to_make_one(tmp_path: Path) -> None:
    """--server without --api-key (or AGENTSESSION_API_KEY): one line, exit 2, the fix."""
    from typer.testing import CliRunner

    from agentsession.cli.app import build_app

    result = CliRunner().invoke(
        build_app(),
        ["demo", "--server", "http://127.0.0.1:9", "--workdir", str(tmp_path)],
        env={"AGENTSESSION_API_KEY": None},
    )
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: --server needs")
    assert "agentsession keys create --user demo-user" in result.stderr
    assert not any(tmp_path.iterdir())  # refused before touching the work directory


def _run_demo(workdir: Path, *extra: str) -> str:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentsession",
            "demo",
            "--workdir",
            str(workdir),
            "--lang",
            "en",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _assert_task_done(out: str, workdir: Path) -> str:
    """The demo's story in its output; returns the session id."""
    pid1 = re.search(r"process 1 · pid (\d+)", out)
    pid2 = re.search(r"process 2 · pid (\d+) \(parent pid (\d+)\)", out)
    assert pid1 and pid2 and pid1.group(1) != pid2.group(1) and pid2.group(2) == pid1.group(1)
    assert "ModuleNotFoundError: No module named 'requests'" in out
    assert "We already found `requests` missing" in out and "NOT re-run" in out
    for seq, task in ((1, "diagnose"), (2, "fix requirements.txt"), (3, "verify")):
        assert re.search(rf"{seq} {task}[^,\n]* SUCCEEDED", out), seq
    assert "final verification: ok" in out
    assert "diagnosis repeated after restore: no" in out
    requirements = (workdir / "project" / "requirements.txt").read_text().split()
    assert requirements == ["flask", "requests"]
    created = re.search(r"created session (ses_\w+) \(user (\S+), ", out)
    assert created
    return created.group(1)


@pytest.mark.slow
def test_demo_end_to_end(tmp_path: Path) -> None:
    """The real demo: two PIDs, requests found and fixed, runs 1-3 SUCCEEDED, verified."""
    workdir = tmp_path / "demo"
    out = _run_demo(workdir)
    sid = _assert_task_done(out, workdir)
    assert (workdir / "sessions.db").exists()
    hint = out.split("look again:\n", 1)[1].splitlines()[0]
    assert not set(hint) & set("│─╭╮╰╯"), hint  # copy-pasted as printed
    looked = subprocess.run(
        shlex.split(hint),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert looked.returncode == 0, looked.stderr
    assert looked.stdout.count("SUCCEEDED") == 3 and sid not in looked.stderr
    opener = shlex.split(out.split("open it in the inspector:\n", 1)[1].splitlines()[0])
    assert opener[-3:] == ["ui", "--session", sid]


@pytest.mark.slow
def test_demo_against_a_running_service(tmp_path: Path) -> None:
    """`demo --server URL --api-key TOKEN`: both processes keep the session in a real
    `agentsession serve`; the user is the key's (carol, not demo-user)."""
    workdir = tmp_path / "demo"
    with running_service(tmp_path / "service", user="carol") as service:
        out = _run_demo(workdir, "--server", service.url, "--api-key", service.token)
        sid = _assert_task_done(out, workdir)
        assert f"the agentsession service at {service.url} (user 'carol', from the API key)" in out
        assert "open no database file: the session's state lives in the service" in out
        assert "loaded from the service" in out
        assert f"created session {sid} (user carol, " in out
        assert not (workdir / "sessions.db").exists()  # no database file on the demo's side
        assert service.token not in out
        assert "look again (after: export AGENTSESSION_API_KEY=<your API key>):" in out
        assert f'  curl -s -H "Authorization: Bearer $AGENTSESSION_API_KEY" {service.url}' in out
        with SessionClient(service.url, service.token) as client:
            session = client.get_session(session_id=sid)
            runs = client.list_runs(session_id=sid).items
    assert session.user_id == "carol" and session.status is SessionStatus.ACTIVE
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * 3
    assert session.message_count > 6 and session.tool_call_count >= 4


def test_the_demo_ends_with_the_command_that_opens_its_session_in_the_inspector() -> None:
    """Locally ``agentsession --url URL ui --session ID``; against a service, the
    session's page under its ``/ui/``."""
    local = _look_again(_Backend("sqlite:///demo/sessions.db"), "ses_x", "demo-user")
    assert local[2] == "open it in the inspector:"
    assert shlex.split(local[3])[1:] == [
        "--url",
        "sqlite:///demo/sessions.db",
        "ui",
        "--session",
        "ses_x",
    ]
    remote = _look_again(_Backend("http://127.0.0.1:8000/", "key"), "ses_x", "carol")
    assert remote[-1].strip() == "http://127.0.0.1:8000/ui/sessions/ses_x"
