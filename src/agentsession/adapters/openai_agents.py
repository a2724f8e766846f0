"""The openai-agents ``Session`` protocol over agentsession: :class:`AgentSessionSession`.

A drop-in for ``agents.SQLiteSession``; the switch is the import and the constructor::

    from agentsession.adapters.openai_agents import AgentSessionSession
    session = AgentSessionSession("conversation_123", backend=manager, user_id="alice")
    result = await Runner.run(agent, "What city is the Golden Gate Bridge in?", session=session)

The backend is a :class:`~agentsession.SessionManager` (wrapped into an
:class:`~agentsession.AsyncSessionManager`, so store I/O stays off the event loop), an
``AsyncSessionManager``, or the HTTP client (:class:`~agentsession.client.SessionClient`,
its calls run in worker threads, or :class:`~agentsession.client.AsyncSessionClient`).

Mapping (docs/adapters.md has the table and the pitfalls):

* The openai-agents ``session_id`` (any string) is the session's external key under
  ``(user_id, agent)``. The session is created by the first ``add_items``
  (``open_session``, safe against a concurrent first write); reading, popping or
  clearing a session never written answers like an empty one.
* Each item is one message: the item whole under ``item``, returned unchanged (the
  Runner fingerprints items to match a session's tail), beside fields derived for
  agentsession's viewer and windows: ``role``, ``content`` (the item's text),
  ``tool_calls`` of a ``function_call`` / ``custom_tool_call``, ``tool_call_id`` of an
  output item.
  A message another writer appended (no ``item``) is converted to items
  (:func:`items_of`).
* ``get_items(limit)`` answers exactly the newest ``limit`` items (no widening to whole
  tool-call groups); ``pop_item`` is ``pop_message``; ``clear_session`` truncates the
  history and keeps the session, its working memory and its audit log.
* Compaction: ``OpenAIResponsesCompactionSession`` over this adapter replaces the
  history through :meth:`AgentSessionSession._atomic_replace_items`, the SDK's hook
  for it: one ``replace_messages`` transaction, so a crash or an outage between
  removing the old items and storing the compacted ones cannot leave the session
  empty.
* ``run_hooks()`` gives ``RunHooks`` that record each function tool call of a run in
  the session's tool history (:mod:`agentsession.adapters.openai_agents_hooks`).
* A CLOSED or EXPIRED session is not restored behind the caller's back: a write raises
  :class:`~agentsession.SessionNotActive`, which the Runner passes on.

``agents`` is imported only under ``TYPE_CHECKING`` or inside the methods that need it,
so this module imports without openai-agents installed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from ..errors import ValidationError
from ..models import Message, Role
from ..service import Limits
from .backend import Backend, KeyedSession

if TYPE_CHECKING:
    from agents import RunHooks
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings

__all__ = ["AgentSessionSession", "items_of", "message_of_item"]

#: Item roles kept as the message's role; any other item is filed under ``assistant``.
_ROLES = frozenset({"system", "developer", "user", "assistant"})


class AgentSessionSession:
    """An openai-agents ``Session`` stored in agentsession (see the module docstring).

    Args:
        session_id: the openai-agents session id, any string; the session's external
            key under ``(user_id, agent)``.
        backend: an AsyncSessionManager (share one per process among all adapter
            sessions), a SessionManager (wrapped into an AsyncSessionManager of this
            adapter's own, with its own worker threads), a SessionClient or an
            AsyncSessionClient. The caller owns it (and closes it).
        user_id: the owner of the session (with a client: the API key's user).
        agent: the agent name sessions are filed under.
        session_settings: openai-agents ``SessionSettings`` (or a dict of its fields);
            its ``limit`` is the default of :meth:`get_items`.
        title, ttl_seconds: given to the session when the first ``add_items`` creates it.
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
        agent: str = "openai-agents",
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        title: str | None = None,
        ttl_seconds: float | None = None,
        limits: Limits | None = None,
    ) -> None:
        from agents.memory.session_settings import SessionSettings, coerce_session_settings

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
        self.session_id = session_id
        self.session_settings: SessionSettings | None = (
            coerce_session_settings(
                dict(session_settings)
                if isinstance(session_settings, Mapping)
                else session_settings
            )
            if session_settings is not None
            else SessionSettings()
        )
        self.user_id, self.agent = user_id, agent

    # -- the Session protocol ------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The newest ``limit`` items, oldest first, exactly as added.

        Args:
            limit: how many; None = ``session_settings.limit``, and None there = all. 0
                gives ``[]``; a negative limit gives all (as ``SQLiteSession``).

        Returns:
            The items (:func:`items_of`); ``[]`` for a session never written.
        """
        from agents.memory.session_settings import resolve_session_limit

        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted == 0:
            return []
        if wanted is not None and wanted < 0:
            wanted = None
        messages = await self._keyed.newest(wanted)
        items = [item for m in messages for item in items_of(m)]
        # A message from another writer may stand for several items: still exactly `wanted`.
        return cast("list[TResponseInputItem]", items if wanted is None else items[-wanted:])

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` in order, creating the session on its first write.

        One ``append_messages`` call (atomic: all or none) per ``limits.max_batch_messages``
        items; a longer list is split, and a failure part-way leaves the earlier parts
        stored. ``[]`` writes nothing.

        Raises:
            ValidationError / PayloadTooLarge / UnsupportedValue: an item that is not a
                JSON object, or too big (nothing of its part is stored).
            SessionNotActive: the session is CLOSED or EXPIRED (restore it first).
        """
        if not items:
            return
        messages = [message_of_item(item, f"items[{i}]") for i, item in enumerate(items)]
        size = self._keyed.limits.max_batch_messages

        async def append(sid: str) -> None:
            for start in range(0, len(messages), size):
                await self._keyed.backend.append_messages(
                    session_id=sid, user_id=self.user_id, messages=messages[start : start + size]
                )

        await self._keyed.with_session(append, create=True)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest message and return its item; None when there is none. A
        message from another writer that stands for several items (:func:`items_of`)
        is removed whole, and its last item returned.

        Raises:
            SessionNotActive: the session is CLOSED or EXPIRED.
        """

        async def pop(sid: str) -> Message | None:
            return await self._keyed.backend.pop_message(session_id=sid, user_id=self.user_id)

        popped = await self._keyed.with_session(pop)
        return None if popped is None else cast("TResponseInputItem", items_of(popped)[-1])

    async def clear_session(self) -> None:
        """Remove every item. The session stays (with its working memory, tool history
        and audit log), so its next items go on in the same session.

        Raises:
            SessionNotActive: the session is CLOSED or EXPIRED.
        """

        async def clear(sid: str) -> None:
            await self._keyed.backend.truncate_messages(
                session_id=sid, user_id=self.user_id, after_seq=0
            )

        await self._keyed.with_session(clear)

    async def _atomic_replace_items(self, items: list[TResponseInputItem]) -> bool:
        """Replace every item with ``items`` in one transaction (``replace_messages``
        with ``after_seq=0``; ``[]`` clears, a truncate, atomic too): a crash or an
        outage leaves the old items or the new ones, never none.

        openai-agents' ``OpenAIResponsesCompactionSession`` looks this hook up on the
        wrapped session's class and, when present, replaces the history with the
        compacted items through it instead of ``clear_session`` then ``add_items``
        (which an outage between the two leaves empty). It checks nothing about the
        items it replaces, as the SDK's own stores do not.

        One replace holds at most ``limits.max_batch_messages`` items (1000 by
        default). For more, the hook declines (False) and the SDK clears and adds
        (:meth:`add_items` splits the items into batches): such a compaction is not
        atomic, and an outage part-way leaves what the SDK's own restore could put back.

        Returns:
            True: the history was replaced (the session is created if it did not
            exist); False: more items than one replace holds, nothing was done.

        Raises:
            ValidationError / PayloadTooLarge / UnsupportedValue: an item as in
                :meth:`add_items` (nothing changes).
            SessionNotActive: the session is CLOSED or EXPIRED.
        """
        if not items:
            await self.clear_session()
            return True
        if len(items) > self._keyed.limits.max_batch_messages:
            return False
        messages = [message_of_item(item, f"items[{i}]") for i, item in enumerate(items)]

        async def replace(sid: str) -> None:
            await self._keyed.backend.replace_messages(
                session_id=sid, user_id=self.user_id, after_seq=0, messages=messages
            )

        await self._keyed.with_session(replace, create=True)
        return True

    def run_hooks(self) -> RunHooks[Any]:
        """``RunHooks`` for ``Runner.run(..., hooks=session.run_hooks())`` that record each
        function tool call of the run in this session's tool history
        (:class:`~agentsession.adapters.openai_agents_hooks.ToolHistoryHooks`)."""
        from .openai_agents_hooks import ToolHistoryHooks

        return ToolHistoryHooks(self)

    async def record_tool_call(
        self,
        *,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        result: Any = None,
        started_at: datetime | None = None,
        ended_at: datetime | None = None,
        provider_call_id: str | None = None,
    ) -> None:
        """Record a tool call that ran in this session (created if it does not exist
        yet); the arguments are :meth:`SessionManager.record_tool_call`'s.

        Raises:
            ValidationError, PayloadTooLarge, UnsupportedValue, SessionNotActive.
        """

        async def record(sid: str) -> None:
            await self._keyed.backend.record_tool_call(
                session_id=sid,
                user_id=self.user_id,
                tool=tool,
                arguments=arguments,
                result=result,
                started_at=started_at,
                ended_at=ended_at,
                provider_call_id=provider_call_id,
            )

        await self._keyed.with_session(record, create=True)

    def close(self) -> None:
        """Let go of the worker threads the adapter started around a sync manager. The
        backend stays open: its caller owns it. The adapter stays usable."""
        self._keyed.close()


def message_of_item(item: Any, field: str = "item") -> dict[str, Any]:
    """The message that stores one openai-agents item: ``{"role", "item": item}`` plus
    ``content`` (the item's text, when it has any), ``tool_calls`` (a call item) or
    ``tool_call_id`` (an output item).

    Args:
        item: a ``TResponseInputItem`` (a dict).
        field: the argument's name in errors.

    Raises:
        ValidationError: ``item`` is not a JSON object.
    """
    if not isinstance(item, Mapping):
        raise ValidationError(f"{field} must be an object (a response input item)", field=field)
    kind = item.get("type")
    call_id = item.get("call_id")
    role = item.get("role")
    known = isinstance(role, str) and role in _ROLES  # a list or object: not hashable
    message: dict[str, Any] = {"role": role if known else "assistant"}
    text = _text(
        item.get("output")
        if isinstance(kind, str) and kind.endswith("_output")
        else item.get("content")
    )
    if text is not None:
        message["content"] = text
    if isinstance(call_id, str) and isinstance(kind, str):
        if kind == "function_call":
            function = {"name": item.get("name"), "arguments": item.get("arguments")}
            message["tool_calls"] = [{"id": call_id, "type": "function", "function": function}]
        elif kind == "custom_tool_call":
            custom = {"name": item.get("name"), "input": item.get("input")}
            message["tool_calls"] = [{"id": call_id, "type": "custom", "custom": custom}]
        elif kind.endswith("_output"):
            message.update(role="tool", tool_call_id=call_id)
    message["item"] = dict(item)
    return message


def items_of(message: Message) -> list[dict[str, Any]]:
    """The items a message stands for: the one it stores (:func:`message_of_item`),
    unchanged. A message appended by other means than this adapter has no ``item`` and
    is converted, so the Runner is never handed something it cannot send:

    * a payload with a ``type`` (a Responses item appended directly): as appended;
    * role ``tool``: ``{"type": "function_call_output", "call_id": tool_call_id,
      "output": its text}``;
    * any other role: ``{"role", "content": its text}`` when it has text (or no tool
      calls), then one ``{"type": "function_call", "call_id", "name", "arguments"}``
      per function entry of ``tool_calls`` (arguments as JSON text).

    Returns:
        One item, or for an assistant message with text and/or several tool calls, its
        items in order.
    """
    payload = message.payload()
    item = payload.get("item")
    if isinstance(item, dict):
        return [item]
    if "type" in payload:
        return [payload]
    text = _text(message.content) or ""
    if message.role is Role.TOOL:
        return [
            {"type": "function_call_output", "call_id": message.tool_call_id or "", "output": text}
        ]
    calls = [_function_call(c) for c in message.tool_calls or []]
    said = [{"role": message.role.value, "content": text}] if text or not calls else []
    return said + [c for c in calls if c is not None]


def _function_call(call: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``function_call`` item of one chat-completions tool call; None for another
    kind of call."""
    function = call.get("function")
    if not isinstance(function, Mapping):
        return None
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
    return {
        "type": "function_call",
        "call_id": str(call.get("id") or ""),
        "name": str(function.get("name") or ""),
        "arguments": arguments,
    }


def _text(value: Any) -> str | None:
    """The text of an item's ``content`` or ``output``: a string as is, or the ``text``
    of its parts joined by newlines; None when it has no text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [
            p["text"] for p in value if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        ]
        return "\n".join(texts) if texts else None
    return None
