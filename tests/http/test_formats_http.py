"""The three message formats over HTTP: Responses items without a role go in and come
back exactly as sent, and windows keep calls with their results (C32)."""

from __future__ import annotations

import pytest
from http_support import Api
from pydantic import TypeAdapter

from agentsession import Message

MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])

pytestmark = pytest.mark.store_independent

ITEMS = [
    {"type": "message", "role": "user", "content": "fix it"},
    {"type": "function_call", "call_id": "c1", "name": "sh", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "ok"},
]


def test_c32_responses_items_over_http(api: Api) -> None:
    """Items are answered without a role added; the newest window of 1 widens to the
    call its output answers; the OpenAPI document does not require a role."""
    sid = api.create()["session_id"]
    base = f"/v1/sessions/{sid}/messages"
    r = api.http.post(base, json={"messages": ITEMS}, headers=api.alice)
    assert r.status_code == 201, r.text
    assert ["role" in m for m in r.json()["items"]] == [True, False, False]
    window = api.http.get(f"{base}?limit=1", headers=api.alice).json()["items"]
    assert [m["seq"] for m in window] == [2, 3]
    assert {k: window[1][k] for k in ITEMS[2]} == ITEMS[2] and "role" not in window[1]
    schema = api.http.get("/openapi.json").json()["components"]["schemas"]["Message"]
    assert "role" not in schema["required"]


def test_c32_items_parse_back_as_sent(api: Api) -> None:
    """The answer parsed as the client parses it: payload() is what was sent, and
    ``role`` reads as derived (assistant for a call, tool for an output)."""
    sid = api.create()["session_id"]
    base = f"/v1/sessions/{sid}/messages"
    api.http.post(base, json={"messages": ITEMS}, headers=api.alice)
    got = MESSAGES.validate_python(api.http.get(base, headers=api.alice).json()["items"])
    assert [m.payload() for m in got] == ITEMS
    assert [m.role.value for m in got] == ["user", "assistant", "tool"]
