"""SQL-specific behaviour of SQLStore on SQLite (the contract suite covers the rest)."""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from agentsession.errors import StoreError, ValidationError
from agentsession.models import AuditEvent, Message, Run, RunStep, Session, ToolCall, WorkingMemory
from agentsession.stores.base import IdempotencyRecord, StoreConflict
from agentsession.stores.memory.store import MemoryStore
from agentsession.stores.registry import open_store
from agentsession.stores.sql.dialect import masked_url, parse_url
from agentsession.stores.sql.store import SQLStore
from sqlcapture import captured_sql

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
CHILD_TABLES = ("messages", "working_memory", "tool_calls", "runs", "run_steps")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Path of a fresh SQLite file (not created yet)."""
    return tmp_path / "data" / "sessions.db"


@pytest.fixture
def sql_store(db: Path) -> Iterator[SQLStore]:
    """An SQLStore on a fresh SQLite file."""
    store = SQLStore(f"sqlite:///{db}", auto_migrate=True)
    yield store
    store.close()


def _session(session_id: str = "ses_a", *, at: datetime = T0) -> Session:
    return Session(
        session_id=session_id,
        user_id="alice",
        agent="coding",
        created_at=at,
        updated_at=at,
        last_active_at=at,
    )


def _message(seq: int, content: Any, session_id: str = "ses_a") -> Message:
    return Message.model_validate(
        {
            "message_id": f"msg_{session_id}_{seq}",
            "session_id": session_id,
            "seq": seq,
            "created_at": T0,
            "role": "user",
            "content": content,
        }
    )


def _count(db: Path, table: str, session_id: str) -> int:
    with sqlite3.connect(db) as raw:
        sql = f"SELECT COUNT(*) FROM {table} WHERE session_id = ?"
        return int(raw.execute(sql, (session_id,)).fetchone()[0])


def test_pragmas_hold_on_every_pooled_connection(db: Path) -> None:
    """WAL, foreign keys, busy timeout and the chosen synchronous are set per connection."""
    store = SQLStore(
        f"sqlite:///{db}", auto_migrate=True, sqlite_synchronous="NORMAL", busy_timeout_seconds=7
    )
    try:
        with ExitStack() as stack:
            conns = [stack.enter_context(store.engine.connect()) for _ in range(4)]
            assert len({id(c.connection.dbapi_connection) for c in conns}) == 4
            for conn in conns:
                pragma = {
                    name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
                    for name in ("journal_mode", "foreign_keys", "synchronous", "busy_timeout")
                }
                assert pragma == {
                    "journal_mode": "wal",
                    "foreign_keys": 1,
                    "synchronous": 1,  # NORMAL
                    "busy_timeout": 7000,
                }
    finally:
        store.close()


def test_default_synchronous_is_full(sql_store: SQLStore) -> None:
    """Without an option, synchronous is FULL: no acknowledged loss on power failure."""
    with sql_store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2


def test_bad_synchronous_is_a_validation_error(db: Path) -> None:
    """An unknown synchronous level is rejected before anything is opened."""
    with pytest.raises(ValidationError, match="sqlite_synchronous"):
        SQLStore(f"sqlite:///{db}", auto_migrate=True, sqlite_synchronous="SOMETIMES")


def test_c25_delete_leaves_no_child_rows(sql_store: SQLStore, db: Path) -> None:
    """Deleting a session removes every child row (foreign_keys=ON makes cascades work)."""
    with sql_store.transaction(write=True) as tx:
        for sid in ("ses_a", "ses_b"):
            tx.insert_session(_session(sid))
            tx.insert_messages([_message(1, "hi", sid), _message(2, "there", sid)])
            memory = WorkingMemory(session_id=sid, version=2, data={"goal": "g"})
            tx.put_working_memory(memory, at_seq=0)
            tx.insert_tool_call(
                ToolCall(
                    call_id="call_1",
                    session_id=sid,
                    seq=1,
                    tool="grep",
                    arguments={"q": "x"},
                    arguments_hash="h",
                    started_at=T0,
                    ended_at=T0,
                    duration_ms=1.0,
                    created_at=T0,
                )
            )
            tx.insert_run(Run(run_id="run_1", session_id=sid, seq=1, created_at=T0))
            tx.insert_run_step(sid, RunStep(run_id="run_1", index=0, kind="model", started_at=T0))
            tx.insert_audit(_audit(sid, "session.created"))
            tx.put_idempotency(IdempotencyRecord("alice", "append", sid, "f", sid, "{}", T0))
    for table in (*CHILD_TABLES, "audit_events", "idempotency_keys"):
        assert _count(db, table, "ses_a") >= 1, table

    with sql_store.transaction(write=True) as tx:
        tx.delete_session("ses_a")
        tx.insert_audit(_audit("ses_a", "session.deleted"))

    for table in (*CHILD_TABLES, "idempotency_keys"):
        assert _count(db, table, "ses_a") == 0, table
        assert _count(db, table, "ses_b") >= 1, table
    with sqlite3.connect(db) as raw:
        actions = raw.execute("SELECT action FROM audit_events WHERE session_id = 'ses_a'")
        assert [a for (a,) in actions] == ["session.deleted"]
    with sql_store.transaction(write=False) as tx:
        assert tx.get_session("ses_a") is None
        assert [e.action for e in tx.list_audit("ses_a")] == ["session.deleted"]


def _audit(session_id: str, action: str) -> AuditEvent:
    return AuditEvent(
        seq=0, session_id=session_id, user_id="alice", actor="alice", action=action, at=T0
    )


def test_audit_seq_is_never_reused_after_delete(sql_store: SQLStore) -> None:
    """Deleting the newest audit rows does not let a later event reuse their seq."""
    with sql_store.transaction(write=True) as tx:
        tx.insert_session(_session())
        first = [tx.insert_audit(_audit("ses_a", "x")) for _ in range(3)]
    with sql_store.transaction(write=True) as tx:
        tx.delete_session("ses_a")
        tombstone = tx.insert_audit(_audit("ses_a", "session.deleted"))
    assert first == sorted(first)
    assert tombstone > max(first)


def test_c10_c12_raw_json_is_utf8_and_keeps_nul(sql_store: SQLStore, db: Path) -> None:
    """Stored JSON holds real UTF-8 characters, not \\u escapes; NUL survives exactly."""
    content = "中文 日本語 العربية é é 👩‍💻 🇯🇵 before\x00after"
    with sql_store.transaction(write=True) as tx:
        tx.insert_session(_session())
        tx.insert_messages([_message(1, content)])
    with sqlite3.connect(db) as raw:
        (stored,) = raw.execute("SELECT CAST(payload AS BLOB) FROM messages").fetchone()
    assert "中文 日本語 العربية é é 👩‍💻 🇯🇵".encode() in stored
    assert b"\\u4e2d" not in stored
    assert b"before\\u0000after" in stored
    with sql_store.transaction(write=False) as tx:
        (message,) = tx.get_messages("ses_a")
    assert message.content == content


def test_c29_unset_null_and_empty_fields_stay_distinct(sql_store: SQLStore) -> None:
    """A message comes back with the same fields set: null, missing and "" differ."""
    sent = Message.model_validate(
        {
            "message_id": "msg_1",
            "session_id": "ses_a",
            "seq": 1,
            "created_at": T0,
            "role": "assistant",
            "content": None,
            "refusal": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f"}}],
            "provider_x": {"nested": [1, None]},
        }
    )
    with sql_store.transaction(write=True) as tx:
        tx.insert_session(_session())
        tx.insert_messages([sent])
    with sql_store.transaction(write=False) as tx:
        (back,) = tx.get_messages("ses_a")
    assert back.payload() == sent.payload()
    assert "name" not in back.model_fields_set
    assert back == sent


def test_c15_timestamps_are_aware_utc_under_another_tz(db: Path) -> None:
    """Under TZ=America/Los_Angeles every timestamp still comes back aware UTC."""
    old_tz = os.environ.get("TZ")
    os.environ["TZ"] = "America/Los_Angeles"
    time.tzset()
    try:
        store = SQLStore(f"sqlite:///{db}", auto_migrate=True)
        now = datetime.now().astimezone()  # local, i.e. Los Angeles
        kolkata = now.astimezone(timezone(timedelta(hours=5, minutes=30)))
        with store.transaction(write=True) as tx:
            tx.insert_session(
                _session().model_copy(update={"created_at": now, "last_active_at": kolkata})
            )
        with store.transaction(write=False) as tx:
            back = tx.get_session("ses_a")
        store.close()
    finally:
        if old_tz is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old_tz
        time.tzset()
    assert back is not None
    for stamp in (back.created_at, back.updated_at, back.last_active_at):
        assert stamp.tzinfo is UTC
    assert back.created_at == now and back.last_active_at == now
    assert abs(back.created_at - datetime.now(UTC)) < timedelta(seconds=1)
    with sqlite3.connect(db) as raw:
        (text,) = raw.execute("SELECT created_at FROM sessions").fetchone()
    assert text.endswith("+00:00") and len(text) == 32


def test_sessions_list_in_time_order_across_text_timestamps(sql_store: SQLStore) -> None:
    """Text timestamps sort as instants (fixed width, UTC), with session_id breaking ties."""
    stamps = {
        "ses_a": T0 + timedelta(microseconds=1),
        "ses_b": T0 + timedelta(seconds=9),
        "ses_c": T0 + timedelta(seconds=10),
        "ses_d": T0 + timedelta(seconds=10),
    }
    with sql_store.transaction(write=True) as tx:
        for sid, at in stamps.items():
            tx.insert_session(_session(sid, at=at))
    with sql_store.transaction(write=False) as tx:
        listed = tx.list_sessions(
            user_id="alice", status=None, agent=None, after=None, limit=9, now=T0
        )
        page2 = tx.list_sessions(
            user_id="alice",
            status=None,
            agent=None,
            after=(stamps["ses_c"], "ses_c"),
            limit=9,
            now=T0,
        )
    assert [s.session_id for s in listed] == ["ses_d", "ses_c", "ses_b", "ses_a"]
    assert [s.session_id for s in page2] == ["ses_b", "ses_a"]


def test_hot_paths_cost_one_statement(sql_store: SQLStore) -> None:
    """Appending a batch is one INSERT, and one of its search index rows (the same
    transaction's, docs/guide.md "Search"); last-N is one indexed query; list_runs is one
    (run rows only, with their step counts); a step is one UPDATE and one INSERT."""
    with sql_store.transaction(write=True) as tx:
        tx.insert_session(_session())
        for seq in range(1, 4):
            tx.insert_run(Run(run_id=f"run_{seq}", session_id="ses_a", seq=seq, created_at=T0))
            for i in range(3):
                step = RunStep(run_id=f"run_{seq}", index=i, kind="tool", started_at=T0)
                tx.insert_run_step("ses_a", step)
    with captured_sql(sql_store) as seen, sql_store.transaction(write=True) as tx:
        tx.insert_messages([_message(seq, f"m{seq}") for seq in range(1, 51)])
    inserts = [s.split(" (")[0] for s, _ in seen if s.startswith("INSERT")]
    assert inserts == ["INSERT INTO messages", "INSERT INTO search_texts"]
    with captured_sql(sql_store) as seen, sql_store.transaction(write=False) as tx:
        last = tx.get_messages("ses_a", limit=5)
    assert [m.seq for m in last] == [46, 47, 48, 49, 50]
    selects = [(s, p) for s, p in seen if s.startswith("SELECT")]
    assert len(selects) == 1
    with sql_store.engine.connect() as conn:
        plan = " ".join(
            str(row[-1])
            for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {selects[0][0]}", selects[0][1])
        )
    assert "ix_messages_session_id_seq" in plan and "TEMP B-TREE" not in plan
    with captured_sql(sql_store) as seen, sql_store.transaction(write=False) as tx:
        runs = tx.list_runs("ses_a")
    assert [(r.step_count, r.steps) for r in runs] == [(3, [])] * 3
    assert len([s for s, _ in seen if s.startswith("SELECT")]) == 1
    with captured_sql(sql_store) as seen, sql_store.transaction(write=True) as tx:
        tx.insert_run_step("ses_a", RunStep(run_id="run_1", index=3, kind="tool", started_at=T0))
    assert [s.split()[0] for s, _ in seen if not s.startswith("BEGIN")] == ["UPDATE", "INSERT"]


def test_record_prefix_is_a_bounded_index_range(sql_store: SQLStore) -> None:
    """A prefix listing reads only the prefix's keys: SQLite's plan bounds the primary
    key range above as well as below (else it scans to the end of the namespace)."""
    with sql_store.transaction(write=True) as tx:
        tx.insert_session(_session())
    with captured_sql(sql_store) as seen, sql_store.transaction(write=False) as tx:
        tx.list_records(
            "ses_a", namespace="w", prefix="b", after=None, before=None, limit=1, descending=False
        )
    [(sql, params)] = [(q, p) for q, p in seen if "session_records" in q]
    with sql_store.engine.connect() as conn:
        plan = [str(row[-1]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)]
    assert any("key>? AND key<?" in line for line in plan), plan


def test_run_writes_never_read_run_steps(sql_store: SQLStore) -> None:
    """On a run with 30 steps, a step, a tagged tool call and message, and the finish
    touch run_steps only to insert the new step: no statement reads steps."""
    from agentsession import SessionManager

    m = SessionManager(sql_store)
    sid = m.create_session(user_id="alice").session_id
    kw: dict[str, Any] = {"session_id": sid, "user_id": "alice"}
    run_id = m.start_run(**kw).run_id
    for _ in range(30):
        m.add_run_step(**kw, run_id=run_id, kind="model")
    with captured_sql(sql_store) as seen:
        m.add_run_step(**kw, run_id=run_id, kind="model")
        m.record_tool_call(**kw, tool="t", run_id=run_id)
        m.append_message(**kw, message={"role": "assistant", "content": "x", "run_id": run_id})
        m.finish_run(**kw, run_id=run_id, status="SUCCEEDED")
    touching = [" ".join(sql.split()[:3]) for sql, _ in seen if "run_steps" in sql]
    assert touching == ["INSERT INTO run_steps"]
    assert m.get_run(**kw, run_id=run_id).step_count == 31


def test_newest_page_of_a_chat_is_two_selects(sql_store: SQLStore) -> None:
    """The newest page of a chat without tool calls reads the session row and the
    messages, nothing more: whether its first message (an assistant's) follows a
    reasoning item is told by the one message read with the page. One that does is
    still taken in."""
    from agentsession import SessionManager

    m = SessionManager(sql_store)
    sid = m.create_session(user_id="alice").session_id
    kw: dict[str, Any] = {"session_id": sid, "user_id": "alice"}
    m.append_messages(
        **kw,
        messages=[
            {"role": "user" if i % 2 else "assistant", "content": str(i)} for i in range(1, 11)
        ],
    )
    with captured_sql(sql_store) as seen:
        page = m.get_messages(**kw, limit=4)
    assert [p.seq for p in page.items] == [7, 8, 9, 10] and page.items[0].role == "user"
    assert [s.split()[0] for s, _ in seen if not s.startswith(("BEGIN", "COMMIT"))] == [
        "SELECT",
        "SELECT",
    ]
    with captured_sql(sql_store) as seen:
        page = m.get_messages(**kw, limit=3)
    assert [p.seq for p in page.items] == [8, 9, 10] and page.items[0].role == "assistant"
    assert len([s for s, _ in seen if s.startswith("SELECT")]) == 2
    m.append_messages(
        **kw,
        messages=[
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"role": "assistant", "content": "answer"},
            {"role": "user", "content": "thanks"},
        ],
    )
    page = m.get_messages(**kw, limit=2)
    assert [p.seq for p in page.items] == [11, 12, 13]


def test_c22_returned_models_do_not_alias_storage(sql_store: SQLStore) -> None:
    """Changing a returned JSON object in place changes nothing stored."""
    with sql_store.transaction(write=True) as tx:
        tx.insert_session(_session())
        written = WorkingMemory(session_id="ses_a", version=2, data={"facts": {}})
        tx.put_working_memory(written, at_seq=0)
    with sql_store.transaction(write=False) as tx:
        memory = tx.get_working_memory("ses_a")
    assert memory is not None
    memory.data["facts"]["x"] = 1
    with sql_store.transaction(write=False) as tx:
        again = tx.get_working_memory("ses_a")
    assert again is not None and again.data == {"facts": {}}


def test_update_session_is_compare_and_set(sql_store: SQLStore) -> None:
    """A stale expected_version raises StoreConflict and writes nothing."""
    with sql_store.transaction(write=True) as tx:
        tx.insert_session(_session())
    with sql_store.transaction(write=True) as tx:
        s = tx.get_session("ses_a")
        assert s is not None
        tx.update_session(s.model_copy(update={"version": 2, "title": "A"}), expected_version=1)
    with pytest.raises(StoreConflict), sql_store.transaction(write=True) as tx:
        tx.update_session(s.model_copy(update={"version": 2, "title": "B"}), expected_version=1)
    with sql_store.transaction(write=False) as tx:
        after = tx.get_session("ses_a")
    assert after is not None and (after.version, after.title) == (2, "A")


def _assert_store_error(exc_info: pytest.ExceptionInfo[StoreError]) -> None:
    """The error is ours, with the driver's error chained, never a driver class."""
    assert not isinstance(exc_info.value, sa.exc.SQLAlchemyError | sqlite3.Error)
    assert exc_info.value.__cause__ is not None


def test_no_driver_error_escapes_when_tables_vanish(sql_store: SQLStore, db: Path) -> None:
    """A database file deleted under the store gives StoreError, not sqlite3/sqlalchemy."""
    with sql_store.transaction(write=True) as tx:
        tx.insert_session(_session())
    sql_store.engine.dispose()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with pytest.raises(StoreError) as exc_info, sql_store.transaction(write=False) as tx:
        tx.get_session("ses_a")
    _assert_store_error(exc_info)


def test_no_driver_error_escapes_on_a_corrupt_file(db: Path) -> None:
    """Opening a file that is not a database raises StoreError before the driver sees
    it (the file is left as it was); one with SQLite's header and garbage after it
    raises StoreError with the driver's error chained."""
    db.parent.mkdir(parents=True)
    junk = b"this is not an sqlite database, just bytes " * 200
    db.write_bytes(junk)
    with pytest.raises(StoreError, match="is not an SQLite database"):
        SQLStore(f"sqlite:///{db}", auto_migrate=True)
    assert db.read_bytes() == junk
    db.write_bytes(b"SQLite format 3\x00" + junk)
    with pytest.raises(StoreError) as exc_info:
        SQLStore(f"sqlite:///{db}", auto_migrate=True)
    _assert_store_error(exc_info)


def test_no_driver_error_escapes_on_bad_values(sql_store: SQLStore) -> None:
    """A naive datetime or a duplicate key surfaces as a store error, not a driver one."""
    naive = _session().model_copy(update={"created_at": datetime(2026, 1, 1)})
    with pytest.raises(StoreError) as exc_info, sql_store.transaction(write=True) as tx:
        tx.insert_session(naive)
    _assert_store_error(exc_info)
    with sql_store.transaction(write=True) as tx:
        tx.insert_session(_session())
    with pytest.raises(StoreConflict) as conflict, sql_store.transaction(write=True) as tx:
        tx.insert_messages([_message(1, "a"), _message(1, "b")])
    _assert_store_error(conflict)


def test_closed_store_and_read_only_transactions_raise_store_error(sql_store: SQLStore) -> None:
    """Writes in a read transaction, and any use after close, raise StoreError."""
    with pytest.raises(StoreError, match="read-only"), sql_store.transaction(write=False) as tx:
        tx.insert_session(_session())
    sql_store.close()
    sql_store.close()
    with pytest.raises(StoreError, match="closed"), sql_store.transaction(write=False):
        pass


def test_sqlite_url_creates_parent_directories(tmp_path: Path) -> None:
    """sqlite:/// with missing parent directories creates them."""
    path = tmp_path / "a" / "b" / "c.db"
    SQLStore(f"sqlite:///{path}", auto_migrate=True).close()
    assert path.is_file()


def test_open_store_by_url(tmp_path: Path) -> None:
    """open_store picks the store from the scheme; unknown ones are clear."""
    assert isinstance(open_store("memory://", auto_migrate=True), MemoryStore)
    store = open_store(f"sqlite:///{tmp_path / 's.db'}", auto_migrate=True)
    assert isinstance(store, SQLStore)
    store.close()
    with pytest.raises(ValidationError, match=r"memory://.*sqlite:///.*postgresql\+psycopg"):
        open_store("mongodb://localhost/x")
    with pytest.raises(ValidationError, match="memory://"):
        open_store("sqlite://")
    with pytest.raises(ValidationError, match="no option"):
        open_store(f"sqlite:///{tmp_path / 's.db'}", colour="blue")


@pytest.mark.parametrize(
    ("url", "extra", "module"),
    [
        ("postgresql+psycopg://u:pw@localhost/db", "postgres", "psycopg"),
        ("mysql+pymysql://u:pw@localhost/db", "mysql", "pymysql"),
    ],
)
def test_missing_driver_names_the_extra(
    url: str, extra: str, module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PostgreSQL or MySQL URL without its driver says which extra to install."""
    # The dev extra installs both drivers: hide this one, as if it were missing.
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == module else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(StoreError, match=rf"pip install 'agentsession\[{extra}\]'"):
        open_store(url)


def test_url_password_is_masked() -> None:
    """The store's url never shows a password."""
    url = sa.engine.make_url("postgresql+psycopg://bob:s3cret@db.example/sessions")
    shown = masked_url(url)
    assert "s3cret" not in shown and "bob:***@db.example" in shown
    assert parse_url("sqlite:///x.db").drivername == "sqlite+pysqlite"
