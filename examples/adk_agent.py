"""A Google ADK agent whose sessions live in agentsession (SQLite), no network needed.

The model is scripted (:class:`ScriptedModel`): for each user message it calls the tool
``remember`` with the message, then answers with the list of things remembered. The tool
writes session state (``last``) and user state (``user:items``); the answer goes to
``temp:answer`` (``output_key``), which ADK keeps for the run only. Run it twice: the
second run continues the same session from the file::

    python examples/adk_agent.py sessions.db "buy milk"
    python examples/adk_agent.py sessions.db "call mom"
    agentsession --url sqlite:///sessions.db sessions list --user alice
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import Runner
from google.adk.tools import ToolContext
from google.genai import types

from agentsession import AsyncSessionManager
from agentsession.adapters.adk import AgentSessionService

APP, USER, SESSION = "notes", "alice", "notes-1"


class ScriptedModel(BaseLlm):
    """A model without a network: a tool call for a user turn, a text after a tool's
    response (listing what the model saw remembered so far)."""

    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1].parts or []
        response = next((p.function_response for p in last if p.function_response), None)
        if response is None:
            text = next((p.text for p in last if p.text), "")
            call = types.FunctionCall(name="remember", args={"item": text})
            part = types.Part(function_call=call)
            yield LlmResponse(content=types.Content(role="model", parts=[part]))
            return
        items = (response.response or {}).get("items", [])
        answer = f"I remember: {', '.join(items)} ({len(llm_request.contents)} turns seen)"
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=answer)]))


def remember(item: str, tool_context: ToolContext) -> dict[str, Any]:
    """Remember ``item`` for this user (state ``user:items``) and as this session's
    ``last``; returns everything remembered."""
    items = [*tool_context.state.get("user:items", []), item]
    tool_context.state["user:items"] = items
    tool_context.state["last"] = item
    return {"items": items}


def runner(manager: AsyncSessionManager) -> Runner:
    """The agent's Runner over agentsession: the switch from ADK's own service is the
    ``session_service`` argument."""
    agent = LlmAgent(
        name="notes", model=ScriptedModel(), tools=[remember], output_key="temp:answer"
    )
    return Runner(app_name=APP, agent=agent, session_service=AgentSessionService(manager))


async def turn(db: str, text: str) -> str:
    """One user turn in the session ``SESSION`` of the SQLite file ``db`` (created on
    first use); returns the agent's answer."""
    manager = AsyncSessionManager.from_url(f"sqlite:///{db}", auto_migrate=True)
    try:
        run = runner(manager)
        service = run.session_service
        if await service.get_session(app_name=APP, user_id=USER, session_id=SESSION) is None:
            await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
        answer = ""
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for event in run.run_async(user_id=USER, session_id=SESSION, new_message=message):
            if event.is_final_response() and event.content and event.content.parts:
                answer = event.content.parts[0].text or ""
        return answer
    finally:
        await manager.close()


if __name__ == "__main__":
    print(json.dumps({"answer": asyncio.run(turn(sys.argv[1], sys.argv[2]))}))
