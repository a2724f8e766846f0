"""The SQL store on the database servers (PostgreSQL, MariaDB/MySQL): what the contract
suite cannot say on its own.

* The documented maximum payloads (4 MiB per message, 4 MiB per tool call) round-trip
  byte for byte, with the bytes that cost the most on the way: backslashes and quotes
  (escaped twice, by JSON and by PyMySQL's client-side quoting), 4-byte UTF-8 and NUL.
  One byte more is refused by the manager before anything is written.
* MariaDB/MySQL: utf8mb4 everywhere. A database or table in another character set is
  refused at start with a message naming the fix, and so is a server whose
  ``max_allowed_packet`` cannot carry a 4 MiB payload.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

import servers
from agentsession import PayloadTooLarge, SessionManager
from agentsession.errors import StoreError
from agentsession.jsonvalues import dumps
from agentsession.stores.sql.migrate import upgrade
from agentsession.stores.sql.store import SQLStore

MiB = 1024 * 1024
USER = "alice"
# Every costly kind of character: JSON escapes (\\ \" \u0000), a 4-byte emoji, a
# 3-byte CJK character, and a quote PyMySQL escapes but JSON does not.
CHUNK = "a\\\"\x00😀中'\n"

pytestmark = pytest.mark.skipif(
    not servers.server_stores_enabled(),
    reason=f"server stores left out ({servers.SERVER_STORES_ENV}=0)",
)


@pytest.fixture(params=["postgres", "mysql"])
def server_url(request: pytest.FixtureRequest) -> str:
    """A fresh, empty database on each SQL server."""
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def manager(server_url: str) -> Iterator[SessionManager]:
    store = SQLStore(server_url, auto_migrate=True)
    try:
        yield SessionManager(store)
    finally:
        store.close()


def _json_bytes(value: object) -> int:
    return len(dumps(value).encode())


def _fill(build: object, limit: int) -> str:
    """The longest text ``t`` of CHUNKs (then ASCII) with ``build(t)`` at most ``limit``
    bytes of JSON; in practice exactly ``limit``."""
    assert callable(build)
    overhead = _json_bytes(build(""))
    chunk_bytes = _json_bytes(CHUNK) - 2  # without the quotes
    text = CHUNK * ((limit - overhead) // chunk_bytes)
    text += "x" * (limit - _json_bytes(build(text)))
    assert _json_bytes(build(text)) == limit
    return text


def test_four_mib_message_round_trips(manager: SessionManager) -> None:
    """A message of exactly max_message_bytes (4 MiB) of JSON, full of escapes, 4-byte
    characters and NUL, is stored and read back intact: plain, in a batch of three, and
    with an idempotency key (whose stored answer holds the message a second time)."""
    limit = manager.limits.max_message_bytes
    assert limit == 4 * MiB
    sid = manager.create_session(user_id=USER, agent="big").session_id

    def message(text: str) -> dict[str, object]:
        return {"role": "tool", "tool_call_id": "c1", "content": text}

    big = message(_fill(message, limit))
    first = manager.append_message(session_id=sid, user_id=USER, message=big)
    batch = manager.append_messages(session_id=sid, user_id=USER, messages=[big] * 3)
    keyed = manager.append_message(
        session_id=sid, user_id=USER, message=big, idempotency_key="big-1"
    )
    again = manager.append_message(
        session_id=sid, user_id=USER, message=big, idempotency_key="big-1"
    )
    assert again.message_id == keyed.message_id and again.seq == keyed.seq == 5
    stored = manager.get_messages(session_id=sid, user_id=USER).items
    assert [m.seq for m in stored] == [1, 2, 3, 4, 5]
    assert [m.message_id for m in stored] == [
        first.message_id,
        *(m.message_id for m in batch),
        keyed.message_id,
    ]
    for m in stored:
        assert m.payload() == big


def test_four_mib_tool_call_round_trips(manager: SessionManager) -> None:
    """A tool call of exactly max_tool_call_bytes (arguments + result + error) round-trips."""
    limit = manager.limits.max_tool_call_bytes
    sid = manager.create_session(user_id=USER, agent="big").session_id
    arguments = {"path": "a\\b\x00😀"}

    def doc(text: str) -> dict[str, object]:
        # What the manager measures: arguments, result and error together.
        return {"arguments": arguments, "result": {"stdout": text}, "error": None}

    text = _fill(doc, limit)
    call = manager.record_tool_call(
        session_id=sid, user_id=USER, tool="run", arguments=arguments, result={"stdout": text}
    )
    [got] = manager.get_tool_history(session_id=sid, user_id=USER).items
    assert got.result == call.result == {"stdout": text}
    assert got.arguments == arguments


def test_one_byte_over_four_mib_is_refused_before_writing(manager: SessionManager) -> None:
    """4 MiB + 1 byte: PayloadTooLarge from the manager; the session is unchanged."""
    limit = manager.limits.max_message_bytes
    sid = manager.create_session(user_id=USER, agent="big").session_id
    before = manager.get_session(session_id=sid, user_id=USER)

    def message(text: str) -> dict[str, object]:
        return {"role": "user", "content": text}

    over = message(_fill(message, limit) + "x")
    with pytest.raises(PayloadTooLarge) as err:
        manager.append_message(session_id=sid, user_id=USER, message=over)
    assert err.value.limit_bytes == limit and err.value.size_bytes == limit + 1
    assert manager.get_session(session_id=sid, user_id=USER) == before
    assert manager.get_messages(session_id=sid, user_id=USER).items == []


# -- MariaDB / MySQL: utf8mb4 everywhere ----------------------------------------------


def _admin(server: servers.Server) -> sa.Engine:
    return sa.create_engine(f"{server.url_prefix}/mysql", isolation_level="AUTOCOMMIT")


@pytest.fixture
def latin1_database(mysql_server: servers.Server) -> Iterator[str]:
    """A MariaDB database whose default character set is latin1."""
    name = "t_latin1"
    admin = _admin(mysql_server)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        conn.exec_driver_sql(f"CREATE DATABASE {name} CHARACTER SET latin1")
    try:
        yield f"{mysql_server.url_prefix}/{name}"
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        admin.dispose()


def test_mysql_refuses_a_latin1_database(latin1_database: str) -> None:
    """A database created without utf8mb4 is refused before any table is made, naming
    the statement that fixes it."""
    with pytest.raises(StoreError, match="utf8mb4") as err:
        SQLStore(latin1_database, auto_migrate=True)
    assert "ALTER DATABASE" in str(err.value)
    with pytest.raises(StoreError, match="utf8mb4"):
        upgrade(latin1_database)
    engine = sa.create_engine(latin1_database)
    try:
        assert sa.inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_mysql_refuses_a_table_converted_away_from_utf8mb4(mysql_url: str) -> None:
    """A store table (or one of its columns) that is no longer utf8mb4 is refused at start."""
    SQLStore(mysql_url, auto_migrate=True).close()
    engine = sa.create_engine(mysql_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "ALTER TABLE messages MODIFY payload LONGTEXT CHARACTER SET utf8mb3 NOT NULL"
            )
    finally:
        engine.dispose()
    with pytest.raises(StoreError, match="utf8mb4") as err:
        SQLStore(mysql_url)
    assert "messages.payload" in str(err.value)


def test_mysql_store_connections_speak_utf8mb4(mysql_url: str) -> None:
    """Every pooled connection uses utf8mb4 (a 4-byte character is never mangled to '?')."""
    store = SQLStore(mysql_url, auto_migrate=True)
    try:
        with store.engine.connect() as conn:
            charset = conn.exec_driver_sql("SELECT @@character_set_connection").scalar()
            assert charset == "utf8mb4"
        m = SessionManager(store)
        sid = m.create_session(user_id=USER, title="😀 t\x00").session_id
        assert m.get_session(session_id=sid, user_id=USER).title == "😀 t\x00"
    finally:
        store.close()


def test_postgres_refuses_a_database_not_in_utf8(postgres_server: servers.Server) -> None:
    """A PostgreSQL database in LATIN1 is refused at start, naming the encoding it needs."""
    name = "t_latin1"
    admin = sa.create_engine(f"{postgres_server.url_prefix}/postgres", isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
            conn.exec_driver_sql(
                f"CREATE DATABASE {name} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'"
                " TEMPLATE template0"
            )
        with pytest.raises(StoreError, match="UTF8"):
            SQLStore(f"{postgres_server.url_prefix}/{name}", auto_migrate=True)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


def test_mysql_refuses_a_max_allowed_packet_too_small_for_4_mib(
    mysql_server: servers.Server, mysql_url: str
) -> None:
    """max_allowed_packet of 4 MiB (MySQL 5.7's default) cannot carry a 4 MiB payload
    once quoted: refused at start, naming the setting, instead of failing mid-write."""
    admin = _admin(mysql_server)
    try:
        with admin.connect() as conn:
            old = conn.exec_driver_sql("SELECT @@GLOBAL.max_allowed_packet").scalar()
            conn.exec_driver_sql(f"SET GLOBAL max_allowed_packet = {4 * MiB}")
            try:
                with pytest.raises(StoreError, match="max_allowed_packet"):
                    SQLStore(mysql_url, auto_migrate=True)
            finally:
                conn.exec_driver_sql(f"SET GLOBAL max_allowed_packet = {old}")
    finally:
        admin.dispose()
    SQLStore(mysql_url, auto_migrate=True).close()
