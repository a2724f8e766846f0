"""openai-agents ``RunHooks`` that keep each function tool call a run makes in the
session's tool history (:meth:`AgentSessionSession.run_hooks`).

Imported only by ``run_hooks()``, so the adapter module itself needs no openai-agents.
"""

from __future__ import annotations

import json
import logging
import weakref
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agents import Agent, RunContextWrapper, RunHooks, Tool
from agents.tool_context import ToolContext
from pydantic import BaseModel

from ..errors import SessionNotActive, UnsupportedValue
from ..fieldlimits import CALL_ID_CHARS
from ..ids import is_label
from ..jsonvalues import check_json

if TYPE_CHECKING:
    from .openai_agents import AgentSessionSession

__all__ = ["ToolHistoryHooks"]

logger = logging.getLogger(__name__)


class ToolHistoryHooks(RunHooks[Any]):
    """Records every function tool call of a run with ``record_tool_call``: the tool's
    name, its arguments (the JSON object the model sent; other text as
    ``{"arguments": text}``), its result (:func:`_result`: a JSON value as is, a
    pydantic model as its JSON form, anything else as its ``str``), start and end time,
    and the model's call id as ``provider_call_id`` (models reuse ids, so it is not our
    ``call_id``; an id the store cannot hold, outside 1-128 chars of ``A-Za-z0-9._:-``,
    is left out). Other kinds of tools (hosted, computer, shell) are not recorded.

    A tool that raised is answered to the model by openai-agents' failure handler,
    whose error text reaches ``on_tool_end`` as the result: hooks get no signal that
    tells it from an ordinary result, so such a call is recorded with status ``ok`` and
    that text. A tool whose exception ends the run is not recorded.

    Tool history is an extra beside the conversation: a call that cannot be recorded is
    logged (logger ``agentsession.adapters.openai_agents_hooks``, WARNING) and the run
    goes on; only :class:`~agentsession.SessionNotActive` stops it.

    Args:
        session: the adapter session whose tool history gets the calls.
    """

    def __init__(self, session: AgentSessionSession) -> None:
        self._session = session
        # Keyed by the call's own context, not the model's call id (models reuse ids):
        # the start of a call that raised goes with its context, never to a later call.
        self._started: weakref.WeakKeyDictionary[ToolContext[Any], datetime] = (
            weakref.WeakKeyDictionary()
        )

    async def on_tool_start(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool
    ) -> None:
        """Note when the call started."""
        if isinstance(context, ToolContext):
            self._started[context] = datetime.now(UTC)

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        """Record the finished call.

        Raises:
            SessionNotActive: the session is CLOSED or EXPIRED. The Runner wraps an
                exception raised by a hook in ``agents.exceptions.UserError`` (the
                original is its ``__cause__``). Any other failure to record is logged.
        """
        if not isinstance(context, ToolContext):
            return
        call_id = context.tool_call_id
        try:
            await self._session.record_tool_call(
                tool=context.tool_name,
                arguments=_arguments(context.tool_arguments),
                result=_result(result),
                started_at=self._started.pop(context, None),
                ended_at=datetime.now(UTC),
                provider_call_id=call_id if is_label(call_id, CALL_ID_CHARS) else None,
            )
        except SessionNotActive:
            raise
        except Exception:
            logger.warning(
                "tool call %r (%r) not recorded in tool history",
                context.tool_name,
                call_id,
                exc_info=True,
            )


def _arguments(text: str) -> dict[str, Any]:
    """The call's arguments as a JSON object."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"arguments": text}


def _result(value: object) -> Any:
    """A tool's result as a storable JSON value: a JSON value as is, a pydantic model
    as ``model_dump(mode="json")``, anything else (NaN included) as its ``str``."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    try:
        check_json(value, field="result")
    except UnsupportedValue:
        return str(value)
    return value
