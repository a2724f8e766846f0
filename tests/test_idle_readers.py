"""Read transactions on SQLite reuse idle connections and begin on the driver
(stores/idlereaders.py), with the same answers, isolation and observability as before."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from agentsession import SessionManager
from agentsession.errors import SessionNotFound, StoreError
from agentsession.stores.sql import idlereaders
from agentsession.stores.sql.idlereaders import MAX_IDLE
from agentsession.stores.sql.store import SQLStore
from sqlcapture import captured_sql


@pytest.fixture
def sm(tmp_path: Path) -> Iterator[SessionManager]:
    manager = SessionManager.from_url(f"sqlite:///{tmp_path / 's.db'}", auto_migrate=True)
    yield manager
    manager.close()


def _store(sm: SessionManager) -> SQLStore:
    assert isinstance(sm.store, SQLStore)
    return sm.store


def _read(sm: SessionManager, sid: str) -> int:
    return len(sm.get_messages(session_id=sid, user_id="u", limit=20).items)


def test_reads_take_no_pooled_connection_once_one_is_idle(sm: SessionManager) -> None:
    sid = sm.create_session(user_id="u").session_id
    sm.append_message(session_id=sid, user_id="u", message={"role": "user", "content": "hi"})
    _read(sm, sid)
    checkouts: list[int] = []
    sa.event.listen(_store(sm).engine.pool, "checkout", lambda *_: checkouts.append(1))
    assert [_read(sm, sid) for _ in range(5)] == [1] * 5
    assert checkouts == []


def test_a_core_statement_joins_the_driver_transaction(sm: SessionManager) -> None:
    sid = sm.create_session(user_id="u").session_id
    store = _store(sm)
    with store.transaction(write=False) as tx:
        assert tx.get_session(sid) is not None
        conn = tx._conn
        assert conn.execute(sa.select(sa.literal(1))).scalar() == 1  # Core joins
        assert conn.in_transaction()
    driver = conn.connection.dbapi_connection
    assert driver is not None and not driver.in_transaction
    assert not conn.in_transaction()
    assert _read(sm, sid) == 0  # the idle connection serves again


def test_a_failed_read_leaves_its_connection_clean(sm: SessionManager) -> None:
    sid = sm.create_session(user_id="u").session_id
    with pytest.raises(SessionNotFound):
        sm.get_messages(session_id=sid, user_id="someone-else")
    idle = _store(sm)._readers._idle  # type: ignore[union-attr]
    assert len(idle) == 1
    driver = idle[0].connection.dbapi_connection
    assert driver is not None and not driver.in_transaction
    assert _read(sm, sid) == 0


def test_a_listener_added_later_sees_the_reads_of_idle_connections(sm: SessionManager) -> None:
    sid = sm.create_session(user_id="u").session_id
    _read(sm, sid)  # leaves a connection idle, made while nobody observed
    with captured_sql(_store(sm)) as seen:
        _read(sm, sid)
    statements = [s for s, _ in seen]
    assert any(s.startswith("BEGIN") for s in statements)
    assert sum("FROM messages" in s for s in statements) == 1
    assert any("FROM sessions" in s for s in statements)


def test_at_most_max_idle_connections_stay_and_close_closes_them(tmp_path: Path) -> None:
    store = SQLStore(f"sqlite:///{tmp_path / 's.db'}", auto_migrate=True)
    conns: list[Any] = []
    with ExitStack() as stack:
        for _ in range(MAX_IDLE + 3):  # more reads at once than stay idle
            conns.append(stack.enter_context(store.transaction(write=False))._conn)
    idle = list(store._readers._idle)  # type: ignore[union-attr]
    assert len(idle) == MAX_IDLE
    assert sum(c.closed for c in conns) == 3
    store.close()
    assert all(c.closed for c in conns)


def test_a_forked_process_does_not_use_its_parents_idle_connections(
    sm: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = sm.create_session(user_id="u").session_id
    _read(sm, sid)
    readers = _store(sm)._readers
    assert readers is not None
    parents = list(readers._idle)
    monkeypatch.setattr(idlereaders.os, "getpid", lambda: -1)  # as in a forked child
    with _store(sm).transaction(write=False) as tx:
        assert tx._conn not in parents
    assert not any(c.closed for c in parents)
    assert all(c not in parents for c in readers._idle)


@pytest.mark.parametrize("observe", [False, True], ids=["driver", "observed"])
def test_a_driver_error_in_a_read_is_a_store_error_and_rolls_back(
    sm: SessionManager, observe: bool
) -> None:
    """The lean read transaction (stores/sql/hotread.py) raises a driver error of its
    block as the store's error, as the general one did, and rolls the read back."""
    sid = sm.create_session(user_id="u").session_id
    store = _store(sm)
    if observe:
        sa.event.listen(store.engine, "before_cursor_execute", lambda *_: None)
    with pytest.raises(StoreError, match="no such table"), store.transaction(write=False) as tx:
        tx._conn.exec_driver_sql("SELECT * FROM no_such_table")
    for conn in store._readers._idle:  # type: ignore[union-attr]
        driver = conn.connection.dbapi_connection
        assert driver is not None and not driver.in_transaction
    assert _read(sm, sid) == 0
