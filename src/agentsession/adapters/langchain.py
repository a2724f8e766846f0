"""LangChain's chat message history over agentsession: :class:`AgentSessionChatMessageHistory`.

A drop-in for a ``BaseChatMessageHistory`` (e.g. ``RedisChatMessageHistory``); the
switch is the import and the constructor::

    from agentsession.adapters.langchain import AgentSessionChatMessageHistory
    history = AgentSessionChatMessageHistory("conversation_123", backend=manager, user_id="alice")

Mapping (docs/adapters.md has the table):

* The LangChain ``session_id`` (any string) is the session's external key under
  ``(user_id, agent)``; the first ``add_messages`` creates the session, and reading or
  clearing a session never written answers like an empty one.
* Each LangChain message is one message: ``role`` (human ``user``, AI ``assistant``,
  tool ``tool``, system ``system``, a ``ChatMessage`` its own role when it is one of
  ours), ``content`` (its text), ``tool_calls`` of an AI message in the
  chat-completions shape, ``tool_call_id`` of a tool message, and the original whole
  under ``lc`` (``message_to_dict``), read back with ``messages_from_dict``, so every
  field (``additional_kwargs``, ``id``, ``response_metadata``...) returns as it went in.
  A message another writer appended (no ``lc``) is converted by its role
  (:func:`lc_message_of`).
* ``clear`` truncates the history: the session, its working memory, tool history and
  audit log stay.

The sync methods (``messages``, ``add_messages``, ``clear``) run the adapter's async
calls to their end on an event loop of their own (in a worker thread when the calling
thread already runs one), so they work with every backend but an
``AsyncSessionClient``, whose connections belong to the caller's loop: with it, use the
async methods. ``langchain_core`` is required (``pip install 'agentsession[langchain]'``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

from ..client import AsyncSessionClient
from ..errors import UnsupportedValue, ValidationError
from ..models import Message, Role
from ..service import Limits
from .backend import Backend, KeyedSession

__all__ = ["AgentSessionChatMessageHistory", "lc_message_of", "message_of_lc"]

T = TypeVar("T")

#: Our role of each LangChain message type (chunks as their message).
_ROLES = {
    "human": "user",
    "HumanMessageChunk": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "system": "system",
    "SystemMessageChunk": "system",
    "tool": "tool",
    "ToolMessageChunk": "tool",
    "function": "tool",
    "FunctionMessageChunk": "tool",
}


class AgentSessionChatMessageHistory(BaseChatMessageHistory):
    """A LangChain ``BaseChatMessageHistory`` stored in agentsession (see the module
    docstring).

    Args:
        session_id: the LangChain session id, any string; the session's external key
            under ``(user_id, agent)``.
        backend: an AsyncSessionManager (share one per process), a SessionManager
            (wrapped into an AsyncSessionManager of this history's own; :meth:`close`
            lets its threads go), a SessionClient or an AsyncSessionClient (async
            methods only). The caller owns it (and closes it).
        user_id: the owner of the session (with a client: the API key's user).
        agent: the agent name sessions are filed under.
        title, ttl_seconds: given to the session when the first ``add_messages``
            creates it.
        limits: the backend's :class:`~agentsession.Limits` (batch and page sizes). A
            manager's own by default; the server defaults for a client.

    Raises:
        ValidationError: ``session_id`` is not a string.
        TypeError: ``backend`` is none of the four.
    """

    def __init__(
        self,
        session_id: str,
        *,
        backend: Backend,
        user_id: str,
        agent: str = "langchain",
        title: str | None = None,
        ttl_seconds: float | None = None,
        limits: Limits | None = None,
    ) -> None:
        if not isinstance(session_id, str):
            raise ValidationError("session_id must be a string", field="session_id")
        self._keyed = KeyedSession(
            backend,
            user_id=user_id,
            agent=agent,
            external_key=session_id,
            title=title,
            ttl_seconds=ttl_seconds,
            limits=limits,
        )
        self._async_only = isinstance(backend, AsyncSessionClient)
        self.session_id, self.user_id, self.agent = session_id, user_id, agent

    # -- async ------------------------------------------------------------------------------

    async def aget_messages(self) -> list[BaseMessage]:
        """Every message, oldest first (:func:`lc_message_of`); ``[]`` for a session
        never written."""
        return [lc_message_of(m) for m in await self._keyed.newest(None)]

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` in order, creating the session on its first write.

        One ``append_messages`` call (atomic) per ``limits.max_batch_messages``
        messages; a longer list is split, and a failure part-way leaves the earlier
        parts stored. An empty list writes nothing.

        Raises:
            ValidationError: an element that is not a LangChain message.
            PayloadTooLarge / UnsupportedValue: a message too big, or holding a value
                JSON cannot carry (nothing of its part is stored).
            SessionNotActive: the session is CLOSED or EXPIRED (restore it first).
        """
        if not messages:
            return
        stored = [message_of_lc(m, f"messages[{i}]") for i, m in enumerate(messages)]
        size = self._keyed.limits.max_batch_messages

        async def append(sid: str) -> None:
            for start in range(0, len(stored), size):
                await self._keyed.backend.append_messages(
                    session_id=sid, user_id=self.user_id, messages=stored[start : start + size]
                )

        await self._keyed.with_session(append, create=True)

    async def aclear(self) -> None:
        """Remove every message; the session stays (with its working memory, tool
        history and audit log).

        Raises:
            SessionNotActive: the session is CLOSED or EXPIRED.
        """

        async def clear(sid: str) -> None:
            await self._keyed.backend.truncate_messages(
                session_id=sid, user_id=self.user_id, after_seq=0
            )

        await self._keyed.with_session(clear)

    # -- sync -------------------------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message, oldest first (as :meth:`aget_messages`)."""
        return self._blocking(self.aget_messages())

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` (as :meth:`aadd_messages`, with its errors)."""
        self._blocking(self.aadd_messages(messages))

    def clear(self) -> None:
        """Remove every message (as :meth:`aclear`)."""
        self._blocking(self.aclear())

    def close(self) -> None:
        """Let go of the worker threads started around a sync manager. The backend
        stays open: its caller owns it. The history stays usable."""
        self._keyed.close()

    def _blocking(self, call: Coroutine[Any, Any, T]) -> T:
        """Run ``call`` to its end on a loop of its own, from sync code.

        Raises:
            TypeError: the backend is an AsyncSessionClient.
        """
        if self._async_only:
            call.close()
            raise TypeError(
                "an AsyncSessionClient backend serves the async methods only (aget_messages, "
                "aadd_messages, aclear); use a SessionClient for sync code"
            )
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(call)
        # A sync call from inside a running loop: that loop cannot run another.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, call).result()


def message_of_lc(message: Any, field: str = "message") -> dict[str, Any]:
    """The message that stores one LangChain message: ``{"role", "content", "lc"}``
    plus ``tool_calls`` (an AI message with tool calls) or ``tool_call_id`` (a tool
    message). ``content`` is the message's text; ``lc`` is ``message_to_dict(message)``.

    Args:
        message: a ``BaseMessage``.
        field: the argument's name in errors.

    Raises:
        ValidationError: ``message`` is not a ``BaseMessage``.
        UnsupportedValue: an AI message's tool call ``args`` JSON cannot carry.
    """
    if not isinstance(message, BaseMessage):
        raise ValidationError(f"{field} must be a LangChain message (BaseMessage)", field=field)
    role = _ROLES.get(message.type)
    if role is None:
        chat_role = getattr(message, "role", None)
        role = chat_role if chat_role in Role._value2member_map_ else "assistant"
    stored: dict[str, Any] = {"role": role, "content": str(message.text)}
    if isinstance(message, AIMessage) and message.tool_calls:
        stored["tool_calls"] = [
            {
                "id": call.get("id"),
                "type": "function",
                "function": {"name": call["name"], "arguments": _arguments(call["args"], field)},
            }
            for call in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        stored["tool_call_id"] = message.tool_call_id
    stored["lc"] = message_to_dict(message)
    return stored


def _arguments(args: Any, field: str) -> str:
    """A tool call's ``args`` as JSON text (the chat-completions ``arguments``).

    Raises:
        UnsupportedValue: ``args`` holds a value JSON cannot carry.
    """
    try:
        return json.dumps(args)
    except (TypeError, ValueError):
        raise UnsupportedValue(
            f"{field}.tool_calls: args hold a value JSON cannot carry", field=f"{field}.tool_calls"
        ) from None


def lc_message_of(message: Message) -> BaseMessage:
    """The LangChain message a stored message stands for: its ``lc``, read back with
    ``messages_from_dict``. A message appended by other means (no ``lc``, or an ``lc``
    that is not a LangChain message dict) is converted by role: ``user`` to
    ``HumanMessage``, ``assistant`` to ``AIMessage`` (its function ``tool_calls`` as
    LangChain tool calls; arguments that are not a JSON object as ``{}``), ``tool`` to
    ``ToolMessage`` (``tool_call_id``), ``system`` and ``developer`` to
    ``SystemMessage``; content as stored when it is text or a list of parts, else ``""``.
    """
    payload = message.payload()
    lc = payload.get("lc")
    if isinstance(lc, Mapping):
        try:
            return messages_from_dict([dict(lc)])[0]
        except (KeyError, TypeError, ValueError):  # another writer's unrelated ``lc``
            pass
    content: Any = message.content if isinstance(message.content, (str, list)) else ""
    if message.role is Role.USER:
        return HumanMessage(content=content)
    if message.role is Role.TOOL:
        return ToolMessage(content=content, tool_call_id=message.tool_call_id or "")
    if message.role is Role.ASSISTANT:
        calls = [_tool_call(c) for c in message.tool_calls or []]
        return AIMessage(content=content, tool_calls=[c for c in calls if c is not None])
    return SystemMessage(content=content)


def _tool_call(call: Mapping[str, Any]) -> dict[str, Any] | None:
    """The LangChain tool call of one chat-completions tool call; None for another
    kind of call."""
    function = call.get("function")
    if not isinstance(function, Mapping):
        return None
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {}
    return {
        "name": str(function.get("name") or ""),
        "args": arguments if isinstance(arguments, dict) else {},
        "id": call.get("id") if isinstance(call.get("id"), str) else None,
        "type": "tool_call",
    }
