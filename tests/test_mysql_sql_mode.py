"""MariaDB/MySQL in a non-strict sql_mode: the store makes its own connections strict,
so a value too long for its column is an error, never cut short (where two idempotency
keys sharing their first characters would collide), and the longest values of every
field still round-trip (C31)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

import servers
from agentsession import SessionManager
from agentsession.errors import StoreError
from agentsession.fieldlimits import IDEMPOTENCY_KEY_CHARS
from agentsession.stores.base import IdempotencyRecord
from agentsession.stores.sql.store import SQLStore

pytestmark = pytest.mark.skipif(
    not servers.server_stores_enabled(),
    reason=f"server stores left out ({servers.SERVER_STORES_ENV}=0)",
)


@pytest.fixture
def lenient_mysql_url(mysql_url: str) -> Iterator[str]:
    """A fresh MariaDB database on a server whose global sql_mode is empty (non-strict)
    for the length of the test."""
    engine = sa.create_engine(mysql_url)
    try:
        with engine.connect() as conn:
            before = conn.exec_driver_sql("SELECT @@GLOBAL.sql_mode").scalar()
            conn.exec_driver_sql("SET GLOBAL sql_mode = ''")
        try:
            yield mysql_url
        finally:
            with engine.connect() as conn:
                conn.exec_driver_sql("SET GLOBAL sql_mode = %s", (before,))
    finally:
        engine.dispose()


def _record(key: str) -> IdempotencyRecord:
    now = datetime.now(UTC)
    return IdempotencyRecord("alice", "append_messages", key, "f" * 64, None, "{}", now)


def test_store_connections_are_strict_on_a_lenient_server(lenient_mysql_url: str) -> None:
    """The server says '' but the store's sessions run STRICT_ALL_TABLES: a key longer
    than its column (written past validation, straight through the store) fails with
    StoreError instead of being cut to the column's width."""
    plain = sa.create_engine(lenient_mysql_url)
    store = SQLStore(lenient_mysql_url, auto_migrate=True)
    try:
        with plain.connect() as conn:
            assert conn.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar() == ""
        with store.engine.connect() as conn:
            mode = conn.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar()
        assert "STRICT_ALL_TABLES" in mode.split(",")
        with pytest.raises(StoreError), store.transaction(write=True) as tx:
            tx.put_idempotency(_record("k" * (IDEMPOTENCY_KEY_CHARS + 1)))
        with store.transaction(write=False) as tx:
            assert tx.get_idempotency("alice", "append_messages", "k" * 255) is None
    finally:
        store.close()
        plain.dispose()


def test_c31_keys_past_the_old_width_do_not_collide_on_a_lenient_server(
    lenient_mysql_url: str,
) -> None:
    """Two keys sharing their first 128 characters stay two keys."""
    store = SQLStore(lenient_mysql_url, auto_migrate=True)
    try:
        m = SessionManager(store)
        first = m.create_session(user_id="alice", idempotency_key="x" * 128 + "a" * 127)
        second = m.create_session(user_id="alice", idempotency_key="x" * 128 + "b" * 127)
        assert first.session_id != second.session_id
    finally:
        store.close()
