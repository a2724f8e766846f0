"""Connections the database server closed, and a store that cannot write.

A pooled connection closed by the server (PostgreSQL ``idle_session_timeout``,
MariaDB ``wait_timeout``, or killed) must not fail the next call of the library, the
LangGraph saver or ``serve``; a connection lost at the COMMIT surfaces as
StoreUnavailable and is not re-run; a full SQLite database (and a Redis over its
``maxmemory``) is StoreUnavailable, a 503 with ``Retry-After`` over HTTP, and
StoreUnavailable again in both clients.
The server stopped and started again under load is in ``test_store_outage.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from sqlalchemy import event

import servers
from agentsession import SessionManager, StoreError, StoreUnavailable
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.sql.store import SQLStore
from inprocess import InProcess

#: The server-side idle timeout the tests set (seconds), and how long they stay idle.
IDLE_TIMEOUT = 1
IDLE_WAIT = IDLE_TIMEOUT + 0.6

USER = {"role": "user", "content": "hello"}


def _database(url: str) -> str:
    return url.rsplit("/", 1)[1]


def _idle_timeout_store(kind: str, server: servers.Server, url: str) -> SQLStore:
    """A migrated store whose every connection the server closes after IDLE_TIMEOUT
    seconds idle: PostgreSQL ``idle_session_timeout`` set on the database, MariaDB
    ``wait_timeout`` set at each connection (a GLOBAL would reach other tests)."""
    if kind == "postgres":
        SQLStore(url, auto_migrate=True).close()
        with server._lock:
            server._admin.execute(
                f"ALTER DATABASE {_database(url)} SET idle_session_timeout = '{IDLE_TIMEOUT}s'"
            )
        return SQLStore(url)
    store = SQLStore(url, auto_migrate=True)

    @event.listens_for(store.engine, "connect")
    def _short_wait(dbapi_connection: Any, record: Any) -> None:
        with dbapi_connection.cursor() as cur:
            cur.execute(f"SET SESSION wait_timeout = {IDLE_TIMEOUT}")

    store.engine.dispose()  # the migration's connections had no timeout
    return store


@pytest.fixture(params=["postgres", "mysql"])
def idle_store(request: pytest.FixtureRequest) -> Iterator[SQLStore]:
    """A server store that closes connections idle for IDLE_TIMEOUT seconds."""
    kind = request.param
    server = request.getfixturevalue(f"{kind}_server")
    url = request.getfixturevalue(f"{kind}_url")
    store = _idle_timeout_store(kind, server, url)
    yield store
    store.close()


def _fill_pool(manager: SessionManager, session_id: str, connections: int = 4) -> None:
    """Put several connections in the pool: that many reads at once."""
    barrier = threading.Barrier(connections)

    def read() -> None:
        barrier.wait()
        manager.get_messages(session_id=session_id, user_id="alice")

    threads = [threading.Thread(target=read) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _serve(manager: SessionManager) -> tuple[TestClient, dict[str, str]]:
    """``serve``'s app over ``manager`` in this process, and alice's headers."""
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    app = create_app(manager, Settings(url="memory://"), keys=keys)
    return TestClient(app, raise_server_exceptions=False), {"Authorization": f"Bearer {token}"}


def test_idle_timeout_library_next_call_succeeds(idle_store: SQLStore) -> None:
    """Every pooled connection closed by the server's idle timeout: the next reads and
    writes of the library succeed (before: the first one raised StoreError)."""
    manager = SessionManager(idle_store)
    sid = manager.create_session(user_id="alice").session_id
    _fill_pool(manager, sid)
    time.sleep(IDLE_WAIT)
    manager.append_message(session_id=sid, user_id="alice", message=USER)
    _fill_pool(manager, sid)
    time.sleep(IDLE_WAIT)
    assert manager.get_session(session_id=sid, user_id="alice").message_count == 1
    assert len(manager.get_messages(session_id=sid, user_id="alice").items) == 1


def test_idle_timeout_langgraph_saver_next_call_succeeds(idle_store: SQLStore) -> None:
    """The LangGraph saver over a store whose connections timed out keeps working."""
    pytest.importorskip("langgraph", reason="langgraph not installed")
    from langgraph.checkpoint.conformance.test_utils import (
        generate_checkpoint,
        generate_config,
        generate_metadata,
    )

    from agentsession.adapters.langgraph import AgentSessionSaver

    saver = AgentSessionSaver(SessionManager(idle_store), user_id="alice")
    config = generate_config("thread-1")
    saver.put(config, generate_checkpoint(), generate_metadata(source="loop"), {})
    time.sleep(IDLE_WAIT)
    saved = saver.put(config, generate_checkpoint(), generate_metadata(source="loop"), {})
    found = saver.get_tuple(generate_config("thread-1"))
    assert found is not None
    assert found.config["configurable"]["checkpoint_id"] == saved["configurable"]["checkpoint_id"]


def test_idle_timeout_serve_answers_no_500(idle_store: SQLStore) -> None:
    """``serve`` over a store whose connections timed out answers every request as
    usual: no 500 (before: the first request after the timeout was a 500)."""
    manager = SessionManager(idle_store)
    http, headers = _serve(manager)
    with http:
        sid = http.post("/v1/sessions", json={}, headers=headers).json()["session_id"]
        _fill_pool(manager, sid)
        time.sleep(IDLE_WAIT)
        r = http.post(f"/v1/sessions/{sid}/messages", json={"message": USER}, headers=headers)
        statuses = [r.status_code]
        statuses.append(http.get(f"/v1/sessions/{sid}", headers=headers).status_code)
    assert statuses == [201, 200]


def _backend_pids(kind: str, server: servers.Server, url: str) -> list[int]:
    db = _database(url)
    with server._lock:
        if kind == "postgres":
            rows = server._admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s", (db,)
            ).fetchall()
        else:
            with server._admin.cursor() as cur:
                cur.execute("SELECT id FROM information_schema.processlist WHERE db = %s", (db,))
                rows = cur.fetchall()
    return [r[0] for r in rows]


def _kill(kind: str, server: servers.Server, pid: int) -> None:
    with server._lock:
        if kind == "postgres":
            server._admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        else:
            with server._admin.cursor() as cur:
                cur.execute(f"KILL CONNECTION {int(pid)}")


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_connections_killed_between_calls_are_replaced(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """Every connection of the pool killed right after use (too recent to be pinged):
    the next call's transaction loses its connection before the COMMIT and is re-run
    on a fresh one, and succeeds; so do the calls after it."""
    server = request.getfixturevalue(f"{kind}_server")
    url = request.getfixturevalue(f"{kind}_url")
    manager = SessionManager.from_url(url, auto_migrate=True)
    try:
        sid = manager.create_session(user_id="alice").session_id
        _fill_pool(manager, sid)
        for pid in _backend_pids(kind, server, url):
            _kill(kind, server, pid)
        for _ in range(3):
            manager.append_message(session_id=sid, user_id="alice", message=USER)
        assert manager.get_session(session_id=sid, user_id="alice").message_count == 3
    finally:
        manager.close()


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
def test_connection_lost_at_commit_is_unavailable_not_rerun(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """The connection killed just before its COMMIT is sent: the outcome is unknown,
    so the write is not re-run; it raises StoreUnavailable saying so."""
    server = request.getfixturevalue(f"{kind}_server")
    url = request.getfixturevalue(f"{kind}_url")
    manager = SessionManager.from_url(url, auto_migrate=True)
    store = manager.store
    assert isinstance(store, SQLStore)
    sid = manager.create_session(user_id="alice").session_id
    commits: list[int] = []

    def kill_before_commit(conn: sa.Connection) -> None:
        pid = conn.exec_driver_sql(
            "SELECT pg_backend_pid()" if kind == "postgres" else "SELECT CONNECTION_ID()"
        ).scalar_one()
        commits.append(pid)
        _kill(kind, server, pid)
        time.sleep(0.2)  # MariaDB closes the killed connection asynchronously

    try:
        event.listen(store.engine, "commit", kill_before_commit)
        with pytest.raises(StoreUnavailable, match="outcome is unknown"):
            manager.append_message(session_id=sid, user_id="alice", message=USER)
        assert len(commits) == 1
        event.remove(store.engine, "commit", kill_before_commit)
        # Not written (the server rolled it back), and the store works again.
        assert manager.get_session(session_id=sid, user_id="alice").message_count == 0
        manager.append_message(session_id=sid, user_id="alice", message=USER)
    finally:
        manager.close()


def _full_sqlite_manager(tmp_path: Path) -> SessionManager:
    """A manager on an SQLite file that cannot grow (``max_page_count``): SQLITE_FULL,
    as on a full disk."""
    manager = SessionManager.from_url(f"sqlite:///{tmp_path / 'full.db'}", auto_migrate=True)
    store = manager.store
    assert isinstance(store, SQLStore)

    @event.listens_for(store.engine, "connect")
    def _no_growth(dbapi_connection: Any, record: Any) -> None:
        pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages}")

    store.engine.dispose()  # the migration's connection may grow the file
    return manager


def _grow_until_full(append: Callable[[], Any]) -> StoreUnavailable:
    for _ in range(1000):
        try:
            append()
        except StoreUnavailable as exc:
            return exc
    raise AssertionError("the database never filled up")


def test_sqlite_full_is_store_unavailable(tmp_path: Path) -> None:
    """SQLITE_FULL ("database or disk is full") raises StoreUnavailable, a StoreError;
    what was acknowledged before is kept and reads still work."""
    manager = _full_sqlite_manager(tmp_path)
    try:
        sid = manager.create_session(user_id="alice").session_id
        big = {"role": "user", "content": "x" * 20_000}
        exc = _grow_until_full(
            lambda: manager.append_message(session_id=sid, user_id="alice", message=big)
        )
        assert isinstance(exc, StoreError)
        assert "full" in str(exc)
        count = manager.get_session(session_id=sid, user_id="alice").message_count
        assert len(manager.get_messages(session_id=sid, user_id="alice").items) == count
    finally:
        manager.close()


def test_sqlite_full_is_503_with_retry_after_and_unavailable_in_clients(tmp_path: Path) -> None:
    """Over HTTP a full database is a 503 problem ``store-unavailable`` with
    ``Retry-After`` (before: 500); the sync and async clients raise StoreUnavailable."""
    manager = _full_sqlite_manager(tmp_path)
    http, headers = _serve(manager)
    big = {"role": "user", "content": "x" * 20_000}
    with http:
        sid = http.post("/v1/sessions", json={}, headers=headers).json()["session_id"]
        for _ in range(1000):
            r = http.post(f"/v1/sessions/{sid}/messages", json={"message": big}, headers=headers)
            if r.status_code != 201:
                break
        assert r.status_code == 503
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.headers["retry-after"] == "1"
        assert r.json()["type"].endswith("/store-unavailable")
        token = headers["Authorization"].removeprefix("Bearer ")
        client = SessionClient("http://testserver", token, transport=InProcess(http), max_retries=0)
        with pytest.raises(StoreUnavailable):
            client.append_message(session_id=sid, message=big)

        async def append_async() -> None:
            transport = httpx.ASGITransport(app=http.app)
            client = AsyncSessionClient("http://t", token, transport=transport, max_retries=0)
            async with client as c:
                await c.append_message(session_id=sid, message=big)

        with pytest.raises(StoreUnavailable):
            asyncio.run(append_async())
    manager.close()


def _driver_errors() -> list[Any]:
    import sqlite3

    import psycopg
    import pymysql

    def wrapped(orig: Exception) -> sa.exc.DBAPIError:
        return sa.exc.OperationalError("INSERT ...", None, orig)

    return [
        pytest.param(wrapped(psycopg.errors.DiskFull("could not extend file")), id="pg-53100"),
        pytest.param(wrapped(psycopg.OperationalError("connection refused")), id="pg-refused"),
        pytest.param(wrapped(psycopg.errors.AdminShutdown("terminating")), id="pg-57P01"),
        pytest.param(wrapped(pymysql.err.OperationalError(1021, "Disk full")), id="my-1021"),
        pytest.param(wrapped(pymysql.err.OperationalError(1114, "table is full")), id="my-1114"),
        pytest.param(
            wrapped(pymysql.err.OperationalError(1030, "Got error 28 from storage engine")),
            id="my-errno-28",
        ),
        pytest.param(wrapped(pymysql.err.OperationalError(2003, "Can't connect")), id="my-2003"),
        pytest.param(wrapped(sqlite3.OperationalError("database or disk is full")), id="sqlite"),
    ]


@pytest.mark.parametrize("error", _driver_errors())
def test_disk_full_and_refused_connections_are_store_unavailable(error: Exception) -> None:
    """Each store's disk-full and connection errors translate to StoreUnavailable (the
    server stores' disk-full codes are checked here, as a full disk cannot be made on
    the shared test servers); a COMMIT's one says its outcome is unknown."""
    from agentsession.stores.sql.dialect import translate_error

    assert type(translate_error(error)) is StoreUnavailable
    assert "outcome is unknown" in str(translate_error(error, committing=True))


def test_other_driver_errors_stay_store_error() -> None:
    """What is neither busy, a conflict nor unavailable stays a plain StoreError."""
    import pymysql

    from agentsession.stores.sql.dialect import translate_error

    other = sa.exc.OperationalError("COMMIT", None, Exception("disk I/O error"))
    assert type(translate_error(other)) is StoreError
    syntax = sa.exc.ProgrammingError("SELECT", None, pymysql.err.ProgrammingError(1064, "x"))
    assert type(translate_error(syntax)) is StoreError


def test_redis_out_of_memory_is_store_unavailable(
    redis_server: servers.Server, redis_url: str
) -> None:
    """A Redis refusing writes (over ``maxmemory``: OOM) is StoreUnavailable, a 503 with
    ``Retry-After`` over HTTP (before: StoreError, a 500); reads go on working."""
    manager = SessionManager.from_url(redis_url)
    sid = manager.create_session(user_id="alice").session_id
    http, headers = _serve(manager)
    port = redis_server.port
    servers.redis_command(port, "CONFIG", "SET", "maxmemory", "1")
    try:
        with pytest.raises(StoreUnavailable, match="maxmemory"):
            manager.append_message(session_id=sid, user_id="alice", message=USER)
        r = http.post(f"/v1/sessions/{sid}/messages", json={"message": USER}, headers=headers)
        assert (r.status_code, r.headers.get("retry-after")) == (503, "1")
        assert r.json()["type"].endswith("/store-unavailable")
        assert manager.get_session(session_id=sid, user_id="alice").message_count == 0
    finally:
        servers.redis_command(port, "CONFIG", "SET", "maxmemory", "0")
    manager.append_message(session_id=sid, user_id="alice", message=USER)
    manager.close()
