"""The openai-agents adapter on every store and over HTTP: the behaviours each
openai-agents session backend re-tests (isolation, limits, pop, clear, settings), items
coming back byte-exact, exact windows across a tool call, a Runner with a function tool,
and a session continued in another process."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

agents = pytest.importorskip(
    "agents", reason="openai-agents not installed: pip install -e '.[dev]'"
)

from agents import Agent, RunConfig, Runner, SessionSettings, function_tool  # noqa: E402
from agents.memory import OpenAIResponsesCompactionSession  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from agentsession import (  # noqa: E402
    AgentSessionError,
    Limits,
    SessionManager,
    SessionNotActive,
    StoreError,
    ValidationError,
)
from agentsession.adapters.openai_agents import AgentSessionSession  # noqa: E402
from agentsession.http.app import create_app  # noqa: E402
from agentsession.http.keys import MemoryKeyStore  # noqa: E402
from agentsession.service import messages as service_messages  # noqa: E402
from agentsession.settings import Settings  # noqa: E402
from agentsession.stores.base import SessionStore  # noqa: E402

NO_TRACES = RunConfig(tracing_disabled=True)

#: One item of each kind a Runner stores, with details a re-encoding would change
#: (key order, absent vs null vs "", unicode, nested parts).
ITEMS: list[dict[str, Any]] = [
    {"content": "You answer in one word.", "role": "developer"},
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Wetter in Zürich? 🌧", "type": "message"},
    {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "look up"}],
        "encrypted_content": None,
    },
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Zürich"}',
        "id": "fc_1",
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "rain, 7°C"},
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Rain.", "annotations": [], "logprobs": []}],
    },
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": ""},
    },
]


class Harness:
    """An adapter factory over one backend, and the manager underneath for checks."""

    def __init__(self, manager: SessionManager, backend: Any) -> None:
        self.manager, self.backend = manager, backend

    def session(self, session_id: str = "conversation_123", **options: Any) -> AgentSessionSession:
        """An adapter session owned by ``alice``."""
        return AgentSessionSession(session_id, backend=self.backend, user_id="alice", **options)

    def messages(
        self, session_id: str = "conversation_123", agent: str = "openai-agents"
    ) -> list[Any]:
        """The stored messages of the session keyed ``session_id``, oldest first."""
        s = self.manager.get_session_by_key(user_id="alice", agent=agent, external_key=session_id)
        return self.manager.get_messages(
            session_id=s.session_id, user_id="alice", limit=1000, align_tool_calls=False
        ).items


@pytest.fixture
def make_harness() -> type[Harness]:
    """The openai-agents adapter's harness, for the shared ``harness`` fixture (conftest.py)."""
    return Harness


def run(coro: Any) -> Any:
    """Run a coroutine to its end on a new event loop."""
    return asyncio.run(coro)


def test_items_come_back_byte_exact_with_derived_fields(harness: Harness) -> None:
    """Every kind of item returns exactly as added (same JSON text), and the stored
    message carries role, text and tool-call fields for agentsession's own tools."""
    session = harness.session()
    run(session.add_items(ITEMS))
    got = run(session.get_items())
    assert [json.dumps(i, ensure_ascii=False) for i in got] == [
        json.dumps(i, ensure_ascii=False) for i in ITEMS
    ]
    stored = harness.messages()
    assert [m.role.value for m in stored] == [
        "developer",
        "system",
        "user",
        "assistant",
        "assistant",
        "tool",
        "assistant",
        "assistant",
    ]
    assert stored[2].content == "Wetter in Zürich? 🌧" and stored[6].content == "Rain."
    assert stored[4].tool_calls == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Zürich"}'},
        }
    ]
    assert stored[5].tool_call_id == "call_1" and stored[5].content == "rain, 7°C"
    assert all(m.payload()["item"] == i for m, i in zip(stored, ITEMS, strict=True))


def test_limit_is_exact_even_inside_a_tool_call(harness: Harness) -> None:
    """``get_items(limit)`` gives exactly the newest ``limit`` items: a window that
    starts at a tool result is not widened to its call."""
    session = harness.session()
    run(session.add_items(ITEMS))
    assert run(session.get_items(limit=3)) == ITEMS[-3:]  # output, message, search
    assert run(session.get_items(limit=1)) == ITEMS[-1:]
    assert run(session.get_items(limit=0)) == []
    assert run(session.get_items(limit=100)) == ITEMS
    assert run(session.get_items(limit=-1)) == ITEMS  # as SQLiteSession: no limit


def test_settings_limit_is_the_default_and_an_explicit_limit_wins(harness: Harness) -> None:
    """``session_settings.limit`` applies when no limit is given; a dict is coerced."""
    plain = harness.session()
    assert plain.session_settings == SessionSettings()
    run(plain.add_items(ITEMS))
    limited = harness.session(session_settings={"limit": 2})
    assert limited.session_settings == SessionSettings(limit=2)
    assert run(limited.get_items()) == ITEMS[-2:]
    assert run(limited.get_items(limit=4)) == ITEMS[-4:]


def test_sessions_are_isolated_by_id_and_agent(harness: Harness) -> None:
    """Two session ids, and one id under two agent names, are three histories."""
    a, b = harness.session("a"), harness.session("b")
    other_agent = harness.session("a", agent="triage")
    run(a.add_items([{"role": "user", "content": "for a"}]))
    run(b.add_items([{"role": "user", "content": "for b"}]))
    run(other_agent.add_items([{"role": "user", "content": "for triage a"}]))
    assert run(a.get_items()) == [{"role": "user", "content": "for a"}]
    assert run(b.get_items()) == [{"role": "user", "content": "for b"}]
    assert run(other_agent.get_items()) == [{"role": "user", "content": "for triage a"}]
    assert run(b.pop_item()) == {"role": "user", "content": "for b"}
    assert run(a.get_items()) == [{"role": "user", "content": "for a"}]


def test_an_unwritten_session_reads_empty_and_is_created_by_the_first_item(
    harness: Harness,
) -> None:
    """Reading, popping, clearing or adding ``[]`` creates nothing; the first item
    creates the session, keyed by the openai-agents id."""
    session = harness.session("fresh")
    assert run(session.get_items()) == []
    assert run(session.pop_item()) is None
    run(session.clear_session())
    run(session.add_items([]))
    assert harness.manager.list_sessions(user_id="alice").items == []
    run(session.add_items([{"role": "user", "content": "hi"}]))
    [created] = harness.manager.list_sessions(user_id="alice").items
    assert created.external_key == "fresh" and created.agent == "openai-agents"


def test_pop_returns_the_newest_item_until_empty(harness: Harness) -> None:
    """pop_item removes and returns the newest item, then None once empty."""
    session = harness.session()
    run(session.add_items(ITEMS[:3]))
    assert run(session.pop_item()) == ITEMS[2]
    assert run(session.get_items()) == ITEMS[:2]
    assert run(session.pop_item()) == ITEMS[1]
    assert run(session.pop_item()) == ITEMS[0]
    assert run(session.pop_item()) is None


def test_clear_keeps_the_session_and_its_working_memory(harness: Harness) -> None:
    """clear_session empties the history; the session, its id and memory stay."""
    session = harness.session()
    run(session.add_items(ITEMS))
    s = harness.manager.get_session_by_key(
        user_id="alice", agent="openai-agents", external_key="conversation_123"
    )
    harness.manager.update_working_memory(
        session_id=s.session_id, user_id="alice", patch={"goal": "g"}
    )
    run(session.clear_session())
    assert run(session.get_items()) == []
    run(session.add_items(ITEMS[:1]))
    assert run(session.get_items()) == ITEMS[:1]
    again = harness.manager.get_session(session_id=s.session_id, user_id="alice")
    assert again.message_count == 1
    memory = harness.manager.get_working_memory(session_id=s.session_id, user_id="alice")
    assert memory.goal == "g"


def test_a_closed_session_refuses_writes_and_stays_readable(harness: Harness) -> None:
    """No silent restore: writes to a CLOSED session raise SessionNotActive."""
    session = harness.session()
    run(session.add_items(ITEMS[:2]))
    s = harness.manager.get_session_by_key(
        user_id="alice", agent="openai-agents", external_key="conversation_123"
    )
    harness.manager.close_session(session_id=s.session_id, user_id="alice")
    with pytest.raises(SessionNotActive):
        run(session.add_items(ITEMS[2:3]))
    with pytest.raises(SessionNotActive):
        run(session.pop_item())
    with pytest.raises(SessionNotActive):
        run(session.clear_session())
    assert run(session.get_items()) == ITEMS[:2]


def test_a_bad_item_is_refused_and_nothing_of_its_batch_is_stored(harness: Harness) -> None:
    """An item that is not a JSON object raises ValidationError before any write."""
    session = harness.session()
    run(session.add_items(ITEMS[:1]))
    with pytest.raises(ValidationError) as bad:
        run(session.add_items([ITEMS[1], "not an item"]))  # type: ignore[list-item]
    assert bad.value.field == "items[1]"
    assert run(session.get_items()) == ITEMS[:1]


def test_a_runner_with_a_function_tool_stores_its_turn(harness: Harness) -> None:
    """Runner.run with a scripted model that calls a function tool: the turn is stored
    as user / call / result / answer, and the next turn's model input holds it all."""

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in ``city``."""
        return f"rain in {city}"

    model = ScriptedModel(
        [
            [function_call("get_weather", {"city": "Zürich"}, call_id="call_1")],
            [assistant_message("Rain.")],
            [assistant_message("Take an umbrella.")],
        ]
    )
    agent = Agent(name="weather", model=model, tools=[get_weather])
    session = harness.session()
    first = run(Runner.run(agent, "Weather in Zürich?", session=session, run_config=NO_TRACES))
    assert first.final_output == "Rain."
    stored = harness.messages()
    assert [m.role.value for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].tool_calls[0]["function"]["name"] == "get_weather"
    assert stored[2].tool_call_id == "call_1" and stored[2].content == "rain in Zürich"
    second = run(Runner.run(agent, "So?", session=session, run_config=NO_TRACES))
    assert second.final_output == "Take an umbrella."
    assert model.calls[-1].input[:4] == run(session.get_items(limit=6))[:4]
    assert len(model.calls[-1].input) == 5


def test_batches_over_the_limit_are_split(store: SessionStore) -> None:
    """More items than ``limits.max_batch_messages`` go in several appends (one version
    step each), all stored in order."""
    manager = SessionManager(store, limits=Limits(max_batch_messages=3))
    session = AgentSessionSession("big", backend=manager, user_id="alice")
    items = [{"role": "user", "content": str(i)} for i in range(7)]
    run(session.add_items(items))
    assert run(session.get_items()) == items
    s = manager.get_session_by_key(user_id="alice", agent="openai-agents", external_key="big")
    assert s.message_count == 7 and s.version == 4  # created at 1, then three appends


SECOND_PROCESS = textwrap.dedent(
    """
    import asyncio, json, sys
    from agents import Agent, RunConfig, Runner
    from agents.testing import ScriptedModel, assistant_message
    from agentsession import SessionManager
    from agentsession.adapters.openai_agents import AgentSessionSession

    async def main():
        with SessionManager.from_url(sys.argv[1]) as manager:
            session = AgentSessionSession("trip", backend=manager, user_id="alice")
            model = ScriptedModel([[assistant_message("Yes: you asked about Zürich.")]])
            agent = Agent(name="weather", model=model)
            result = await Runner.run(agent, "Did I ask about a city?", session=session,
                                      run_config=RunConfig(tracing_disabled=True))
            print(json.dumps({"answer": result.final_output,
                              "model_input": model.calls[0].input}))

    asyncio.run(main())
    """
)


def test_a_session_continues_in_another_process(tmp_path: Path) -> None:
    """A Runner turn with a tool call stored in SQLite; a second process opens the same
    session id and runs again: its model gets the whole first turn back, unchanged."""
    url = f"sqlite:///{tmp_path / 'sessions.db'}"

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in ``city``."""
        return f"rain in {city}"

    model = ScriptedModel(
        [
            [function_call("get_weather", {"city": "Zürich"}, call_id="call_1")],
            [assistant_message("Rain.")],
        ]
    )
    agent = Agent(name="weather", model=model, tools=[get_weather])
    with SessionManager.from_url(url, auto_migrate=True) as manager:
        session = AgentSessionSession("trip", backend=manager, user_id="alice")
        run(Runner.run(agent, "Weather in Zürich?", session=session, run_config=NO_TRACES))
        first_turn = run(session.get_items())
        session.close()
    done = subprocess.run(
        [sys.executable, "-c", SECOND_PROCESS, url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["answer"] == "Yes: you asked about Zürich."
    assert len(first_turn) == 4
    assert out["model_input"][:4] == first_turn
    assert out["model_input"][4] == {"content": "Did I ask about a city?", "role": "user"}


def test_the_adapter_imports_without_openai_agents() -> None:
    """``import agentsession`` and the adapter module need no openai-agents."""
    code = (
        "import sys; sys.modules['agents'] = None\n"
        "import agentsession, agentsession.adapters.openai_agents as m\n"
        "print(m.AgentSessionSession.__name__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "AgentSessionSession"


def test_async_manager_and_async_client_backends(store: SessionStore) -> None:
    """The same adapter over an AsyncSessionManager and an AsyncSessionClient."""
    from agentsession import AsyncSessionManager
    from agentsession.client import AsyncSessionClient

    manager = SessionManager(store)
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    app = create_app(manager, Settings(url="memory://"), keys=keys)

    async def flow(backend: Any, session_id: str) -> list[Any]:
        session = AgentSessionSession(session_id, backend=backend, user_id="alice")
        await session.add_items(ITEMS)
        popped = await session.pop_item()
        return [popped, await session.get_items(limit=2)]

    async def main() -> list[Any]:
        async with AsyncSessionClient(
            "http://t", token, transport=httpx.ASGITransport(app=app)
        ) as client:
            over_http = await flow(client, "async-http")
        return [await flow(AsyncSessionManager(manager), "async-manager"), over_http]

    expected = [ITEMS[-1], ITEMS[-3:-1]]
    assert run(main()) == [expected, expected]


def test_the_readme_example_runs_and_the_cli_shows_its_session(tmp_path: Path) -> None:
    """examples/openai_agents_session.py runs offline; ``agentsession sessions messages``
    shows its turn (the question, the tool call, its result, the answer) and ``sessions
    tools`` the calls its hooks recorded; a second run prints the same."""
    example = Path(__file__).resolve().parents[2] / "examples" / "openai_agents_session.py"
    runs = [
        subprocess.run(
            [sys.executable, str(example)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        for _ in range(2)
    ]
    assert all(done.returncode == 0 for done in runs), runs[-1].stderr
    assert runs[0].stdout == runs[1].stdout  # a second run starts over: same output
    lines = runs[1].stdout.splitlines()
    assert lines[:2] == ["Rain in Zürich: take an umbrella.", "You asked about Zürich."]
    session_id = lines[2].split()[1].rstrip(":")
    assert lines[2] == f"session {session_id}: 6 messages"
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentsession",
            "--url",
            "sqlite:///sessions.db",
            "sessions",
            "messages",
            session_id,
            "--user",
            "alice",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    for text in ("Weather in Zürich?", "get_weather()", "rain, 7°C in Zürich", "umbrella"):
        assert text in shown.stdout
    tools = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentsession",
            "--url",
            "sqlite:///sessions.db",
            "sessions",
            "tools",
            session_id,
            "--user",
            "alice",
            "--json",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tools.returncode == 0, tools.stderr
    calls = json.loads(tools.stdout)["items"]  # one per run of the example
    assert [(c["tool"], c["provider_call_id"]) for c in calls] == [("get_weather", "call_1")] * 2


def test_a_deleted_session_starts_over_under_the_same_id(harness: Harness) -> None:
    """Once the session is deleted, the adapter (which remembered its id) reads it as
    empty, and its next items start a new session under the same key."""
    session = harness.session()
    run(session.add_items(ITEMS[:2]))
    old = harness.manager.get_session_by_key(
        user_id="alice", agent="openai-agents", external_key="conversation_123"
    )
    harness.manager.delete_session(session_id=old.session_id, user_id="alice")
    assert run(session.get_items()) == []
    run(session.add_items(ITEMS[2:3]))
    assert run(session.get_items()) == ITEMS[2:3]
    new = harness.manager.get_session_by_key(
        user_id="alice", agent="openai-agents", external_key="conversation_123"
    )
    assert new.session_id != old.session_id


def test_run_hooks_keep_the_function_tool_calls_in_tool_history(harness: Harness) -> None:
    """With ``hooks=session.run_hooks()``, each function tool call of the run is recorded:
    tool, arguments, result, and the model's call id as ``provider_call_id``."""

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in ``city``."""
        return f"rain in {city}"

    model = ScriptedModel(
        [
            [function_call("get_weather", {"city": "Zürich"}, call_id="call_1")],
            [function_call("get_weather", {"city": "Bern"}, call_id="call_2")],
            [assistant_message("Rain in both.")],
        ]
    )
    agent = Agent(name="weather", model=model, tools=[get_weather])
    session = harness.session()
    hooks = session.run_hooks()
    run(Runner.run(agent, "Zürich, Bern?", session=session, hooks=hooks, run_config=NO_TRACES))
    s = harness.manager.get_session_by_key(
        user_id="alice", agent="openai-agents", external_key="conversation_123"
    )
    calls = harness.manager.get_tool_history(session_id=s.session_id, user_id="alice").items
    assert [(c.tool, c.arguments, c.result, c.provider_call_id) for c in calls] == [
        ("get_weather", {"city": "Zürich"}, "rain in Zürich", "call_1"),
        ("get_weather", {"city": "Bern"}, "rain in Bern", "call_2"),
    ]


def test_run_hooks_time_each_call_from_its_start(harness: Harness) -> None:
    """The recorded start is the time ``on_tool_start`` saw, not the end: a tool that
    sleeps 20 ms is recorded with a duration of at least 15 ms."""

    @function_tool
    def slow() -> str:
        """Sleeps 20 ms."""
        time.sleep(0.02)
        return "done"

    model = ScriptedModel(
        [[function_call("slow", {}, call_id="call_1")], [assistant_message("ok")]]
    )
    agent = Agent(name="slow", model=model, tools=[slow])
    session = harness.session()
    run(Runner.run(agent, "go", session=session, hooks=session.run_hooks(), run_config=NO_TRACES))
    [call] = tool_history(harness)
    assert call.duration_ms >= 15


class Forecast(BaseModel):
    """A structured tool result."""

    city: str
    celsius: float


@pytest.mark.parametrize("call_id", ["call/1", "call 1", "c" * 129])
def test_run_hooks_record_a_call_whose_id_or_result_the_store_cannot_hold(
    harness: Harness, call_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A model call id outside ``A-Za-z0-9._:-``/1-128 is left out of the record; a
    result that is not JSON (NaN) is stored as its text, a pydantic model as its JSON
    form; the run ends normally."""

    @function_tool
    def nan() -> float:
        """Not a number."""
        return float("nan")

    @function_tool
    def forecast() -> Forecast:
        """A forecast."""
        return Forecast(city="Zürich", celsius=7.5)

    model = ScriptedModel(
        [
            [function_call("nan", {}, call_id=call_id)],
            [function_call("forecast", {}, call_id="call_2")],
            [assistant_message("Done.")],
        ]
    )
    agent = Agent(name="odd", model=model, tools=[nan, forecast])
    session = harness.session()
    hooks = session.run_hooks()
    done = run(Runner.run(agent, "go", session=session, hooks=hooks, run_config=NO_TRACES))
    assert done.final_output == "Done."
    assert [(c.tool, c.result, c.provider_call_id) for c in tool_history(harness)] == [
        ("nan", "nan", None),
        ("forecast", {"city": "Zürich", "celsius": 7.5}, "call_2"),
    ]
    assert "not recorded" not in caplog.text


def test_run_hooks_log_a_call_they_cannot_record_and_the_run_goes_on(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """A call the store refuses (a tool name outside ``A-Za-z0-9._:-``) is logged as not
    recorded; the run still ends with its answer."""

    @function_tool(name_override="get weather")
    def get_weather() -> str:
        """Rain."""
        return "rain"

    model = ScriptedModel(
        [[function_call("get weather", {}, call_id="call_1")], [assistant_message("Rain.")]]
    )
    agent = Agent(name="weather", model=model, tools=[get_weather])
    session = harness.session()
    with caplog.at_level(logging.WARNING, "agentsession.adapters.openai_agents_hooks"):
        done = run(
            Runner.run(
                agent, "go", session=session, hooks=session.run_hooks(), run_config=NO_TRACES
            )
        )
    assert done.final_output == "Rain."
    assert tool_history(harness) == []
    assert "tool call 'get weather' ('call_1') not recorded" in caplog.text


def test_run_hooks_stop_the_run_when_the_session_was_closed(harness: Harness) -> None:
    """A session closed while its tool runs: recording the call raises SessionNotActive,
    which the Runner wraps in ``UserError``."""
    from agents.exceptions import UserError

    session = harness.session()

    @function_tool
    def close() -> str:
        """Closes the session."""
        s = harness.manager.get_session_by_key(
            user_id="alice", agent="openai-agents", external_key="conversation_123"
        )
        harness.manager.close_session(session_id=s.session_id, user_id="alice")
        return "closed"

    model = ScriptedModel(
        [[function_call("close", {}, call_id="call_1")], [assistant_message("x")]]
    )
    agent = Agent(name="closer", model=model, tools=[close])
    with pytest.raises(UserError) as stopped:
        run(
            Runner.run(
                agent, "go", session=session, hooks=session.run_hooks(), run_config=NO_TRACES
            )
        )
    assert isinstance(stopped.value.__cause__, SessionNotActive)


def test_run_hooks_keep_no_start_time_of_a_call_that_raised(harness: Harness) -> None:
    """A tool whose exception ends the run never reaches ``on_tool_end``: its start time
    goes with the call, so a later call under the same model id cannot inherit it."""

    @function_tool(failure_error_function=None)
    def broken() -> str:
        """Fails."""
        raise RuntimeError("down")

    model = ScriptedModel([[function_call("broken", {}, call_id="call_1")]])
    agent = Agent(name="broken", model=model, tools=[broken])
    session = harness.session()
    hooks = session.run_hooks()
    with pytest.raises(Exception, match="down"):
        run(Runner.run(agent, "go", session=session, hooks=hooks, run_config=NO_TRACES))
    gc.collect()
    assert len(hooks._started) == 0  # type: ignore[attr-defined]
    assert tool_history(harness) == []


def test_messages_from_other_writers_come_back_as_response_items(harness: Harness) -> None:
    """Messages appended without an ``item`` (chat-completions shape, as the library,
    HTTP or restore's synthetic tool results write them) come back as items the Runner
    can send: role/content, one ``function_call`` per tool call, a
    ``function_call_output``; a limit still counts items; a Runner run continues them."""
    session = harness.session()
    run(session.add_items(ITEMS[1:2]))
    s = harness.manager.get_session_by_key(
        user_id="alice", agent="openai-agents", external_key="conversation_123"
    )
    call = {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    harness.manager.append_messages(
        session_id=s.session_id,
        user_id="alice",
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "Hi"}], "name": "al"},
            {"role": "assistant", "content": "Looking.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_9", "content": "tool call interrupted"},
        ],
    )
    converted = [
        ITEMS[1],
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Looking."},
        {"type": "function_call", "call_id": "call_9", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_9", "output": "tool call interrupted"},
    ]
    assert run(session.get_items()) == converted
    assert run(session.get_items(limit=2)) == converted[-2:]
    model = ScriptedModel([[assistant_message("Go on.")]])
    agent = Agent(name="a", model=model)
    run(Runner.run(agent, "And?", session=session, run_config=NO_TRACES))
    assert model.calls[0].input[: len(converted)] == converted
    run(session.pop_item())  # the answer
    run(session.pop_item())  # the question
    assert run(session.pop_item()) == converted[-1]


def test_an_unsupported_backend_is_refused_at_once(store: SessionStore) -> None:
    """A backend of another type (here a store, a common slip) raises TypeError in the
    constructor, not an AttributeError at the first call."""
    with pytest.raises(TypeError, match="backend must be a SessionManager"):
        AgentSessionSession("s", backend=store, user_id="alice")  # type: ignore[arg-type]


def test_get_items_reads_past_the_largest_page(store: SessionStore) -> None:
    """With pages of at most 3, all 8 items, the newest 5, and all again (limit -1)
    come back: the adapter walks the pages."""
    limits = Limits(max_page_size=3, default_page_size=3)
    session = AgentSessionSession(
        "paged", backend=SessionManager(store, limits=limits), user_id="alice"
    )
    items = [{"role": "user", "content": str(i)} for i in range(8)]
    run(session.add_items(items))
    assert run(session.get_items()) == items
    assert run(session.get_items(5)) == items[3:]
    assert run(session.get_items(-1)) == items


def tool_history(harness: Harness, session_id: str = "conversation_123") -> list[Any]:
    """The recorded tool calls of the session keyed ``session_id``, oldest first."""
    s = harness.manager.get_session_by_key(
        user_id="alice", agent="openai-agents", external_key=session_id
    )
    return harness.manager.get_tool_history(session_id=s.session_id, user_id="alice").items


#: Twelve items of one conversation, and what a compaction makes of them.
TWELVE = [
    {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(12)
]
COMPACTED = [
    {"role": "user", "content": "turn 10"},
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "summary of turns 0-11"},
]


class Compactor:
    """The ``responses.compact`` call of an OpenAI client, answering ``output``
    (``COMPACTED`` by default; the compaction session needs nothing else of the client)."""

    def __init__(self, output: list[dict[str, Any]] = COMPACTED) -> None:
        self.responses = self
        self.output = output

    async def compact(self, **request: Any) -> Any:
        """The compacted output, without usage."""
        return SimpleNamespace(output=[dict(i) for i in self.output], usage=None)


def compaction(session: AgentSessionSession, output: list[dict[str, Any]] = COMPACTED) -> Any:
    """openai-agents' compaction session over ``session``, with a :class:`Compactor`
    answering ``output``."""
    return OpenAIResponsesCompactionSession(
        session.session_id, session, client=Compactor(output), model="gpt-4.1"
    )


def test_compaction_replaces_the_history_in_one_step(harness: Harness) -> None:
    """openai-agents' compaction session replaces the twelve items with the compacted
    ones through the adapter's atomic replace: one ``message.replaced`` version step,
    no truncate in between."""
    session = harness.session()
    run(session.add_items(TWELVE))
    run(compaction(session).run_compaction({"force": True}))
    assert run(session.get_items()) == COMPACTED
    s = harness.manager.get_session_by_key(
        user_id="alice", agent="openai-agents", external_key="conversation_123"
    )
    actions = [
        e.action
        for e in harness.manager.get_audit_log(session_id=s.session_id, user_id="alice").items
    ]
    assert actions[-2:] == ["message.appended", "message.replaced"]


def test_c25_compaction_to_more_items_than_one_batch(harness: Harness) -> None:
    """A compaction of 1500 items into 1002, more than ``max_batch_messages`` (1000)
    allows in one replace: the adapter declines its atomic hook and openai-agents
    clears and adds, so the history is the 1002 items (it raised before)."""
    items = [{"role": "user", "content": f"item {i}"} for i in range(1500)]
    compacted = [{"role": "assistant", "content": f"kept {i}"} for i in range(1002)]
    session = harness.session()
    run(session.add_items(items))
    run(compaction(session, compacted).run_compaction({"force": True}))
    assert run(session.get_items()) == compacted


def test_c25_5_compaction_failing_between_clear_and_add_keeps_the_old_items(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outage when the compacted items are stored (every insert of messages fails,
    so openai-agents' own restore fails too): the twelve old items remain, never none."""

    def outage(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("the store is down")

    session = harness.session()
    run(session.add_items(TWELVE))
    monkeypatch.setattr(service_messages, "insert_messages", outage)
    with pytest.raises(AgentSessionError):
        run(compaction(session).run_compaction({"force": True}))
    monkeypatch.undo()
    assert run(session.get_items()) == TWELVE


CRASHING_COMPACTION = textwrap.dedent(
    """
    import asyncio, os, sys
    sys.path.insert(0, sys.argv[2])
    from agentsession import SessionManager
    from agentsession.adapters.openai_agents import AgentSessionSession
    from agentsession.service import messages
    from test_openai_agents import compaction

    # The process dies the moment the compacted items are stored.
    messages.insert_messages = lambda *args, **kwargs: os._exit(9)
    manager = SessionManager.from_url(sys.argv[1])
    session = AgentSessionSession("trip", backend=manager, user_id="alice")
    asyncio.run(compaction(session).run_compaction({"force": True}))
    """
)


def test_c25_5_compaction_killed_between_clear_and_add_keeps_the_old_items(tmp_path: Path) -> None:
    """A process killed while compaction stores the compacted items: the twelve old
    items remain in the SQLite file, never none."""
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as manager:
        run(AgentSessionSession("trip", backend=manager, user_id="alice").add_items(TWELVE))
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_COMPACTION, url, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 9, done.stderr
    with SessionManager.from_url(url) as manager:
        session = AgentSessionSession("trip", backend=manager, user_id="alice")
        assert run(session.get_items()) == TWELVE
