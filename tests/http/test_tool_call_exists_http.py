"""A model provider's tool-call id sent twice as ``call_id`` is refused with an error
that names ``provider_call_id`` as the field for it: from the manager, in the HTTP
problem's ``detail``, and from the client that rebuilds the error."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from http_support import Api, assert_problem

from agentsession import ToolCallExists
from agentsession.client import SessionClient
from inprocess import InProcess

pytestmark = pytest.mark.store_independent


def _names_the_field(text: str) -> None:
    assert "'call_abc'" in text and "provider_call_id" in text, text
    assert "may repeat" in text, text


def test_a_repeated_call_id_says_provider_call_id_is_the_field_for_it(api: Api) -> None:
    sid = api.create()["session_id"]
    base = f"/v1/sessions/{sid}/tool-calls"
    body = {"tool": "get_weather", "call_id": "call_abc"}
    assert api.http.post(base, json=body, headers=api.alice).status_code == 201
    detail = assert_problem(
        api.http.post(base, json=body, headers=api.alice), 409, "tool-call-exists"
    )["detail"]
    _names_the_field(detail)
    with pytest.raises(ToolCallExists) as raised:
        api.manager.record_tool_call(session_id=sid, user_id="alice", tool="t", call_id="call_abc")
    _names_the_field(str(raised.value))
    assert raised.value.message == detail
    token = api.alice["Authorization"].removeprefix("Bearer ")
    with (
        TestClient(api.app) as http,
        SessionClient("http://testserver", token, transport=InProcess(http)) as client,
        pytest.raises(ToolCallExists) as again,
    ):
        client.record_tool_call(session_id=sid, tool="t", call_id="call_abc")
    assert again.value.message == detail and again.value.call_id == "call_abc"
    # The field the message names takes the repeated id.
    for _ in range(2):
        r = api.http.post(
            base, json={"tool": "get_weather", "provider_call_id": "call_abc"}, headers=api.alice
        )
        assert r.status_code == 201, r.text
