"""Smoke tests of the throwaway servers in ``tests/servers.py``: each starts, gives a URL
a client can use, and isolates tests (fresh database / flushed Redis). Skipped with a
reason where the server is not installed."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

import servers
from agentsession import SessionManager
from agentsession.stores.base import SessionStore
from servers import Server, redis_command


def test_redis_server_accepts_commands_and_is_append_only(
    redis_server: Server, redis_url: str
) -> None:
    assert redis_url == f"redis://127.0.0.1:{redis_server.port}/0"
    assert redis_command(redis_server.port, "SET", "k", "välue") == "OK"
    assert redis_command(redis_server.port, "GET", "k") == "välue"
    assert "aof_enabled:1" in redis_command(redis_server.port, "INFO", "persistence")


def test_redis_url_fixture_flushes_between_tests(redis_server: Server, redis_url: str) -> None:
    assert redis_command(redis_server.port, "DBSIZE") == 0
    redis_command(redis_server.port, "SET", "left-behind", "1")


def test_postgres_database_is_fresh_and_utf8(postgres_url: str) -> None:
    engine = sa.create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            assert conn.scalar(sa.text("SHOW server_encoding")) == "UTF8"
            assert (
                conn.scalar(sa.text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"))
                == 0
            )
    finally:
        engine.dispose()


def test_mysql_database_is_fresh_and_utf8mb4(mysql_url: str) -> None:
    engine = sa.create_engine(mysql_url)
    try:
        with engine.connect() as conn:
            assert conn.scalar(sa.text("SELECT @@character_set_database")) == "utf8mb4"
            assert (
                conn.scalar(
                    sa.text(
                        "SELECT count(*) FROM information_schema.tables "
                        "WHERE table_schema = DATABASE()"
                    )
                )
                == 0
            )
    finally:
        engine.dispose()


@pytest.mark.parametrize("turn", [1, 2])
def test_store_fixture_starts_empty_every_test(store: SessionStore, turn: int) -> None:
    """The SQL server stores share one migrated database per session: the second turn
    would see the first turn's session if the fixture did not empty it."""
    m = SessionManager(store)
    assert m.list_sessions(user_id="root", all_users=True, admin=True).items == []
    m.create_session(user_id="alice", idempotency_key=f"turn-{turn}")


def test_a_server_that_fails_to_start_once_is_started_again(tmp_path: Path) -> None:
    """One failed start (``mariadb-install-db`` exited 1 once on a loaded machine) is
    retried, instead of failing every test of the session that needs the server."""
    stopped: list[int] = []
    server = Server(
        kind="fake",
        version="1",
        host="127.0.0.1",
        port=1,
        url_prefix="x:",
        startup_seconds=0.0,
        log=tmp_path / "log",
        _stop=lambda: stopped.append(1),
    )
    starts: list[int] = []

    def start() -> Server:
        starts.append(1)
        if len(starts) == 1:
            raise RuntimeError("mariadb-install-db failed (exit 1):\n...")
        return server

    served = servers._session_server("fake", start)
    assert next(served) is server and len(starts) == 2
    served.close()
    assert stopped == [1]

    def never() -> Server:
        raise RuntimeError("still failing")

    with pytest.raises(RuntimeError, match="still failing"):
        next(servers._session_server("fake", never))


def test_a_failed_start_names_the_servers_own_error_and_keeps_the_log(tmp_path: Path) -> None:
    """The server's ``[ERROR]`` lines come first, before a tool's help text that follows
    them, and the whole log is kept where the message says (its directory is removed)."""
    log = tmp_path / "server.log"
    help_text = [f"  --option-{i}  what it does" for i in range(40)]
    log.write_text("\n".join(["starting", "2026 [ERROR] InnoDB: disk full", *help_text]))
    tail = servers._tail(log)
    assert tail.splitlines()[0] == "2026 [ERROR] InnoDB: disk full"
    kept = Path(tail.splitlines()[-1].removeprefix("(the whole log: ").removesuffix(")"))
    assert kept.read_text() == log.read_text()
