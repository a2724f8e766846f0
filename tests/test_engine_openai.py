"""OpenAIChatModel against a fake chat-completions server (httpx.MockTransport, no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentsession import SessionManager
from agentsession.engine import AgentEngine, ModelContext, ModelError, OpenAIChatModel, ProjectTools
from agentsession.engine.model import parse_completion
from agentsession.stores.memory.store import MemoryStore

USER = "alice"


def _completion(message: dict[str, Any], usage: dict[str, int] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"choices": [{"index": 0, "message": message}]}
    if usage is not None:
        body["usage"] = usage
    return body


def _tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": call_id, "type": "function", "function": function}


class FakeServer:
    """Answers /chat/completions with canned bodies and keeps the requests it saw."""

    def __init__(self, *bodies: dict[str, Any]) -> None:
        self.bodies = list(bodies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path != "/v1/chat/completions":
            return httpx.Response(404)
        return httpx.Response(200, json=self.bodies.pop(0))


def _model(server: FakeServer) -> OpenAIChatModel:
    client = httpx.Client(transport=httpx.MockTransport(server))
    return OpenAIChatModel(
        base_url="http://fake.local/v1", api_key="sk-test", model="tiny", client=client
    )


def test_parse_tool_calls_phase_and_usage() -> None:
    """tool_calls become ToolRequests with their ids, begin_phase becomes new_run."""
    decision = parse_completion(
        _completion(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    _tool_call("c1", "begin_phase", {"title": "diagnose"}),
                    _tool_call("c2", "run_command", {"command": "python app.py"}),
                ],
            },
            {"prompt_tokens": 120, "completion_tokens": 15, "total_tokens": 135},
        )
    )
    assert decision.new_run == "diagnose"
    assert [(c.id, c.name, c.arguments) for c in decision.tool_calls] == [
        ("c2", "run_command", {"command": "python app.py"})
    ]
    assert decision.usage == {"input_tokens": 120, "output_tokens": 15, "total_tokens": 135}


_BAD_ARGS = {"id": "c", "type": "function", "function": {"name": "x", "arguments": "{not json"}}


@pytest.mark.parametrize(
    "body", [{}, {"choices": []}, _completion({"role": "assistant", "tool_calls": [_BAD_ARGS]})]
)
def test_malformed_completion_is_a_model_error(body: Any) -> None:
    """No choices[0].message, or tool arguments that are not JSON, raise ModelError."""
    with pytest.raises(ModelError):
        parse_completion(body)


def test_engine_runs_the_canned_tool_call_and_records_usage(tmp_path: Path) -> None:
    """The engine executes the fake server's tool call, sends the result back, stores usage."""
    (tmp_path / "requirements.txt").write_text("flask\n")
    server = FakeServer(
        _completion(
            {
                "role": "assistant",
                "tool_calls": [_tool_call("call_1", "read_file", {"path": "requirements.txt"})],
            },
            {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        ),
        _completion(
            {"role": "assistant", "content": "requirements.txt lists flask only."},
            {"prompt_tokens": 70, "completion_tokens": 8, "total_tokens": 78},
        ),
    )
    sm = SessionManager(MemoryStore())
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    reply = AgentEngine(sm, _model(server), ProjectTools(tmp_path), user_id=USER).handle(
        sid, "what is in requirements.txt?"
    )
    assert reply.text == "requirements.txt lists flask only."
    first = json.loads(server.requests[0].content)
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert first["model"] == "tiny" and first["messages"][0]["role"] == "system"
    assert first["messages"][-1] == {"role": "user", "content": "what is in requirements.txt?"}
    names = {t["function"]["name"] for t in first["tools"]}
    assert {"run_command", "read_file", "edit_file", "update_memory", "begin_phase"} <= names
    second = json.loads(server.requests[1].content)
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    assert "flask" in json.loads(tool_message["content"])["result"]["content"]
    [call] = sm.get_tool_history(session_id=sid, user_id=USER).items
    assert call.provider_call_id == "call_1" and call.status.value == "ok"
    assert call.call_id.startswith("call_") and call.call_id != "call_1"
    [run] = sm.list_runs(session_id=sid, user_id=USER).items
    assert run.usage == {"input_tokens": 120, "output_tokens": 18, "total_tokens": 138}
    # The body names no model: the usage is the requested model's, in the ledger too.
    assert [(e.model, e.input_tokens, e.output_tokens) for e in run.usage_entries] == [
        ("tiny", 120, 18)
    ]
    [total] = sm.get_usage(user_id=USER, group_by="model")
    assert (total.group, total.total_tokens, total.runs) == ("tiny", 138, 1)


def test_engine_reports_the_answering_models_usage_per_model(tmp_path: Path) -> None:
    """The models the bodies name, with cached and reasoning tokens, reach finish_run
    per model (usage_by_model when the calls of one run name two models)."""
    details = {
        "prompt_tokens_details": {"cached_tokens": 30},
        "completion_tokens_details": {"reasoning_tokens": 4},
    }
    first = _completion(
        {"role": "assistant", "tool_calls": [_tool_call("c1", "read_file", {"path": "a.txt"})]},
        {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    )
    second = _completion(
        {"role": "assistant", "content": "done"},
        {"prompt_tokens": 70, "completion_tokens": 8, "total_tokens": 78},
    )
    first["model"], second["model"] = "gpt-4o-2024-08-06", "gpt-4o-mini"
    first["usage"].update(details)
    decision = parse_completion(first)
    assert (decision.model, decision.usage["cache_read_tokens"]) == ("gpt-4o-2024-08-06", 30)
    assert decision.usage["reasoning_tokens"] == 4
    (tmp_path / "a.txt").write_text("x\n")
    sm = SessionManager(MemoryStore())
    sid = sm.create_session(user_id=USER, agent="coding").session_id
    model = _model(FakeServer(first, second))
    AgentEngine(sm, model, ProjectTools(tmp_path), user_id=USER).handle(sid, "read a.txt")
    [run] = sm.list_runs(session_id=sid, user_id=USER).items
    got = {
        e.model: (e.input_tokens, e.cache_read_tokens, e.reasoning_tokens)
        for e in run.usage_entries
    }
    assert got == {"gpt-4o-2024-08-06": (50, 30, 4), "gpt-4o-mini": (70, 0, 0)}


def test_http_error_is_a_model_error() -> None:
    """A 500 from the endpoint raises ModelError, not an httpx exception."""
    client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(500)))
    model = OpenAIChatModel(base_url="http://x/v1", api_key=None, model="m", client=client)
    context = ModelContext("ses_x", "hi", {}, [], [], [], [])
    with pytest.raises(ModelError):
        model.decide(context)
