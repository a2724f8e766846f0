"""Erased means gone from disk: canaries of every kind (tests/canaries.py) are written,
the user is erased, and none of them is left in the store's files: the SQLite database,
-wal and -shm (while the process runs, and after close), the Redis keys and AOF, a
PostgreSQL dump and, after ``compact`` (VACUUM FULL), its table files."""

from __future__ import annotations

import functools
import logging
import secrets
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
import sqlalchemy as sa

import servers
from agentsession import SessionManager
from agentsession.stores.redis.store import RedisStore
from agentsession.stores.sql.schema import metadata
from agentsession.stores.sql.store import SQLStore
from canaries import USER_DOCUMENT, Canaries, write_canaries


def _bytes_of(paths: list[Path]) -> bytes:
    return b"".join(p.read_bytes() for p in paths if p.is_file())


def test_sqlite_erasure_leaves_no_canary_in_db_wal_or_shm(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    files = [db, tmp_path / "c.db-wal", tmp_path / "c.db-shm"]
    store = SQLStore(f"sqlite:///{db}", auto_migrate=True)
    sm = SessionManager(store)
    c = write_canaries(sm)
    assert c.found_in(_bytes_of(files)) == sorted(c.values)  # the scan does see them
    erasure = sm.erase_user(user_id=c.user)
    assert erasure.sessions_deleted == len(c.session_ids) and erasure.store.pending == ()
    assert c.found_in(_bytes_of(files)) == []  # the process still runs
    store.close()
    assert c.found_in(_bytes_of(files)) == []


def test_sqlite_erasure_reaches_the_disk_on_a_build_without_secure_delete(tmp_path: Path) -> None:
    """SQLite's own default is secure_delete off (Debian builds turn it on): every
    connection of the store turns it on itself."""
    db = tmp_path / "off.db"
    files = [db, tmp_path / "off.db-wal", tmp_path / "off.db-shm"]
    store = SQLStore(f"sqlite:///{db}", auto_migrate=True)

    def like_a_default_build(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA secure_delete = OFF")

    # Runs before the store's own connect hook, on every new connection.
    sa.event.listen(store.engine, "connect", like_a_default_build, insert=True)
    store.engine.dispose()
    with SessionManager(store) as sm:
        c = write_canaries(sm)
        sm.erase_user(user_id=c.user)
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA secure_delete").scalar() == 1
        store.close()
    assert c.found_in(_bytes_of(files)) == []


def test_sqlite_erasure_leaves_nothing_of_the_search_index_on_disk(tmp_path: Path) -> None:
    """The search index held the canaries (its table, and the FTS5 segments' trigrams,
    which no other data of the file holds: ``ж9#``, ``9#8``, ``#8ж``); after the
    erasure neither the texts nor those trigrams are in the database, -wal or -shm,
    though the FTS5 delete only adds a marker (the scrub's ``optimize`` merges them
    out). Another user's indexed text stays found."""
    db = tmp_path / "s.db"
    files = [db, tmp_path / "s.db-wal", tmp_path / "s.db-shm"]
    store = SQLStore(f"sqlite:///{db}", auto_migrate=True)
    with SessionManager(store) as sm:
        c = write_canaries(sm)
        sid = sm.create_session(user_id=c.user).session_id
        kw: dict[str, Any] = {"session_id": sid, "user_id": c.user}
        secret = "index canary ж9#8ж9#8"
        sm.append_message(**kw, message={"role": "user", "content": secret})
        keep = sm.create_session(user_id="keeper", title="kept 9 title").session_id
        found = sm.search(user_id=c.user, query=c.values["message_content"])
        assert [h.kind for h in found] == ["message"]
        trigrams = [t.encode() for t in ("ж9#", "9#8", "#8ж")]
        with store.engine.connect() as conn:
            indexed = conn.exec_driver_sql("SELECT text FROM search_texts").scalars().all()
            assert any(secret in text for text in indexed)
        assert all(t in _bytes_of(files) for t in trigrams)  # the scan does see them
        sm.erase_user(user_id=c.user)
        assert sm.search(user_id=c.user, query="ж9#8").items == []
        assert [h.session_id for h in sm.search(user_id="keeper", query="kept 9")] == [keep]
        raw = _bytes_of(files)
        assert [t for t in trigrams if t in raw] == [] and secret.encode() not in raw
        assert c.found_in(raw) == []
    store.close()


def test_sqlite_delete_session_leaves_no_canary_on_disk(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    files = [db, tmp_path / "d.db-wal", tmp_path / "d.db-shm"]
    with SessionManager(SQLStore(f"sqlite:///{db}", auto_migrate=True)) as sm:
        c = write_canaries(sm)
        for sid in c.session_ids:
            sm.delete_session(session_id=sid, user_id=c.user)
        found = c.found_in(_bytes_of(files))
        # Erasing by session leaves the user's shared-memory document (the user's, not
        # the session's), keyed by user and agent, and the idempotency record of the
        # admin's keyed write to it (session-less, the user's as its owner).
        assert found == sorted((*USER_DOCUMENT, "agent", "idempotency_key", "user_id"))
        sm.store.close()


def test_sqlite_removed_messages_are_erased_with_their_session(tmp_path: Path) -> None:
    """Removing messages is no erasure: their content stays in the idempotency records
    of the appends and pops; deleting the session erases it from the database file,
    -wal and -shm."""
    db = tmp_path / "r.db"
    files = [db, tmp_path / "r.db-wal", tmp_path / "r.db-shm"]
    with SessionManager(SQLStore(f"sqlite:///{db}", auto_migrate=True)) as sm:
        sid = sm.create_session(user_id="alice").session_id
        kw: dict[str, Any] = {"session_id": sid, "user_id": "alice"}
        texts = [f"CANARY-removal-{i}-{secrets.token_hex(6)}" for i in range(3)]
        messages = [{"role": "user", "content": t} for t in texts]
        sm.append_messages(**kw, messages=messages, idempotency_key="add")
        sm.pop_message(**kw, idempotency_key="pop")
        sm.truncate_messages(**kw, after_seq=0, idempotency_key="cut")
        assert all(t.encode() in _bytes_of(files) for t in texts)  # the scan does see them
        sm.delete_session(**kw)
        assert [t for t in texts if t.encode() in _bytes_of(files)] == []
        sm.store.close()


def test_sqlite_delete_with_a_reader_holding_a_snapshot_does_not_stall_writers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The -wal checkpoint holds the writer lock while it waits for readers: it waits
    about a second, not the 30 s busy timeout, and says the -wal may keep erased rows."""
    db = tmp_path / "r.db"
    with SessionManager(SQLStore(f"sqlite:///{db}", auto_migrate=True)) as sm:
        gone = sm.create_session(user_id="alice")
        other = sm.create_session(user_id="bob")
        sm.append_message(
            session_id=gone.session_id, user_id="alice", message={"role": "user", "content": "x"}
        )
        reader = sqlite3.connect(db, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sessions").fetchone()  # holds its snapshot
        took: list[float] = []

        def delete() -> None:
            start = time.monotonic()
            sm.delete_session(session_id=gone.session_id, user_id="alice")
            took.append(time.monotonic() - start)

        try:
            with caplog.at_level(logging.WARNING):
                deleting = threading.Thread(target=delete)
                deleting.start()
                start = time.monotonic()
                sm.append_message(
                    session_id=other.session_id,
                    user_id="bob",
                    message={"role": "user", "content": "y"},
                )
                writer_took = time.monotonic() - start
                deleting.join()
        finally:
            reader.close()
        assert took and took[0] < 10 and writer_took < 10
        assert "erased rows may remain in the -wal" in caplog.text


# -- Redis ------------------------------------------------------------------------------


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the test Redis, with RDB compression off while the test runs (so a
    canary in the rewritten AOF's RDB preamble would be seen, not LZF-compressed)."""
    client = redis.Redis.from_url(redis_url)
    client.config_set("rdbcompression", "no")
    try:
        yield client
    finally:
        client.config_set("rdbcompression", "yes")
        client.close()


def _aof_files(client: redis.Redis) -> list[Path]:
    directory = Path(client.config_get("dir")["dir"])
    return sorted(p for p in directory.rglob("*") if p.is_file() and "appendonly" in str(p))


def _all_values(client: redis.Redis) -> bytes:
    """Every key name and value of the Redis database, as bytes."""
    out = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key)
        value = {
            b"string": lambda k: [client.get(k)],
            b"hash": lambda k: [x for kv in client.hgetall(k).items() for x in kv],
            b"zset": lambda k: client.zrange(k, 0, -1),
            b"set": lambda k: list(client.smembers(k)),
            b"list": lambda k: client.lrange(k, 0, -1),
            # The change feed: entry ids and fields (a session id and a seq).
            b"stream": lambda k: [
                x for i, fields in client.xrange(k) for kv in fields.items() for x in (i, *kv)
            ],
        }[kind](key)
        out += [key, *value]
    return b"\n".join(out)


def _wait_until_gone(c: Canaries, files: Callable[[], list[Path]]) -> list[str]:
    """Redis deletes the AOF files a rewrite replaced in a background thread, so they may
    linger for a moment after the rewrite is reported done."""
    deadline = time.monotonic() + 10
    while (found := c.found_in(_bytes_of(files()))) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def test_redis_erasure_with_aof_rewrite_leaves_no_canary(
    redis_url: str, redis_client: redis.Redis
) -> None:
    store = RedisStore(redis_url, rewrite_aof_after_erasure=True)
    with SessionManager(store) as sm:
        c = write_canaries(sm)
        assert c.found_in(_bytes_of(_aof_files(redis_client))) == sorted(c.values)
        erasure = sm.erase_user(user_id=c.user)
    store.close()
    assert any(step.startswith("BGREWRITEAOF") for step in erasure.store.done)
    assert c.found_in(_all_values(redis_client)) == []
    assert _wait_until_gone(c, lambda: _aof_files(redis_client)) == []


def test_redis_erasure_without_rewrite_says_the_aof_keeps_them(
    redis_url: str, redis_client: redis.Redis
) -> None:
    store = RedisStore(redis_url)
    with SessionManager(store) as sm:
        c = write_canaries(sm)
        erasure = sm.erase_user(user_id=c.user)
    store.close()
    assert c.found_in(_all_values(redis_client)) == []
    assert c.found_in(_bytes_of(_aof_files(redis_client))) != []
    assert any("append-only file keeps" in step for step in erasure.store.pending)


# -- PostgreSQL and MariaDB ---------------------------------------------------------------


def _pg_dump(postgres_server: servers.Server, url: str) -> bytes:
    dump = servers._postgres_bin() / "pg_dump"
    database = url.rsplit("/", 1)[1]
    return subprocess.run(
        [str(dump), "-h", "127.0.0.1", "-p", str(postgres_server.port), "-U", "postgres", database],
        check=True,
        capture_output=True,
    ).stdout


def _pg_table_files(postgres_server: servers.Server, url: str) -> list[Path]:
    """Every file of the database's directory (tables, TOAST, indexes), after a
    CHECKPOINT wrote the changed pages out."""
    database = url.rsplit("/", 1)[1]
    with psycopg.connect(
        host="127.0.0.1",
        port=postgres_server.port,
        user="postgres",
        dbname=database,
        autocommit=True,
    ) as conn:
        conn.execute("CHECKPOINT")
        data = conn.execute("SHOW data_directory").fetchone()[0]
        oid = conn.execute(
            "SELECT oid FROM pg_database WHERE datname = current_database()"
        ).fetchone()[0]
    return sorted((Path(data) / "base" / str(oid)).iterdir())


def test_postgres_erasure_leaves_no_canary_in_a_dump_nor_after_compact_in_the_files(
    postgres_server: servers.Server, postgres_url: str
) -> None:
    store = SQLStore(postgres_url, auto_migrate=True)
    with SessionManager(store) as sm:
        c = write_canaries(sm)
        erasure = sm.erase_user(user_id=c.user)
        assert any("VACUUM FULL" in step for step in erasure.store.pending)
        assert c.found_in(_pg_dump(postgres_server, postgres_url)) == []
        # The dead row versions are still in the table files: what --compact is for.
        assert c.found_in(_bytes_of(_pg_table_files(postgres_server, postgres_url))) != []
        report = store.scrub(compact=True)
    store.close()
    assert report.done[0].startswith(f"VACUUM FULL of {len(metadata.tables)} tables")
    assert c.found_in(_bytes_of(_pg_table_files(postgres_server, postgres_url))) == []


def _every_row(store: SQLStore) -> bytes:
    """Every row of every table of the store, as text."""
    with store.engine.connect() as conn:
        rows = [row for t in metadata.sorted_tables for row in conn.execute(sa.select(t))]
    return repr(rows).encode("utf-8") + b"".join(
        v for row in rows for v in row if isinstance(v, bytes)
    )


def test_mariadb_erasure_leaves_no_canary_in_any_table(mysql_url: str) -> None:
    store = SQLStore(mysql_url, auto_migrate=True)
    with SessionManager(store) as sm:
        c = write_canaries(sm)
        # The scan does see them (but those no live row holds: replaced, deleted).
        assert {"admin_shared_memory", "admin_message", "idempotency_key"} <= set(
            c.found_in(_every_row(store))
        )
        sm.erase_user(user_id=c.user)
        assert c.found_in(_every_row(store)) == []
        store.close()


def _pg_admin(postgres_server: servers.Server) -> psycopg.Connection[Any]:
    return psycopg.connect(
        host="127.0.0.1", port=postgres_server.port, user="postgres", autocommit=True
    )


def test_postgres_wal_keeps_erased_rows_until_the_documented_steps(
    postgres_server: servers.Server, postgres_url: str
) -> None:
    """docs/security.md: after an erasure ``pg_wal`` still holds the rows (and a
    recycled segment would keep them); ``CHECKPOINT; SELECT pg_switch_wal();
    CHECKPOINT;`` with ``wal_recycle=off`` removes every segment that held them."""
    with _pg_admin(postgres_server) as conn:
        conn.execute("ALTER SYSTEM SET wal_recycle = off")
        conn.execute("SELECT pg_reload_conf()")
        wal = Path(conn.execute("SHOW data_directory").fetchone()[0]) / "pg_wal"
    try:
        with SessionManager(SQLStore(postgres_url, auto_migrate=True)) as sm:
            c = write_canaries(sm)
            sm.erase_user(user_id=c.user)
            sm.store.close()
        segments = lambda: sorted(p for p in wal.iterdir() if p.is_file())  # noqa: E731
        assert c.found_in(_bytes_of(segments())) != []  # what the steps are for
        with _pg_admin(postgres_server) as conn:
            conn.execute("CHECKPOINT")
            conn.execute("SELECT pg_switch_wal()")
            conn.execute("CHECKPOINT")
        assert c.found_in(_bytes_of(segments())) == []
    finally:
        with _pg_admin(postgres_server) as conn:
            conn.execute("ALTER SYSTEM RESET wal_recycle")
            conn.execute("SELECT pg_reload_conf()")


def test_mariadb_compact_rebuilds_every_table(mysql_url: str) -> None:
    store = SQLStore(mysql_url, auto_migrate=True)
    try:
        assert any("OPTIMIZE TABLE" in step for step in store.scrub().pending)
        report = store.scrub(compact=True)
    finally:
        store.close()
    assert report.done[0].startswith(f"OPTIMIZE TABLE of {len(metadata.tables)} tables")
    assert all("OPTIMIZE TABLE" not in step for step in report.pending)


def _race(n: int, call: Callable[[], Any]) -> None:
    """Run ``call`` in ``n`` threads released together; re-raise the first error."""
    start, errors = threading.Barrier(n), []

    def run() -> None:
        start.wait()
        try:
            call()
        except Exception as exc:  # reported by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize("database", ["postgres", "mysql"])
def test_racing_writers_on_one_key_leave_no_user_id_in_the_server_log(
    database: str, request: pytest.FixtureRequest
) -> None:
    """Writers racing on one idempotency key, on the first write of one shared document
    and on opening one external key leave no user id or key in the server's log:
    PostgreSQL logs every unique violation with the key's values (``DETAIL: Key
    (user_id, ...)=(...) already exists``), where an erasure cannot reach them, so the
    store loses such races without one; MariaDB logs no failed statement."""
    server: servers.Server = request.getfixturevalue(f"{database}_server")
    url: str = request.getfixturevalue(f"{database}_url")
    user = f"CANARY-racer-{secrets.token_hex(6)}"
    key = f"CANARY-race-key-{secrets.token_hex(6)}"
    logged_before = server.log.stat().st_size
    with SessionManager(SQLStore(url, auto_migrate=True)) as sm:
        sid = sm.create_session(user_id=user).session_id
        for n in range(5):
            _race(
                8,
                functools.partial(
                    sm.append_message,
                    session_id=sid,
                    user_id=user,
                    message={"role": "user", "content": f"m{n}"},
                    idempotency_key=f"{key}-{n}",
                ),
            )
            _race(
                8,
                functools.partial(
                    sm.update_shared_memory,
                    scope="user",
                    agent=f"a{n}",
                    user_id=user,
                    data={"n": 1},
                ),
            )
            _race(
                8,
                functools.partial(
                    sm.open_session, user_id=user, agent=f"a{n}", external_key=f"{key}-{n}"
                ),
            )
        history = sm.get_messages(session_id=sid, user_id=user).items
        assert [m.content for m in history] == [f"m{i}" for i in range(5)]  # one per key
        assert len(sm.list_sessions(user_id=user).items) == 6  # one per external key
        sm.store.close()
    with server.log.open("rb") as log:
        log.seek(logged_before)
        written = log.read().decode("utf-8", errors="replace")
    assert "already exists" not in written and user not in written and key not in written
