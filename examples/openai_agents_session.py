"""An openai-agents agent whose session lives in agentsession, with no network: a
scripted model calls a function tool, then answers; a second turn sees the first.

    pip install 'agentsession[openai-agents]'   # from a checkout: pip install -e '.[openai-agents]'
    python examples/openai_agents_session.py            # stores in ./sessions.db
    agentsession --url sqlite:///sessions.db sessions messages SESSION_ID --user alice
    agentsession --url sqlite:///sessions.db sessions tools SESSION_ID --user alice

Each run starts the conversation over (``clear_session``), so it always ends with the
same 6 messages; the tool history keeps one ``get_weather`` call per run. The lines
that differ from the SQLiteSession version are marked "switch".
"""

from __future__ import annotations

import asyncio
import sys

from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from agentsession import AsyncSessionManager  # switch
from agentsession.adapters.openai_agents import AgentSessionSession  # switch


@function_tool
def get_weather(city: str) -> str:
    """The weather in ``city`` (a stand-in for a real lookup)."""
    return f"rain, 7°C in {city}"


async def main(url: str) -> None:
    """Run two turns of one session on the store at ``url`` and print its id."""
    model = ScriptedModel(
        [
            [function_call("get_weather", {"city": "Zürich"}, call_id="call_1")],
            [assistant_message("Rain in Zürich: take an umbrella.")],
            [assistant_message("You asked about Zürich.")],
        ]
    )
    agent = Agent(name="weather", model=model, tools=[get_weather])
    config = RunConfig(tracing_disabled=True)  # no trace export: no network
    # One manager per process, shared by every session; closed (with its store) on exit.
    async with AsyncSessionManager.from_url(url, auto_migrate=True) as manager:  # switch
        # switch: was SQLiteSession("trip-42", "agents.db"); a new file, not that one
        session = AgentSessionSession("trip-42", backend=manager, user_id="alice")
        await session.clear_session()  # start over on every run of the example
        hooks = session.run_hooks()  # optional: tool calls into the session's tool history
        first = await Runner.run(
            agent, "Weather in Zürich?", session=session, hooks=hooks, run_config=config
        )
        second = await Runner.run(
            agent, "Which city?", session=session, hooks=hooks, run_config=config
        )
        stored = await manager.get_session_by_key(
            user_id="alice", agent="openai-agents", external_key="trip-42"
        )
    print(first.final_output)
    print(second.final_output)
    print(f"session {stored.session_id}: {stored.message_count} messages")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "sqlite:///sessions.db"))
