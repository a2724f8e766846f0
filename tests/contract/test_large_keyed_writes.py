"""Writes at their documented maximum with an idempotency key, of the content a client
escaping into SQL text doubles (backslashes and quotes), on every store: MariaDB at
its default ``max_allowed_packet`` (16 MiB) too. A keyed message write keeps its whole
result as JSON text beside the messages, so one statement holds all of them."""

from __future__ import annotations

from typing import Any

import pytest
from contract_support import USER, new_session, user_msg

from agentsession import SessionManager
from agentsession.jsonvalues import dumps
from agentsession.service import Limits
from agentsession.stores.base import SessionStore
from agentsession.stores.sealed import SealedStore
from agentsession.stores.sql.store import SQLStore

pytestmark = pytest.mark.keyring_slow  # sealing megabytes: minutes per variant

MiB = 1024 * 1024
#: Content whose JSON a SQL client escapes the most: a backslash or a quote is two bytes
#: of JSON and four once escaped (a NUL, six and seven, is milder).
UNIT = '\\"'


def _worst(json_bytes: int, make: Any) -> Any:
    """``make(text)`` whose JSON is ``json_bytes`` bytes or at most a few less, ``text``
    all backslashes and quotes."""
    base = len(dumps(make("")).encode())
    per_unit = len(dumps(UNIT)) - 2
    text = UNIT * ((json_bytes - base) // per_unit)
    text += "\\" * ((json_bytes - base - len(dumps(text)) + 2) // 2)
    value = make(text)
    assert json_bytes - 2 <= len(dumps(value).encode()) <= json_bytes
    return value


@pytest.fixture
def sid(store: SessionStore, manager: SessionManager) -> str:
    inner = store.inner if isinstance(store, SealedStore) else None
    if isinstance(inner, SQLStore) and inner.engine.dialect.name in ("mysql", "mariadb"):
        pytest.skip(
            "a sealed value is base64 text, sent to MariaDB as base64 again (16/9 of its "
            "JSON): these need max_allowed_packet of 32 MiB (docs/security.md)"
        )
    if isinstance(store, SQLStore) and store.engine.dialect.name in ("mysql", "mariadb"):
        with store.engine.connect() as conn:
            packet = conn.exec_driver_sql("SELECT @@max_allowed_packet").scalar()
        assert packet == 16 * MiB  # the servers' default: the test is honest
    return new_session(manager).session_id


def _contents(m: SessionManager, sid: str) -> list[Any]:
    return [x.content for x in m.get_messages(session_id=sid, user_id=USER)]


@pytest.mark.parametrize("count, each", [(2, Limits().max_message_bytes), (3, 3 * MiB)])
def test_c25_keyed_append_of_worst_case_messages(
    manager: SessionManager, sid: str, count: int, each: int
) -> None:
    """``count`` messages of ``each`` bytes of JSON in one keyed append are kept, and
    the key replays the same result."""
    batch = [_worst(each, user_msg) for _ in range(count)]
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER, "idempotency_key": "k"}
    first = manager.append_messages(**kw, messages=batch)
    assert manager.append_messages(**kw, messages=batch) == first
    assert _contents(manager, sid) == [m["content"] for m in batch]


def test_c25_keyed_replace_of_worst_case_messages(manager: SessionManager, sid: str) -> None:
    """A keyed ``replace_messages`` of two messages at the message maximum is kept."""
    manager.append_messages(session_id=sid, user_id=USER, messages=[user_msg("old")])
    batch = [_worst(Limits().max_message_bytes, user_msg) for _ in range(2)]
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER, "idempotency_key": "r"}
    first = manager.replace_messages(**kw, after_seq=0, messages=batch)
    assert manager.replace_messages(**kw, after_seq=0, messages=batch) == first
    assert _contents(manager, sid) == [m["content"] for m in batch]


def test_c25_keyed_worst_case_memory_tool_call_and_run(manager: SessionManager, sid: str) -> None:
    """Working memory, a tool call and a run's input and output, each at its maximum
    and keyed, are kept."""
    limits = Limits()
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    memory = _worst(limits.max_working_memory_bytes, lambda t: {"m": t})
    manager.update_working_memory(**kw, data=memory, idempotency_key="m")
    assert manager.get_working_memory(**kw).data == memory
    half = limits.max_tool_call_bytes // 2
    args, result = _worst(half - 32, lambda t: {"a": t}), _worst(half - 32, lambda t: [t])
    call = manager.record_tool_call(
        **kw, tool="t", arguments=args, result=result, idempotency_key="t"
    )
    assert (call.arguments, call.result) == (args, result)
    payload = _worst(limits.max_run_payload_bytes - 64, lambda t: {"p": t})
    run = manager.start_run(**kw, input=payload, idempotency_key="s")
    done = manager.finish_run(
        **kw, run_id=run.run_id, status="SUCCEEDED", output=payload, idempotency_key="f"
    )
    assert (done.input, done.output) == (payload, payload)
