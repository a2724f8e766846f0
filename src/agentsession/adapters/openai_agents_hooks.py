"""openai-agents ``RunHooks`` that keep each function tool call a run makes in the
session's tool history (:meth:`AgentSessionSession.run_hooks`).

Imported only by ``run_hooks()``, so the adapter module itself needs no openai-agents.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agents import Agent, RunContextWrapper, RunHooks, Tool
from agents.tool_context import ToolContext

if TYPE_CHECKING:
    from .openai_agents import AgentSessionSession

__all__ = ["ToolHistoryHooks"]


class ToolHistoryHooks(RunHooks[Any]):
    """Records every function tool call of a run with ``record_tool_call``: the tool's
    name, its arguments (the JSON object the model sent; other text as
    ``{"arguments": text}``), its result (a string, number, bool or None as is,
    anything else as its ``str``), start and end time, and the model's call id as
    ``provider_call_id`` (models reuse ids, so it is not our ``call_id``). Other kinds
    of tools (hosted, computer, shell) are not recorded.

    Args:
        session: the adapter session whose tool history gets the calls.
    """

    def __init__(self, session: AgentSessionSession) -> None:
        self._session = session
        self._started: dict[str, datetime] = {}

    async def on_tool_start(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool
    ) -> None:
        """Note when the call started."""
        if isinstance(context, ToolContext):
            self._started[context.tool_call_id] = datetime.now(UTC)

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        """Record the finished call.

        Raises:
            SessionNotActive, ValidationError (a tool name outside ``A-Za-z0-9._:-``),
            PayloadTooLarge: from ``record_tool_call``; the Runner passes them on.
        """
        if not isinstance(context, ToolContext):
            return
        await self._session.record_tool_call(
            tool=context.tool_name,
            arguments=_arguments(context.tool_arguments),
            result=result if isinstance(result, str | int | float | bool | None) else str(result),
            started_at=self._started.pop(context.tool_call_id, None),
            ended_at=datetime.now(UTC),
            provider_call_id=context.tool_call_id,
        )


def _arguments(text: str) -> dict[str, Any]:
    """The call's arguments as a JSON object."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"arguments": text}
