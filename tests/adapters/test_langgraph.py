"""The LangGraph checkpointer: LangGraph's own conformance suite
(``langgraph-checkpoint-conformance``) on the memory and SQLite stores, the sync API on
every store, and a graph interrupted by ``interrupt()`` and resumed in a new process
from the same SQLite file."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from fastapi.testclient import TestClient

import servers

pytest.importorskip("langgraph", reason="langgraph not installed: pip install -e '.[dev]'")

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.test_utils import (
    generate_checkpoint,
    generate_config,
    generate_metadata,
)

from agentsession import AsyncSessionManager, SessionManager, ValidationError
from agentsession.adapters.langgraph import (
    AGENT,
    CHECKPOINTS,
    WRITES,
    AgentSessionSaver,
    checkpoint_record,
)
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.base import SessionStore
from inprocess import InProcess

#: The capabilities of the conformance suite 0.0.2 and how many tests each has: the
#: base ones, and the extended ones the saver implements (all three).
SUITE_TESTS = {
    "put": 17,
    "put_writes": 10,
    "get_tuple": 10,
    "list": 16,
    "delete_thread": 5,
    "delete_for_runs": 7,
    "copy_thread": 8,
    "prune": 8,
}


def _conformance(
    make_manager: Any, open_saver: Callable[[], AbstractContextManager[Any]] | None = None
) -> dict[str, Any]:
    """The suite's results per capability, each saver over a new manager of
    ``make_manager`` (or as ``open_saver`` opens it)."""

    @contextmanager
    def on_manager() -> Iterator[AgentSessionSaver]:
        manager = make_manager()
        try:  # a user per saver: the server stores' databases outlive one test
            yield AgentSessionSaver(manager, user_id=f"alice-{uuid.uuid4().hex}")
        finally:
            manager.close()

    @checkpointer_test(name="agentsession")
    async def saver() -> AsyncIterator[AgentSessionSaver]:
        with (open_saver or on_manager)() as opened:
            yield opened

    report = asyncio.run(validate(saver))
    assert report.passed_all_base() and report.passed_all(), report.to_dict()
    return {
        cap: (r.tests_passed, r.tests_failed) for cap, r in report.results.items() if r.detected
    }


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_langgraph_conformance_suite_passes_every_test(kind: str, tmp_path: Path) -> None:
    files = iter(range(1000))

    def make_manager() -> SessionManager:
        if kind == "memory":
            return SessionManager.from_url("memory://")
        return SessionManager.from_url(
            f"sqlite:///{tmp_path / f'lg{next(files)}.db'}", auto_migrate=True
        )

    counts = _conformance(make_manager)
    assert counts == {cap: (n, 0) for cap, n in SUITE_TESTS.items()}


@pytest.mark.slow
def test_langgraph_conformance_suite_over_http() -> None:
    """The same suite with the saver over a SessionClient (HTTP, an in-process server:
    a user and API key per saver): every test passes (slow: about 10 s)."""
    manager = SessionManager.from_url("memory://")
    keys = MemoryKeyStore()

    @contextmanager
    def over_http() -> Iterator[AgentSessionSaver]:
        # Not closed one by one: closing a client closes the shared in-process server.
        user = f"alice-{uuid.uuid4().hex}"
        client = SessionClient(
            "http://testserver", keys.create(user_id=user)[1], transport=InProcess(http)
        )
        yield AgentSessionSaver(client, user_id=user)

    with TestClient(create_app(manager, Settings(url="memory://"), keys=keys)) as http:
        counts = _conformance(None, over_http)
    assert counts == {cap: (n, 0) for cap, n in SUITE_TESTS.items()}
    manager.close()


def test_writes_over_http_are_cut_to_fit_the_body_limit() -> None:
    """Over a SessionClient (the server's default body limit: one 8 MiB record in
    base64 and some room), ``put_writes`` of two 5 MiB values and ``copy_thread`` of
    three 4 MiB checkpoints go through: each fits, so their batches are cut by bytes."""
    manager, keys = SessionManager.from_url("memory://"), MemoryKeyStore()
    with TestClient(create_app(manager, Settings(url="memory://"), keys=keys)) as http:
        client = SessionClient(
            "http://testserver", keys.create(user_id="alice")[1], transport=InProcess(http)
        )
        saver = AgentSessionSaver(client, user_id="alice")
        config = generate_config("src")
        for i in range(3):
            config = _put(
                saver,
                "src",
                parent=config["configurable"].get("checkpoint_id"),
                channel_values={"blob": bytes([i]) * (4 << 20)},
            )
        saver.put_writes(config, [("a", b"y" * (5 << 20)), ("b", b"z" * (5 << 20))], "task")
        found = saver.get_tuple(config)
        assert found is not None and [c for _, c, _ in found.pending_writes or []] == ["a", "b"]
        saver.copy_thread("src", "dst")
        copied = list(saver.list(generate_config("dst")))
        assert [len(t.checkpoint["channel_values"]["blob"]) for t in copied] == [4 << 20] * 3
        assert len(copied[0].pending_writes or []) == 2
    manager.close()


def test_a_user_id_other_than_the_keys_is_refused_over_a_client() -> None:
    """Over a SessionClient every call acts as the API key's user: another
    ``user_id`` is a ValidationError at construction, not threads kept elsewhere."""
    keys = MemoryKeyStore()
    with TestClient(
        create_app(SessionManager.from_url("memory://"), Settings(url="memory://"), keys=keys)
    ) as http:
        client = SessionClient(
            "http://testserver", keys.create(user_id="alice")[1], transport=InProcess(http)
        )
        with pytest.raises(ValidationError) as e:
            AgentSessionSaver(client, user_id="someone-else")
        assert e.value.field == "user_id" and "'alice'" in str(e.value)
        saver = AgentSessionSaver(client, user_id="alice")
        assert saver.get_tuple(generate_config("t")) is None


def test_langgraph_conformance_suite_over_an_async_manager() -> None:
    """The same suite with the saver over an AsyncSessionManager: every test passes."""
    manager = SessionManager.from_url("memory://")

    @contextmanager
    def over_async_manager() -> Iterator[AgentSessionSaver]:
        yield AgentSessionSaver(AsyncSessionManager(manager), user_id=f"a-{uuid.uuid4().hex}")

    counts = _conformance(None, over_async_manager)
    assert counts == {cap: (n, 0) for cap, n in SUITE_TESTS.items()}
    manager.close()


def test_an_interrupted_graph_resumes_over_http(tmp_path: Path) -> None:
    """A graph stopped at ``interrupt()`` through a SessionClient resumes through
    another client of the same user; the checkpoints are records of the session."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    def ask(state: dict[str, Any]) -> dict[str, Any]:
        return {"answer": interrupt("name?")}

    builder = StateGraph(dict)  # type: ignore[type-var]
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    manager = SessionManager.from_url(f"sqlite:///{tmp_path / 'lg.db'}", auto_migrate=True)
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    config = {"configurable": {"thread_id": "thread-1"}}
    with TestClient(create_app(manager, Settings(url="memory://"), keys=keys)) as http:
        for step in ("start", "resume"):  # a client each (closing one closes the server)
            client = SessionClient("http://testserver", token, transport=InProcess(http))
            graph = builder.compile(checkpointer=AgentSessionSaver(client, user_id="alice"))
            if step == "start":
                out = graph.invoke({"question": "name?"}, config)
                assert out["__interrupt__"][0].value == "name?"
            else:
                assert graph.invoke(Command(resume="Ada"), config)["answer"] == "Ada"
    s = manager.get_session_by_key(user_id="alice", agent=AGENT, external_key="thread-1")
    assert manager.list_records(session_id=s.session_id, user_id="alice", namespace=CHECKPOINTS)
    manager.close()


def test_an_async_client_is_refused_with_the_reason() -> None:
    """The saver blocks, so an AsyncSessionClient cannot drive it: TypeError naming
    the SessionClient to use instead."""
    client = AsyncSessionClient("http://testserver", "token")
    with pytest.raises(TypeError, match="give it a SessionClient"):
        AgentSessionSaver(client, user_id="alice")
    asyncio.run(client.close())


#: The fixture giving each server store's URL.
_SERVER_URLS = {"postgres": "postgres_store_url", "mysql": "mysql_store_url", "redis": "redis_url"}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(_SERVER_URLS))
def test_langgraph_conformance_suite_on_server_stores(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """The same suite on PostgreSQL, MariaDB and Redis (slow: servers and network)."""
    if not servers.server_stores_enabled():
        pytest.skip("server stores disabled")
    url = request.getfixturevalue(_SERVER_URLS[kind])
    counts = _conformance(lambda: SessionManager.from_url(url))
    assert counts == {cap: (n, 0) for cap, n in SUITE_TESTS.items()}


def _put(saver: AgentSessionSaver, thread: str, ns: str = "", **kw: Any) -> dict[str, Any]:
    config = generate_config(thread, checkpoint_ns=ns)
    if "parent" in kw:
        config["configurable"]["checkpoint_id"] = kw.pop("parent")
    cp = generate_checkpoint(**kw)
    return dict(saver.put(config, cp, generate_metadata(**{"source": "loop"}), {}))


def test_sync_api_on_every_store(store: SessionStore) -> None:
    """put, put_writes, get_tuple, list and delete_thread on each store: bytes and
    order survive, regular writes are insert-if-absent and special ones replace, and
    everything lives in records of the thread's session."""
    m = SessionManager(store)
    saver = AgentSessionSaver(m, user_id="alice")
    first = _put(saver, "t1", channel_values={"msg": "one", "raw": b"\x00\xff"})
    second = _put(
        saver, "t1", parent=first["configurable"]["checkpoint_id"], channel_values={"msg": "two"}
    )
    child = _put(saver, "t1", ns="sub:1|x/y", channel_values={"msg": "child"})
    saver.put_writes(second, [("a", 1), ("b", {"k": [1]})], task_id="task/1")
    saver.put_writes(second, [("a", "ignored"), ("__error__", "e1")], task_id="task/1")
    saver.put_writes(second, [("__error__", "e2")], task_id="task/1")
    latest = saver.get_tuple(generate_config("t1"))
    assert isinstance(latest, CheckpointTuple)
    assert latest.checkpoint["channel_values"] == {"msg": "two"}
    assert latest.parent_config is not None
    assert (
        latest.parent_config["configurable"]["checkpoint_id"]
        == first["configurable"]["checkpoint_id"]
    )
    assert sorted((c, v) for _, c, v in latest.pending_writes or []) == [
        ("__error__", "e2"),
        ("a", 1),
        ("b", {"k": [1]}),
    ]
    old = saver.get_tuple(first)
    assert old is not None and old.checkpoint["channel_values"]["raw"] == b"\x00\xff"
    sub = saver.get_tuple(generate_config("t1", checkpoint_ns="sub:1|x/y"))
    assert sub is not None and sub.config == child
    listed = [t.config["configurable"]["checkpoint_id"] for t in saver.list(generate_config("t1"))]
    assert listed == [
        second["configurable"]["checkpoint_id"],
        first["configurable"]["checkpoint_id"],
    ]
    assert len(list(saver.list(None))) == 3  # every thread, every namespace
    s = m.get_session_by_key(user_id="alice", agent=AGENT, external_key="t1")
    namespaces = {r.namespace for r in m.list_records(session_id=s.session_id, user_id="alice")}
    assert namespaces == {CHECKPOINTS, WRITES}
    saver.delete_thread("t1")
    assert saver.get_tuple(generate_config("t1")) is None
    assert list(saver.list(None)) == []


def test_the_default_serde_calls_no_stored_constructor(tmp_path: Path) -> None:
    """A checkpoint record naming ``os.system`` (an imported file's, say) is loaded by
    the default serde without calling it; LangChain messages still load."""
    marker = tmp_path / "called"
    call = ormsgpack.Ext(1, ormsgpack.packb(["os", "system", [f"touch {marker}"]]))
    m = SessionManager.from_url("memory://")
    saver = AgentSessionSaver(m, user_id="alice")
    config = _put(saver, "t1", channel_values={"messages": [HumanMessage("hi")]})
    assert saver.get_tuple(config).checkpoint["channel_values"]["messages"][0].content == "hi"
    cp = generate_checkpoint(channel_values={"x": 1})
    evil = checkpoint_record(
        "",
        cp["id"],
        ("msgpack", ormsgpack.packb({**cp, "channel_values": {"x": call}})),
        saver.serde.dumps_typed({}),
        None,
    )
    s = m.get_session_by_key(user_id="alice", agent=AGENT, external_key="t1")
    m.put_records(session_id=s.session_id, user_id="alice", records=[evil])
    found = saver.get_tuple(generate_config("t1", checkpoint_id=cp["id"]))
    assert found is not None and not marker.exists()


@pytest.mark.parametrize("thread_id", ["", "a\x01b", "x" * 257])
def test_unusable_thread_id_reads_nothing_and_put_says_why(thread_id: str) -> None:
    saver = AgentSessionSaver(SessionManager.from_url("memory://"), user_id="alice")
    config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    assert saver.get_tuple(config) is None
    assert list(saver.list(config)) == []
    saver.delete_thread(thread_id)
    saver.prune([thread_id])
    with pytest.raises(ValidationError) as e:
        saver.put(config, generate_checkpoint(), generate_metadata(), {})
    assert e.value.field == "thread_id" and "1-256 characters" in str(e.value)


def _counting(m: SessionManager) -> dict[str, int]:
    """Count the records ``m.list_records``/``get_record`` return, per namespace."""
    read = {CHECKPOINTS: 0, WRITES: 0}
    list_records, get_record = m.list_records, m.get_record

    def counted_list(**kw: Any) -> Any:
        found = list_records(**kw)
        for r in found:
            read[r.namespace] += 1
        return found

    def counted_get(**kw: Any) -> Any:
        found = get_record(**kw)
        if found is not None:
            read[found.namespace] += 1
        return found

    m.list_records, m.get_record = counted_list, counted_get  # type: ignore[method-assign]
    return read


def test_list_reads_only_what_it_yields() -> None:
    """``list(limit=1)`` reads one checkpoint, not the thread; ``before`` bounds the
    store listing; the metadata filter runs before any pending write is read; the
    newest of every namespace merges in id order."""
    m = SessionManager.from_url("memory://")
    saver = AgentSessionSaver(m, user_id="alice")
    ids = []
    for i in range(30):
        config = _put(saver, "t", channel_values={"i": i})
        saver.put_writes(config, [("a", i)], task_id="t1")
        ids.append(config["configurable"]["checkpoint_id"])
    child = _put(saver, "t", ns="child", channel_values={"i": 99})
    read = _counting(m)
    [newest] = saver.list(generate_config("t", checkpoint_ns=""), limit=1)
    assert newest.checkpoint["channel_values"] == {"i": 29}
    assert read == {CHECKPOINTS: 1, WRITES: 1}
    before = generate_config("t", checkpoint_ns="", checkpoint_id=ids[10])
    got = [
        t.checkpoint["channel_values"]["i"]
        for t in saver.list(generate_config("t", checkpoint_ns=""), before=before, limit=2)
    ]
    assert got == [9, 8] and read == {CHECKPOINTS: 3, WRITES: 3}
    assert list(saver.list(generate_config("t"), filter={"source": "nope"})) == []
    assert read[WRITES] == 3  # no pending write read for a checkpoint filtered out
    merged = [
        t.config["configurable"]["checkpoint_id"]
        for t in saver.list({"configurable": {"thread_id": "t"}}, limit=2)
    ]
    assert merged == [child["configurable"]["checkpoint_id"], ids[29]]


_GRAPH = textwrap.dedent(
    """
    import sys
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    from agentsession import SessionManager
    from agentsession.adapters.langgraph import AgentSessionSaver


    class State(TypedDict):
        question: str
        answer: str


    def ask(state: State) -> dict[str, str]:
        return {"answer": interrupt({"question": state["question"]})}


    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    url, step = sys.argv[1], sys.argv[2]
    with SessionManager.from_url(url, auto_migrate=True) as sm:
        graph = builder.compile(checkpointer=AgentSessionSaver(sm, user_id="alice"))
        config = {"configurable": {"thread_id": "thread-1"}}
        if step == "start":
            out = graph.invoke({"question": "name?", "answer": ""}, config)
            print(repr(out["__interrupt__"][0].value))
        else:
            print(repr(graph.invoke(Command(resume="Ada"), config)))
    """
)


def test_interrupted_graph_resumes_in_a_new_process(tmp_path: Path) -> None:
    script = tmp_path / "graph.py"
    script.write_text(_GRAPH)
    url = f"sqlite:///{tmp_path / 'lg.db'}"

    def run(step: str) -> str:
        done = subprocess.run(
            [sys.executable, str(script), url, step],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run("start") == "{'question': 'name?'}"
    assert run("resume") == "{'question': 'name?', 'answer': 'Ada'}"
