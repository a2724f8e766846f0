"""The fast forms of the read path give exactly what the general forms give.

A message read from a store is built without a second validation
(:meth:`Message.from_store`), stored JSON is decoded by orjson where it answers as the
standard library does (:func:`agentsession.jsonvalues.loads`), and the window rule skips
messages that cannot make or answer a call (:func:`callgroups.touches_calls`): each is
checked here against the slower form it replaces, on the values where they could differ.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agentsession import callgroups, jsonvalues
from agentsession.models import Message

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
STORE = {"message_id": "msg_1", "session_id": "ses_1", "seq": 3, "created_at": NOW}

_json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
_json = st.recursive(
    _json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
#: Values of every known field: right types, wrong types, and the store's own fields.
_fields = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["user", "assistant", "tool", "system", "developer", "bogus", 1]),
        "type": st.sampled_from(
            ["function_call", "function_call_output", "custom_tool_call", "reasoning", "message", 5]
        ),
        "content": st.none() | st.text(max_size=5) | st.lists(_json, max_size=2) | st.integers(),
        "name": st.none() | st.text(max_size=3) | st.integers(),
        "tool_calls": st.none()
        | st.lists(st.dictionaries(st.text(max_size=3), _json), max_size=2)
        | st.lists(st.integers(), max_size=2),
        "tool_call_id": st.none() | st.text(max_size=3) | st.booleans(),
        "run_id": st.none() | st.text(max_size=3),
        "metadata": st.none()
        | st.dictionaries(st.text(max_size=3), _json, max_size=2)
        | st.text(max_size=2),
        "session_version": st.none() | st.integers(0, 5),
        "call_id": st.text(max_size=3),
        "refusal": _json,
        "message_id": st.text(max_size=3),
        "seq": st.integers(),
    },
)


def _validated(payload: dict[str, Any], **store: Any) -> Message | str:
    try:
        return Message.model_validate({**payload, **store})
    except ValidationError as exc:
        return str(exc)


def _from_store(payload: dict[str, Any], **store: Any) -> Message | str:
    try:
        return Message.from_store(json.loads(json.dumps(payload)), **store)
    except ValidationError as exc:
        return str(exc)


def _assert_same(a: Message | str, b: Message | str) -> None:
    assert type(a) is type(b)
    if isinstance(a, str):
        assert a == b  # the same validation error
        return
    assert isinstance(b, Message)
    assert a == b
    assert list(a.__dict__.items()) == list(b.__dict__.items())
    assert a.model_fields_set == b.model_fields_set
    assert list((a.model_extra or {}).items()) == list((b.model_extra or {}).items())
    assert a.payload() == b.payload()
    assert repr(a) == repr(b)
    assert a.model_dump_json() == b.model_dump_json()


@settings(max_examples=400, deadline=None)
@given(_fields)
def test_a_stored_message_is_the_validated_one(payload: dict[str, Any]) -> None:
    _assert_same(_validated(payload, **STORE), _from_store(payload, **STORE))


@pytest.mark.parametrize(
    "payload",
    [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "reasoning", "summary": []},
        {"type": "message", "content": "no role"},  # no derived role: the same error
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}], "refusal": None},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text"}], "run_id": "r"},
        {"role": "user", "message_id": "other", "seq": 99},  # the store's values win
        {"role": "user", "session_version": 4},
        {"role": "user", "metadata": {"a": 1}, "name": None},
    ],
)
def test_a_stored_message_is_the_validated_one_in_every_format(payload: dict[str, Any]) -> None:
    _assert_same(_validated(payload, **STORE), _from_store(payload, **STORE))


@pytest.mark.parametrize(
    "given",
    [
        {**STORE, "created_at": "2026-01-01T12:00:00+00:00"},  # text, as Redis keeps it
        {**STORE, "created_at": datetime(2026, 1, 1, 17, 30, tzinfo=timezone(timedelta(hours=5)))},
        {**STORE, "seq": "3"},
        {**STORE, "message_id": None},
    ],
)
def test_a_store_value_of_another_type_is_validated(given: dict[str, Any]) -> None:
    payload = {"role": "user", "content": "hi"}
    _assert_same(_validated(payload, **given), _from_store(payload, **given))


_call_payloads = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system"])},
    optional={
        "content": st.none()
        | st.text(max_size=3)
        | st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["text", "tool_use", "tool_result"])},
                optional={"id": st.text(max_size=2), "tool_use_id": st.text(max_size=2)},
            ),
            max_size=2,
        ),
        "tool_calls": st.none() | st.lists(st.fixed_dictionaries({"id": st.text(max_size=2)})),
        "tool_call_id": st.none() | st.text(max_size=2),
        "type": st.sampled_from(["function_call", "custom_tool_call_output", "message"]),
        "call_id": st.text(max_size=2),
    },
)


@settings(max_examples=300, deadline=None)
@given(_call_payloads)
def test_a_message_that_touches_no_calls_opens_and_answers_none(payload: dict[str, Any]) -> None:
    m = Message.model_validate({**payload, **STORE})
    if not callgroups.touches_calls(m):
        assert callgroups.opened_calls(m) == []
        assert callgroups.answered_calls(m) == []


def test_only_plain_messages_skip_the_call_rule() -> None:
    def touches(payload: dict[str, Any]) -> bool:
        return callgroups.touches_calls(Message.model_validate({**payload, **STORE}))

    assert not touches({"role": "user", "content": "hi"})
    assert not touches({"role": "assistant", "content": "hi", "refusal": None})
    assert touches({"role": "assistant", "tool_calls": [{"id": "c"}]})
    assert touches({"role": "tool", "tool_call_id": "c", "content": "ok"})
    assert touches({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c"}]})
    assert touches({"type": "function_call_output", "call_id": "c", "output": "ok"})


#: What ``loads`` decoded with before orjson.
_STDLIB = json.JSONDecoder()


def _same_decoding(text: str) -> None:
    try:
        expected: Any = _STDLIB.decode(text)
    except json.JSONDecodeError as exc:
        with pytest.raises(json.JSONDecodeError) as caught:
            jsonvalues.loads(text)
        assert str(caught.value) == str(exc)
        return
    got = jsonvalues.loads(text)
    assert repr(got) == repr(expected)  # repr: tells 1 from 1.0, and NaN from NaN
    assert json.dumps(got) == json.dumps(expected)


@pytest.mark.parametrize(
    "text",
    [
        # Integers at and beyond 64 bits (orjson reads those beyond as floats).
        "9223372036854775807",
        "9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "-18446744073709551615",
        '{"n": [123456789012345678901234567890]}',
        # What orjson refuses and the standard library reads.
        "NaN",
        "[Infinity, -Infinity]",
        '"\\ud800"',
        '{"k\\udc00": 1}',
        "1e400",
        '"\ud800"',
        # The same either way.
        '"a\\u0000b"',
        "5e-324",
        "-0.0",
        "1.7976931348623157e308",
        '{"a": 1, "a": 2}',
        '"😀 ü"',
        # Not JSON: the standard library's error.
        "",
        "[1,]",
        '{"a": 1} x',
        '"\x1f"',
        "\ufeff{}",
    ],
)
def test_loads_answers_as_the_standard_library(text: str) -> None:
    _same_decoding(text)


@settings(max_examples=300, deadline=None)
@given(_json | st.integers(min_value=-(2**70), max_value=2**70) | st.floats())
def test_loads_round_trips_as_the_standard_library(value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        text = json.dumps(value)  # NaN / Infinity: refused on write, read all the same
    else:
        text = jsonvalues.dumps(value)
    _same_decoding(text)
