"""The fast forms of the hot paths give exactly what the general forms give.

The SQL store's column types hand SQLite plain-function processors, a compiled
statement precomputes its binds, ids are encoded two digits at a time, "is anyone
watching statements?" reads long-lived dispatch objects, a write copies its models
without pydantic's ``model_copy`` and builds its stored messages from the checked
payloads without validating them again: each is checked here against the slower form
it replaces, on the values and cases where they could differ.
"""

from __future__ import annotations

import base64
import functools
import itertools
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from pydantic import BaseModel, TypeAdapter
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection, Engine

from agentsession import SessionManager, ids
from agentsession.auditchain import event_hash, new_event
from agentsession.errors import AgentSessionError
from agentsession.jsonvalues import loads
from agentsession.models import AuditEvent, Message, Session, WorkingMemory
from agentsession.principal import Principal
from agentsession.searchtext import message_text, payload_text
from agentsession.service.changes.memory import apply_memory
from agentsession.service.changes.messages import insert_messages
from agentsession.service.changes.statechange import StateChange
from agentsession.service.messages import _check_runs
from agentsession.service.modelcopy import updated
from agentsession.service.pipeline import Change, WriteRequest, request_parts
from agentsession.service.policy import Limits
from agentsession.service.validation import check_memory, check_message
from agentsession.stores.base import StoreTransaction
from agentsession.stores.sql.columns import JSONText, PlainText, UTCDateTime
from agentsession.stores.sql.execute import CompiledStatement, observed
from agentsession.stores.sql.store import SQLStore
from frozen_clock import FrozenClock

SQLITE = sqlite.dialect()
IST = timezone(timedelta(hours=5, minutes=30))


def _generic_bind(decorator: sa.types.TypeDecorator[Any], value: Any) -> Any:
    return decorator.process_bind_param(value, SQLITE)


def _generic_result(decorator: sa.types.TypeDecorator[Any], value: Any) -> Any:
    return decorator.process_result_value(value, SQLITE)


def _sqlite_processors(column: Any) -> tuple[Any, Any]:
    """The SQLite bind and result processors of a column type (both must exist)."""
    impl = column.dialect_impl(SQLITE)
    bind, result = impl.bind_processor(SQLITE), impl.result_processor(SQLITE, None)
    assert bind is not None and result is not None
    return bind, result


@pytest.mark.parametrize(
    "value",
    [
        None,
        datetime(2026, 1, 1, 12, 0, tzinfo=UTC),
        datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=IST),
        datetime(1999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-8))),
    ],
)
def test_sqlite_datetime_processors_match_the_type_methods(value: datetime | None) -> None:
    column = UTCDateTime()
    bind, result = _sqlite_processors(column)
    stored = bind(value)
    assert stored == _generic_bind(column, value)
    back = result(stored)
    assert back == _generic_result(column, stored)
    if back is not None:
        assert back.tzinfo is UTC


def test_sqlite_datetime_processor_refuses_naive_values() -> None:
    bind = UTCDateTime().dialect_impl(SQLITE).bind_processor(SQLITE)
    assert bind is not None
    with pytest.raises(ValueError, match="naive datetime"):
        bind(datetime(2026, 1, 1, 12, 0))


def test_sqlite_datetime_result_of_zone_less_text_is_utc() -> None:
    result = UTCDateTime().dialect_impl(SQLITE).result_processor(SQLITE, None)
    assert result is not None
    assert result("2026-01-01T12:00:00") == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert result("2026-01-01T17:30:00+05:30") == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("value", [None, {"a": [1, 2.5, "\x00é"]}, "text", [], 3])
def test_json_processors_match_the_type_methods(value: Any) -> None:
    column = JSONText()
    bind, result = _sqlite_processors(column)
    stored = bind(value)
    assert stored == _generic_bind(column, value)
    assert result(stored) == _generic_result(column, stored) == value
    assert result(None) is None


def test_plain_text_needs_no_processor_off_postgresql() -> None:
    column = PlainText()
    assert column.dialect_impl(SQLITE).bind_processor(SQLITE) is None
    assert column.dialect_impl(SQLITE).result_processor(SQLITE, None) is None
    assert _generic_bind(column, "a\x00b\\") == "a\x00b\\"


def test_compiled_statement_binds_defaults_and_refuses_missing_values() -> None:
    table = sa.table("t", sa.column("a", UTCDateTime()), sa.column("b", sa.Integer()))
    at = datetime(2026, 1, 1, tzinfo=UTC)
    insert = CompiledStatement(
        sa.insert(table).values(a=sa.bindparam("a", type_=UTCDateTime()), b=7), SQLITE
    )
    assert insert.parameters({"a": at}) == ["2026-01-01T00:00:00.000000+00:00", 7]
    plain = CompiledStatement(sa.select(table).where(table.c.b == sa.bindparam("b")), SQLITE)
    assert plain.parameters({"b": 1, "extra": 2}) == [1]
    with pytest.raises(sa.exc.ArgumentError, match="'b'"):
        plain.parameters({})


def test_new_id_is_the_base32_of_its_random_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    for raw in (bytes(16), b"\xff" * 16, bytes(range(16)), bytes(range(200, 216))):
        monkeypatch.setattr(ids.secrets, "token_bytes", lambda n, raw=raw: raw)
        expected = base64.b32encode(raw).decode("ascii").rstrip("=").lower()
        assert ids.new_id("msg") == f"msg_{expected}"
        assert ids.is_id(ids.new_id("msg"), "msg")


@pytest.fixture
def engine() -> Iterator[Engine]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLStore(f"sqlite:///{Path(tmp) / 'a.db'}", auto_migrate=True)
        try:
            yield store.engine
        finally:
            store.close()


def _seen(engine: Engine) -> bool:
    with engine.connect() as conn:
        return observed(conn)


def _listener(*_args: Any) -> None:
    return None


@pytest.mark.parametrize("event", ["before_cursor_execute", "after_cursor_execute"])
@pytest.mark.parametrize("where", ["engine", "Engine", "Connection"])
def test_observed_sees_listeners_wherever_they_are(engine: Engine, event: str, where: str) -> None:
    target: Any = {"engine": engine, "Engine": Engine, "Connection": Connection}[where]
    assert not _seen(engine)
    sa.event.listen(target, event, _listener)
    try:
        assert _seen(engine)
    finally:
        sa.event.remove(target, event, _listener)
    assert not _seen(engine)


def test_observed_sees_a_listener_on_the_connection_and_echo(engine: Engine) -> None:
    with engine.connect() as conn:
        assert not observed(conn)
        sa.event.listen(conn, "before_cursor_execute", _listener)
        assert observed(conn)
    engine.echo = True
    try:
        assert _seen(engine)
    finally:
        engine.echo = False


def _models() -> list[Any]:
    now = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    session = Session.model_validate(
        {
            "session_id": ids.new_id("ses"),
            "user_id": "alice",
            "agent": "bot",
            "metadata": {"k": [1, 2]},
            "created_at": now,
            "updated_at": now,
            "last_active_at": now,
            "version": 3,
        }
    )
    store = {"message_id": ids.new_id("msg"), "session_id": session.session_id, "seq": 4}
    plain = Message.model_validate({"role": "user", "content": "hi", **store, "created_at": now})
    extra = Message.model_validate(
        {"role": "assistant", "refusal": None, "x": {"y": 1}, **store, "created_at": now}
    )
    item = Message.model_validate(
        {"type": "function_call", "call_id": "c1", "name": "f", **store, "created_at": now}
    )
    return [session, plain, extra, item]


@pytest.mark.parametrize("model", _models(), ids=["session", "message", "extra", "item"])
def test_updated_is_model_copy(model: Any) -> None:
    """The write path's copy gives what pydantic's model_copy gives: values, fields
    set, extra fields (a dict of its own), and the JSON a client receives."""
    field = "message_count" if isinstance(model, Session) else "session_version"
    fast, slow = updated(model, {field: 7}), model.model_copy(update={field: 7})
    assert fast == slow and type(fast) is type(slow)
    assert fast.__dict__ == slow.__dict__
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.__pydantic_extra__ == slow.__pydantic_extra__
    assert fast.__pydantic_private__ == slow.__pydantic_private__
    assert fast.model_dump(mode="json", exclude_unset=True) == slow.model_dump(
        mode="json", exclude_unset=True
    )
    if model.__pydantic_extra__ is not None:
        assert fast.__pydantic_extra__ is not model.__pydantic_extra__
    assert getattr(model, field) != 7  # the original is untouched


def test_updated_refuses_an_undeclared_field() -> None:
    with pytest.raises(KeyError, match="no field 'refusal'"):
        updated(_models()[1], {"refusal": "no"})


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "plain"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "t", "type": "function"}]},
        {"role": "tool", "content": [{"type": "text", "text": "x"}], "tool_call_id": "t"},
        {"role": "user", "content": "meta", "metadata": {"a": 1}, "refusal": None, "z": [1.5]},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"type": "reasoning", "summary": []},
    ],
)
def test_appended_message_is_the_validated_payload(message: dict[str, Any]) -> None:
    """An append builds its stored messages from the checked payload without a second
    validation: exactly the model validating the payload with the store's fields gives."""
    payload, _text = check_message(message, "message", Limits())
    now = datetime(2026, 1, 2, tzinfo=UTC)
    store = {"message_id": ids.new_id("msg"), "session_id": ids.new_id("ses"), "seq": 9}
    fast = Message.from_store(dict(payload), **store, created_at=now)
    slow = Message.model_validate({**payload, **store, "created_at": now})
    assert fast == slow
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.__pydantic_extra__ == slow.__pydantic_extra__
    assert fast.payload() == slow.payload() == message


# -- the lean write path: the same rows and answers as the general pipeline ---------


def _general_append(
    m: SessionManager,
    *,
    session_id: str,
    user_id: str,
    messages: list[dict[str, Any]],
    working_memory_patch: dict[str, Any] | None = None,
    expected_version: int | None = None,
    idempotency_key: str | None = None,
) -> list[Message]:
    """``append_messages`` as the general write pipeline runs it (a Session loaded and
    copied, ``update_session``): the form the lean one replaced, kept as the reference."""
    payloads, texts = m._checked_batch(messages)
    state = StateChange.check(working_memory_patch, None, None, m.limits, admin=False)

    def change(tx: StoreTransaction, s: Session, now: datetime) -> Change:
        _check_runs(tx, s, payloads)
        stored = insert_messages(tx, s, now, payloads, texts)
        new = updated(s, {"message_count": s.message_count + len(stored)})
        details: dict[str, Any] = {
            "count": len(stored),
            "first_seq": stored[0].seq,
            "last_seq": stored[-1].seq,
        }
        state.apply(tx, s, now, m.limits, details, at_seq=new.message_count)
        return Change(new, "message.appended", details, stored)

    request = WriteRequest(
        scope="append_messages",
        session_id=session_id,
        principal=Principal(user_id, False),
        change=change,
        result_type=TypeAdapter(list[Message]),
        request=(payloads, *state.request()),
        expected_version=expected_version,
        idempotency_key=idempotency_key,
        touch=True,
    )
    return m._pipeline.write(request).value


def _general_memory(
    m: SessionManager,
    *,
    session_id: str,
    user_id: str,
    data: dict[str, Any],
    expected_version: int | None = None,
    idempotency_key: str | None = None,
) -> WorkingMemory:
    """``update_working_memory(data=...)`` as the general write pipeline runs it."""
    full = check_memory(data, m.limits)

    def change(tx: StoreTransaction, s: Session, now: datetime) -> Change:
        memory = apply_memory(tx, s, now, m.limits, data=full, at_seq=s.message_count)
        return Change(s, "memory.updated", {"mode": "replace"}, memory)

    request = WriteRequest(
        scope="update_working_memory",
        session_id=session_id,
        principal=Principal(user_id, False),
        change=change,
        result_type=TypeAdapter(WorkingMemory),
        request=request_parts(full, None, None, None, required=2),
        expected_version=expected_version,
        idempotency_key=idempotency_key,
        touch=True,
    )
    return m._pipeline.write(request).value


def _script(m: SessionManager, clock: FrozenClock, lean: bool) -> list[Any]:
    """Every case of an append and a memory update, good and refused: each answer (or
    error: its type and message), in order."""
    append = m.append_messages if lean else functools.partial(_general_append, m)
    memory = m.update_working_memory if lean else functools.partial(_general_memory, m)
    user = "alice"
    s = m.create_session(user_id=user, agent="bot", ttl_seconds=600, working_memory={"a": 1})
    sid = s.session_id
    huge = {"role": "user", "content": "x" * (Limits().max_message_bytes + 1)}
    run = {"role": "assistant", "content": "in a run"}
    missing = ids.new_id("run")
    steps: list[Callable[[], Any]] = [
        lambda: append(session_id=sid, user_id=user, messages=[{"role": "user", "content": "hi"}]),
        lambda: append(
            session_id=sid,
            user_id=user,
            messages=[{"role": "assistant", "content": "yo", "x": [1.5]}, {"type": "reasoning"}],
            working_memory_patch={"b": {"c": None, "d": "é"}},
            expected_version=3,
        ),
        lambda: memory(session_id=sid, user_id=user, data={"goal": "g"}, expected_version=4),
        lambda: append(session_id=sid, user_id=user, messages=[huge]),
        lambda: append(session_id=sid, user_id=user, messages=[run], expected_version=2),
        lambda: memory(session_id=sid, user_id=user, data={"x": 1}, expected_version=9),
        lambda: append(session_id=sid, user_id="bob", messages=[run]),
        lambda: memory(session_id="ses_nope", user_id=user, data={}),
        lambda: append(session_id=sid, user_id=user, messages=[run], idempotency_key="k"),
        lambda: append(session_id=sid, user_id=user, messages=[run], idempotency_key="k"),
        lambda: append(session_id=sid, user_id=user, messages=[huge, run], idempotency_key="k"),
        lambda: append(
            session_id=sid, user_id=user, messages=[{"role": "user"}], idempotency_key="k"
        ),
        lambda: memory(session_id=sid, user_id=user, data={"m": 2}, idempotency_key="m"),
        lambda: memory(session_id=sid, user_id=user, data={"m": 2}, idempotency_key="m"),
        lambda: m.start_run(session_id=sid, user_id=user, lease_seconds=30),
        lambda: append(session_id=sid, user_id=user, messages=[{**run, "run_id": missing}]),
        lambda: clock.advance(31),  # the run's lease lapses
        lambda: append(session_id=sid, user_id=user, messages=[run]),
        lambda: memory(session_id=sid, user_id=user, data={"after": "lease"}),
        lambda: clock.advance(601),  # the session's TTL runs out
        lambda: append(session_id=sid, user_id=user, messages=[run]),
        lambda: memory(session_id=sid, user_id=user, data={}),
    ]
    run_step = len(steps)
    steps += [
        lambda: m.restore_session(session_id=sid, user_id=user),
        lambda: m.start_run(session_id=sid, user_id=user, lease_seconds=30),
        lambda: append(session_id=sid, user_id=user, messages=[{**run, "run_id": ran[0]}]),
        lambda: clock.advance(31),
        lambda: append(session_id=sid, user_id=user, messages=[{**run, "run_id": ran[0]}]),
        lambda: m.close_session(session_id=sid, user_id=user),
        lambda: append(session_id=sid, user_id=user, messages=[run]),
        lambda: memory(session_id=sid, user_id=user, data={}),
    ]
    ran: list[str] = []
    out: list[Any] = []
    for i, step in enumerate(steps):
        try:
            answer = step()
        except AgentSessionError as exc:
            out.append(("error", type(exc).__name__, str(exc)))
            continue
        if i == run_step + 1:
            ran.append(answer.run_id)
        out.append(_dumped(answer))
    out.append(_dumped(m.get_session(session_id=sid, user_id=user)))
    out.append(_dumped(m.get_messages(session_id=sid, user_id=user, limit=100)))
    out.append(_dumped(m.get_audit_log(session_id=sid, user_id=user, limit=100)))
    out.append(_dumped(m.list_memory_versions(session_id=sid, user_id=user, limit=100)))
    out.append(_dumped(m.verify_audit(user_id=user, session_id=sid, admin=True)))
    return out


def _dumped(value: Any) -> Any:
    """A value as JSON, models with their fields set (what a caller can tell apart)."""
    if isinstance(value, list):
        return [_dumped(v) for v in value]
    if isinstance(value, BaseModel):
        return (type(value).__name__, value.model_dump(mode="json", exclude_unset=True))
    return value


def _rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of a SQLite file, in rowid order."""
    db = sqlite3.connect(path)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: db.execute(f'SELECT * FROM "{t}"').fetchall() for t in sorted(tables)}
    finally:
        db.close()


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_lean_writes_store_and_answer_what_the_general_pipeline_does(
    kind: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An append (with a memory patch, a run, a key) and a working-memory update in
    their lean form (a SessionRow, advance_session) and in the general form (a Session,
    update_session): the same answers, the same errors (a version conflict, another
    user's or a missing session, an oversize message, a replay and a reused key, an
    unknown run, a lapsed lease, an expired and a closed session) and, on SQLite, the
    same rows in every table (elsewhere: the same history, audit log and memory versions
    read back)."""
    results = []
    for lean in (True, False):
        # The same ids on both sides, made in the same order.
        made = itertools.count()
        monkeypatch.setattr(
            ids.secrets, "token_bytes", lambda n, c=made: next(c).to_bytes(n, "big")
        )
        clock = FrozenClock()
        path = tmp_path / f"{lean}.db"
        url = f"sqlite:///{path}" if kind == "sqlite" else "memory://"
        with SessionManager.from_url(url, auto_migrate=True, clock=clock) as m:
            answers = _script(m, clock, lean)
        results.append((answers, _rows(path) if kind == "sqlite" else None))
    (lean_answers, lean_rows), (general_answers, general_rows) = results
    assert lean_answers == general_answers
    assert lean_rows == general_rows
    errors = [a[1] for a in lean_answers if isinstance(a, tuple) and a[0] == "error"]
    for expected in (
        "VersionConflict",
        "SessionNotFound",
        "PayloadTooLarge",
        "IdempotencyKeyReused",
        "RunNotFound",
        "RunLeaseExpired",
        "SessionNotActive",
    ):
        assert expected in errors, errors


def test_new_event_is_the_validated_event_chained() -> None:
    """The write pipeline's audit event, built without validation, is the event
    validated with its chain fields: values, fields set, the hash of its content."""
    values = {
        "seq": 0,
        "session_id": ids.new_id("ses"),
        "user_id": "alice",
        "actor": "admin",
        "action": "message.appended",
        "at": datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        "version_before": 3,
        "version_after": 4,
        "request_id": "req-1",
        "details": {"count": 2, "note": "é\x00", "f": 1.5},
    }
    for prev in (None, "ab" * 32):
        digest = event_hash(AuditEvent(**values), prev)
        fast, slow = (
            new_event(dict(values), prev),
            AuditEvent(**values, prev_hash=prev, hash=digest),
        )
        assert fast == slow
        assert fast.__dict__ == slow.__dict__
        assert fast.model_fields_set == slow.model_fields_set
        assert event_hash(fast, prev) == fast.hash


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "plain\x00text"},
        {"role": "tool", "content": [{"type": "text", "text": "x"}, {"type": "image"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"arguments": "{}"}}]},
        {"type": "function_call_output", "call_id": "c1", "output": "42", "x": 1.5},
    ],
)
def test_search_text_of_the_bound_payload_is_the_message_text(message: dict[str, Any]) -> None:
    """The SQL store indexes a message from the payload JSON it binds: the same text as
    from the message built of it."""
    payload, text = check_message(message, "message", Limits())
    now = datetime(2026, 1, 2, tzinfo=UTC)
    built = Message.from_store(
        dict(payload),
        message_id=ids.new_id("msg"),
        session_id=ids.new_id("ses"),
        seq=1,
        created_at=now,
    )
    assert payload_text(loads(text)) == message_text(built)


def test_memory_data_is_stored_as_the_json_column_encodes_it(tmp_path: Path) -> None:
    """The working memory's data, bound as the JSON text encoded once per write, is
    stored as the JSON column's own encoding of it, in the memory and its history."""
    data = {"goal": "é\x00", "facts": {"n": 1.5, "big": 2**60}, "completed": []}
    with SessionManager.from_url(f"sqlite:///{tmp_path / 'm.db'}", auto_migrate=True) as m:
        s = m.create_session(user_id="alice")
        m.update_working_memory(session_id=s.session_id, user_id="alice", data=data)
        column = JSONText().dialect_impl(SQLITE).bind_processor(SQLITE)
        assert column is not None
        with m.store.engine.connect() as conn:
            for table in ("working_memory", "memory_history"):
                stored = conn.exec_driver_sql(
                    f"SELECT data FROM {table} WHERE session_id = ? ORDER BY version DESC",
                    (s.session_id,),
                ).first()
                assert stored is not None and stored[0] == column(data)
        assert m.get_working_memory(session_id=s.session_id, user_id="alice").data == data
