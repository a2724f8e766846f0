"""Tool calls in a message history, in the three formats agents send today.

The one place that knows which call ids a message *opens* (makes a tool call) and which
it *answers* (carries a tool result), used by the window rule and by restore's
synthetic results for calls a crash left unanswered:

* chat completions: an assistant message's ``tool_calls[].id`` makes a call; a
  ``{"role": "tool", "tool_call_id": ...}`` message answers it.
* Anthropic messages: an assistant ``content`` block ``{"type": "tool_use", "id": ...}``
  makes a call; a user ``content`` block ``{"type": "tool_result", "tool_use_id": ...}``
  answers it.
* OpenAI Responses: an item ``{"type": "function_call", "call_id": ...}`` (or
  ``custom_tool_call``) makes a call; ``{"type": "function_call_output", "call_id": ...}``
  (or ``custom_tool_call_output``) answers it.

A Responses ``reasoning`` item (:func:`is_reasoning`) belongs with the item right after
it, the call or message the model produced from it (:func:`produced_from`): a provider
refuses either one without the other (OpenAI answers 400 to a reasoning item "provided
without its required following item", and to an item sent without its required
reasoning item). So no window of history (a context, a page, a restore) holds one of
the two without the other; a reasoning item followed by anything else (a history a
crash left broken) has no successor.

Responses items carry no ``role``: :data:`ITEM_ROLES` gives the role a message is filed
under when it has none (a call or a reasoning item: ``assistant``; a call output:
``tool``). The stored payload stays exactly as sent, without the derived role.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from .models import Message

__all__ = [
    "CALL_ITEMS",
    "ITEM_ROLES",
    "OUTPUT_ITEMS",
    "answered_calls",
    "in_tool_exchange",
    "is_reasoning",
    "item_role",
    "model_output",
    "opened_calls",
    "produced_from",
    "results_for",
    "touches_calls",
]

#: Responses item types that make a call -> the item type that carries its result.
CALL_ITEMS: Final[Mapping[str, str]] = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
}
#: Responses item types that carry a call's result.
OUTPUT_ITEMS: Final = frozenset(CALL_ITEMS.values())

#: The role of a Responses item sent without one (its ``type`` -> a role value).
ITEM_ROLES: Final[Mapping[str, str]] = {
    **{kind: "assistant" for kind in CALL_ITEMS},
    **{kind: "tool" for kind in OUTPUT_ITEMS},
    "reasoning": "assistant",
}


def item_role(payload: Mapping[str, Any]) -> str | None:
    """The role of a message sent without ``role``: its Responses item type's role
    (:data:`ITEM_ROLES`), or None when ``type`` is no such item type."""
    kind = payload.get("type")
    return ITEM_ROLES.get(kind) if isinstance(kind, str) else None


def opened_calls(m: Message) -> list[str]:
    """The ids of the tool calls ``m`` makes, in order (empty if none)."""
    if _plain(m):
        return []
    kind = _item_type(m)
    if kind in CALL_ITEMS:
        return _ids([(m.model_extra or {}).get("call_id")])
    if m.role != "assistant":
        return []
    ids = [c.get("id") for c in m.tool_calls or ()]
    ids += [b.get("id") for b in _blocks(m, "tool_use")]
    return _ids(ids)


def answered_calls(m: Message) -> list[str]:
    """The ids of the tool calls whose results ``m`` carries, in order (empty if none)."""
    if _plain(m):
        return []
    if _item_type(m) in OUTPUT_ITEMS:
        return _ids([(m.model_extra or {}).get("call_id")])
    if m.role == "tool":
        return _ids([m.tool_call_id])
    if m.role == "user":
        return _ids(b.get("tool_use_id") for b in _blocks(m, "tool_result"))
    return []


def touches_calls(m: Message) -> bool:
    """Whether ``m`` may make or answer a tool call at all. False is certain (it does
    neither: what most messages are, decided without looking further); True means
    :func:`opened_calls` and :func:`answered_calls` must be asked."""
    return not _plain(m)


def in_tool_exchange(m: Message) -> bool:
    """Whether ``m`` may stand between a call and its result: it makes or answers calls,
    or it is another assistant message (a Responses turn can hold several call and
    reasoning items before the outputs). A user or system message without tool
    results ends an exchange: no format puts one between a call and its result."""
    return m.role == "assistant" or bool(opened_calls(m) or answered_calls(m))


def is_reasoning(m: Message) -> bool:
    """Whether ``m`` is a Responses ``reasoning`` item."""
    return _item_type(m) == "reasoning"


def model_output(m: Message) -> bool:
    """Whether ``m`` is what a model may produce from a reasoning item: a call or an
    assistant message (any message filed as ``assistant``), not another reasoning item."""
    return m.role == "assistant" and not is_reasoning(m)


def produced_from(before: Message, m: Message) -> bool:
    """Whether ``m`` is what the Responses reasoning item ``before`` was produced for:
    ``before`` is a reasoning item and ``m`` its successor in history (seq + 1) and a
    :func:`model_output`. The two go into a window together or not at all (this
    module's docstring)."""
    return is_reasoning(before) and m.seq == before.seq + 1 and model_output(m)


def results_for(call: Message, call_ids: list[str], text: str) -> list[dict[str, Any]]:
    """Payloads answering ``call_ids`` (calls ``call`` made) with ``text``, in ``call``'s
    format: one tool message per id (chat), one user message with a ``tool_result``
    block per id marked ``is_error`` (Anthropic), one output item per id (Responses).

    Raises:
        ValueError: ``call_ids`` is empty or holds a call ``call`` does not make.
    """
    if not call_ids or not set(call_ids) <= set(opened_calls(call)):
        raise ValueError("call_ids must be calls the message makes")
    output_item = CALL_ITEMS.get(_item_type(call) or "")
    if output_item is not None:
        return [{"type": output_item, "call_id": c, "output": text} for c in call_ids]
    anthropic = {b.get("id") for b in _blocks(call, "tool_use")}
    chat = [c for c in call_ids if c not in anthropic]
    results: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": c, "content": text} for c in chat
    ]
    blocks = [
        {"type": "tool_result", "tool_use_id": c, "content": text, "is_error": True}
        for c in call_ids
        if c in anthropic
    ]
    if blocks:
        results.append({"role": "user", "content": blocks})
    return results


def _plain(m: Message) -> bool:
    """Whether ``m`` can neither make nor answer a call: no Responses item type, no
    ``tool_calls``, no ``tool_call_id``, no content blocks (every format's call and
    result lives in one of these)."""
    extra = m.__pydantic_extra__
    return (
        (not extra or "type" not in extra)
        and m.tool_calls is None
        and m.tool_call_id is None
        and not isinstance(m.content, list)
    )


def _item_type(m: Message) -> str | None:
    kind = (m.__pydantic_extra__ or {}).get("type")
    return kind if isinstance(kind, str) else None


def _blocks(m: Message, kind: str) -> list[dict[str, Any]]:
    """The content blocks of ``m`` of type ``kind`` (Anthropic ``tool_use`` / ``tool_result``)."""
    if not isinstance(m.content, list):
        return []
    return [b for b in m.content if isinstance(b, dict) and b.get("type") == kind]


def _ids(values: Iterable[Any]) -> list[str]:
    return [v for v in values if isinstance(v, str) and v]
