"""Schema migrations: old databases upgrade and keep their data; concurrent starts are safe."""

from __future__ import annotations

import multiprocessing
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

import agentsession
import servers
from agentsession import RecordWrite, SessionManager
from agentsession.errors import SchemaOutOfDate, SessionExists
from agentsession.ids import new_id
from agentsession.models import AuditEvent, Message, Session
from agentsession.stores.sql.columns import UTCDateTime
from agentsession.stores.sql.dialect import create_store_engine, migration_lock, parse_url
from agentsession.stores.sql.migrate import current_revision, head_revision, upgrade
from agentsession.stores.sql.schema import NATIVE_SEARCH_OBJECTS, metadata
from agentsession.stores.sql.store import SQLStore

SPAWN = multiprocessing.get_context("spawn")


def _url(path: Path) -> str:
    return f"sqlite:///{path}"


def _text(at: datetime) -> str:
    """A timestamp as the SQLite store writes it."""
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def _alembic_versions(path: Path) -> list[str]:
    with sqlite3.connect(path) as raw:
        return [v for (v,) in raw.execute("SELECT version_num FROM alembic_version")]


def _versions_at(url: str) -> list[str]:
    """The rows of ``alembic_version`` in any SQL database."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars())
    finally:
        engine.dispose()


SQL_BACKENDS = ["sqlite", "postgres", "mysql"]


@pytest.fixture(params=SQL_BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of a fresh, empty database: an SQLite file, or one on the throwaway PostgreSQL
    or MariaDB server (skipped when that server is not installed, or when
    ``AGENTSESSION_TEST_SERVERS=0``)."""
    if request.param == "sqlite":
        yield _url(tmp_path / "db.sqlite")
        return
    if not servers.server_stores_enabled():
        pytest.skip(f"server stores left out ({servers.SERVER_STORES_ENV}=0)")
    yield str(request.getfixturevalue(f"{request.param}_url"))


# The tables as revision 0001 made them, for writing old rows through SQLAlchemy on any
# database (UTCDateTime stores each dialect's way, as the 0001 code did).
_OLD_SESSIONS = sa.table(
    "sessions",
    *(sa.column(c) for c in ("session_id", "user_id", "agent", "title", "metadata", "status")),
    sa.column("version", sa.Integer),
    *(sa.column(c, UTCDateTime) for c in ("created_at", "updated_at", "last_active_at")),
    sa.column("closed_at", UTCDateTime),
    sa.column("expired_at", UTCDateTime),
    sa.column("ttl_seconds", sa.Double),
    *(sa.column(c, sa.Integer) for c in ("message_count", "run_count", "tool_call_count")),
)
_OLD_MESSAGES = sa.table(
    "messages",
    sa.column("message_id"),
    sa.column("session_id"),
    sa.column("seq", sa.Integer),
    sa.column("created_at", UTCDateTime),
    sa.column("role"),
    sa.column("run_id"),
    sa.column("payload"),
)


_OLD_RUNS = sa.table(
    "runs",
    *(sa.column(c) for c in ("session_id", "run_id", "input", "status", "error", "output")),
    *(sa.column(c) for c in ("usage", "metadata")),
    sa.column("seq", sa.Integer),
    *(sa.column(c, UTCDateTime) for c in ("created_at", "started_at", "ended_at")),
)
_OLD_STEPS = sa.table(
    "run_steps",
    *(sa.column(c) for c in ("session_id", "run_id", "kind", "name", "input", "output")),
    *(sa.column(c) for c in ("status", "error")),
    sa.column("step_index", sa.Integer),
    *(sa.column(c, UTCDateTime) for c in ("started_at", "ended_at")),
)
_OLD_KEYS = sa.table(
    "idempotency_keys",
    *(sa.column(c) for c in ("user_id", "scope", "idem_key", "fingerprint", "session_id")),
    sa.column("result"),
    sa.column("created_at", UTCDateTime),
)


def test_fresh_database_upgrades_to_head(tmp_path: Path) -> None:
    """An empty file has no revision; upgrade brings it to the head the code expects."""
    url = _url(tmp_path / "fresh.db")
    assert head_revision() == "0021_store_meta_session_chain"
    assert current_revision(url) is None
    assert upgrade(url) == head_revision()
    assert current_revision(url) == head_revision()
    assert upgrade(url) == head_revision()  # a second run has nothing to do


def test_schema_module_matches_the_migrations(db_url: str) -> None:
    """schema.py describes exactly what the migrations build (no drift either way), but
    for each dialect's search index objects, which it names (NATIVE_SEARCH_OBJECTS)."""
    store = SQLStore(db_url, auto_migrate=True)

    def described(name: str | None, *_: Any) -> bool:
        return name not in NATIVE_SEARCH_OBJECTS

    try:
        with store.engine.connect() as conn:
            opts = {"compare_type": True, "include_name": described}
            context = MigrationContext.configure(conn, opts=opts)
            assert compare_metadata(context, metadata) == []
    finally:
        store.close()


def test_c26_old_schema_upgrades_and_keeps_data(db_url: str) -> None:
    """A 0001 database with NULLs in optional fields: clear error, upgrade, data intact
    (SQLite, PostgreSQL, MariaDB)."""
    url = db_url
    assert upgrade(url, revision="0001_initial") == "0001_initial"
    now = datetime.now(UTC)
    last_active = now - timedelta(minutes=5)
    with_ttl, without_ttl, closed = new_id("ses"), new_id("ses"), new_id("ses")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for sid, status, ttl, closed_at in (
                (with_ttl, "ACTIVE", 86400.0, None),
                (without_ttl, "ACTIVE", None, None),
                (closed, "CLOSED", 60.0, now),
            ):
                conn.execute(
                    sa.insert(_OLD_SESSIONS),
                    {
                        "session_id": sid,
                        "user_id": "alice",
                        "agent": "coding",
                        "title": None,
                        "metadata": "{}",
                        "status": status,
                        "version": 3,
                        "created_at": last_active,
                        "updated_at": last_active,
                        "last_active_at": last_active,
                        "closed_at": closed_at,
                        "expired_at": None,
                        "ttl_seconds": ttl,
                        "message_count": 2,
                        "run_count": 0,
                        "tool_call_count": 0,
                    },
                )
                conn.execute(
                    sa.insert(_OLD_MESSAGES),
                    [
                        {
                            "message_id": new_id("msg"),
                            "session_id": sid,
                            "seq": seq,
                            "created_at": last_active,
                            "role": "user",
                            "run_id": None,
                            "payload": f'{{"role":"user","content":"m{seq}"}}',
                        }
                        for seq in (1, 2)
                    ],
                )
    finally:
        engine.dispose()

    with pytest.raises(SchemaOutOfDate, match="agentsession db upgrade") as exc_info:
        SQLStore(url)
    assert exc_info.value.current_revision == "0001_initial"
    assert exc_info.value.expected_revision == head_revision()

    assert upgrade(url) == head_revision()
    store = SQLStore(url)
    try:
        with store.transaction(write=False) as tx:
            sessions = {sid: tx.get_session(sid) for sid in (with_ttl, without_ttl, closed)}
            assert [m.content for m in tx.get_messages(with_ttl)] == ["m1", "m2"]
        old = sessions[with_ttl]
        assert old is not None and old.title is None and old.status_reason is None
        assert old.expires_at == last_active + timedelta(days=1)
        assert sessions[without_ttl] is not None and sessions[without_ttl].expires_at is None
        assert sessions[closed] is not None and sessions[closed].expires_at is None

        manager = SessionManager(store)
        for sid in (with_ttl, without_ttl):
            assert manager.get_session(session_id=sid, user_id="alice").version == 3
            added = manager.append_message(
                session_id=sid, user_id="alice", message={"role": "user", "content": "new"}
            )
            assert added.seq == 3
            history = manager.get_messages(session_id=sid, user_id="alice").items
            assert [m.content for m in history] == ["m1", "m2", "new"]
    finally:
        store.close()
    assert _versions_at(url) == [head_revision()]


_OLD_RUNS = sa.table(
    "runs",
    *(sa.column(c) for c in ("session_id", "run_id", "input", "status", "error")),
    *(sa.column(c) for c in ("output", "usage", "metadata")),
    sa.column("seq", sa.Integer),
    *(sa.column(c, UTCDateTime) for c in ("created_at", "started_at", "ended_at")),
)
_OLD_STEPS = sa.table(
    "run_steps",
    *(sa.column(c) for c in ("session_id", "run_id", "kind", "name", "input", "output")),
    *(sa.column(c) for c in ("status", "error")),
    sa.column("step_index", sa.Integer),
    sa.column("started_at", UTCDateTime),
    sa.column("ended_at", UTCDateTime),
)


def _old_session_row(sid: str, at: datetime, runs: int) -> dict[str, Any]:
    return {
        "session_id": sid,
        "user_id": "alice",
        "agent": "coding",
        "title": None,
        "metadata": "{}",
        "status": "ACTIVE",
        "version": 1,
        "created_at": at,
        "updated_at": at,
        "last_active_at": at,
        "closed_at": None,
        "expired_at": None,
        "ttl_seconds": None,
        "message_count": 0,
        "run_count": runs,
        "tool_call_count": 0,
    }


def test_step_count_is_backfilled_from_run_steps(db_url: str) -> None:
    """A 0002 database with runs of 3, 0 and 2 steps upgrades with step_count 3, 0, 2;
    the next step gets index 3 (SQLite, PostgreSQL, MariaDB)."""
    url = db_url
    assert upgrade(url, revision="0002_expiry_columns") == "0002_expiry_columns"
    at = datetime.now(UTC) - timedelta(minutes=5)
    sid, other = new_id("ses"), new_id("ses")
    run_ids = {"a": new_id("run"), "b": new_id("run"), "c": new_id("run")}
    steps = {(sid, run_ids["a"]): 3, (sid, run_ids["b"]): 0, (other, run_ids["c"]): 2}
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.insert(_OLD_SESSIONS),
                [_old_session_row(sid, at, 2), _old_session_row(other, at, 1)],
            )
            for seq, ((owner, run_id), count) in enumerate(steps.items(), start=1):
                conn.execute(
                    sa.insert(_OLD_RUNS),
                    {
                        "session_id": owner,
                        "run_id": run_id,
                        "seq": seq,
                        "input": "null",
                        "status": "SUCCEEDED" if run_id != run_ids["a"] else "RUNNING",
                        "error": None,
                        "output": "null",
                        "usage": "{}",
                        "metadata": "{}",
                        "created_at": at,
                        "started_at": at,
                        "ended_at": None,
                    },
                )
                for i in range(count):
                    conn.execute(
                        sa.insert(_OLD_STEPS),
                        {
                            "session_id": owner,
                            "run_id": run_id,
                            "step_index": i,
                            "kind": "k",
                            "name": None,
                            "input": "null",
                            "output": "null",
                            "status": "ok",
                            "error": None,
                            "started_at": at,
                            "ended_at": at,
                        },
                    )
    finally:
        engine.dispose()

    assert upgrade(url) == head_revision()
    store = SQLStore(url)
    try:
        with store.transaction(write=False) as tx:
            counts = {
                (owner, run_id): getattr(tx.get_run(owner, run_id), "step_count", None)
                for owner, run_id in steps
            }
            listed = [(r.step_count, r.steps) for r in tx.list_runs(sid)]
        assert counts == steps
        assert listed == [(3, []), (0, [])]
        manager = SessionManager(store)
        step = manager.add_run_step(session_id=sid, user_id="alice", run_id=run_ids["a"], kind="k")
        assert step.index == 3
        run = manager.get_run(session_id=sid, user_id="alice", run_id=run_ids["a"])
        assert (run.step_count, [s.index for s in run.steps]) == (4, [0, 1, 2, 3])
    finally:
        store.close()


def test_c26_auto_migrate_upgrades_an_old_database(db_url: str) -> None:
    """With auto_migrate=True an old schema is brought to head at start."""
    url = db_url
    upgrade(url, revision="0001_initial")
    SQLStore(url, auto_migrate=True).close()
    assert current_revision(url) == head_revision()


def test_field_widths_upgrade_keeps_rows_and_takes_longer_values(db_url: str) -> None:
    """0005 widens idempotency keys, step kinds and statuses: rows written at 0002 stay,
    and the longest accepted values then fit (SQLite, PostgreSQL, MariaDB)."""
    url = db_url
    upgrade(url, revision="0002_expiry_columns")
    now = datetime.now(UTC)
    sid, run_id = new_id("ses"), new_id("run")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.insert(_OLD_SESSIONS),
                {
                    "session_id": sid,
                    "user_id": "alice",
                    "agent": "a",
                    "title": None,
                    "metadata": "{}",
                    "status": "ACTIVE",
                    "version": 2,
                    "created_at": now,
                    "updated_at": now,
                    "last_active_at": now,
                    "closed_at": None,
                    "expired_at": None,
                    "ttl_seconds": None,
                    "message_count": 0,
                    "run_count": 1,
                    "tool_call_count": 0,
                },
            )
            conn.execute(
                sa.insert(_OLD_RUNS),
                {
                    "session_id": sid,
                    "run_id": run_id,
                    "seq": 1,
                    "input": "null",
                    "status": "RUNNING",
                    "created_at": now,
                    "started_at": now,
                    "ended_at": None,
                    "error": None,
                    "output": "null",
                    "usage": "{}",
                    "metadata": "{}",
                },
            )
            conn.execute(
                sa.insert(_OLD_STEPS),
                {
                    "session_id": sid,
                    "run_id": run_id,
                    "step_index": 0,
                    "kind": "k" * 64,
                    "name": None,
                    "input": "null",
                    "output": "null",
                    "status": "s" * 32,
                    "error": None,
                    "started_at": now,
                    "ended_at": now,
                },
            )
            conn.execute(
                sa.insert(_OLD_KEYS),
                {
                    "user_id": "alice",
                    "scope": "create_session",
                    "idem_key": "i" * 128,
                    "fingerprint": "f" * 64,
                    "session_id": sid,
                    "result": "{}",
                    "created_at": now,
                },
            )
    finally:
        engine.dispose()
    assert upgrade(url) == head_revision()
    store = SQLStore(url)
    try:
        with store.transaction(write=False) as tx:
            steps = tx.list_run_steps(sid, run_id)
            assert [(st.kind, st.status) for st in steps] == [("k" * 64, "s" * 32)]
            assert tx.get_idempotency("alice", "create_session", "i" * 128) is not None
        manager = SessionManager(store)
        step = manager.add_run_step(
            session_id=sid,
            user_id="alice",
            run_id=run_id,
            kind="k" * 128,
            status="s" * 128,
            idempotency_key="i" * 255,
        )
        assert (step.kind, step.status) == ("k" * 128, "s" * 128)
    finally:
        store.close()


def test_newer_schema_is_refused_even_with_auto_migrate(tmp_path: Path) -> None:
    """A database migrated by newer code is not touched by older code."""
    path = tmp_path / "newer.db"
    upgrade(_url(path))
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE alembic_version SET version_num = '0099_from_the_future'")
    with pytest.raises(SchemaOutOfDate, match="0099_from_the_future"):
        SQLStore(_url(path), auto_migrate=True)


def _upgrade_worker(url: str, barrier: Any, results: Any) -> None:
    barrier.wait()
    try:
        results.put(("ok", upgrade(url)))
    except Exception as exc:  # reported to the parent, which fails the test
        results.put(("error", repr(exc)))


def _open_worker(url: str, barrier: Any, results: Any) -> None:
    barrier.wait()
    try:
        store = SQLStore(url, auto_migrate=True)
        with store.transaction(write=False) as tx:
            tx.list_user_session_ids("nobody")
        store.close()
        results.put(("ok", head_revision()))
    except Exception as exc:  # reported to the parent, which fails the test
        results.put(("error", repr(exc)))


@pytest.mark.parametrize("how", ["upgrade", "auto_migrate"])
def test_c26_two_processes_upgrade_at_the_same_moment(db_url: str, how: str) -> None:
    """Two processes migrating one fresh database at once (``db upgrade``, or two
    instances starting with auto_migrate): both succeed, one version row (SQLite,
    PostgreSQL, MariaDB)."""
    worker = _upgrade_worker if how == "upgrade" else _open_worker
    barrier, results = SPAWN.Barrier(2), SPAWN.Queue()
    procs = [SPAWN.Process(target=worker, args=(db_url, barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert outcomes == [("ok", head_revision())] * 2
    assert _versions_at(db_url) == [head_revision()]


# -- C05: two processes, 20 writers and 20 readers on one SQLite file ------------------

C05_SECONDS = 4.0
C05_THREADS = 10  # writers and readers per process; two processes make 20 + 20


def _c05_worker(url: str, barrier: Any, results: Any) -> None:
    """Open the store at the same moment as the other process, then write and read."""
    errors: list[str] = []
    acked: dict[str, int] = {}
    session_ids: list[str] = []
    lock = threading.Lock()
    barrier.wait()
    try:
        store = SQLStore(url, auto_migrate=True)
    except Exception as exc:
        results.put({"errors": [f"open: {exc!r}"], "acked": {}, "reads": 0})
        return
    deadline = time.monotonic() + C05_SECONDS
    reads = [0]

    def writer() -> None:
        sid = new_id("ses")
        now = datetime.now(UTC)
        session = Session(
            session_id=sid,
            user_id="c05",
            agent="a",
            created_at=now,
            updated_at=now,
            last_active_at=now,
        )
        try:
            with store.transaction(write=True) as tx:
                tx.insert_session(session)
            with lock:
                session_ids.append(sid)
            # SQLite's busy handler is not fair across processes: one process's writers
            # can hold the lock for the whole window while the other's wait (up to
            # busy_timeout). So each writer goes on until its first append is acknowledged.
            while time.monotonic() < deadline or sid not in acked:
                # One append as the SessionManager does it: lock, insert, CAS, audit.
                with store.transaction(write=True) as tx:
                    s = tx.get_session(sid)
                    assert s is not None
                    seq = s.message_count + 1
                    at = datetime.now(UTC)
                    tx.insert_messages(
                        [
                            Message(
                                message_id=new_id("msg"),
                                session_id=sid,
                                seq=seq,
                                created_at=at,
                                role="user",
                                content=f"m{seq}",
                            )
                        ]
                    )
                    new = s.model_copy(
                        update={"version": s.version + 1, "message_count": seq, "updated_at": at}
                    )
                    tx.update_session(new, expected_version=s.version)
                    tx.insert_audit(
                        AuditEvent(
                            seq=0,
                            session_id=sid,
                            user_id="c05",
                            actor="c05",
                            action="messages.appended",
                            at=at,
                            version_before=s.version,
                            version_after=new.version,
                        )
                    )
                acked[sid] = seq  # acknowledged: the transaction committed
        except Exception as exc:
            with lock:
                errors.append(f"writer: {exc!r}")

    def reader() -> None:
        try:
            while time.monotonic() < deadline or reads[0] == 0:
                with lock:
                    sid = random.choice(session_ids) if session_ids else None
                if sid is None:
                    time.sleep(0.001)
                    continue
                with store.transaction(write=False) as tx:
                    s = tx.get_session(sid)
                    last = tx.get_messages(sid, limit=20)
                # One snapshot: the count and the newest message agree.
                assert s is not None
                assert (last[-1].seq if last else 0) == s.message_count
                with lock:
                    reads[0] += 1
                time.sleep(0.001)  # a request handler does other work between reads
        except Exception as exc:
            with lock:
                errors.append(f"reader: {exc!r}")

    threads = [threading.Thread(target=writer) for _ in range(C05_THREADS)]
    threads += [threading.Thread(target=reader) for _ in range(C05_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    results.put({"errors": errors, "acked": acked, "reads": reads[0]})


@pytest.mark.slow
def test_c05_sqlite_locked_two_processes(tmp_path: Path) -> None:
    """Two processes, 20 writers + 20 readers: no lock error surfaces, no write is lost."""
    path = tmp_path / "c05.db"
    barrier, results = SPAWN.Barrier(2), SPAWN.Queue()
    procs = [
        SPAWN.Process(target=_c05_worker, args=(_url(path), barrier, results)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=90) for _ in procs]
    for p in procs:
        p.join(timeout=30)

    assert [o["errors"] for o in outcomes] == [[], []]
    acked: dict[str, int] = {}
    for o in outcomes:
        acked.update(o["acked"])
    assert len(acked) == 2 * C05_THREADS
    assert all(o["reads"] > 0 for o in outcomes)
    assert sum(acked.values()) > 2 * C05_THREADS  # real contention, not a trivial run
    assert _alembic_versions(path) == [head_revision()]
    store = SQLStore(_url(path))
    try:
        with store.transaction(write=False) as tx:
            for sid, seq in acked.items():
                s = tx.get_session(sid)
                assert s is not None and s.message_count == seq
                assert [m.seq for m in tx.get_messages(sid)] == list(range(1, seq + 1))
                assert len(tx.list_audit(sid)) == seq
    finally:
        store.close()


def test_external_keys_upgrade_keeps_keyless_rows(db_url: str) -> None:
    """0006 adds the external key: sessions written at 0005 have none and do not collide
    (their hash is NULL); new sessions then take keys, unique per user and agent
    (SQLite, PostgreSQL, MariaDB)."""
    url = db_url
    upgrade(url, revision="0005_field_widths")
    now = datetime.now(UTC)
    old = [new_id("ses"), new_id("ses")]
    engine = sa.create_engine(url)
    try:
        sessions = sa.Table("sessions", sa.MetaData(), autoload_with=engine)
        assert "external_key" not in sessions.c
        with engine.begin() as conn:
            for sid in old:
                row = _old_session_row(sid, now, runs=0)
                conn.execute(sa.insert(sessions), {k: v for k, v in row.items() if k in sessions.c})
    finally:
        engine.dispose()
    assert upgrade(url) == head_revision()
    with SessionManager.from_url(url) as sm:
        keys = [sm.get_session(session_id=sid, user_id="alice").external_key for sid in old]
        assert keys == [None, None]
        keyed = sm.create_session(user_id="alice", agent="a", external_key="k")
        with pytest.raises(SessionExists):
            sm.create_session(user_id="alice", agent="a", external_key="k")
        assert sm.open_session(user_id="alice", agent="a", external_key="k") == (keyed, False)


def _downgrade(url: str, revision: str) -> None:
    """Migrate down to ``revision`` on an engine configured as the store's (on SQLite:
    ``PRAGMA foreign_keys=ON``, so a dropped parent table would cascade)."""
    engine = create_store_engine(parse_url(url))
    try:
        with engine.connect() as conn, migration_lock(conn, timeout_seconds=30):
            config = Config()
            config.set_main_option(
                "script_location", str(Path(agentsession.__file__).parent / "migrations")
            )
            config.attributes["connection"] = conn
            command.downgrade(config, revision)
    finally:
        engine.dispose()


#: The tables revision 0011 creates.
_NEW_11 = ("memory_history", "rewinds", "rewound_messages")
#: The table revision 0013 creates.
_NEW_13 = ("search_texts",)
#: The tables revision 0015 creates.
_NEW_15 = ("usage_ledger", "user_budgets", "session_budgets")
#: The tables revisions 0016 and 0017 create.
_NEW_16 = ("api_keys", "auth_failures")
#: The table revision 0018 creates.
_NEW_18 = ("session_metadata",)
#: The tables revision 0021 creates.
_NEW_21 = ("store_meta", "session_chain")


def _row_counts(url: str) -> dict[str, int]:
    """Rows per table of the current schema that the database has (a downgrade drops
    the newer ones), but the change feed's gate (one fixed row, no data)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            present = set(sa.inspect(conn).get_table_names())
            return {
                t: conn.execute(sa.select(sa.func.count()).select_from(sa.table(t))).scalar_one()
                for t in metadata.tables
                if t in present and t != "change_feed_gate"
            }
    finally:
        engine.dispose()


@pytest.mark.parametrize("target", ["0005_field_widths", "0002_expiry_columns"])
def test_downgrade_keeps_every_child_row(db_url: str, target: str) -> None:
    """Downgrading drops columns in place: no table with children is rebuilt, so no
    cascade deletes a session's messages, memory, tool calls, runs or steps (SQLite with
    foreign keys on, PostgreSQL, MariaDB)."""
    upgrade(db_url)
    with SessionManager.from_url(db_url) as sm:
        sid = sm.create_session(
            user_id="alice", agent="a", external_key="k", working_memory={"goal": "g"}
        ).session_id
        sm.append_messages(
            session_id=sid,
            user_id="alice",
            messages=[{"role": "user", "content": "m1"}, {"role": "assistant", "content": "m2"}],
        )
        run = sm.start_run(session_id=sid, user_id="alice")
        for kind in ("plan", "act"):
            sm.add_run_step(session_id=sid, user_id="alice", run_id=run.run_id, kind=kind)
        sm.record_tool_call(session_id=sid, user_id="alice", tool="search")
    before = _row_counts(db_url)
    assert all(before[t] > 0 for t in ("messages", "working_memory", "tool_calls", "run_steps"))
    _downgrade(db_url, target)
    assert _versions_at(db_url) == [target]
    after = _row_counts(db_url)  # tables a later revision created are gone, empty here
    assert after == {t: n for t, n in before.items() if t in after}
    newer = {
        "session_records",
        "shared_memory",
        "summaries",
        *_NEW_11,
        *_NEW_13,
        *_NEW_15,
        *_NEW_16,
        *_NEW_18,
        *_NEW_21,
    }
    assert set(before) - set(after) <= newer


def test_records_downgrade_drops_only_the_records(db_url: str) -> None:
    """Downgrading past the records revision drops ``session_records`` and nothing
    else (SQLite with foreign keys on, PostgreSQL, MariaDB); upgrading again gives an
    empty records table that takes writes, and ``"k"`` and ``"k "`` stay two keys."""
    upgrade(db_url)
    with SessionManager.from_url(db_url) as sm:
        sid = sm.create_session(user_id="alice", agent="a").session_id
        sm.append_message(session_id=sid, user_id="alice", message={"role": "user", "content": "m"})
        sm.put_records(session_id=sid, user_id="alice", records=[RecordWrite("ns", "k", b"\x00")])
    before = _row_counts(db_url)
    assert before["session_records"] == 1
    _downgrade(db_url, "0006_external_keys")
    assert _versions_at(db_url) == ["0006_external_keys"]
    newer = (
        "session_records",
        "shared_memory",
        "summaries",
        *_NEW_11,
        *_NEW_13,
        *_NEW_15,
        *_NEW_16,
        *_NEW_18,
        *_NEW_21,
    )
    assert _row_counts(db_url) == {t: n for t, n in before.items() if t not in newer}
    assert upgrade(db_url) == head_revision()
    with SessionManager.from_url(db_url) as sm:
        assert sm.list_records(session_id=sid, user_id="alice") == []
        keys = [RecordWrite("ns", "k"), RecordWrite("ns", "k ")]
        assert sm.put_records(session_id=sid, user_id="alice", records=keys).written == 2
        got = sm.list_records(session_id=sid, user_id="alice")
        assert [r.key for r in got] == ["k", "k "]


def test_run_leases_downgrade_forgets_leases_and_keeps_runs(db_url: str) -> None:
    """Down past 0009 drops only the lease columns (and their index); upgrading again
    gives the kept runs no lease, so they stay RUNNING as runs always did."""
    upgrade(db_url)
    with SessionManager.from_url(db_url) as sm:
        sid = sm.create_session(user_id="alice", agent="a").session_id
        run = sm.start_run(session_id=sid, user_id="alice", lease_seconds=30)
        sm.add_run_step(session_id=sid, user_id="alice", run_id=run.run_id, kind="plan")
    before = _row_counts(db_url)
    _downgrade(db_url, "0008_shared_memory")
    # The summaries table (0010) goes too on the way down; the runs stay.
    assert _row_counts(db_url) == {
        t: n
        for t, n in before.items()
        if t not in ("summaries", *_NEW_11, *_NEW_13, *_NEW_15, *_NEW_16, *_NEW_18, *_NEW_21)
    }
    engine = sa.create_engine(db_url)
    try:
        inspector = sa.inspect(engine)
        columns = {t: {c["name"] for c in inspector.get_columns(t)} for t in ("runs", "sessions")}
    finally:
        engine.dispose()
    assert not {"lease_seconds", "lease_expires_at"} & (columns["runs"] | columns["sessions"])
    assert upgrade(db_url) == head_revision()
    with SessionManager.from_url(db_url) as sm:
        kept = sm.get_run(session_id=sid, user_id="alice", run_id=run.run_id)
        assert (kept.status, kept.step_count, kept.lease_expires_at) == ("RUNNING", 1, None)
        assert sm.get_session(session_id=sid, user_id="alice").lease_expires_at is None


def test_summaries_downgrade_drops_only_the_summaries(db_url: str) -> None:
    """Downgrading past the summaries revision drops ``summaries`` and nothing else;
    upgrading again gives an empty table that takes writes."""
    upgrade(db_url)
    with SessionManager.from_url(db_url) as sm:
        sid = sm.create_session(user_id="alice", agent="a").session_id
        sm.append_message(session_id=sid, user_id="alice", message={"role": "user", "content": "m"})
        sm.add_summary(session_id=sid, user_id="alice", text="gist", from_seq=1, to_seq=1)
    before = _row_counts(db_url)
    assert before["summaries"] == 1
    _downgrade(db_url, "0009_run_leases")
    assert _versions_at(db_url) == ["0009_run_leases"]
    assert _row_counts(db_url) == {
        t: n
        for t, n in before.items()
        if t not in ("summaries", *_NEW_11, *_NEW_13, *_NEW_15, *_NEW_16, *_NEW_18, *_NEW_21)
    }
    assert upgrade(db_url) == head_revision()
    with SessionManager.from_url(db_url) as sm:
        assert sm.list_summaries(session_id=sid, user_id="alice") == []
        again = sm.add_summary(session_id=sid, user_id="alice", text="g", from_seq=1, to_seq=1)
        assert again.number == 1


def test_memory_history_seeds_one_row_per_working_memory(db_url: str) -> None:
    """Upgrading to 0011 gives each stored working memory one history row, at the
    session's message_count; downgrading drops the three new tables and the fork
    columns, and nothing else."""
    upgrade(db_url)
    with SessionManager.from_url(db_url) as sm:
        sid = sm.create_session(user_id="alice", agent="a", working_memory={"g": 1}).session_id
        msgs = [{"role": "user", "content": "m1"}, {"role": "user", "content": "m2"}]
        sm.append_messages(session_id=sid, user_id="alice", messages=msgs)
        version = sm.get_working_memory(session_id=sid, user_id="alice").version
    before = _row_counts(db_url)
    assert before["memory_history"] == 1
    _downgrade(db_url, "0010_summaries")
    assert _row_counts(db_url) == {
        t: n
        for t, n in before.items()
        if t not in (*_NEW_11, *_NEW_13, *_NEW_15, *_NEW_16, *_NEW_18, *_NEW_21)
    }
    engine = sa.create_engine(db_url)
    try:
        columns = {c["name"] for c in sa.inspect(engine).get_columns("sessions")}
    finally:
        engine.dispose()
    assert not {"parent_session_id", "fork_seq"} & columns
    assert upgrade(db_url) == head_revision()
    store = SQLStore(db_url)
    try:
        with store.transaction(write=False) as tx:
            seeded = tx.get_working_memory_at(sid, 2)
            assert tx.get_working_memory_at(sid, 1) is None  # the history starts now
    finally:
        store.close()
    assert seeded is not None and (seeded.version, seeded.data) == (version, {"g": 1})


def test_idempotency_owner_is_filled_in_for_records_written_before_0012(db_url: str) -> None:
    """Upgrading to 0012 names the owner of each stored record: a session write's from
    its session, a shared-memory write's from the document in its result; the erasure
    of the owner then purges an admin's records too."""
    upgrade(db_url)
    admin: dict[str, Any] = {"user_id": "root", "admin": True}
    with SessionManager.from_url(db_url) as sm:
        sid = sm.create_session(user_id="alice", agent="a").session_id
        message = {"role": "user", "content": "m"}
        sm.append_message(session_id=sid, message=message, idempotency_key="k1", **admin)
        for scope, target in (("user", "alice"), ("app", None)):
            key = f"k-{scope}"
            sm.update_shared_memory(
                scope=scope,
                agent="a",
                target_user_id=target,
                data={"x": 1},
                idempotency_key=key,
                **admin,
            )
    _downgrade(db_url, "0011_memory_history")
    assert upgrade(db_url) == head_revision()
    keys = [("append_messages", "k1"), ("update_shared_memory", "k-user")]
    keys.append(("update_shared_memory", "k-app"))
    store = SQLStore(db_url)
    try:
        with store.transaction(write=False) as tx:
            owners = [tx.get_idempotency("root", scope, k) for scope, k in keys]
        assert [r.owner_id if r else "gone" for r in owners] == ["alice", "alice", None]
        SessionManager(store).erase_user(user_id="alice")
        with store.transaction(write=False) as tx:
            left = [k for scope, k in keys if tx.get_idempotency("root", scope, k)]
        assert left == ["k-app"]  # the app document is no user's
    finally:
        store.close()


def test_search_index_is_built_for_data_stored_before_0013(db_url: str) -> None:
    """Upgrading to 0013 indexes the titles, messages and tool calls already stored (a
    database downgraded to 0012 has none indexed), on every SQL dialect: search then
    finds them, CJK and identifiers alike, and only the owner's."""
    upgrade(db_url)
    with SessionManager.from_url(db_url) as sm:
        sid = sm.create_session(user_id="alice", agent="a", title="启动 title").session_id
        sm.append_messages(
            session_id=sid,
            user_id="alice",
            messages=[
                {"role": "user", "content": "帮我修复启动失败"},
                {"role": "assistant", "content": [{"type": "text", "text": "see setup.cfg"}]},
            ],
        )
        sm.record_tool_call(
            session_id=sid, user_id="alice", tool="read", arguments={"p": "requirements.txt"}
        )
        sm.create_session(user_id="bob", agent="a", title="requirements.txt")
        many = sm.create_session(user_id="carol", agent="a").session_id
        for start in (0, 600):  # more than one batch of 1,000 messages
            texts = [{"role": "user", "content": f"row {start + i}"} for i in range(600)]
            sm.append_messages(session_id=many, user_id="carol", messages=texts)
    _downgrade(db_url, "0012_idempotency_owner")
    assert upgrade(db_url) == head_revision()  # through 0013_search_index
    with SessionManager.from_url(db_url) as sm:

        def found(query: str) -> list[tuple[str, int]]:
            return [(h.kind, h.seq) for h in sm.search(user_id="alice", query=query)]

        assert found("修复启动") == [("message", 1)]
        assert found("setup.cfg") == [("message", 2)]
        assert found("requirements.txt") == [("tool_call", 1)]
        assert found("启动 title") == [("title", 0)]
        rows = sm.search(user_id="carol", query="row 1199").items
        assert [(h.seq, h.snippet) for h in rows] == [(1200, "row 1199")]
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            counted = conn.exec_driver_sql("SELECT COUNT(*) FROM search_texts").scalar()
    finally:
        engine.dispose()
    assert counted == 2 + 1 + 1 + 1 + 1200  # messages, tool call, two titles, carol's


def test_usage_ledger_upgrade_enters_the_finished_runs_usage(db_url: str) -> None:
    """Upgrading to 0015 enters the usage of runs finished before it in the ledger
    (model unknown): get_usage then sums what the runs recorded; a RUNNING run and a
    run of no usage add nothing (SQLite, PostgreSQL, MariaDB)."""
    upgrade(db_url)
    with SessionManager.from_url(db_url) as sm:
        sids = [sm.create_session(user_id="alice", agent=a).session_id for a in ("x", "y")]
        for sid, usage in zip(sids, ({"input_tokens": 5, "output_tokens": 2}, {}), strict=True):
            run = sm.start_run(session_id=sid, user_id="alice")
            sm.finish_run(
                session_id=sid, user_id="alice", run_id=run.run_id, status="FAILED", usage=usage
            )
        for n in (7, 11):
            run = sm.start_run(session_id=sids[1], user_id="alice")
            sm.finish_run(
                session_id=sids[1],
                user_id="alice",
                run_id=run.run_id,
                status="SUCCEEDED",
                usage={"prompt_tokens": n, "total_tokens": n},
                model="m",
            )
        sm.start_run(session_id=sids[0], user_id="alice")
        expected = {t.group: t.input_tokens for t in sm.get_usage(user_id="alice")}
    _downgrade(db_url, "0014_change_feed")
    assert upgrade(db_url) == head_revision()
    with SessionManager.from_url(db_url) as sm:
        totals = sm.get_usage(user_id="alice")
        assert {t.group: t.input_tokens for t in totals} == expected == {sids[0]: 5, sids[1]: 18}
        assert {t.group: t.runs for t in totals} == {sids[0]: 1, sids[1]: 2}
        assert [t.group for t in sm.get_usage(user_id="alice", group_by="model")] == [None]
        runs = sm.list_runs(session_id=sids[1], user_id="alice").items
        assert [[e.input_tokens for e in r.usage_entries] for r in runs] == [[], [7], [11]]


def test_metadata_index_is_built_for_sessions_stored_before_0018(db_url: str) -> None:
    """Upgrading to 0018 indexes the metadata of the sessions already stored (a database
    downgraded to 0017 has none indexed), more than one batch of them, on every SQL
    dialect: the filters then count and list them, typed values by their text, and only
    the owner's."""
    upgrade(db_url)
    with SessionManager.from_url(db_url) as sm:
        a = sm.create_session(user_id="alice", metadata={"team": "x", "n": 3.0}).session_id
        sm.create_session(user_id="alice", metadata={"team": "y", "n": [3]})
        sm.create_session(user_id="bob", metadata={"team": "x"})
        sm.create_session(user_id="carol", metadata={"team": "z", "big": "v" * 300})
    _downgrade(db_url, "0017_auth_failures")
    engine = sa.create_engine(db_url)
    try:  # 1,000 more of carol's: more than one batch of 1,000 sessions
        with engine.begin() as conn:
            table = sa.Table("sessions", sa.MetaData(), autoload_with=conn)
            row = conn.execute(sa.select(table).where(table.c.user_id == "carol")).one()
            copies = [row._asdict() | {"session_id": f"ses_{i:026d}"} for i in range(1000)]
            conn.execute(sa.insert(table), copies)
    finally:
        engine.dispose()
    assert upgrade(db_url) == head_revision()  # through 0018_session_metadata
    with SessionManager.from_url(db_url) as sm:
        assert sm.count_sessions(user_id="alice", metadata={"team": "x"}) == 1
        page = sm.list_sessions(user_id="alice", metadata={"team": "x", "n": "3"})
        assert [s.session_id for s in page.items] == [a]
        assert sm.count_sessions(user_id="carol", metadata={"team": "z"}) == 1001
        assert sm.count_sessions(user_id="alice", metadata={"n": "[3]"}) == 0
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            counted = conn.exec_driver_sql("SELECT COUNT(*) FROM session_metadata").scalar()
    finally:
        engine.dispose()
    assert counted == 2 + 1 + 1 + 1001  # alice's team and n, team, bob's, carol's (big: too long)
