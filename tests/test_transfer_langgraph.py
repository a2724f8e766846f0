"""``agentsession import langgraph``: a LangGraph ``SqliteSaver`` database moved into ours.
An interrupted graph resumes on :class:`AgentSessionSaver` as it does on ``SqliteSaver``
(every checkpoint, namespace, parent, metadata and pending write, the same bytes); the
benchmark's database arrives with every message; re-runs add nothing; a pickled
checkpoint is refused and never loaded; a bad file is one line of error and exit 2; the
source is never written."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any, TypedDict
from urllib.parse import quote

import ormsgpack
import pytest

pytest.importorskip("langgraph.checkpoint.sqlite", reason="pip install -e '.[dev]'")

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
    message_to_dict,
)
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from agentsession import SessionManager
from agentsession.adapters.langgraph import AGENT, CHECKPOINTS, WRITES, AgentSessionSaver
from test_transfer import as_other_user, damage_late_pages, invoke


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    answer: str


def _ask(state: State) -> State:
    call = {"name": "weather", "args": {"city": "Zürich"}, "id": "call_1"}
    return {"messages": [AIMessage(content="", tool_calls=[call], id="m-ask")]}


def _tool(state: State) -> State:
    return {"messages": [ToolMessage(content="rain, 7°C", tool_call_id="call_1", id="m-tool")]}


def _human(state: State) -> State:
    ok = interrupt("approve?")
    return {"answer": ok, "messages": [AIMessage(content=f"approved: {ok}", id="m-done")]}


def graph(saver: Any) -> Any:
    """ask -> tools (a subgraph: checkpoints of its own namespace) -> human, which
    stops at ``interrupt()`` until resumed."""
    inner = StateGraph(State)
    inner.add_node("tool", _tool)
    inner.add_edge(START, "tool")
    inner.add_edge("tool", END)
    outer = StateGraph(State)
    outer.add_node("ask", _ask)
    outer.add_node("tools", inner.compile(checkpointer=True))
    outer.add_node("human", _human)
    outer.add_edge(START, "ask")
    outer.add_edge("ask", "tools")
    outer.add_edge("tools", "human")
    outer.add_edge("human", END)
    return outer.compile(checkpointer=saver)


def interrupted_database(path: Path, threads: tuple[str, ...]) -> None:
    """A SqliteSaver database with each thread stopped at ``interrupt()``."""
    conn = sqlite3.connect(path, check_same_thread=False)
    g = graph(SqliteSaver(conn))
    for thread in threads:
        config = {"configurable": {"thread_id": thread}}
        g.invoke({"messages": [HumanMessage(content="Weather? 🌧", id=f"m-{thread}")]}, config)
    conn.close()


def new_store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    SessionManager.from_url(url, auto_migrate=True).close()
    return url


def folder_bytes(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` by name, as a digest of its bytes."""
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in folder.iterdir()}


def history(saver: Any, thread: str) -> list[Any]:
    """Every checkpoint of a thread (every namespace), newest first, as plain data."""
    return [
        (t.config, t.parent_config, t.metadata, t.checkpoint, t.pending_writes)
        for t in saver.list({"configurable": {"thread_id": thread}})
    ]


def test_an_interrupted_graph_resumes_on_ours_as_on_sqlitesaver(tmp_path: Path) -> None:
    """Two threads stopped at ``interrupt()`` (checkpoints in two namespaces, pending
    writes of the interrupt) are imported: the same history through our saver, each
    blob the same bytes; ``Command(resume=...)`` on ours gives the final state it gives
    on SqliteSaver; the messages are the newest state's, tool calls included; the
    source folder is byte-identical and holds no new file."""
    source_dir = tmp_path / "source"
    source_dir.mkdir()
    source = source_dir / "checkpoints.sqlite"
    interrupted_database(source, ("t-1", "thread 2/ü"))
    before = folder_bytes(source_dir)
    url = new_store(tmp_path)
    done = invoke("import", "langgraph", str(source), "--url", url, "--user", "alice", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert (report["threads"], report["created"], report["failed"]) == (2, 2, [])
    assert folder_bytes(source_dir) == before
    conn = sqlite3.connect(source, check_same_thread=False)
    theirs = SqliteSaver(conn)
    rows = conn.execute(
        "SELECT checkpoint_ns, checkpoint_id, type, checkpoint FROM checkpoints "
        "WHERE thread_id = 't-1'"
    ).fetchall()
    namespaces = {ns for ns, *_ in rows}
    assert len(namespaces) == 2 and "" in namespaces  # the root and the subgraph's
    with SessionManager.from_url(url) as manager:
        ours = AgentSessionSaver(manager, user_id="alice")
        for thread in ("t-1", "thread 2/ü"):
            assert history(ours, thread) == history(theirs, thread)
            assert any(t[4] for t in history(ours, thread))  # the interrupt's writes
        s = manager.get_session_by_key(user_id="alice", agent=AGENT, external_key="t-1")
        scope = {"session_id": s.session_id, "user_id": "alice"}
        for ns, checkpoint_id, kind, blob in rows:
            key = f"{quote(ns, safe='')}/{checkpoint_id}"
            record = manager.get_record(**scope, namespace=CHECKPOINTS, key=key)
            assert record is not None and (record.meta["type"], record.data) == (kind, blob)
        stored = manager.get_messages(**scope, limit=100).items
        state = theirs.get_tuple({"configurable": {"thread_id": "t-1"}})
        assert state is not None
        expected = state.checkpoint["channel_values"]["messages"]
        assert [json.dumps(m.payload()["lc"]) for m in stored] == [
            json.dumps(message_to_dict(m)) for m in expected
        ]
        assert [m.payload().get("tool_calls") for m in stored][1] == [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": json.dumps({"city": "Zürich"})},
            }
        ]
        assert stored[2].payload()["tool_call_id"] == "call_1"
        config = {"configurable": {"thread_id": "t-1"}}
        resumed_ours = graph(ours).invoke(Command(resume="yes"), config)
    resumed_theirs = graph(theirs).invoke(Command(resume="yes"), config)
    conn.close()
    assert resumed_ours == resumed_theirs
    assert resumed_ours["answer"] == "yes" and len(resumed_ours["messages"]) == 4


def test_the_benchmarks_langgraph_database_moves_into_ours(tmp_path: Path) -> None:
    """The database ``make bench`` builds for LangGraph (its own participant,
    benchmarks/peers.py ``LangGraph``, with the benchmark's PRAGMAs) is imported whole:
    every thread's messages in order, byte for byte, and the same graph state through
    our saver; a second run writes nothing, not even a version step."""
    benchmarks = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, benchmarks)
    try:
        import peers
    finally:
        sys.path.remove(benchmarks)
    peer = peers.LangGraph(tmp_path, peers.WAL_NORMAL)
    peer.open()
    handles = []
    for _ in range(3):
        handle = peer.new_session()
        peer.append_batch(handle, 0, 10)
        for i in range(10, 15):
            peer.append(handle, i)
        peer.update_memory(handle, 1)
        handles.append(handle)
    expected = {h["configurable"]["thread_id"]: peer.graph.get_state(h).values for h in handles}
    checkpoints = peer.conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
    peer.close()
    before = hashlib.sha256(peer.path.read_bytes()).hexdigest()
    url = new_store(tmp_path)
    args = ("import", "langgraph", str(peer.path), "--url", url, "--user", "alice", "--json")
    done = invoke(*args)
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["messages"] == 45 and report["checkpoints"] == checkpoints
    with SessionManager.from_url(url) as manager:
        ours = AgentSessionSaver(manager, user_id="alice")
        sessions = manager.list_sessions(user_id="alice", agent=AGENT).items
        assert sorted(s.external_key or "" for s in sessions) == sorted(expected)
        for s in sessions:
            want = expected[s.external_key or ""]
            stored = manager.get_messages(session_id=s.session_id, user_id="alice", limit=100)
            assert [json.dumps(m.payload()["lc"]) for m in stored.items] == [
                json.dumps(message_to_dict(m)) for m in want["messages"]
            ]
            assert [m.content for m in stored.items] == [m.content for m in want["messages"]]
            config = {"configurable": {"thread_id": s.external_key}}
            assert graph_state(ours, config, want) == want
        versions = {s.session_id: s.version for s in sessions}
    again = json.loads(invoke(*args).output)
    assert (again["records"], again["messages"], again["created"]) == (0, 0, 0)
    with SessionManager.from_url(url) as manager:
        sessions = manager.list_sessions(user_id="alice", agent=AGENT).items
        assert {s.session_id: s.version for s in sessions} == versions
    text = invoke(*args[:-1]).output  # a re-run's summary: the checkpoints were seen
    assert text.startswith(
        f"3 threads (0 new): {checkpoints} checkpoints seen, 0 records written, 0 messages imported"
    ), text
    assert hashlib.sha256(peer.path.read_bytes()).hexdigest() == before


def graph_state(saver: AgentSessionSaver, config: Any, like: dict[str, Any]) -> Any:
    """The values of the thread's newest checkpoint through ``saver``, of the channels
    ``like`` has."""
    found = saver.get_tuple(config)
    assert found is not None
    return {k: found.checkpoint["channel_values"].get(k) for k in like}


class Boom:
    """Creates its marker file when unpickled: loading pickle would show."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (Path(self.marker).touch, ())


def test_a_pickled_checkpoint_is_refused_and_never_loaded(tmp_path: Path) -> None:
    """A checkpoint stored as pickle (its bytes would create a file when loaded) is
    refused naming the thread and checkpoint; exit 1, the others imported."""
    source = tmp_path / "checkpoints.sqlite"
    interrupted_database(source, ("t-1", "t-2"))
    marker = tmp_path / "unpickled"
    with sqlite3.connect(source) as db:
        (bad,) = db.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = 't-2' "
            "AND checkpoint_ns = '' ORDER BY checkpoint_id LIMIT 1"
        ).fetchone()
        db.execute(
            "UPDATE checkpoints SET type = 'pickle', checkpoint = ? WHERE checkpoint_id = ?",
            (pickle.dumps(Boom(str(marker))), bad),
        )
    db.close()
    url = new_store(tmp_path)
    done = invoke("import", "langgraph", str(source), "--url", url, "--user", "alice")
    assert done.exit_code == 1, done.output
    assert f"not imported: 't-2': checkpoint {bad} is pickled; refused" in done.output
    assert not marker.exists()
    with sqlite3.connect(source) as db:
        total = db.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
    db.close()
    with SessionManager.from_url(url) as manager:
        stored = 0
        for thread in ("t-1", "t-2"):
            s = manager.get_session_by_key(user_id="alice", agent=AGENT, external_key=thread)
            scope = {"session_id": s.session_id, "user_id": "alice"}
            stored += len(manager.list_records(**scope, namespace=CHECKPOINTS, limit=100))
            assert manager.list_records(**scope, namespace=WRITES, limit=100)
            assert s.message_count == 3
        assert stored == total - 1


def constructor_calling(marker: Path) -> bytes:
    """A msgpack checkpoint whose ``messages`` hold an ext value naming ``os.system``
    (a permissive ``JsonPlusSerializer`` calls it: ``marker`` appears)."""
    call = ormsgpack.Ext(1, ormsgpack.packb(["os", "system", [f"touch {marker}"]]))
    return ormsgpack.packb(
        {
            "v": 4,
            "id": "x",
            "ts": "",
            "channel_values": {"messages": [call]},
            "channel_versions": {},
            "versions_seen": {},
        }
    )


def test_a_constructor_in_the_newest_checkpoint_is_never_called(tmp_path: Path) -> None:
    """The newest checkpoint is loaded for its messages with the strict serializer: a
    msgpack value naming ``os.system`` is not called; its records are imported."""
    source = tmp_path / "checkpoints.sqlite"
    interrupted_database(source, ("t-1",))
    marker = tmp_path / "called"
    with sqlite3.connect(source) as db:
        db.execute(
            "UPDATE checkpoints SET type = 'msgpack', checkpoint = ?",
            (constructor_calling(marker),),
        )
    db.close()
    url = new_store(tmp_path)
    done = invoke("import", "langgraph", str(source), "--url", url, "--user", "alice")
    assert done.exit_code == 0, done.output
    assert not marker.exists()
    with SessionManager.from_url(url) as manager:
        s = manager.get_session_by_key(user_id="alice", agent=AGENT, external_key="t-1")
        scope = {"session_id": s.session_id, "user_id": "alice"}
        assert manager.list_records(**scope, namespace=CHECKPOINTS, limit=100)
        assert s.message_count == 0


def test_a_rerun_replaces_a_special_write_the_source_replaced(tmp_path: Path) -> None:
    """``SqliteSaver`` replaces a special pending write (``__error__``) in place: a
    re-run brings the new one over (regular writes stay insert-if-absent), and a run
    over an unchanged source writes and counts nothing."""
    source, url = tmp_path / "checkpoints.sqlite", new_store(tmp_path)
    with SqliteSaver.from_conn_string(str(source)) as saver:
        config = saver.put(
            {"configurable": {"thread_id": "t", "checkpoint_ns": ""}},
            empty_checkpoint(),
            {"step": 0},
            {},
        )
        saver.put_writes(config, [("__error__", "first"), ("ch", 1)], "task-1")
    runs = [invoke("import", "langgraph", str(source), "--url", url, "--user", "alice")]
    with SqliteSaver.from_conn_string(str(source)) as saver:
        saver.put_writes(config, [("__error__", "second")], "task-1")
        want = saver.get_tuple(config).pending_writes
    for _ in range(2):
        runs.append(invoke("import", "langgraph", str(source), "--url", url, "--user", "alice"))
    assert [r.exit_code for r in runs] == [0, 0, 0], runs[-1].output
    assert [
        " 3 records written" in runs[0].output,
        " 1 record written" in runs[1].output,
        " 0 records written" in runs[2].output,
    ] == [True] * 3, runs
    with SessionManager.from_url(url) as manager:
        got = AgentSessionSaver(manager, user_id="alice").get_tuple(config)
    assert got is not None and sorted(got.pending_writes or []) == sorted(want or [])


def test_messages_that_differ_are_a_warning_not_a_failure(tmp_path: Path) -> None:
    """After the source graph removed a message, a re-run imports the new checkpoint,
    leaves the stored messages alone and warns; exit 0 (``--json``: ``warnings``)."""
    source, url = tmp_path / "checkpoints.sqlite", new_store(tmp_path)
    conn = sqlite3.connect(source, check_same_thread=False)
    chat = StateGraph(State)
    chat.add_node("bot", lambda s: {"messages": [AIMessage(content="ok")]})
    chat.add_edge(START, "bot")
    chat.add_edge("bot", END)
    g, config = chat.compile(checkpointer=SqliteSaver(conn)), {"configurable": {"thread_id": "t"}}
    g.invoke({"messages": [HumanMessage(content="hi", id="h1")]}, config)
    first = invoke("import", "langgraph", str(source), "--url", url, "--user", "alice")
    assert first.exit_code == 0, first.output
    g.update_state(config, {"messages": [RemoveMessage(id="h1")]})
    conn.close()
    done = invoke("import", "langgraph", str(source), "--url", url, "--user", "alice", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["failed"] == [] and report["records"] > 0 and report["messages"] == 0
    assert [w["thread_id"] for w in report["warnings"]] == ["t"]
    assert "messages left alone" in report["warnings"][0]["reason"]
    again = invoke("import", "langgraph", str(source), "--url", url, "--user", "alice")
    assert again.exit_code == 0 and "\nwarning: 't': messages left alone" in again.output


def test_a_bad_source_is_one_line_of_error_and_exit_2(tmp_path: Path) -> None:
    """A missing path, a folder, a file that is not SQLite, a SQLite file of another
    kind (ours): ``error: ...`` on one line, exit 2, no traceback."""
    url = new_store(tmp_path)
    (tmp_path / "text.sqlite").write_text("not a database", encoding="utf-8")
    cases = {
        tmp_path / "missing.sqlite": "no such database file",
        tmp_path: "is a directory, not a database file",
        tmp_path / "text.sqlite": "is not a LangGraph SqliteSaver database",
        tmp_path / "sessions.db": "is not a LangGraph SqliteSaver database",
    }
    for path, error in cases.items():
        done = invoke("import", "langgraph", str(path), "--url", url, "--user", "alice")
        assert done.exit_code == 2, (path, done.output)
        assert done.output.startswith(f"error: {path}" if "LangGraph" in error else "error: ")
        assert error in done.output and len(done.output.strip().splitlines()) == 1, done.output


def test_a_source_damaged_part_way_is_exit_2(tmp_path: Path) -> None:
    """A database whose late pages are damaged opens, then fails as it is read:
    ``error: cannot read ...`` on one line, exit 2 (as a bad file)."""
    source = tmp_path / "checkpoints.sqlite"
    with SqliteSaver.from_conn_string(str(source)) as saver:
        for i in range(200):
            cp = empty_checkpoint()
            cp["channel_values"] = {"pad": "p" * 3000}
            saver.put({"configurable": {"thread_id": f"t{i:03d}", "checkpoint_ns": ""}}, cp, {}, {})
    damage_late_pages(source)
    url = new_store(tmp_path)
    done = invoke("import", "langgraph", str(source), "--url", url, "--user", "alice")
    assert done.exit_code == 2, done.output
    # A damaged page fails the read (cannot read), or reads as a row of wrong values
    # (named by its rowid): either way one line naming the file, nothing imported.
    assert done.output.startswith((f"error: cannot read {source}: ", f"error: {source}: "))
    assert len(done.output.strip().splitlines()) == 1, done.output
    with SessionManager.from_url(url) as manager:
        assert not manager.list_sessions(user_id="alice")


def test_an_unreadable_source_is_refused_as_such(tmp_path: Path) -> None:
    """A file this user cannot read: ``error: cannot open ...``, exit 2, not reported
    as a foreign database."""
    prefix = as_other_user()
    base = Path(tempfile.mkdtemp(prefix="agentsession-lg-"))  # tmp_path is root's only
    try:
        base.chmod(0o755)
        locked = base / "locked.sqlite"
        interrupted_database(locked, ("t-1",))
        locked.chmod(0o000 if prefix else 0o200)
        if prefix:
            os.chown(base, 65534, 65534)
        url = f"sqlite:///{base / 'sessions.db'}"
        done = subprocess.run(
            [
                *prefix,
                sys.executable,
                "-m",
                "agentsession",
                "import",
                "langgraph",
                str(locked),
                "--url",
                url,
                "--user",
                "alice",
                "--quiet",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "HOME": str(base)},
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("error: cannot open") and "LangGraph" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    finally:
        shutil.rmtree(base)


def test_a_missing_sqlite_saver_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``langgraph-checkpoint-sqlite``: exit 2 naming the extra to install."""
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.sqlite", None)
    monkeypatch.delitem(sys.modules, "agentsession.transfer.langgraph", raising=False)
    done = invoke("import", "langgraph", "x.sqlite", "--url", "memory://", "--user", "alice")
    assert done.exit_code == 2
    assert "pip install 'agentsession[langgraph-import]'" in done.output
