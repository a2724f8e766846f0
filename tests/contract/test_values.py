"""Values: Unicode and NUL round trips, non-JSON values, payload limits in bytes,
timezones, and snapshot isolation (C10, C12, C13, C14, C15, C22)."""

from __future__ import annotations

import json
import os
import time
import unicodedata
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from contract_support import OTHER, USER, Ctx, assert_aware_utc_near, snapshot, user_msg, utcnow

from agentsession import Limits, PayloadTooLarge, SessionManager, UnsupportedValue
from agentsession.stores.base import SessionStore

KiB = 1024
MiB = 1024 * KiB

# ------------------------------------------------------------------------- C10

TEXTS = {
    "chinese": "你好，世界。修复启动错误",
    "japanese": "こんにちは、世界。カタカナ",
    "arabic": "مرحبا بالعالم",
    "nfc": unicodedata.normalize("NFC", "é"),
    "nfd": unicodedata.normalize("NFD", "é"),
    "zwj": "👩‍💻",
    "flags": "🇯🇵🇺🇸🏳️‍🌈",
    "astral": "𝄞𠜎",
    "mixed": "a\u200bb\u00a0c\ufeffd\r\n\t",
}


def test_c10_unicode_round_trips_exactly(manager: SessionManager, sid: str) -> None:
    """C10: CJK, Arabic, NFC vs NFD, ZWJ emoji and flags come back exactly and distinct."""
    assert TEXTS["nfc"] != TEXTS["nfd"]
    manager.update_session(
        session_id=sid,
        user_id=USER,
        title=TEXTS["zwj"] + TEXTS["nfd"],
        metadata={TEXTS["nfd"]: TEXTS["nfc"]},
    )
    for name, text in TEXTS.items():
        manager.append_message(session_id=sid, user_id=USER, message=user_msg(text, name=name))
    manager.update_working_memory(
        session_id=sid, user_id=USER, data={"facts": {v: k for k, v in TEXTS.items()}}
    )
    manager.record_tool_call(
        session_id=sid, user_id=USER, tool="echo", arguments={TEXTS["nfc"]: 1}, result=TEXTS
    )
    got = manager.get_messages(session_id=sid, user_id=USER).items
    assert [(x.name, x.content) for x in got] == list(TEXTS.items())
    assert got[3].content != got[4].content
    s = manager.get_session(session_id=sid, user_id=USER)
    assert s.title == TEXTS["zwj"] + TEXTS["nfd"]
    assert s.metadata == {TEXTS["nfd"]: TEXTS["nfc"]} and TEXTS["nfc"] not in s.metadata
    facts = manager.get_working_memory(session_id=sid, user_id=USER).facts
    assert facts == {v: k for k, v in TEXTS.items()} and len(facts) == len(TEXTS)
    [call] = manager.get_tool_history(session_id=sid, user_id=USER).items
    assert call.result == TEXTS
    assert (
        manager.find_tool_call(
            session_id=sid, user_id=USER, tool="echo", arguments={TEXTS["nfd"]: 1}
        )
        is None
    )
    assert (
        manager.find_tool_call(
            session_id=sid, user_id=USER, tool="echo", arguments={TEXTS["nfc"]: 1}
        )
        is not None
    )


def _message_bytes(message: dict[str, Any]) -> int:
    """Bytes of the UTF-8 JSON encoding (compact, real UTF-8), as DESIGN.md measures sizes."""
    return len(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode())


@pytest.mark.store_independent
@pytest.mark.parametrize("char", ["é", "中", "👩"])
def test_c10_size_limits_count_bytes(store: SessionStore, char: str) -> None:
    """C10: a limit counts UTF-8 bytes: just under it passes, one char over fails, chars don't."""
    limit = 4 * KiB
    m = SessionManager(store, limits=Limits(max_message_bytes=limit))
    sid = m.create_session(user_id=USER).session_id
    width = len(char.encode())
    overhead = _message_bytes(user_msg(""))
    fits = (limit - overhead) // width
    ok = user_msg(char * fits)
    assert limit - width < _message_bytes(ok) <= limit
    m.append_message(session_id=sid, user_id=USER, message=ok)
    over = user_msg(char * (fits + 1))
    assert len(json.dumps(over, ensure_ascii=False)) < limit * 2
    with pytest.raises(PayloadTooLarge) as err:
        m.append_message(session_id=sid, user_id=USER, message=over)
    assert err.value.limit_bytes == limit and err.value.size_bytes == _message_bytes(over)
    assert str(limit) in str(err.value)
    by_chars = user_msg(char * (limit // 2))  # under the limit in characters only
    with pytest.raises(PayloadTooLarge):
        m.append_message(session_id=sid, user_id=USER, message=by_chars)
    [stored] = m.get_messages(session_id=sid, user_id=USER).items
    assert stored.content == ok["content"]


# ------------------------------------------------------------------------- C12


def test_c12_nul_round_trips_exactly(manager: SessionManager, sid: str) -> None:
    """C12: NUL in content, nested tool-result keys and values, memory and metadata round-trips."""
    nul = "before\x00after"
    result = {"outer": {"k\x00ey": ["v\x00al", {"\x00": "\x00"}]}}
    msg = manager.append_message(
        session_id=sid, user_id=USER, message=user_msg(nul, metadata={"n\x00": "\x00"})
    )
    call = manager.record_tool_call(
        session_id=sid, user_id=USER, tool="t", arguments={"a\x00": "b\x00"}, result=result
    )
    manager.update_working_memory(
        session_id=sid, user_id=USER, data={"goal": nul, "facts": {"\x00k": "\x00v"}}
    )
    manager.update_session(session_id=sid, user_id=USER, title="t\x00t")
    [got] = manager.get_messages(session_id=sid, user_id=USER).items
    assert got.payload() == msg.payload() == user_msg(nul, metadata={"n\x00": "\x00"})
    [tool] = manager.get_tool_history(session_id=sid, user_id=USER).items
    assert (tool.result, tool.arguments) == (result, {"a\x00": "b\x00"})
    assert (
        manager.find_tool_call(
            session_id=sid, user_id=USER, tool="t", arguments={"a\x00": "b\x00"}
        ).call_id
        == call.call_id
    )
    wm = manager.get_working_memory(session_id=sid, user_id=USER)
    assert wm.data == {"goal": nul, "facts": {"\x00k": "\x00v"}}
    assert manager.get_session(session_id=sid, user_id=USER).title == "t\x00t"


def test_c12_free_text_fields_keep_nul_and_their_longest_value(manager: SessionManager) -> None:
    """C12: NUL, and the longest accepted value, round-trip in every free-text field that
    is not JSON: close reason, tool error, run error, step name and error. Backslashes are
    the worst case for PostgreSQL's escaping (see PlainText)."""
    for text in ("a\x00b", "\\0" + "\\" * 498):
        name = text[:120]  # the longest step name add_run_step accepts
        sid = manager.create_session(user_id=USER).session_id
        manager.record_tool_call(session_id=sid, user_id=USER, tool="t", status="error", error=text)
        run = manager.start_run(session_id=sid, user_id=USER, input="x")
        manager.add_run_step(
            session_id=sid, user_id=USER, run_id=run.run_id, kind="tool", name=name, error=text
        )
        manager.finish_run(
            session_id=sid, user_id=USER, run_id=run.run_id, status="FAILED", error=text
        )
        manager.close_session(session_id=sid, user_id=USER, reason=text)
        [tool] = manager.get_tool_history(session_id=sid, user_id=USER).items
        got = manager.get_run(session_id=sid, user_id=USER, run_id=run.run_id)
        [step] = got.steps
        session = manager.get_session(session_id=sid, user_id=USER)
        assert step.name == name
        assert (tool.error, got.error, step.error, session.status_reason) == (text,) * 4


@pytest.mark.store_independent
def test_c12_lone_surrogates_are_rejected_with_the_field(manager: SessionManager, sid: str) -> None:
    """Text that cannot be UTF-8 (a lone surrogate) is rejected, naming the field."""
    with pytest.raises(UnsupportedValue) as err:
        manager.append_message(session_id=sid, user_id=USER, message=user_msg("a\ud800b"))
    assert "content" in (err.value.field or "")
    assert manager.get_messages(session_id=sid, user_id=USER).items == []


# ------------------------------------------------------------------------- C13


class Custom:
    """A value that is not JSON."""


NON_JSON: dict[str, Any] = {
    "bytes": b"\x89PNG" + b"\x00" * MiB,
    "datetime": datetime(2026, 1, 1, tzinfo=UTC),
    "decimal": Decimal("0.1"),
    "uuid": uuid.UUID(int=7),
    "set": {1, 2},
    "tuple": (1, 2),
    "nan": float("nan"),
    "inf": float("inf"),
    "custom": Custom(),
    "int_key": {1: "x"},
}


@pytest.mark.store_independent
@pytest.mark.parametrize("kind", sorted(NON_JSON))
def test_c13_non_json_values_name_their_path(manager: SessionManager, kind: str) -> None:
    """C13: non-JSON values in message/memory/tool result raise UnsupportedValue with the path."""
    ctx = Ctx(manager)
    before = snapshot(manager, ctx.sid)
    bad = NON_JSON[kind]
    kw = {"session_id": ctx.sid, "user_id": USER}
    attempts = [
        (
            lambda: manager.append_message(
                **kw, message={"role": "user", "content": [{"type": "image", "data": bad}]}
            ),
            "content[0].data",
        ),
        (
            lambda: manager.append_messages(
                **kw,
                messages=[
                    user_msg("ok"),
                    {"role": "user", "content": "x", "extra": {"deep": [bad]}},
                ],
            ),
            "extra.deep[0]",
        ),
        (
            lambda: manager.append_message(
                **kw, message=user_msg("x"), working_memory_patch={"facts": {"v": bad}}
            ),
            "facts",
        ),
        (lambda: manager.update_working_memory(**kw, data={"facts": {"v": bad}}), "facts"),
        (lambda: manager.update_working_memory(**kw, patch={"x": [bad]}), "x[0]"),
        (lambda: manager.record_tool_call(**kw, tool="t", result={"r": bad}), "result.r"),
        (lambda: manager.record_tool_call(**kw, tool="t", arguments={"a": bad}), "arguments.a"),
        (lambda: manager.start_run(**kw, input={"i": bad}), "i"),
        (
            lambda: manager.add_run_step(**kw, run_id=ctx.run_id, kind="k", output=[bad]),
            "output[0]",
        ),
        (lambda: manager.update_session(**kw, metadata={"m": bad}), "metadata"),
        (lambda: manager.create_session(user_id=USER, metadata={"m": bad}), "metadata"),
    ]
    for attempt, path in attempts:
        with pytest.raises(UnsupportedValue) as err:
            attempt()
        assert err.value.field is not None and path in err.value.field, (err.value.field, path)
    assert snapshot(manager, ctx.sid) == before
    assert len(manager.list_sessions(user_id=USER).items) == 1


# ------------------------------------------------------------------------- C14


def _blob(size: int, char: str = "x") -> str:
    """A JSON string whose UTF-8 encoding is ``size`` bytes (quotes excluded)."""
    width = len(char.encode())
    return char * (size // width) + "y" * (size % width)


@pytest.mark.parametrize("size", [60 * KiB, 64 * KiB + 1, MiB])
@pytest.mark.parametrize("char", ["x", "中"])
def test_c14_large_tool_results_are_intact(
    manager: SessionManager, sid: str, size: int, char: str
) -> None:
    """C14: 60 KB, 64 KB+1 and 1 MB results (ASCII and multi-byte) come back byte for byte."""
    result = {"stdout": _blob(size, char), "tail": "END"}
    call = manager.record_tool_call(session_id=sid, user_id=USER, tool="run", result=result)
    [got] = manager.get_tool_history(session_id=sid, user_id=USER).items
    assert got.result == result and call.result == result
    assert len(got.result["stdout"].encode()) == size
    msg = manager.append_message(
        session_id=sid,
        user_id=USER,
        message={"role": "tool", "tool_call_id": "c", "content": result["stdout"]},
    )
    [back] = manager.get_messages(session_id=sid, user_id=USER).items
    assert back.content == msg.content == result["stdout"]


@pytest.mark.store_independent
@pytest.mark.parametrize("char", ["x", "中"])
def test_c14_over_the_limit_is_rejected_naming_it(store: SessionStore, char: str) -> None:
    """C14: a tool result over max_tool_call_bytes raises PayloadTooLarge naming the limit."""
    limit = 64 * KiB
    m = SessionManager(store, limits=Limits(max_tool_call_bytes=limit, max_message_bytes=limit))
    sid = m.create_session(user_id=USER).session_id
    before = snapshot(m, sid)
    for size in (limit + 1, 2 * limit, MiB):
        with pytest.raises(PayloadTooLarge) as err:
            m.record_tool_call(session_id=sid, user_id=USER, tool="run", result=_blob(size, char))
        assert err.value.limit_bytes == limit and str(limit) in str(err.value)
        assert err.value.size_bytes > limit
        with pytest.raises(PayloadTooLarge):
            m.append_message(
                session_id=sid, user_id=USER, message={"role": "tool", "content": _blob(size, char)}
            )
    assert snapshot(m, sid) == before


@pytest.mark.store_independent
@pytest.mark.parametrize("char", ["x", "中"])
def test_c14_twenty_megabytes_rejected_with_default_limits(
    manager: SessionManager, sid: str, char: str
) -> None:
    """C14: a 20 MB tool result is rejected before writing under the default limits."""
    before = snapshot(manager, sid)
    with pytest.raises(PayloadTooLarge) as err:
        manager.record_tool_call(
            session_id=sid, user_id=USER, tool="run", result=_blob(20 * MiB, char)
        )
    assert err.value.limit_bytes == manager.limits.max_tool_call_bytes
    with pytest.raises(PayloadTooLarge):
        manager.append_message(
            session_id=sid, user_id=USER, message=user_msg(_blob(20 * MiB, char))
        )
    assert snapshot(manager, sid) == before


# ------------------------------------------------------------------------- C15


@pytest.fixture(params=["America/Los_Angeles", "Asia/Kolkata"])
def local_tz(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test with the process in another local timezone; restore afterwards."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = request.param
    time.tzset()
    try:
        yield request.param
    finally:
        if old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old
        time.tzset()


def test_c15_timestamps_are_aware_utc_in_any_local_timezone(
    manager: SessionManager, local_tz: str
) -> None:
    """C15: under TZ=LA/Kolkata every returned timestamp is aware UTC and near real time."""
    assert time.localtime().tm_gmtoff != 0
    s = manager.create_session(user_id=USER, ttl_seconds=3600)
    kw = {"session_id": s.session_id, "user_id": USER}
    results: list[Any] = [
        s,
        manager.append_message(**kw, message=user_msg("x")),
        manager.update_working_memory(**kw, data={"goal": "g"}),
        manager.record_tool_call(**kw, tool="t"),
    ]
    run = manager.start_run(**kw)
    results += [
        run,
        manager.add_run_step(**kw, run_id=run.run_id, kind="model"),
        manager.finish_run(**kw, run_id=run.run_id, status="SUCCEEDED"),
    ]
    results += [
        manager.get_session(**kw),
        *manager.get_messages(**kw).items,
        manager.get_working_memory(**kw),
        *manager.get_tool_history(**kw).items,
        manager.get_run(**kw, run_id=run.run_id),
        *manager.get_audit_log(**kw).items,
        *manager.list_sessions(user_id=USER).items,
    ]
    closed = manager.close_session(**kw)
    results += [closed, manager.restore_session(**kw)]
    now = utcnow()
    for r in results:
        _near(r, now)


def _near(model: Any, now: datetime) -> None:
    """expires_at lies ttl ahead; every other timestamp is near now (UTC, not local)."""
    dumped = model.model_dump()
    if isinstance(dumped, dict) and dumped.get("expires_at") is not None:
        model = model.model_copy(update={"expires_at": None})
    if isinstance(dumped, dict) and isinstance(dumped.get("session"), dict):
        inner = model.session.model_copy(update={"expires_at": None})
        model = model.model_copy(update={"session": inner})
    assert_aware_utc_near(model, now)


# ------------------------------------------------------------------------- C22


def test_c22_returned_objects_are_snapshots(manager: SessionManager) -> None:
    """C22: mutating returned objects' nested data in place changes nothing stored."""
    a = Ctx(manager, running=False)
    b = Ctx(manager, OTHER)
    kw = {"session_id": a.sid, "user_id": USER}
    before_a, before_b = snapshot(manager, a.sid), snapshot(manager, b.sid)
    msg = manager.append_message(
        **kw,
        message={
            "role": "assistant",
            "content": [{"t": 1}],
            "tool_calls": [{"id": "c", "f": {"n": 1}}],
        },
    )
    before_a = snapshot(manager, a.sid)
    s = manager.get_session(**kw)
    s.metadata["k"]["n"] = 999
    s.metadata["new"] = 1
    wm = manager.get_working_memory(**kw)
    wm.data["facts"]["a"] = "changed"
    wm.data["goal"] = "changed"
    for x in manager.get_messages(**kw).items:
        if isinstance(x.content, list):
            x.content.append({"t": 2})
            x.tool_calls[0]["f"]["n"] = 2
    msg.tool_calls[0]["id"] = "changed"
    [call] = manager.get_tool_history(**kw).items
    call.result["hits"] = 0
    call.arguments["q"] = "changed"
    run = manager.get_run(**kw, run_id=a.run_id)
    run.input["task"] = "changed"
    run.steps.append(run.steps[0] if run.steps else None)
    listed = manager.list_sessions(user_id=USER).items[0]
    listed.metadata["k"]["n"] = -1
    restored = manager.restore_session(**kw)
    restored.working_memory.data["facts"]["a"] = "again"
    assert snapshot(manager, a.sid) == before_a
    assert snapshot(manager, b.sid) == before_b
    after = snapshot(manager, a.sid)
    assert after["session"]["metadata"] == {"k": {"n": 1}}
    assert after["memory"]["data"]["facts"] == {"a": 1}


def test_c22_inputs_are_copied_on_write(manager: SessionManager, sid: str) -> None:
    """C22: mutating the dicts passed in after the call changes nothing stored."""
    doc = {"goal": "g", "facts": {"a": [1]}}
    manager.update_working_memory(session_id=sid, user_id=USER, data=doc)
    message = {"role": "user", "content": [{"type": "text", "text": "x"}], "meta": {"a": 1}}
    manager.append_message(session_id=sid, user_id=USER, message=message)
    result = {"rows": [1, 2]}
    manager.record_tool_call(session_id=sid, user_id=USER, tool="t", result=result)
    doc["facts"]["a"].append(2)
    message["content"][0]["text"] = "changed"
    message["meta"]["a"] = 2
    result["rows"].clear()
    assert manager.get_working_memory(session_id=sid, user_id=USER).data == {
        "goal": "g",
        "facts": {"a": [1]},
    }
    [m] = manager.get_messages(session_id=sid, user_id=USER).items
    assert m.payload() == {
        "role": "user",
        "content": [{"type": "text", "text": "x"}],
        "meta": {"a": 1},
    }
    [call] = manager.get_tool_history(session_id=sid, user_id=USER).items
    assert call.result == {"rows": [1, 2]}


def test_c22_explicit_update_persists_and_bumps_version(manager: SessionManager, sid: str) -> None:
    """C22: the explicit API update is what persists, with a version bump."""
    wm = manager.get_working_memory(session_id=sid, user_id=USER)
    data = dict(wm.data)
    data["goal"] = "explicit"
    v = manager.get_session(session_id=sid, user_id=USER).version
    manager.update_working_memory(session_id=sid, user_id=USER, data=data)
    assert manager.get_working_memory(session_id=sid, user_id=USER).data == {"goal": "explicit"}
    assert manager.get_session(session_id=sid, user_id=USER).version == v + 1
