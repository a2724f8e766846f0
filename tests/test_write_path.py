"""The write path's cheaper forms write exactly what the general forms wrote.

The SQL store's session update sets only the columns whose value changed since the row
was read in the same transaction, and SQLite formats one ``now`` once however many
columns it is bound to: each is checked here where it could differ from writing
everything afresh.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentsession import SessionManager, jsonvalues
from agentsession.stores.base import SessionStore, StoreTransaction
from agentsession.stores.sql import columns
from agentsession.stores.sql import store as sql_store
from agentsession.stores.sql.store import SQLStore
from sqlcapture import captured_sql


def _session_updates(seen: list[tuple[str, object]]) -> list[str]:
    return [sql for sql, _params in seen if sql.lstrip().upper().startswith("UPDATE SESSIONS")]


def test_an_append_sets_only_the_session_columns_it_changes(tmp_path: Path) -> None:
    store = SQLStore(f"sqlite:///{tmp_path / 's.db'}", auto_migrate=True)
    with SessionManager(store) as sm:
        s = sm.create_session(user_id="u1", agent="a", metadata={"k": "v"}, ttl_seconds=60)
        with captured_sql(store) as seen:
            sm.append_message(session_id=s.session_id, user_id="u1", message={"role": "user"})
        [update] = _session_updates(seen)
        assigned = update.split(" SET ", 1)[1].split(" WHERE ", 1)[0]
        for column in ("version", "updated_at", "last_active_at", "expires_at", "message_count"):
            assert f"{column}=" in assigned
        for column in ("user_id", "title", "created_at", "status", "external_key_hash"):
            assert f"{column}=" not in assigned
        after = sm.get_session(session_id=s.session_id, user_id="u1")
        assert (after.version, after.message_count, after.metadata) == (2, 1, {"k": "v"})
    store.close()


def test_a_session_update_writes_a_value_changed_in_place(store: SessionStore) -> None:
    """A dict of the row read may have been changed in place (the same object, other
    contents): it is written all the same."""
    s = SessionManager(store).create_session(user_id="u1", agent="a")
    with store.transaction(write=True) as tx:
        read = tx.get_session(s.session_id)
        assert read is not None
        read.metadata["added"] = True
        tx.update_session(read.model_copy(update={"version": 2}), expected_version=1)
    with store.transaction(write=False) as tx:
        stored = tx.get_session(s.session_id)
        assert stored is not None
        assert (stored.metadata, stored.version) == ({"added": True}, 2)


def test_a_changed_external_key_moves_its_lookup(tmp_path: Path) -> None:
    store = SQLStore(f"sqlite:///{tmp_path / 's.db'}", auto_migrate=True)
    s = SessionManager(store).create_session(user_id="u1", agent="a", external_key="old")
    with store.transaction(write=True) as tx:
        read = tx.get_session(s.session_id)
        assert read is not None
        changed = read.model_copy(update={"version": 2, "external_key": "new"})
        tx.update_session(changed, expected_version=1)
        assert tx.find_session_by_key("u1", "a", "new") == s.session_id
        assert tx.find_session_by_key("u1", "a", "old") is None
    store.close()


def test_one_datetime_is_formatted_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[datetime] = []
    real = columns._utc

    def counted(value: datetime) -> datetime:
        calls.append(value)
        return real(value)

    monkeypatch.setattr(columns, "_utc", counted)
    bind = columns._sqlite_datetime_bind
    now = datetime(2026, 1, 1, 12, 0, 0, 5, tzinfo=UTC)
    later = now + timedelta(microseconds=1)
    assert bind(now) == bind(now) == "2026-01-01T12:00:00.000005+00:00"
    assert len(calls) == 1
    assert bind(later) == "2026-01-01T12:00:00.000006+00:00"
    # An equal datetime that is another object is formatted afresh, and rightly.
    equal = now.astimezone(UTC)
    assert bind(equal) == "2026-01-01T12:00:00.000005+00:00"
    assert bind(None) is None
    assert len(calls) == 3


def test_an_appended_payload_is_encoded_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JSON text made when the message was checked is the text stored."""
    store = SQLStore(f"sqlite:///{tmp_path / 's.db'}", auto_migrate=True)
    with SessionManager(store) as sm:
        s = sm.create_session(user_id="u1", agent="a")
        encoded: list[object] = []
        real = jsonvalues.dumps

        def counted(value: object) -> str:
            encoded.append(value)
            return real(value)

        for module in (jsonvalues, columns, sql_store):
            monkeypatch.setattr(module, "dumps", counted)
        message = {"content": "hé\x00", "role": "user", "extra": [1, 2.5]}
        with captured_sql(store) as seen:
            sm.append_message(session_id=s.session_id, user_id="u1", message=message)
        assert message in encoded
        assert encoded.count(message) == 1
        [(_sql, params)] = [(q, p) for q, p in seen if q.startswith("INSERT INTO messages")]
        assert real(message) in params
        [read] = sm.get_messages(session_id=s.session_id, user_id="u1").items
        assert read.payload() == message
    store.close()


def test_messages_inserted_without_their_text_are_encoded_by_the_store(tmp_path: Path) -> None:
    store = SQLStore(f"sqlite:///{tmp_path / 's.db'}", auto_migrate=True)
    with SessionManager(store) as sm:
        s = sm.create_session(user_id="u1", agent="a")
        sm.append_message(session_id=s.session_id, user_id="u1", message={"role": "user"})
        [first] = sm.get_messages(session_id=s.session_id, user_id="u1").items
    with store.transaction(write=True) as tx:
        copy = first.model_copy(update={"seq": 2, "message_id": "msg_" + "a" * 26})
        tx.insert_messages([copy])
    with store.transaction(write=False) as tx:
        assert [m.payload() for m in tx.get_messages(s.session_id)] == [{"role": "user"}] * 2
    store.close()


def test_a_payload_changed_by_its_caller_during_the_write_is_stored_as_checked(
    tmp_path: Path,
) -> None:
    # The caller's nested value changes after the check, while the write waits for
    # its turn: the stored, returned and replayed message are all the checked one.
    store = SQLStore(f"sqlite:///{tmp_path / 's.db'}", auto_migrate=True)
    parts = [{"type": "text", "text": "checked"}]
    opened = store.transaction

    @contextmanager
    def changed_while_waiting(*, write: bool) -> Iterator[StoreTransaction]:
        if write:
            parts[0]["text"] = "changed"
        with opened(write=write) as tx:
            yield tx

    with SessionManager(store) as sm:
        s = sm.create_session(user_id="u1", agent="a")
        store.transaction = changed_while_waiting  # type: ignore[method-assign]
        kw = {"session_id": s.session_id, "user_id": "u1", "idempotency_key": "k1"}
        [returned] = sm.append_messages(**kw, messages=[{"role": "user", "content": parts}])
        again = [{"role": "user", "content": [{"type": "text", "text": "checked"}]}]
        [replayed] = sm.append_messages(**kw, messages=again)
        store.transaction = opened  # type: ignore[method-assign]
        [read] = sm.get_messages(session_id=s.session_id, user_id="u1").items
    for m in (returned, replayed, read):
        assert m.content == [{"type": "text", "text": "checked"}]


@contextmanager
def _driver_sql(store: SQLStore) -> Iterator[list[str]]:
    """Every SQL text the writer's SQLite connection runs while the block runs (its
    trace callback: what reaches SQLite, whoever sent it)."""
    seen: list[str] = []
    writes = store._writes
    assert writes is not None
    with writes.exclusive(5) as conn:  # the writer connection, made if none yet
        driver = conn.connection.dbapi_connection
    assert driver is not None
    driver.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        driver.set_trace_callback(None)


def test_a_write_begins_immediate_and_commits_on_the_driver(tmp_path: Path) -> None:
    """A write's transaction is BEGIN IMMEDIATE ... COMMIT sent straight to SQLite; a
    Core statement inside it (creating a session) joins it, and Core's commit ends it.
    With a cursor listener, the BEGIN goes through Core, where the listener sees it."""
    store = SQLStore(f"sqlite:///{tmp_path / 's.db'}", auto_migrate=True)
    with SessionManager(store) as sm:
        with _driver_sql(store) as seen:
            sid = sm.create_session(user_id="u1").session_id
            sm.append_message(session_id=sid, user_id="u1", message={"role": "user"})
        transactions = [s for s in seen if s.split()[0] in ("BEGIN", "COMMIT", "ROLLBACK")]
        assert transactions == ["BEGIN IMMEDIATE", "COMMIT"] * 2, seen
        with captured_sql(store) as listened:
            sm.append_message(session_id=sid, user_id="u1", message={"role": "user"})
        assert listened[0][0] == "BEGIN IMMEDIATE"
        assert sm.get_messages(session_id=sid, user_id="u1").items[-1].seq == 2


def test_an_append_writes_no_metadata_index_row_and_a_change_in_place_is_indexed(
    tmp_path: Path,
) -> None:
    """Every append writes the session's metadata column; the metadata index is written
    only when the entries differ from those read (here: never on an append), and a dict
    changed in place after the read is still seen as a change."""
    store = SQLStore(f"sqlite:///{tmp_path / 's.db'}", auto_migrate=True)
    with SessionManager(store) as sm:
        s = sm.create_session(user_id="u1", agent="a", metadata={"team": "x"})
        with captured_sql(store) as seen:
            sm.append_message(session_id=s.session_id, user_id="u1", message={"role": "user"})
        assert not [sql for sql, _ in seen if "session_metadata" in sql], seen
        with store.transaction(write=True) as tx:
            read = tx.get_session(s.session_id)
            assert read is not None
            read.metadata["team"] = "y"
            tx.update_session(read.model_copy(update={"version": 3}), expected_version=2)
        assert sm.count_sessions(user_id="u1", metadata={"team": "y"}) == 1
        assert sm.count_sessions(user_id="u1", metadata={"team": "x"}) == 0
    store.close()
