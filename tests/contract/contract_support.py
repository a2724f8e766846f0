"""Helpers shared by the contract suite: principals, message builders, state snapshots,
and a failure-injecting store proxy (a real adapter wrapper, not a mock).

Everything here talks to a store only through :class:`SessionManager` or the public
store protocol, so it works for every backend registered in ``tests/conftest.py``;
the memory-history helpers alone reach into each store (they count or drop rows no
protocol read exposes).
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from agentsession import Message, Page, RecordWrite, Session, SessionManager
from agentsession.ids import new_id
from agentsession.stores.base import FeedRead, ScrubReport, SessionStore, StoreTransaction
from agentsession.stores.memory.store import MemoryStore
from agentsession.stores.redis.memory import memory_keys
from agentsession.stores.sealed import SealedStore
from agentsession.stores.sql.schema import memory_history
from agentsession.stores.sql.store import SQLStore

#: Public methods of SessionManager (what callers may use).
PUBLIC_METHODS = sorted(
    name
    for name, _ in inspect.getmembers(SessionManager, inspect.isfunction)
    if not name.startswith("_")
)

USER = "alice"
OTHER = "bob"
ADMIN = "root"


def user_msg(text: str, **extra: Any) -> dict[str, Any]:
    """A user message payload."""
    return {"role": "user", "content": text, **extra}


def assistant_msg(text: str, **extra: Any) -> dict[str, Any]:
    """An assistant message payload."""
    return {"role": "assistant", "content": text, **extra}


def new_session(m: SessionManager, user: str = USER, **kwargs: Any) -> Session:
    """Create a session owned by ``user``."""
    return m.create_session(user_id=user, agent="coding", **kwargs)


def missing_session_id() -> str:
    """A well-formed session id that names no session."""
    return new_id("ses")


def dump(model: Any) -> Any:
    """JSON-comparable form of a model or list of models."""
    if isinstance(model, list):
        return [dump(x) for x in model]
    return model.model_dump(mode="json")


def every(listing: Callable[..., Page[Any]], **kwargs: Any) -> list[Any]:
    """Every item of a listing (``manager.get_messages``...) in seq order, following its
    cursors in either direction; seq bounds or a cursor in ``kwargs`` go to the first
    call only.
    Fails if a cursor leads to an empty page or an item comes twice."""
    page = listing(**kwargs)
    found = list(page.items)
    rest = {k: v for k, v in kwargs.items() if k not in ("after", "before", "cursor")}
    while page.next_cursor is not None:
        page = listing(**rest, cursor=page.next_cursor)
        assert page.items, "a cursor led to an empty page"
        found += page.items
    found.sort(key=lambda item: item.seq)
    assert len({item.seq for item in found}) == len(found), "an item came twice"
    return found


def as_read(model: Any) -> Any:
    """A write's answer as a read returns it: without the ``session_version`` of the write."""
    return model.model_copy(update={"session_version": None})


def snapshot(m: SessionManager, session_id: str) -> dict[str, Any]:
    """Everything observable about a session, read as admin (reads write nothing here)."""
    kw: dict[str, Any] = {"session_id": session_id, "user_id": ADMIN, "admin": True}
    return {
        "session": dump(m.get_session(**kw)),
        "messages": dump(every(m.get_messages, after=0, **kw)),
        "memory": dump(m.get_working_memory(**kw)),
        "tools": dump(every(m.get_tool_history, **kw)),
        "runs": dump(every(m.list_runs, **kw)),
        "audit": dump(every(m.get_audit_log, **kw)),
        "records": [
            (r.namespace, r.key, r.data, r.meta, r.version)
            for r in m.list_records(**kw, limit=m.limits.max_page_size)
        ],
    }


def audit_of(m: SessionManager, session_id: str) -> list[Any]:
    """The session's whole audit log, read as admin."""
    return every(m.get_audit_log, session_id=session_id, user_id=ADMIN, admin=True)


def assert_version_chain(events: list[Any]) -> None:
    """Every event moves the version by exactly one, each starting where the last ended."""
    versioned = [e for e in events if e.version_after is not None]
    assert versioned, "no versioned audit events"
    assert versioned[0].version_before is None and versioned[0].version_after == 1
    for prev, cur in itertools.pairwise(versioned):
        assert cur.version_before == prev.version_after, (prev, cur)
        assert cur.version_after == cur.version_before + 1, cur
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def seqs(messages: list[Message]) -> list[int]:
    """The seqs of ``messages``, in the order given."""
    return [x.seq for x in messages]


def walk_datetimes(value: Any, path: str = "") -> Iterator[tuple[str, datetime]]:
    """Yield every datetime inside a model dump (python mode), with its path."""
    if isinstance(value, datetime):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from walk_datetimes(v, f"{path}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from walk_datetimes(v, f"{path}[{i}]")


def assert_aware_utc_near(model: Any, now: datetime, tolerance_s: float = 60.0) -> None:
    """Every timestamp in ``model`` is aware, UTC (offset 0) and within tolerance of now.

    The default tolerance is far below any local time's offset from UTC (15 minutes at
    the least), which a timestamp stored in local time would be off by, and far above
    the delay of a loaded machine between the write and ``now`` (1.4 s was seen in CI).
    """
    found = list(walk_datetimes(model.model_dump()))
    assert found, f"no timestamps in {type(model).__name__}"
    for path, at in found:
        assert at.tzinfo is not None, f"{path} is naive: {at!r}"
        assert at.utcoffset().total_seconds() == 0, f"{path} is not UTC: {at!r}"
        assert abs((at - now).total_seconds()) <= tolerance_s, f"{path}={at} vs now={now}"


def utcnow() -> datetime:
    """The real current time, aware UTC."""
    return datetime.now(UTC)


def canon(value: Any) -> str:
    """Order-sensitive JSON text (for 'field order kept' checks)."""
    return json.dumps(value, ensure_ascii=False)


def same_payload(got: dict[str, Any], sent: dict[str, Any]) -> bool:
    """Equal fields with equal values, each nested value in the same key order (the
    top-level field order of a message is not part of the contract)."""
    return got == sent and all(canon(got[k]) == canon(v) for k, v in sent.items())


class InjectedFailure:
    """One planned failure: raise ``error`` on the ``nth`` call of ``method``
    (after the call reached the real store when ``after=True``)."""

    def __init__(self, method: str, error: BaseException, *, nth: int = 1, after: bool = True):
        self.method = method
        self.error = error
        self.nth = nth
        self.after = after
        self.seen = 0
        self.fired = False


class ProxyStore:
    """Wraps a real store: records every transaction method called and can inject
    failures inside a transaction (so the real store must roll back).

    Attributes:
        calls: names of the transaction methods called, in order.
    """

    def __init__(self, inner: SessionStore) -> None:
        self.inner = inner
        self.url = inner.url
        self.calls: list[str] = []
        self.failures: list[InjectedFailure] = []

    def fail(self, method: str, error: BaseException, *, nth: int = 1, after: bool = True) -> None:
        """Plan a failure of ``method`` on its ``nth`` call from now."""
        self.failures.append(InjectedFailure(method, error, nth=nth, after=after))

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[StoreTransaction]:
        """Open a transaction of the real store and hand out a recording wrapper."""
        with self.inner.transaction(write=write) as tx:
            yield _ProxyTransaction(self, tx)  # type: ignore[misc]

    def scrub(self, *, compact: bool = False) -> ScrubReport:
        """The real store's disk step."""
        return self.inner.scrub(compact=compact)

    def read_changes(self, **query: Any) -> FeedRead:
        """The real store's change feed."""
        return self.inner.read_changes(**query)

    def change_tail(self) -> str | None:
        """The real store's feed tail."""
        return self.inner.change_tail()

    def close(self) -> None:
        """The wrapped store belongs to the fixture; nothing to release here."""


class _ProxyTransaction:
    def __init__(self, proxy: ProxyStore, tx: StoreTransaction) -> None:
        self._proxy = proxy
        self._tx = tx

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._tx, name)
        if not callable(target):
            return target
        proxy = self._proxy

        def call(*args: Any, **kwargs: Any) -> Any:
            proxy.calls.append(name)
            planned = None
            for f in proxy.failures:
                if f.method == name and not f.fired:
                    f.seen += 1
                    if f.seen == f.nth:
                        f.fired = True
                        planned = f
                    break
            if planned is not None and not planned.after:
                raise planned.error
            result = target(*args, **kwargs)
            if planned is not None:
                raise planned.error
            return result

        return call


def run_threads(n: int, target: Any) -> list[Any]:
    """Run ``target(i)`` in ``n`` threads released together; return results or exceptions."""
    import threading

    barrier = threading.Barrier(n)
    out: list[Any] = [None] * n

    def work(i: int) -> None:
        barrier.wait()
        try:
            out[i] = target(i)
        except BaseException as exc:  # collected for the test to inspect
            out[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return out


# ---------------------------------------------------------------- operation tables


class Ctx:
    """A session with something of every kind in it: messages, working memory, a tool
    call, a finished run and (optionally) a RUNNING run."""

    def __init__(self, m: SessionManager, user: str = USER, *, running: bool = True) -> None:
        s = new_session(m, user, title="t", metadata={"k": {"n": 1}})
        self.sid = s.session_id
        self.user = user
        kw: dict[str, Any] = {"session_id": self.sid, "user_id": user}
        m.append_messages(**kw, messages=[user_msg("hello"), assistant_msg("hi")])
        m.update_working_memory(**kw, data={"goal": "g", "counter": 1, "facts": {"a": 1}})
        m.record_tool_call(**kw, tool="search", arguments={"q": "x"}, result={"hits": 1})
        self.finished_run_id = m.start_run(**kw, input={"task": "one"}).run_id
        m.finish_run(**kw, run_id=self.finished_run_id, status="SUCCEEDED")
        self.running_run_id: str | None = None
        if running:
            self.running_run_id = m.start_run(**kw, input={"task": "two"}).run_id
        self.version = m.get_session(**kw).version

    @property
    def run_id(self) -> str:
        """The RUNNING run if there is one, else the finished one."""
        return self.running_run_id or self.finished_run_id


def _kw(ctx: Ctx, user: str | None, extra: dict[str, Any]) -> dict[str, Any]:
    return {"session_id": ctx.sid, "user_id": user or ctx.user, **extra}


#: Every mutation that takes ``expected_version``: name -> fn(manager, ctx, user, **kw).
VERSIONED_WRITES: dict[str, Any] = {
    "update_session": lambda m, c, u=None, **kw: m.update_session(**_kw(c, u, kw), title="renamed"),
    "append_message": lambda m, c, u=None, **kw: m.append_message(
        **_kw(c, u, kw), message=user_msg("one more")
    ),
    "append_messages": lambda m, c, u=None, **kw: m.append_messages(
        **_kw(c, u, kw),
        messages=[user_msg("q"), assistant_msg("a")],
        working_memory_patch={"counter": 2},
    ),
    "truncate_messages": lambda m, c, u=None, **kw: m.truncate_messages(
        **_kw(c, u, kw), after_seq=1
    ),
    "replace_messages": lambda m, c, u=None, **kw: m.replace_messages(
        **_kw(c, u, kw), after_seq=1, messages=[assistant_msg("compacted")]
    ),
    "pop_message": lambda m, c, u=None, **kw: m.pop_message(**_kw(c, u, kw)),
    "rewind_session": lambda m, c, u=None, **kw: m.rewind_session(**_kw(c, u, kw), to_seq=1),
    "put_records": lambda m, c, u=None, **kw: m.put_records(
        **_kw(c, u, kw), records=[RecordWrite("ns", "k", b"\x00data")]
    ),
    "add_summary": lambda m, c, u=None, **kw: m.add_summary(
        **_kw(c, u, kw), text="they said hello", from_seq=1, to_seq=1
    ),
    "update_working_memory.data": lambda m, c, u=None, **kw: m.update_working_memory(
        **_kw(c, u, kw), data={"goal": "replaced"}
    ),
    "update_working_memory.patch": lambda m, c, u=None, **kw: m.update_working_memory(
        **_kw(c, u, kw), patch={"counter": 5, "facts": {"b": 2}}
    ),
    "record_tool_call": lambda m, c, u=None, **kw: m.record_tool_call(
        **_kw(c, u, kw), tool="read_file", arguments={"path": "a.py"}, result="text"
    ),
    "start_run": lambda m, c, u=None, **kw: m.start_run(**_kw(c, u, kw), input="task"),
    "add_run_step": lambda m, c, u=None, **kw: m.add_run_step(
        **_kw(c, u, kw), run_id=c.run_id, kind="model", output={"text": "x"}
    ),
    "finish_run": lambda m, c, u=None, **kw: m.finish_run(
        **_kw(c, u, kw), run_id=c.run_id, status="SUCCEEDED", usage={"input_tokens": 3}
    ),
    "close_session": lambda m, c, u=None, **kw: m.close_session(**_kw(c, u, kw), reason="done"),
    "expire_session": lambda m, c, u=None, **kw: m.expire_session(**_kw(c, u, kw)),
    "restore_session": lambda m, c, u=None, **kw: m.restore_session(**_kw(c, u, kw)),
    "delete_session": lambda m, c, u=None, **kw: m.delete_session(**_kw(c, u, kw)),
}

#: Mutations that need the session ACTIVE (content writes): name -> fn.
CONTENT_WRITES: dict[str, Any] = {
    name: fn
    for name, fn in VERSIONED_WRITES.items()
    if name not in ("close_session", "expire_session", "restore_session", "delete_session")
}
CONTENT_WRITES["modify_working_memory"] = lambda m, c, u=None, **kw: m.modify_working_memory(
    **_kw(c, u, kw), fn=lambda d: {**d, "counter": d.get("counter", 0) + 1}
)

#: Every read that takes a session id: name -> fn.
READS: dict[str, Any] = {
    "get_session": lambda m, c, u=None, **kw: m.get_session(**_kw(c, u, kw)),
    "get_messages": lambda m, c, u=None, **kw: m.get_messages(**_kw(c, u, kw)).items,
    "get_messages.window": lambda m, c, u=None, **kw: (
        m.get_messages(**_kw(c, u, kw), limit=1).items
    ),
    "get_working_memory": lambda m, c, u=None, **kw: m.get_working_memory(**_kw(c, u, kw)),
    "get_tool_history": lambda m, c, u=None, **kw: m.get_tool_history(**_kw(c, u, kw)).items,
    "find_tool_call": lambda m, c, u=None, **kw: m.find_tool_call(
        **_kw(c, u, kw), tool="search", arguments={"q": "x"}
    ),
    "get_run": lambda m, c, u=None, **kw: m.get_run(**_kw(c, u, kw), run_id=c.run_id),
    "list_runs": lambda m, c, u=None, **kw: m.list_runs(**_kw(c, u, kw)).items,
    "get_audit_log": lambda m, c, u=None, **kw: m.get_audit_log(**_kw(c, u, kw)).items,
    "get_record": lambda m, c, u=None, **kw: m.get_record(**_kw(c, u, kw), namespace="", key="k"),
    "list_records": lambda m, c, u=None, **kw: m.list_records(**_kw(c, u, kw)),
    "list_summaries": lambda m, c, u=None, **kw: m.list_summaries(**_kw(c, u, kw)),
    "list_rewinds": lambda m, c, u=None, **kw: m.list_rewinds(**_kw(c, u, kw)).items,
    "build_context": lambda m, c, u=None, **kw: m.build_context(
        **_kw(c, u, kw), budget_tokens=1000
    ),
}

#: Every public method that takes a session id.
ALL_SESSION_OPS: dict[str, Any] = {**READS, **VERSIONED_WRITES, **CONTENT_WRITES}


def raw_store(store: SessionStore) -> SessionStore:
    """The store below a keyring variant's SealedStore (``store`` itself otherwise): its
    own tables, keys and fields, which hold ciphertext there."""
    return store.inner if isinstance(store, SealedStore) else store


def history_rows(store: SessionStore, session_id: str) -> int:
    """How many working-memory history rows ``store`` holds for the session."""
    store = raw_store(store)
    if isinstance(store, MemoryStore):
        return len(store._sessions[session_id].memory_history)
    if isinstance(store, SQLStore):
        rows = memory_history.c.session_id == session_id
        stmt = sa.select(sa.func.count()).select_from(memory_history).where(rows)
        with store.engine.connect() as conn:
            return int(conn.execute(stmt).scalar_one())
    _, history, at = memory_keys(session_id)
    client: Any = store.client  # type: ignore[attr-defined]
    assert client.hlen(history) == client.zcard(at)
    return int(client.zcard(at))


def drop_history(store: SessionStore, session_id: str) -> None:
    """Delete the session's history rows, as a session stored before the history
    existed has none (Redis) or fewer."""
    store = raw_store(store)
    if isinstance(store, MemoryStore):
        store._sessions[session_id].memory_history.clear()
    elif isinstance(store, SQLStore):
        with store.engine.begin() as conn:
            conn.execute(sa.delete(memory_history).where(memory_history.c.session_id == session_id))
    else:
        store.client.delete(*memory_keys(session_id)[1:])  # type: ignore[attr-defined]
