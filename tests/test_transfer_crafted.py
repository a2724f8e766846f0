"""Crafted import sources (issue 25, item 4): every importer (JSONL export, openai-agents
SQLiteSession, LangGraph SqliteSaver, Google ADK) is fed sources built here to be wrong:
nesting deeper than a store holds (and deep enough to crash a recursive parser), a value
of the wrong type in a column or field (text in an integer column, NULL, a blob, huge
numbers), text that is not JSON or not UTF-8, a file cut short, not a database, a
missing table, an empty file, an unknown format version. Each is one line ``error:
<file>: <row>: ...`` on stderr, exit 2, no traceback, and the store holds exactly what it
held before; the library raises one ImportSourceError naming the file and the row."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentsession import ImportSourceError, SessionManager
from agentsession.cli.app import build_app
from agentsession.jsonvalues import MAX_DEPTH
from agentsession.transfer.jsonl import LINE_LEVELS, export_session, import_session, read_lines
from agentsession.transfer.openai_agents import OpenAIAgentsSource, import_openai_agents

runner = CliRunner()

DEEP = "[" * 5000 + "]" * 5000  # past any recursive parser's limit


def nested(levels: int) -> Any:
    """A list whose deepest container sits ``levels`` levels below it."""
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


def store(tmp_path: Path) -> str:
    """A SQLite store holding one session of someone else's, so that "unchanged" is
    more than "empty"."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as manager:
        s = manager.create_session(user_id="carol", agent="a", title="kept")
        manager.append_messages(
            session_id=s.session_id, user_id="carol", messages=[{"role": "user", "content": "hi"}]
        )
    return url


def held(url: str) -> list[tuple[str, str, int, int]]:
    """Every session of every user in the store: id, owner, version, message count."""
    with SessionManager.from_url(url) as manager:
        page = manager.list_sessions(user_id="admin", admin=True, all_users=True, limit=100)
        return sorted((s.session_id, s.user_id, s.version, s.message_count) for s in page.items)


def refused(url: str, args: list[str], file: Path, row: str | None, words: str) -> None:
    """Run ``agentsession <args> --url url``: exit 2, stdout empty, stderr one line
    ``error: <file>: <row>: ...`` holding ``words``, no traceback, the store unchanged."""
    before = held(url)
    done = runner.invoke(build_app(), [*args, "--url", url])
    assert isinstance(done.exception, SystemExit), (args, done.output, done.exception)
    assert done.exit_code == 2, (args, done.output)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and done.stdout == "", (done.stdout, done.stderr)
    where = f"{file}: {row}: " if row else f"{file}"
    assert lines[0].startswith(f"error: {where}") or f"{file}" in lines[0], lines[0]
    if row:
        assert lines[0].startswith(f"error: {where}"), lines[0]
    assert words in lines[0], lines[0]
    assert "Traceback" not in done.output
    assert held(url) == before


# ---------------------------------------------------------------- JSONL exports

HEAD = {"type": "session", "format_version": 4, "session": {"agent": "a", "title": "t"}}


def line(kind: str, record: Any) -> str:
    return json.dumps({"type": kind, kind: record})


MESSAGE = line("message", {"role": "user", "content": "hi"})
RUN = {"input": 1, "status": "SUCCEEDED", "steps": [{"kind": "tool", "name": "n"}]}
#: name -> (the file's text or bytes, the line refused, words of the error)
JSONL_CASES: dict[str, tuple[str | bytes, int, str]] = {
    "deep message": (
        f'{json.dumps(HEAD)}\n{MESSAGE}\n{{"type":"message","message":'
        f'{{"role":"user","content":{DEEP}}}}}\n',
        3,
        "nests deeper",
    ),
    "deep first line": (DEEP + "\n", 1, "nests deeper"),
    "one level too deep": (
        json.dumps(HEAD)
        + "\n"
        + line(
            "run", {**RUN, "steps": [{"kind": "tool", "name": "n", "input": nested(MAX_DEPTH + 1)}]}
        )
        + "\n",
        2,
        "nest",
    ),
    "not json": (f"{json.dumps(HEAD)}\n{MESSAGE}\n{{'role': 'user'}}\n", 3, "not JSON"),
    "cut mid-line": (f"{json.dumps(HEAD)}\n{MESSAGE}\n{MESSAGE[:20]}", 3, "not JSON"),
    "not utf-8": (
        json.dumps(HEAD).encode() + b"\n" + MESSAGE.encode() + b"\n\xff\xfe\n",
        3,
        "not UTF-8",
    ),
    "empty file": ("", 1, "no lines"),
    "blank lines only": ("\n\n", 1, "no lines"),
    "unknown version": (json.dumps({**HEAD, "format_version": 99}) + "\n", 1, "format_version"),
    "version as text": (json.dumps({**HEAD, "format_version": "4"}) + "\n", 1, "format_version"),
    "text ttl": (
        json.dumps({**HEAD, "session": {"agent": "a", "ttl_seconds": "x"}}) + "\n",
        1,
        "ttl_seconds",
    ),
    "huge ttl": (
        json.dumps({**HEAD, "session": {"agent": "a", "ttl_seconds": 10**30}}) + "\n",
        1,
        "ttl_seconds",
    ),
    "5000 digits": (
        json.dumps(HEAD) + "\n" + '{"type":"message","message":{"role":"user",'
        '"content":' + "9" * 5000 + "}}\n",
        2,
        "not JSON",
    ),
    "null agent": (json.dumps({**HEAD, "session": {"agent": None}}) + "\n", 1, "agent"),
    "text role": (
        f"{json.dumps(HEAD)}\n{MESSAGE}\n" + line("message", {"role": 5}) + "\n",
        3,
        "role",
    ),
    "role a list": (
        f"{json.dumps(HEAD)}\n" + line("message", {"role": ["user"]}) + "\n",
        2,
        "role",
    ),
    "null tool": (f"{json.dumps(HEAD)}\n" + line("tool_call", {"tool": None}) + "\n", 2, "tool"),
    "time as number": (
        f"{json.dumps(HEAD)}\n" + line("tool_call", {"tool": "t", "started_at": 5}) + "\n",
        2,
        "ISO 8601",
    ),
    "text at_seq": (
        f"{json.dumps(HEAD)}\n" + line("memory", {"at_seq": "x", "data": {}}) + "\n",
        2,
        "at_seq",
    ),
    "negative lease": (
        f"{json.dumps(HEAD)}\n" + line("run", {**RUN, "lease_seconds": -5}) + "\n",
        2,
        "lease_seconds",
    ),
    "text summary seq": (
        f"{json.dumps(HEAD)}\n{MESSAGE}\n"
        + line(
            "summary",
            {
                "text": "s",
                "from_seq": "a",
                "to_seq": 1,
                "summary_tokens": 1,
                "replaced_tokens": 1,
                "tokenizer": "chars",
            },
        )
        + "\n",
        3,
        "from_seq",
    ),
    "record not base64": (
        f"{json.dumps(HEAD)}\n"
        + line("record", {"namespace": "n", "key": "k", "data": "***"})
        + "\n",
        2,
        "base64",
    ),
    "record key a number": (
        f"{json.dumps(HEAD)}\n" + line("record", {"namespace": "n", "key": 5, "data": ""}) + "\n",
        2,
        "strings",
    ),
    "steps not objects": (
        f"{json.dumps(HEAD)}\n" + line("run", {**RUN, "steps": [1]}) + "\n",
        2,
        "run.steps",
    ),
    "unknown line type": (
        f"{json.dumps(HEAD)}\n" + json.dumps({"type": "audit"}) + "\n",
        2,
        "the type",
    ),
    "a call id twice": (
        f"{json.dumps(HEAD)}\n{MESSAGE}\n"
        + "\n".join([line("tool_call", {"tool": "t", "call_id": "c"})] * 2)
        + "\n",
        4,
        "already recorded",
    ),
}


@pytest.mark.parametrize("case", list(JSONL_CASES), ids=str)
def test_a_crafted_export_is_refused_naming_its_line_and_leaves_nothing(
    tmp_path: Path, case: str
) -> None:
    """Each crafted export: one ``error: <file>: line N: ...``, exit 2, no session
    made (the one built up to the bad line is removed), through the CLI and the
    library alike."""
    text, number, words = JSONL_CASES[case]
    url = store(tmp_path)
    path = tmp_path / "crafted.jsonl"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    refused(url, ["import", "jsonl", str(path), "--user", "bob"], path, f"line {number}", words)
    before = held(url)
    with (
        SessionManager.from_url(url) as manager,
        path.open("rb") as f,
        pytest.raises(ImportSourceError) as caught,
    ):
        import_session(manager, read_lines(f), user_id="bob", source=str(path))
    assert (caught.value.source, caught.value.row) == (str(path), f"line {number}")
    assert held(url) == before


def test_the_deepest_export_a_store_holds_still_imports(tmp_path: Path) -> None:
    """The line limit is no stricter than the store: a run step's input as deep as the
    store takes it imports (the line limit, ``LINE_LEVELS``, leaves room for it)."""
    url = store(tmp_path)
    deepest = nested(MAX_DEPTH - 1)  # a step's input sits one level down the step
    text = (
        json.dumps(HEAD)
        + "\n"
        + line("run", {**RUN, "steps": [{"kind": "tool", "name": "n", "input": deepest}]})
        + "\n"
    )
    assert text.count("[") + 2 <= LINE_LEVELS + 1  # and the line's own two objects
    with SessionManager.from_url(url) as manager:
        done = import_session(
            manager, enumerate([json.loads(x) for x in text.splitlines()], 1), user_id="bob"
        )
        steps = manager.list_run_steps(
            session_id=done.session.session_id,
            user_id="bob",
            run_id=manager.list_runs(session_id=done.session.session_id, user_id="bob")
            .items[0]
            .run_id,
        ).items
    assert steps[0].input == deepest


def test_an_export_cut_short_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    """A real export (working memory, messages, tool calls, runs, records) cut in the
    middle of its last line: exit 2 naming that line; the session it had built is
    removed."""
    url = store(tmp_path)
    with SessionManager.from_url(url) as manager:
        s = manager.create_session(user_id="alice", agent="a")
        scope = {"session_id": s.session_id, "user_id": "alice"}
        manager.update_working_memory(**scope, data={"goal": "g"})
        manager.append_messages(
            **scope, messages=[{"role": "user", "content": f"m{i}"} for i in range(5)]
        )
        manager.record_tool_call(**scope, tool="t", arguments={}, result=1)
        text = "".join(json.dumps(x) + "\n" for x in export_session(manager, **scope))
    path = tmp_path / "cut.jsonl"
    path.write_text(text[: len(text) - 30], encoding="utf-8")
    last = text.count("\n")
    refused(url, ["import", "jsonl", str(path), "--user", "bob"], path, f"line {last}", "not JSON")


def test_a_process_prints_one_line_and_no_traceback(tmp_path: Path) -> None:
    """In a real process (stderr as a terminal user reads it), the deepest file: one
    line, exit 2."""
    url = store(tmp_path)
    path = tmp_path / "deep.jsonl"
    path.write_text(
        f'{json.dumps(HEAD)}\n{line("message", {"role": "user"})[:-2]},"content":{DEEP}}}}}\n'
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentsession",
            "import",
            "jsonl",
            str(path),
            "--url",
            url,
            "--user",
            "bob",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: {path}: line 2: ") and done.stderr.count("\n") == 1


# ---------------------------------------------------------------- openai-agents

OA_SCHEMA = """
CREATE TABLE agent_sessions (session_id TEXT PRIMARY KEY,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP);
CREATE TABLE agent_messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
    message_data TEXT NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
"""
#: The same tables without types or constraints: any value goes in as it is.
OA_LOOSE = """
CREATE TABLE agent_sessions (session_id, created_at, updated_at);
CREATE TABLE agent_messages (id, session_id, message_data, created_at);
"""
GOOD_ITEM = json.dumps({"role": "user", "content": "hello"})


def oa_database(path: Path, schema: str, rows: list[tuple[Any, ...]]) -> None:
    """A database with a good session ``s1`` first (imported if nothing stopped it),
    then ``rows`` of session ``s2`` as (id, session_id, message_data, created_at)."""
    with sqlite3.connect(path) as db:
        db.executescript(schema)
        db.executemany(
            "INSERT INTO agent_sessions VALUES (?, '2026-01-01 00:00:00', NULL)", [("s1",), ("s2",)]
        )
        db.execute(
            "INSERT INTO agent_messages VALUES (1, 's1', ?, '2026-01-01 00:00:00')", (GOOD_ITEM,)
        )
        db.executemany("INSERT INTO agent_messages VALUES (?, ?, ?, ?)", rows)
    db.close()


T = "2026-01-01 00:00:01"
#: name -> (schema, the bad rows, the row named, words of the error)
OA_CASES: dict[str, tuple[str, list[tuple[Any, ...]], str, str]] = {
    "deep item": (
        OA_SCHEMA,
        [(2, "s2", '{"content":' + DEEP + "}", T)],
        "agent_messages rowid 2",
        "message_data nests deeper than 64",
    ),
    "one level too deep": (
        OA_SCHEMA,
        [(2, "s2", json.dumps({"c": nested(MAX_DEPTH)}), T)],
        "agent_messages rowid 2",
        "nests deeper",
    ),
    "text id": (
        OA_LOOSE,
        [("abc", "s2", GOOD_ITEM, T)],
        "agent_messages rowid 2",
        "id holds text, not an integer",
    ),
    "real id": (OA_LOOSE, [(2.5, "s2", GOOD_ITEM, T)], "agent_messages rowid 2", "id holds a real"),
    "null session id": (
        OA_LOOSE,
        [(2, None, GOOD_ITEM, T)],
        "agent_messages rowid 2",
        "session_id holds NULL",
    ),
    "blob session id": (
        OA_LOOSE,
        [(2, b"s2", GOOD_ITEM, T)],
        "agent_messages rowid 2",
        "session_id holds a blob",
    ),
    "integer item": (
        OA_LOOSE,
        [(2, "s2", 5, T)],
        "agent_messages rowid 2",
        "message_data holds an integer",
    ),
    "item not utf-8": (
        OA_SCHEMA,
        [(2, "s2", b'{"c":"\xff"}', T)],
        "agent_messages rowid 2",
        "message_data is not UTF-8",
    ),
    "text not utf-8": (
        OA_SCHEMA,
        [(2, "s2", "TEXT_FF", T)],
        "agent_messages rowid 2",
        "message_data is not valid utf-8",
    ),
    "time not a time": (
        OA_SCHEMA,
        [(2, "s2", GOOD_ITEM, "yesterday")],
        "agent_messages rowid 2",
        "created_at is not a time",
    ),
    "null time": (
        OA_LOOSE,
        [(2, "s2", GOOD_ITEM, None)],
        "agent_messages rowid 2",
        "created_at holds NULL",
    ),
    "negative huge time": (
        OA_LOOSE,
        [(2, "s2", GOOD_ITEM, -(2**63))],
        "agent_messages rowid 2",
        "created_at holds an integer",
    ),
}


@pytest.mark.parametrize("case", list(OA_CASES), ids=str)
def test_a_crafted_openai_agents_database_is_refused_naming_its_row(
    tmp_path: Path, case: str
) -> None:
    """Each crafted row (after a good session that would import): exit 2 naming the
    table's row and column, nothing imported, through the CLI and the library."""
    schema, rows, row, words = OA_CASES[case]
    source = tmp_path / "agents.db"
    if rows[0][2] == "TEXT_FF":  # text (not a blob) holding a byte that is not UTF-8
        oa_database(source, schema, [])
        with sqlite3.connect(source) as db:
            db.execute(
                "INSERT INTO agent_messages VALUES (2, 's2', CAST(x'7b22ff7d' AS TEXT), ?)", (T,)
            )
        db.close()
    else:
        oa_database(source, schema, rows)
    url = store(tmp_path)
    refused(url, ["import", "openai-agents", str(source), "--user", "alice"], source, row, words)
    assert_library_refuses(
        url,
        lambda m: import_openai_agents(m, OpenAIAgentsSource(source), user_id="alice"),
        str(source),
        row,
    )


def assert_library_refuses(
    url: str, run: Callable[[SessionManager], Any], source: str, row: str | None
) -> None:
    """``run(manager)`` raises one ImportSourceError naming ``source`` and ``row``
    and leaves the store as it was."""
    before = held(url)
    with SessionManager.from_url(url) as manager, pytest.raises(ImportSourceError) as caught:
        run(manager)
    assert (caught.value.source, caught.value.row) == (source, row)
    assert held(url) == before


def whole_file_cases(tmp_path: Path, good: Callable[[Path], None], table: str) -> dict[str, Any]:
    """Files wrong as a whole: cut short, not a database, a table missing, empty."""
    full = tmp_path / "full.db"
    good(full)
    data = full.read_bytes()
    files = {
        "cut short": data[: len(data) // 2],
        "not a database": b"SQLite format 2\x00" + b"\x07" * 5000,
        "empty file": b"",
    }
    out: dict[str, Any] = {}
    for name, content in files.items():
        path = tmp_path / f"{name.replace(' ', '-')}.db"
        path.write_bytes(content)
        out[name] = path
    missing = tmp_path / "missing-table.db"
    good(missing)
    with sqlite3.connect(missing) as db:
        db.execute(f"DROP TABLE {table}")
    db.close()
    out["a table missing"] = missing
    return out


def big_oa(path: Path) -> None:
    """A good database of many rows (so that half of it is a file cut short)."""
    rows = [(i, "s2", json.dumps({"role": "user", "content": "x" * 500}), T) for i in range(2, 200)]
    oa_database(path, OA_SCHEMA, rows)


def test_an_openai_agents_file_wrong_as_a_whole_is_refused(tmp_path: Path) -> None:
    """Cut short, not a database, a table missing, an empty file: exit 2 naming the
    file, nothing imported."""
    url = store(tmp_path)
    for name, path in whole_file_cases(tmp_path, big_oa, "agent_messages").items():
        before = held(url)
        done = runner.invoke(
            build_app(), ["import", "openai-agents", str(path), "--url", url, "--user", "alice"]
        )
        assert done.exit_code == 2 and isinstance(done.exception, SystemExit), (name, done.output)
        assert done.stderr.startswith("error: ") and str(path) in done.stderr, (name, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert held(url) == before, name


def test_items_of_odd_shapes_import_or_are_refused_never_crash(tmp_path: Path) -> None:
    """Items that are JSON objects of odd shapes (a role that is a list or an object,
    fields of the wrong type, call arguments nesting past any parser's limit): the
    adapter stores each as it is (role "assistant" where it is no role), a call whose
    name is no tool name is skipped, arguments too deep are kept as text; no
    TypeError or RecursionError."""
    odd = [
        {"role": ["user"], "content": "a"},
        {"role": {"r": 1}, "content": 5},
        {"type": 5, "call_id": [], "name": {}},
        {"type": "function_call", "call_id": "c", "name": ["t"], "arguments": 5},
        {"type": "function_call_output", "call_id": "c", "output": {"o": [1]}},
        {"type": "function_call", "call_id": "d", "name": "deep", "arguments": DEEP},
        {"type": "function_call_output", "call_id": "d", "output": "o"},
    ]
    source = tmp_path / "agents.db"
    oa_database(source, OA_SCHEMA, [(i + 2, "s2", json.dumps(x), T) for i, x in enumerate(odd)])
    url = store(tmp_path)
    done = runner.invoke(
        build_app(),
        ["import", "openai-agents", str(source), "--url", url, "--user", "alice", "--json"],
    )
    assert done.exit_code == 0, (done.output, done.exception)
    report = json.loads(done.stdout)
    assert (report["messages"], report["failed"]) == (len(odd) + 1, []), report
    assert report["skipped_calls"] == 1  # the call named ["t"]: no tool name
    with SessionManager.from_url(url) as manager:
        s2 = manager.list_sessions(user_id="alice", limit=10).items[0]
        calls = manager.get_tool_history(session_id=s2.session_id, user_id="alice").items
    assert [c.arguments for c in calls] == [{"arguments": DEEP}]  # too deep to parse: as text


def test_c25_an_item_too_large_refuses_the_import_before_any_write(tmp_path: Path) -> None:
    """A thousand small items, then one of 5 MiB (10 MiB of JSON once a message, over
    ``max_message_bytes``): exit 2 naming the source row of the big item, nothing
    imported (it imported the first batch of 1000, then reported "messages[0]")."""
    small = [
        (i + 2, "s2", json.dumps({"role": "user", "content": f"m{i}"}), T) for i in range(1000)
    ]
    big = json.dumps({"role": "user", "content": "x" * (5 * 1024 * 1024)})
    source = tmp_path / "agents.db"
    oa_database(source, OA_SCHEMA, [*small, (1002, "s2", big, T)])
    url = store(tmp_path)
    args = ["import", "openai-agents", str(source), "--user", "alice"]
    refused(url, args, source, "agent_messages rowid 1002", "bytes of JSON; the limit is")
    assert_library_refuses(
        url,
        lambda m: import_openai_agents(m, OpenAIAgentsSource(source), user_id="alice"),
        str(source),
        "agent_messages rowid 1002",
    )


def test_rows_openai_agents_skips_are_still_skipped(tmp_path: Path) -> None:
    """A row ``SQLiteSession`` itself skips (text that is not JSON, JSON that is not an
    object) is skipped and counted, as documented: the source is readable."""
    source = tmp_path / "agents.db"
    oa_database(
        source, OA_SCHEMA, [(2, "s2", "not json", T), (3, "s2", "[1]", T), (4, "s2", GOOD_ITEM, T)]
    )
    url = store(tmp_path)
    with SessionManager.from_url(url) as manager:
        report = import_openai_agents(manager, OpenAIAgentsSource(source), user_id="alice")
    assert (report.sessions, report.messages, report.bad_rows) == (2, 2, 2)


# ---------------------------------------------------------------- LangGraph

LG_LOOSE = """
CREATE TABLE checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,
    checkpoint, metadata);
CREATE TABLE writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel,
    type, value);
"""


def lg_database(
    path: Path, *, loose: bool = False, checkpoints: int = 1, bad: tuple[str, Any] | None = None
) -> None:
    """A ``SqliteSaver`` database with a good thread ``t1`` (``checkpoints`` of them,
    one pending write), written by ``SqliteSaver`` itself; ``loose``: copied into tables
    without types or constraints; ``bad``: then ``(table, row)`` of thread ``t2``."""
    pytest.importorskip("langgraph.checkpoint.sqlite", reason="pip install -e '.[dev]'")
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite import SqliteSaver

    good = path.with_name(path.name + ".good")
    with SqliteSaver.from_conn_string(str(good)) as saver:
        config: Any = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        for _ in range(checkpoints):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"padding": "x" * 400}
            config = saver.put(config, checkpoint, {"source": "input", "step": -1}, {})
        saver.put_writes(config, [("messages", "hi")], "task-1")
    with sqlite3.connect(path) as db:
        if loose:
            db.executescript(LG_LOOSE)
            db.execute("ATTACH ? AS g", (str(good),))
            db.execute("INSERT INTO checkpoints SELECT * FROM g.checkpoints")
            db.execute(
                "INSERT INTO writes SELECT thread_id, checkpoint_ns, checkpoint_id, "
                "task_id, task_path, idx, channel, type, value FROM g.writes"
            )
            db.commit()
            db.execute("DETACH g")
        else:
            with sqlite3.connect(good) as from_db:
                from_db.backup(db)
            from_db.close()
        if bad is not None:
            table, row = bad
            db.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(row))})", row)
    db.close()


def cp(**change: Any) -> tuple[str, tuple[Any, ...]]:
    """A checkpoints row of thread ``t2``, with ``change``."""
    row = {
        "thread_id": "t2",
        "checkpoint_ns": "",
        "checkpoint_id": "c2",
        "parent_checkpoint_id": None,
        "type": "msgpack",
        "checkpoint": b"\x80",
        "metadata": b'{"step": 1}',
        **change,
    }
    return "checkpoints", tuple(row.values())


def wr(**change: Any) -> tuple[str, tuple[Any, ...]]:
    """A writes row of thread ``t2``, with ``change``."""
    row = {
        "thread_id": "t2",
        "checkpoint_ns": "",
        "checkpoint_id": "c2",
        "task_id": "task",
        "task_path": "",
        "idx": 0,
        "channel": "ch",
        "type": "msgpack",
        "value": b"\x80",
        **change,
    }
    return "writes", tuple(row.values())


#: name -> (loose tables, the bad row, the row named, words of the error)
LG_CASES: dict[str, tuple[bool, tuple[str, Any], str, str]] = {
    "metadata not json": (False, cp(metadata=b"not json"), "checkpoints", "metadata is not JSON"),
    "metadata text not json": (False, cp(metadata="{'a': 1}"), "checkpoints", "is not JSON"),
    "metadata an array": (False, cp(metadata=b"[1]"), "checkpoints", "not a JSON object"),
    "deep metadata": (
        False,
        cp(metadata=('{"a":' + DEEP + "}").encode()),
        "checkpoints",
        "metadata nests deeper",
    ),
    "metadata one level too deep": (
        False,
        cp(metadata=json.dumps(nested(MAX_DEPTH + 1))),
        "checkpoints",
        "nests deeper",
    ),
    "metadata not utf-8": (False, cp(metadata=b'{"a": "\xff"}'), "checkpoints", "not UTF-8"),
    "metadata huge integer": (
        False,
        cp(metadata='{"a": 100000000000000000000000000000}'),
        "checkpoints",
        "metadata cannot be stored",
    ),
    "metadata lone surrogate": (
        False,
        cp(metadata='{"\\ud800": 1}'),
        "checkpoints",
        "metadata cannot be stored",
    ),
    "metadata an integer": (True, cp(metadata=7), "checkpoints", "metadata holds an integer"),
    "checkpoint as text": (False, cp(checkpoint="abc"), "checkpoints", "checkpoint holds text"),
    "null type": (False, cp(type=None), "checkpoints", "type holds NULL"),
    "integer thread id": (True, cp(thread_id=5), "checkpoints", "thread_id holds an integer"),
    "null checkpoint id": (True, cp(checkpoint_id=None), "checkpoints", "checkpoint_id holds NULL"),
    "text idx": (False, wr(idx="x"), "writes", "idx holds text, not an integer"),
    "huge idx": (False, wr(idx=1e300), "writes", "idx holds a real number"),
    "blob channel": (False, wr(channel=b"ch"), "writes", "channel holds a blob"),
    "value as text": (False, wr(value="abc"), "writes", "value holds text"),
}


@pytest.mark.parametrize("case", list(LG_CASES), ids=str)
def test_a_crafted_langgraph_database_is_refused_naming_its_row(tmp_path: Path, case: str) -> None:
    """Each crafted row (after a good thread that would import): exit 2 naming the
    table's row and column, nothing imported, through the CLI and the library."""
    from agentsession.transfer.langgraph import LangGraphSource, import_langgraph

    loose, bad, table, words = LG_CASES[case]
    source = tmp_path / "checkpoints.sqlite"
    lg_database(source, loose=loose, bad=bad)
    with sqlite3.connect(source) as db:
        rowid = db.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()[0]
    db.close()
    row = f"{table} rowid {rowid}"
    url = store(tmp_path)
    refused(url, ["import", "langgraph", str(source), "--user", "alice"], source, row, words)
    assert_library_refuses(
        url,
        lambda m: import_langgraph(m, LangGraphSource(source), user_id="alice"),
        str(source),
        row,
    )


def test_a_langgraph_file_wrong_as_a_whole_is_refused(tmp_path: Path) -> None:
    """Cut short, not a database, a table missing, an empty file: exit 2 naming the
    file, nothing imported."""
    url = store(tmp_path)
    cases = whole_file_cases(tmp_path, lambda p: lg_database(p, checkpoints=60), "writes")
    for name, path in cases.items():
        before = held(url)
        done = runner.invoke(
            build_app(), ["import", "langgraph", str(path), "--url", url, "--user", "alice"]
        )
        assert done.exit_code == 2 and isinstance(done.exception, SystemExit), (name, done.output)
        assert done.stderr.startswith("error: ") and str(path) in done.stderr, (name, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert held(url) == before, name


def test_the_good_langgraph_database_imports(tmp_path: Path) -> None:
    """The database the cases above spoil imports as it is (so what refuses them is
    the crafted row), tables with types or without."""
    from agentsession.transfer.langgraph import LangGraphSource, import_langgraph

    for loose in (False, True):
        source = tmp_path / f"good-{loose}.sqlite"
        lg_database(source, loose=loose)
        with SessionManager.from_url(store(tmp_path)) as manager:
            report = import_langgraph(manager, LangGraphSource(source), user_id="alice")
        assert (report.threads, report.checkpoints, report.records) == (1, 1, 2), loose


# ---------------------------------------------------------------- Google ADK


def adk_database(path: Path) -> None:
    """A ``SqliteSessionService`` file of app ``notes``: sessions ``s1`` and ``s2`` of
    user ``u``, one event each, written by ADK itself."""
    pytest.importorskip("google.adk", reason="google-adk not installed")
    from google.adk.events import Event
    from google.adk.sessions.sqlite_session_service import SqliteSessionService
    from google.genai import types

    async def write() -> None:
        service = SqliteSessionService(str(path))
        for sid in ("s1", "s2"):
            s = await service.create_session(
                app_name="notes", user_id="u", session_id=sid, state={"k": 1}
            )
            content = types.Content(role="user", parts=[types.Part(text="hi")])
            await service.append_event(s, Event(invocation_id="i", author="user", content=content))
        await service.close()

    asyncio.run(write())


#: name -> (the SQL spoiling session s2, its parameters, the row named, words of the error)
ADK_CASES: dict[str, tuple[str, tuple[Any, ...], str, str]] = {
    "event one level too deep": (
        "UPDATE events SET event_data = json_set(event_data, '$.custom_metadata', json(?)) "
        "WHERE session_id = 's2'",
        (json.dumps({"a": nested(MAX_DEPTH)}),),
        "session notes/u/s2",
        "nests deeper than 64",
    ),
    "deep event": (
        "UPDATE events SET event_data = ? WHERE session_id = 's2'",
        ('{"custom_metadata":{"a":' + DEEP + "}}",),
        "session notes/u/s2",
        "cannot read it",
    ),
    "event not json": (
        "UPDATE events SET event_data = 'not json' WHERE session_id = 's2'",
        (),
        "session notes/u/s2",
        "Invalid JSON",
    ),
    "state not json": (
        "UPDATE sessions SET state = 'nope' WHERE id = 's2'",
        (),
        "sessions of app 'notes'",
        "Invalid JSON",
    ),
    "deep state": (
        "UPDATE sessions SET state = ? WHERE id = 's2'",
        ('{"a":' + DEEP + "}",),
        "sessions of app 'notes'",
        "RecursionError",
    ),
    "text update time": (
        "UPDATE sessions SET update_time = 'x' WHERE id = 's2'",
        (),
        "sessions of app 'notes'",
        "last_update_time",
    ),
}


@pytest.mark.parametrize("case", list(ADK_CASES), ids=str)
def test_a_crafted_adk_database_is_refused_naming_its_session(tmp_path: Path, case: str) -> None:
    """Each crafted session (beside a good one that would import): exit 2 naming the
    session (or the app whose sessions cannot be listed), nothing imported, through
    the CLI and the library."""
    from agentsession.transfer import adk

    sql, params, row, words = ADK_CASES[case]
    source = tmp_path / "adk.db"
    adk_database(source)
    with sqlite3.connect(source) as db:
        db.execute(sql, params)
    db.close()
    url = store(tmp_path)
    refused(url, ["import", "google-adk", str(source), "--app", "notes"], source, row, words)

    async def run(manager: SessionManager) -> Any:
        service = adk.open_source(str(source))
        try:
            listed = await adk.list_source(service, ["notes"], name=str(source))
            return await adk.import_google_adk(manager, service, listed, name=str(source))
        finally:
            await service.close()

    assert_library_refuses(url, lambda m: asyncio.run(run(m)), str(source), row)
