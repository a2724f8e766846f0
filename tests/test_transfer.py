"""``agentsession export`` / ``import jsonl`` (an equal session back, on every store and
through the CLI) and ``import openai-agents`` (a SQLiteSession database: every item
byte-exact, every tool call, re-runs add nothing, the source never written)."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentsession import Limits, SessionManager, ValidationError
from agentsession.cli.app import build_app
from agentsession.models import RecordWrite, Session
from agentsession.stores.base import SessionStore
from agentsession.transfer.jsonl import export_session, import_session

runner = CliRunner()

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
T1 = datetime(2026, 5, 1, 12, 0, 3, tzinfo=UTC)

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief.", "metadata": {"source": "prompt"}},
    {"role": "user", "content": "Weather in Zürich? 🌧", "name": "alice"},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Zürich"}',
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "rain"},
    {"role": "assistant", "content": [{"type": "text", "text": "Rain."}], "extra": None},
    {"role": "user", "content": "Thanks"},
    {"role": "assistant", "content": "You're welcome."},
]


def invoke(*args: str) -> Any:
    """Run the CLI in-process; click's Result."""
    return runner.invoke(build_app(), list(args))


def build_session(manager: SessionManager) -> Session:
    """A CLOSED session with everything an export carries: key, title, metadata, TTL,
    working memory, messages (one linked to a run), tool calls, runs with steps in each
    final status and one interrupted."""
    s = manager.create_session(
        user_id="alice",
        agent="travel",
        title="Zürich",
        metadata={"tier": "gold"},
        ttl_seconds=3600,
        external_key="trip 42/ü",
    )
    scope = {"session_id": s.session_id, "user_id": "alice"}
    manager.update_working_memory(**scope, data={"goal": "weather", "facts": {"city": "Zürich"}})
    manager.append_messages(**scope, messages=MESSAGES[:3])
    manager.append_messages(**scope, messages=MESSAGES[3:5])
    manager.record_tool_call(
        **scope,
        tool="get_weather",
        arguments={"city": "Zürich"},
        result={"sky": "rain"},
        started_at=T0,
        ended_at=T1,
        provider_call_id="call_1",
    )
    manager.record_tool_call(
        **scope,
        tool="book",
        arguments={},
        status="error",
        error="no seats",
        started_at=T0,
        ended_at=T1,
        call_id="mine-1",
    )
    for status, steps in (("SUCCEEDED", 3), ("FAILED", 1), ("CANCELLED", 0)):
        lease = 600 if status == "SUCCEEDED" else None  # a lease goes along
        run = manager.start_run(
            **scope, input={"task": status}, metadata={"n": steps}, lease_seconds=lease
        )
        for i in range(steps):
            manager.add_run_step(
                **scope,
                run_id=run.run_id,
                kind="tool",
                name=f"t{i}",
                input=i,
                output=[i],
                status="ok",
                started_at=T0,
                ended_at=T1,
            )
        if status == "SUCCEEDED":
            manager.append_message(**scope, message={**MESSAGES[5], "run_id": run.run_id})
        manager.finish_run(
            **scope,
            run_id=run.run_id,
            status=status,
            output="done",
            error="boom" if status == "FAILED" else None,
            usage={"input_tokens": steps},
        )
    manager.append_message(**scope, message=MESSAGES[6])
    manager.close_session(**scope, reason="done")
    return manager.get_session(**scope)


def content(manager: SessionManager, s: Session) -> dict[str, Any]:
    """Everything an import must reproduce: the session's own fields, working memory,
    message payloads (without run links), tool calls and runs with steps, without ids of
    its own, versions and times of the import."""
    scope = {"session_id": s.session_id, "user_id": s.user_id}
    messages = manager.get_messages(**scope, limit=100, align_tool_calls=False).items
    calls = manager.get_tool_history(**scope, limit=100).items
    runs = manager.list_runs(**scope, limit=100).items
    skip = {
        "session_id",
        "run_id",
        "created_at",
        "session_version",
        "started_at",
        "ended_at",
        "lease_expires_at",
    }
    return {
        "session": s.model_dump(
            include={
                "agent",
                "title",
                "metadata",
                "status",
                "status_reason",
                "ttl_seconds",
                "message_count",
                "run_count",
                "tool_call_count",
            }
        ),
        "memory": manager.get_working_memory(**scope).data,
        "memory_history": [
            manager.get_working_memory(**scope, at_seq=n).data for n in range(s.message_count + 1)
        ],
        "messages": [{k: v for k, v in m.payload().items() if k != "run_id"} for m in messages],
        "calls": [
            c.model_dump(exclude={"session_id", "created_at", "session_version"}) for c in calls
        ],
        "runs": [
            {
                **r.model_dump(exclude=skip | {"seq", "steps"}),
                "steps": [
                    st.model_dump(exclude={"run_id", "session_version"})
                    for st in manager.list_run_steps(**scope, run_id=r.run_id).items
                ],
            }
            for r in runs
        ],
    }


def test_export_then_import_recreates_an_equal_session(store: SessionStore) -> None:
    """Export and import (pages and batches smaller than the session) give a new
    session equal in every field the export carries; the external key goes along when
    it is free (another user) and is left out when it is taken."""
    manager = SessionManager(store, limits=Limits(max_page_size=2, max_batch_messages=3))
    reader = SessionManager(store)
    original = build_session(manager)
    lines = [
        json.loads(json.dumps(line))
        for line in export_session(manager, session_id=original.session_id, user_id="alice")
    ]
    assert [line["type"] for line in lines] == (
        ["session", "working_memory", "memory"]
        + ["message"] * 7
        + ["tool_call"] * 2
        + ["run"] * 3
        + ["end"]
    )
    assert [line["message"]["seq"] for line in lines[3:10]] == list(range(1, 8))
    for owner in ("bob", "alice"):
        done = import_session(manager, enumerate(lines, start=1), user_id=owner)
        assert done.session.session_id != original.session_id
        assert (done.session.external_key, done.key_taken) == (
            ("trip 42/ü", False) if owner == "bob" else (None, True)
        )
        assert content(reader, done.session) == content(reader, original)
        assert done.counts == {
            "working_memory": 1,
            "memory": 1,
            "message": 7,
            "tool_call": 2,
            "run": 3,
        }


def test_the_cli_exports_to_a_file_and_imports_it(tmp_path: Path) -> None:
    """``export --out`` writes JSON Lines; ``import jsonl`` (from the file, or ``-``:
    stdin) makes the equal session and prints its id; a missing session exits 3 and
    creates no file."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as manager:
        original = build_session(manager)
    out = tmp_path / "export.jsonl"
    done = invoke("export", original.session_id, "--out", str(out), "--url", url, "--user", "alice")
    assert done.exit_code == 0, done.output
    assert len(out.read_text(encoding="utf-8").splitlines()) == 16
    imported = invoke("import", "jsonl", str(out), "--url", url, "--user", "bob", "--json")
    assert imported.exit_code == 0, imported.output
    new_id = json.loads(imported.output)["session_id"]
    piped = runner.invoke(
        build_app(),
        ["import", "jsonl", "-", "--url", url, "--user", "carol", "--json"],
        input=out.read_bytes(),
    )
    assert piped.exit_code == 0, piped.output
    with SessionManager.from_url(url) as manager:
        for owner, sid in (("bob", new_id), ("carol", json.loads(piped.output)["session_id"])):
            new = manager.get_session(session_id=sid, user_id=owner)
            assert content(manager, new) == content(manager, original)
    missing = tmp_path / "missing.jsonl"
    gone = invoke(
        "export", "ses_" + "a" * 26, "--out", str(missing), "--url", url, "--user", "alice"
    )
    assert gone.exit_code == 3 and not missing.exists()


def test_a_bad_export_file_is_refused_naming_its_line(tmp_path: Path) -> None:
    """Not JSON, a first line that is no session, an unknown format version or line
    type: exit 2 naming the file and the line number."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    SessionManager.from_url(url, auto_migrate=True).close()
    session = {"type": "session", "format_version": 1, "session": {"agent": "a"}}
    cases = {
        "not json\n": "line 1: not JSON",
        json.dumps({"type": "message", "message": {}}) + "\n": "line 1: expected",
        json.dumps({**session, "format_version": 9}) + "\n": "format_version 9",
        json.dumps(session) + "\n" + json.dumps({"type": "audit"}) + "\n": "line 2: the type",
        json.dumps(session)
        + "\n"
        + json.dumps({"type": "message", "message": {"role": "x"}})
        + "\n": "line 2:",
    }
    for i, (text, error) in enumerate(cases.items()):
        path = tmp_path / f"bad{i}.jsonl"
        path.write_text(text, encoding="utf-8")
        done = invoke("import", "jsonl", str(path), "--url", url, "--user", "alice")
        assert done.exit_code == 2, (text, done.output)
        assert done.output.startswith(f"error: {path}: ") and error in done.output


# ------------------------------------------------------------------ openai-agents

TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Zürich? 🌧"},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Zürich"}',
        "id": "fc_1",
        "status": "completed",
    },
    {"type": "function_call", "call_id": "call/2", "name": "get_time", "arguments": "not json"},
    {"type": "function_call_output", "call_id": "call_1", "output": "rain, 7°C"},
    {
        "type": "function_call_output",
        "call_id": "call/2",
        "output": [{"type": "input_text", "text": "noon"}],
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Rain.", "annotations": [], "logprobs": []}],
    },
    {"type": "function_call", "call_id": "call_3", "name": "never_answered", "arguments": "{}"},
]


def peer_database(path: Path) -> None:
    """An openai-agents database written by ``SQLiteSession`` itself: two sessions."""
    pytest.importorskip("agents", reason="openai-agents not installed")
    from agents.memory import SQLiteSession

    async def write() -> None:
        first = SQLiteSession("conv-1", str(path))
        await first.add_items(TURN)  # type: ignore[arg-type]
        second = SQLiteSession("conv 2/ü", str(path))
        await second.add_items([{"role": "user", "content": "hi"}])
        first.close()
        second.close()

    asyncio.run(write())


def source_rows(path: Path) -> dict[str, list[str]]:
    """Each source session's ``message_data`` texts, in order."""
    rows: dict[str, list[str]] = {}
    with sqlite3.connect(path) as db:
        for sid, data in db.execute(
            "SELECT session_id, message_data FROM agent_messages ORDER BY id"
        ):
            rows.setdefault(sid, []).append(data)
    return rows


def imported(url: str) -> dict[str, Any]:
    """alice's openai-agents sessions by key: item texts, tool calls, version."""
    out: dict[str, Any] = {}
    with SessionManager.from_url(url) as manager:
        for s in manager.list_sessions(user_id="alice", agent="openai-agents").items:
            scope = {"session_id": s.session_id, "user_id": "alice"}
            messages = manager.get_messages(**scope, limit=100, align_tool_calls=False).items
            calls = manager.get_tool_history(**scope, limit=100).items
            out[s.external_key or ""] = {
                "items": [json.dumps(m.payload().get("item")) for m in messages],
                "calls": [(c.tool, c.arguments, c.result, c.provider_call_id) for c in calls],
                "version": s.version,
            }
    return out


def test_an_openai_agents_database_is_imported_whole_and_only_once(tmp_path: Path) -> None:
    """Every SQLiteSession session becomes a session keyed by its id, every item stored
    byte-exact as the adapter stores it, every answered function call a tool call; a
    second run adds nothing; the source file is never written."""
    from agentsession.adapters.openai_agents import AgentSessionSession, message_of_item

    source = tmp_path / "agents.db"
    peer_database(source)
    before = hashlib.sha256(source.read_bytes()).hexdigest()
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    SessionManager.from_url(url, auto_migrate=True).close()
    done = invoke("import", "openai-agents", str(source), "--url", url, "--user", "alice", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output) == {
        "sessions": 2,
        "created": 2,
        "messages": 8,
        "tool_calls": 2,
        "bad_rows": 0,
        "skipped_calls": 0,
        "failed": [],
    }
    got = imported(url)
    assert {key: v["items"] for key, v in got.items()} == source_rows(source)
    assert got["conv-1"]["calls"] == [
        ("get_weather", {"city": "Zürich"}, "rain, 7°C", "call_1"),
        ("get_time", {"arguments": "not json"}, [{"type": "input_text", "text": "noon"}], None),
    ]
    with SessionManager.from_url(url) as manager:
        s = manager.get_session_by_key(
            user_id="alice", agent="openai-agents", external_key="conv-1"
        )
        stored = manager.get_messages(session_id=s.session_id, user_id="alice", limit=100).items
        assert [m.payload() for m in stored] == [message_of_item(i) for i in TURN]
        session = AgentSessionSession("conv-1", backend=manager, user_id="alice")
        assert asyncio.run(session.get_items()) == TURN
        session.close()
    again = invoke(
        "import", "openai-agents", str(source), "--url", url, "--user", "alice", "--json"
    )
    assert json.loads(again.output)["messages"] == 0 and json.loads(again.output)["created"] == 0
    assert imported(url) == got  # not even a version step
    assert hashlib.sha256(source.read_bytes()).hexdigest() == before


def test_an_interrupted_import_resumes_and_a_diverged_session_is_left_alone(tmp_path: Path) -> None:
    """A session holding a prefix of its source (an import that stopped part-way) gets
    the rest; one whose history differs is reported (exit 1) and left as it is."""
    source = tmp_path / "agents.db"
    peer_database(source)
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as manager:
        from agentsession.adapters.openai_agents import message_of_item

        part, _ = manager.open_session(
            user_id="alice", agent="openai-agents", external_key="conv-1"
        )
        manager.append_messages(
            session_id=part.session_id, user_id="alice", messages=[message_of_item(TURN[0])]
        )
        other, _ = manager.open_session(
            user_id="alice", agent="openai-agents", external_key="conv 2/ü"
        )
        manager.append_message(
            session_id=other.session_id,
            user_id="alice",
            message={"role": "user", "content": "something else"},
        )
    done = invoke(
        "import", "openai-agents", str(source), "--url", url, "--user", "alice", "--quiet"
    )
    assert done.exit_code == 1, done.output
    assert "not imported: 'conv 2/ü'" in done.output
    got = imported(url)
    assert got["conv-1"]["items"] == source_rows(source)["conv-1"]
    assert len(got["conv-1"]["calls"]) == 2
    assert got["conv 2/ü"]["items"] == ["null"]  # left alone: only the other writer's message


def test_a_missing_or_foreign_database_is_refused(tmp_path: Path) -> None:
    """No file, a directory (of openai-agents and langgraph imports alike), a SQLite file
    without SQLiteSession's tables, a bad table name: exit 2 (the source named on the
    command line is wrong), one line."""
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    SessionManager.from_url(url, auto_migrate=True).close()
    missing = invoke(
        "import", "openai-agents", str(tmp_path / "no.db"), "--url", url, "--user", "alice"
    )
    assert missing.exit_code == 2 and "no such database file" in missing.output
    for kind in ("openai-agents", "langgraph"):
        folder = invoke("import", kind, str(tmp_path), "--url", url, "--user", "alice")
        assert folder.exit_code == 2 and "is a directory" in folder.output, folder.output
    foreign = invoke(
        "import", "openai-agents", str(tmp_path / "sessions.db"), "--url", url, "--user", "alice"
    )
    assert foreign.exit_code == 2
    assert "not an openai-agents SQLiteSession database" in foreign.output
    bad_table = invoke(
        "import",
        "openai-agents",
        str(tmp_path / "sessions.db"),
        "--url",
        url,
        "--user",
        "alice",
        "--messages-table",
        "x; DROP TABLE y",
    )
    assert bad_table.exit_code == 2


def damage_late_pages(path: Path) -> None:
    """Overwrite the bodies of most of the file's late pages (4096 bytes each), keeping
    the first ones: the file opens and its schema reads, a scan fails part-way."""
    data = bytearray(path.read_bytes())
    pages = len(data) // 4096
    assert pages > 20, pages
    for page in range(pages // 2, pages - 2):
        data[page * 4096 + 8 : page * 4096 + 4000] = b"\xff" * 3992
    path.write_bytes(bytes(data))


def test_a_source_damaged_part_way_is_exit_2_as_a_bad_file(tmp_path: Path) -> None:
    """A database that opens but fails as it is read: ``error: cannot read ...`` (or,
    where the damage reads as text that is not UTF-8, the row that holds it) on one
    line and exit 2, as a file that cannot be opened; nothing is imported."""
    source = tmp_path / "agents.db"
    peer_database(source)
    with sqlite3.connect(source) as db:
        db.executemany(
            "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
            [(f"pad-{i}", json.dumps({"role": "user", "content": "p" * 3000})) for i in range(200)],
        )
    db.close()
    damage_late_pages(source)
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    SessionManager.from_url(url, auto_migrate=True).close()
    done = invoke("import", "openai-agents", str(source), "--url", url, "--user", "alice")
    assert done.exit_code == 2, done.output
    assert done.output.startswith((f"error: cannot read {source}: ", f"error: {source}: "))
    assert len(done.output.strip().splitlines()) == 1, done.output
    with SessionManager.from_url(url) as manager:
        assert manager.list_sessions(user_id="alice").items == []


def as_other_user() -> list[str]:
    """The command prefix that runs a process as a user bound by file permissions: none
    when we are not root, ``setpriv`` to nobody when we are (root ignores them).

    Skips when nobody cannot import agentsession from this checkout (a clone inside a
    private folder, e.g. ``mktemp -d`` or a 0700 home): the test would fail on the
    import, not on what it checks."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv is not available")
    prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    if not _imports_as(tuple(prefix)):
        pytest.skip("user nobody cannot read this checkout (a private parent folder)")
    return prefix


@functools.cache
def _imports_as(prefix: tuple[str, ...]) -> bool:
    """Whether ``prefix`` + this interpreter can import agentsession."""
    probe = [*prefix, sys.executable, "-c", "import agentsession"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def test_a_read_only_database_in_a_read_only_folder_is_imported_and_left_as_it_is(
    tmp_path: Path,
) -> None:
    """A chmod 444 database in a chmod 555 folder, imported by a user who cannot write
    either: with and without a write-ahead log beside it, every item arrives (the log's
    too), and the folder holds the same bytes and no new file after; an unreadable file
    is refused as such (exit 2), not as a foreign database."""
    prefix = as_other_user()
    made = tmp_path / "made.db"
    peer_database(made)
    base = Path(tempfile.mkdtemp(prefix="agentsession-ro-"))  # tmp_path is root's only
    try:
        base.chmod(0o755)
        out = base / "out"
        out.mkdir()
        url = f"sqlite:///{out / 'sessions.db'}"
        SessionManager.from_url(url, auto_migrate=True).close()
        for f in (out, *out.iterdir()):
            if prefix:
                os.chown(f, 65534, 65534)
        plain, logged = base / "plain", base / "logged"
        for folder in (plain, logged):
            folder.mkdir()
        shutil.copyfile(made, plain / "agents.db")
        writer = sqlite3.connect(made)
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("INSERT INTO agent_sessions (session_id) VALUES ('late')")
        writer.execute(
            "INSERT INTO agent_messages (session_id, message_data) VALUES ('late', ?)",
            (json.dumps({"role": "user", "content": "only in the log"}),),
        )
        writer.commit()
        shutil.copyfile(made, logged / "agents.db")
        shutil.copyfile(f"{made}-wal", logged / "agents.db-wal")
        writer.close()
        (plain / "locked.db").write_bytes(made.read_bytes())
        (plain / "locked.db").chmod(0o000 if prefix else 0o200)
        for folder in (plain, logged):
            for f in folder.iterdir():
                if f.name != "locked.db":
                    f.chmod(0o444)
            folder.chmod(0o555)
        before = {
            f: f.read_bytes()
            for folder in (plain, logged)
            for f in folder.iterdir()
            if f.name != "locked.db"
        }
        env = {**os.environ, "HOME": str(out)}

        def run(db: Path) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [
                    *prefix,
                    sys.executable,
                    "-m",
                    "agentsession",
                    "import",
                    "openai-agents",
                    str(db),
                    "--url",
                    url,
                    "--user",
                    "alice",
                    "--json",
                    "--quiet",
                ],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )

        first = run(plain / "agents.db")
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout)["messages"] == 8
        second = run(logged / "agents.db")
        assert second.returncode == 0, second.stderr
        report = json.loads(second.stdout)
        assert (report["sessions"], report["created"], report["messages"]) == (3, 1, 1)
        after = {
            f: f.read_bytes()
            for folder in (plain, logged)
            for f in folder.iterdir()
            if f.name != "locked.db"
        }
        assert after == before
        locked = run(plain / "locked.db")
        assert locked.returncode == 2 and "not readable" in locked.stderr, locked.stderr
    finally:
        for folder in base.iterdir():
            folder.chmod(0o755)
        shutil.rmtree(base)


def test_a_reused_call_id_pairs_each_call_with_its_own_output(tmp_path: Path) -> None:
    """Two calls under one ``call_id``, each answered before the next: each tool call
    gets the output that followed it, not the last one."""
    pytest.importorskip("agents", reason="openai-agents not installed")
    from agents.memory import SQLiteSession

    source = tmp_path / "agents.db"
    items = [
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city":"Z"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "rain"},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city":"B"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "sun"},
    ]
    session = SQLiteSession("conv", str(source))
    asyncio.run(session.add_items(items))  # type: ignore[arg-type]
    session.close()
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    SessionManager.from_url(url, auto_migrate=True).close()
    done = invoke("import", "openai-agents", str(source), "--url", url, "--user", "alice")
    assert done.exit_code == 0, done.output
    assert imported(url)["conv"]["calls"] == [
        ("weather", {"city": "Z"}, "rain", "c1"),
        ("weather", {"city": "B"}, "sun", "c1"),
    ]


def test_messages_of_a_session_missing_from_the_sessions_table_are_imported(tmp_path: Path) -> None:
    """Rows whose session_id has no row in the sessions table (SQLiteSession reads
    them) are imported as their own session, and the progress total matches."""
    from agentsession.transfer.openai_agents import OpenAIAgentsSource, import_openai_agents

    source = tmp_path / "agents.db"
    peer_database(source)
    with sqlite3.connect(source) as db:
        db.executemany(
            "INSERT INTO agent_messages (session_id, message_data) VALUES ('orphan', ?)",
            [(json.dumps({"role": "user", "content": text}),) for text in ("a", "b")],
        )
    db.close()
    done: list[int] = []
    with SessionManager.from_url("memory://") as manager:
        src = OpenAIAgentsSource(source)
        report = import_openai_agents(manager, src, user_id="alice", advance=done.append)
        assert sum(done) == src.item_count() == 10
        src.close()
        assert (report.sessions, report.messages) == (3, 10)
        orphan = manager.get_session_by_key(
            user_id="alice", agent="openai-agents", external_key="orphan"
        )
        assert orphan.message_count == 2


def test_bad_files_and_records_are_an_error_line_and_an_exit_code(tmp_path: Path) -> None:
    """A missing path, a folder, bytes that are not UTF-8, run steps that are not
    objects, an unknown session status: ``error: ...`` naming the file, exit 2; an
    unwritable ``--out``: exit 5; no traceback, and no session stays."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as manager:
        s = manager.create_session(user_id="alice", agent="a")
    session = {"type": "session", "format_version": 1, "session": {"agent": "a"}}
    files = {
        "ff.jsonl": b"\xff\xfe\n",
        "steps.jsonl": (
            json.dumps(session) + "\n" + json.dumps({"type": "run", "run": {"steps": [1]}}) + "\n"
        ).encode(),
        "status.jsonl": json.dumps(
            {**session, "session": {"agent": "a", "status": "OPEN"}}
        ).encode(),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    cases = [
        (["import", "jsonl", str(tmp_path / "no.jsonl")], "cannot read"),
        (["import", "jsonl", str(tmp_path)], "cannot read"),
        (["import", "jsonl", str(tmp_path / "ff.jsonl")], "line 1: not UTF-8"),
        (["export", s.session_id, "--out", str(tmp_path / "no" / "x.jsonl")], "cannot write"),
        (["import", "jsonl", str(tmp_path / "steps.jsonl")], "line 2: run.steps must be"),
        (["import", "jsonl", str(tmp_path / "status.jsonl")], "line 1: session.status must"),
    ]
    for args, error in cases:
        done = invoke(*args, "--url", url, "--user", "bob" if args[0] == "import" else "alice")
        assert done.exit_code == (2 if args[0] == "import" else 5), (args, done.output)
        where = f"{args[-1]}: " if args[0] == "import" and "cannot" not in error else ""
        assert f"error: {where}{error}" in done.output, (args, done.output)
    with SessionManager.from_url(url) as manager:
        assert manager.list_sessions(user_id="bob").items == []  # the steps file's is gone


def test_import_errors_name_the_file_line_and_need_only_the_appended_fields(tmp_path: Path) -> None:
    """Line numbers count blank lines; every refusal of the manager (a conflict too)
    is prefixed ``<file>: line N:``, exit 2; a tool call without a tool is refused,
    not stored as "None"; a message record needs only the fields it was appended
    with, and a field of the wrong shape is one line of error; a refused file leaves
    no session."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    SessionManager.from_url(url, auto_migrate=True).close()
    head = json.dumps({"type": "session", "format_version": 1, "session": {"agent": "a"}})
    call = {"type": "tool_call", "tool_call": {"tool": "t", "arguments": {}, "call_id": "c"}}
    no_tool = {"type": "tool_call", "tool_call": {"arguments": {}}}
    bare = {"type": "message", "message": {"role": "user", "content": "hi"}}
    cases = [
        ([head, "", json.dumps(bare), json.dumps(call), "", json.dumps(call)], "line 6:"),
        ([head, "", json.dumps(no_tool)], "line 3: "),
        ([head, json.dumps({"type": "message", "message": {"role": 5}})], "line 2: "),
    ]
    for i, (lines, error) in enumerate(cases):
        path = tmp_path / f"f{i}.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        done = invoke("import", "jsonl", str(path), "--url", url, "--user", "bob")
        assert done.exit_code == 2, (lines, done.output, done.exception)
        assert f"error: {path}: {error}" in done.output, done.output
        assert "None" not in done.output.replace(str(path), ""), done.output
        assert len(done.output.strip().splitlines()) == 1, done.output
    with SessionManager.from_url(url) as manager:
        assert manager.list_sessions(user_id="bob").items == []


def test_the_benchmarks_openai_agents_database_moves_into_ours(tmp_path: Path) -> None:
    """The database ``make bench`` builds for openai-agents (its own participant,
    benchmarks/peers.py ``OpenAIAgents``, with the benchmark's PRAGMAs) is imported
    whole: every session, every message byte-exact, in order."""
    pytest.importorskip("agents", reason="openai-agents not installed")
    benchmarks = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, benchmarks)
    try:
        import peers
    finally:
        sys.path.remove(benchmarks)
    peer = peers.OpenAIAgents(tmp_path, peers.WAL_NORMAL)
    peer.open()

    async def fill() -> None:
        for _ in range(3):
            handle = peer.new_session()
            await peer.append_batch(handle, 0, 30)
            for i in range(30, 40):
                await peer.append(handle, i)

    asyncio.run(fill())
    peer.close()
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    SessionManager.from_url(url, auto_migrate=True).close()
    done = invoke(
        "import", "openai-agents", str(peer.path), "--url", url, "--user", "alice", "--json"
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["messages"] == 120
    source = source_rows(peer.path)
    assert sorted(source) == ["conv-1", "conv-2", "conv-3"]
    assert {key: v["items"] for key, v in imported(url).items()} == source


def test_the_memory_history_goes_along_with_an_export(store: SessionStore) -> None:
    """Memory lines (format version 4) sit between the messages where the history
    changed, so the import's memory as of every seq is the original's, after patches
    with appends, a replace and a truncation; without them (an older export) the
    working_memory line is written as of the end of the messages."""
    manager = SessionManager(store, limits=Limits(max_page_size=2, max_batch_messages=3))
    sid = manager.create_session(user_id="alice", working_memory={"n": 0}).session_id
    scope = {"session_id": sid, "user_id": "alice"}
    for n in range(1, 4):
        manager.append_messages(
            **scope,
            messages=[{"role": "user", "content": f"m{n}"}] * n,
            working_memory_patch={"n": n},
        )
    manager.append_messages(
        **scope, messages=[{"role": "user", "content": "m"}] * 3, working_memory_patch={"n": 4}
    )  # seqs 7-9
    manager.truncate_messages(**scope, after_seq=7)
    manager.update_working_memory(**scope, data={"n": "after"})
    manager.append_messages(**scope, messages=[{"role": "user", "content": "last"}])
    original = manager.get_session(**scope)
    lines = [json.loads(json.dumps(line)) for line in export_session(manager, **scope)]
    assert lines[0]["format_version"] == 5
    at = [line["memory"]["at_seq"] for line in lines if line["type"] == "memory"]
    assert at == [0, 1, 3, 6, 7]  # creation, three appends, the clamp + the replace
    done = import_session(manager, enumerate(lines, start=1), user_id="bob")
    reader = SessionManager(store)
    assert content(reader, done.session) == content(reader, original)
    old = [{**lines[0], "format_version": 3}] + [
        line for line in lines[1:] if line["type"] not in ("memory", "end")
    ]
    again = import_session(manager, enumerate(old, start=1), user_id="carol").session
    kw = {"session_id": again.session_id, "user_id": "carol"}
    assert manager.get_working_memory(**kw).data == {"n": "after"}
    assert manager.get_working_memory(**kw, at_seq=7).data == {}
    moved = [
        {**line, "memory": {**line["memory"], "at_seq": 2}} if line["type"] == "memory" else line
        for line in lines
    ]
    with pytest.raises(ValidationError, match="at_seq must be 0"):
        import_session(manager, enumerate(moved, start=1), user_id="dave")


def test_records_go_along_with_an_export_and_an_old_export_still_imports(
    store: SessionStore,
) -> None:
    """The session's records (a LangGraph thread's checkpoints and writes) are exported
    page by page and put back byte for byte, with their meta, by ``import jsonl``; a
    version 1 export (no record lines) still imports."""
    manager = SessionManager(
        store, limits=Limits(max_page_size=4, max_batch_messages=2, max_record_bytes=6)
    )
    original = manager.create_session(user_id="alice", agent="lg", external_key="thread-1")
    scope = {"session_id": original.session_id, "user_id": "alice"}
    written = [
        RecordWrite(
            namespace=ns,
            key=f"k{i}",
            data=bytes([i, 0, 255]) * (i % 2 + 1),
            meta={"type": "msgpack", "i": i},
        )
        for ns in ("langgraph.checkpoint", "langgraph.writes")
        for i in range(3)
    ]
    for i in range(0, len(written), 2):
        manager.put_records(**scope, records=written[i : i + 2])
    lines = [json.loads(json.dumps(line)) for line in export_session(manager, **scope)]
    assert lines[0]["format_version"] == 5
    assert sum(line["type"] == "record" for line in lines) == 6
    done = import_session(manager, enumerate(lines, start=1), user_id="bob")
    assert done.counts["record"] == 6
    copied = manager.list_records(session_id=done.session.session_id, user_id="bob", limit=4)
    copied += manager.list_records(
        session_id=done.session.session_id,
        user_id="bob",
        namespace=copied[-1].namespace,
        after=copied[-1].key,
        limit=4,
    )
    assert [(r.namespace, r.key, r.data, r.meta) for r in copied] == [
        (w.namespace, w.key, w.data, w.meta) for w in written
    ]
    old = [{**lines[0], "format_version": 1}] + [
        line for line in lines[1:] if line["type"] not in ("record", "end")
    ]
    assert import_session(manager, enumerate(old, start=1), user_id="carol").counts == {
        "working_memory": 1
    }


def test_summaries_go_along_with_an_export(store: SessionStore) -> None:
    """Stored summaries are exported page by page (format version 3) and added back in
    order, so numbers, ranges, authors, token counts, the tokenizer's name and
    ``supersedes`` are the same; the messages they cover are all there too."""
    manager = SessionManager(store, limits=Limits(max_page_size=2))
    sid = manager.create_session(user_id="alice").session_id
    scope = {"session_id": sid, "user_id": "alice"}
    manager.append_messages(
        **scope, messages=[{"role": "user", "content": f"m{i}"} for i in range(6)]
    )
    for end, supersedes in ((2, None), (4, 1), (6, 2)):
        manager.add_summary(
            **scope, text=f"up to {end}", from_seq=1, to_seq=end, model="m", supersedes=supersedes
        )
    lines = [json.loads(json.dumps(line)) for line in export_session(manager, **scope)]
    assert lines[0]["format_version"] == 5
    assert [line["type"] for line in lines][-4:] == ["summary"] * 3 + ["end"]
    done = import_session(manager, enumerate(lines, start=1), user_id="bob")
    assert done.counts["summary"] == 3

    def kept(user: str, session_id: str) -> list[tuple[object, ...]]:
        return [
            (
                s.number,
                s.text,
                s.from_seq,
                s.to_seq,
                s.author,
                s.model,
                s.summary_tokens,
                s.replaced_tokens,
                s.tokenizer,
                s.supersedes,
            )
            for s in manager.list_summaries(session_id=session_id, user_id=user)
        ]

    assert kept("bob", done.session.session_id) == kept("alice", sid)


def test_an_export_of_a_truncated_session_imports(store: SessionStore) -> None:
    """A truncation takes the summaries reaching past the new end, so the export holds
    only summaries within its messages: it imports, in order, renumbered without the
    gaps, ``supersedes`` naming the same summary (None for one removed)."""
    manager = SessionManager(store)
    sid = manager.create_session(user_id="alice").session_id
    scope = {"session_id": sid, "user_id": "alice"}
    manager.append_messages(
        **scope, messages=[{"role": "user", "content": f"m{i}"} for i in range(10)]
    )
    for first, last, supersedes in ((1, 8, None), (1, 2, None), (1, 4, 2), (3, 5, 1)):
        manager.add_summary(
            **scope, text=f"{first}-{last}", from_seq=first, to_seq=last, supersedes=supersedes
        )
    manager.truncate_messages(**scope, after_seq=5)
    lines = [json.loads(json.dumps(line)) for line in export_session(manager, **scope)]
    done = import_session(manager, enumerate(lines, start=1), user_id="bob")
    copy = {"session_id": done.session.session_id, "user_id": "bob"}
    assert done.counts["summary"] == 3
    assert [m.content for m in manager.get_messages(**copy).items] == [f"m{i}" for i in range(5)]
    assert [(s.number, s.text, s.supersedes) for s in manager.list_summaries(**copy)] == [
        (1, "1-2", None),
        (2, "1-4", 1),
        (3, "3-5", None),
    ]


def test_a_fork_exports_its_parent_and_imports_as_an_ordinary_session(store: SessionStore) -> None:
    """The session line of a fork carries ``parent_session_id`` and ``fork_seq``; the
    import holds its messages and memory but is no fork (the parent may be elsewhere)."""
    manager = SessionManager(store)
    sid = manager.create_session(user_id="alice", working_memory={"goal": "g"}).session_id
    manager.append_messages(
        session_id=sid,
        user_id="alice",
        messages=[{"role": "user", "content": f"m{i}"} for i in range(3)],
    )
    fork = manager.fork_session(session_id=sid, user_id="alice", at_seq=2)
    scope = {"session_id": fork.session_id, "user_id": "alice"}
    lines = [json.loads(json.dumps(line)) for line in export_session(manager, **scope)]
    assert (lines[0]["session"]["parent_session_id"], lines[0]["session"]["fork_seq"]) == (sid, 2)
    done = import_session(manager, enumerate(lines, start=1), user_id="bob")
    copy = {"session_id": done.session.session_id, "user_id": "bob"}
    assert (done.session.parent_session_id, done.session.fork_seq) == (None, None)
    assert [m.content for m in manager.get_messages(**copy).items] == ["m0", "m1"]
    assert manager.get_working_memory(**copy).data == {"goal": "g"}


def test_a_runs_usage_per_model_goes_along_with_an_export(store: SessionStore) -> None:
    """A run's usage entries come back per model (one model: its usage as given and the
    model; several: each model's counts), so the imported session's usage ledger sums
    as the exported one's."""
    manager = SessionManager(store)
    sid = manager.create_session(user_id="alice").session_id
    scope = {"session_id": sid, "user_id": "alice"}
    for finish in (
        {"usage": {"prompt_tokens": 5, "total_tokens": 5}, "model": "m1"},
        {"usage_by_model": {"m1": {"input_tokens": 2}, "m2": {"output_tokens": 3}}},
        {"usage": {"input_tokens": 1}},
    ):
        run = manager.start_run(**scope)
        manager.finish_run(**scope, run_id=run.run_id, status="SUCCEEDED", **finish)
    lines = [json.loads(json.dumps(line)) for line in export_session(manager, **scope)]
    done = import_session(manager, enumerate(lines, start=1), user_id="bob")

    def entries(user: str, session_id: str) -> list[object]:
        runs = manager.list_runs(session_id=session_id, user_id=user).items
        return [(r.usage, r.usage_entries) for r in runs]

    assert entries("bob", done.session.session_id) == entries("alice", sid)
    by_model = manager.get_usage(user_id="bob", group_by="model")
    assert by_model == manager.get_usage(user_id="alice", group_by="model")
