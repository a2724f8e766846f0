"""The searchable text of what a session holds, and the snippet of a search hit.

One module for every store, so that each indexes the same text: a message's text parts
in every format (a chat ``content`` string or ``{"type": "text", "text"}`` parts,
Anthropic ``text``/``tool_use``/``tool_result`` blocks, OpenAI Responses items and their
``arguments``/``output``, chat ``tool_calls`` arguments), a session's title, and a tool
call's name, arguments and result. The text is every string value found under those
members (object keys and structural members such as ids, types, signatures and binary
``data`` left out), joined by newlines.

Matching is a case-insensitive substring test (:func:`occurrences`), the rule every
store's index answers exactly.

A text holding a sealed value (a store with a keyring) is never indexed
(:func:`indexable`): ciphertext says nothing, and a query could match its letters. With
search turned on under a keyring, the sealed store hands the stores the plaintext
texts instead (docs/security.md, "Search with a keyring").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from .crypto.envelope import TEXT_PREFIX
from .models import Message

__all__ = [
    "MIN_INDEXED_CHARS",
    "SNIPPET_CHARS",
    "indexable",
    "message_text",
    "occurrences",
    "payload_text",
    "snippet",
    "tool_call_text",
]

#: Trigram indexes answer queries of at least this many characters from the index; a
#: shorter query is answered by a scan of the caller's indexed texts (docs/guide.md, "Search").
MIN_INDEXED_CHARS: Final = 3

#: The longest snippet of a hit, in characters.
SNIPPET_CHARS: Final = 160

# Members that name or mark rather than say something: never indexed.
_SKIPPED: Final = frozenset(
    {
        "type",
        "id",
        "call_id",
        "tool_call_id",
        "tool_use_id",
        "signature",
        "encrypted_content",
        "data",
        "image_url",
        "url",
        "source",
        "cache_control",
        "status",
        "role",
        "file_id",
        "metadata",
    }
)

# The members of a message that hold what was said: content, tool calls, and the
# members of a Responses item that carry text (kept as extra fields).
_MESSAGE_MEMBERS: Final = ("content", "tool_calls", "arguments", "output", "input", "summary")


def _strings(value: Any) -> Iterator[str]:
    """Every string value in ``value``, depth first, skipping the :data:`_SKIPPED` members."""
    if isinstance(value, str):
        if value:
            yield value.replace("\x00", " ")  # PostgreSQL text holds no NUL
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _SKIPPED:
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def message_text(message: Message) -> str:
    """The searchable text of one message ("" when it has none): its text parts in any
    format, tool-call arguments and tool outputs, newline-joined."""
    return payload_text(message.payload())


def payload_text(payload: dict[str, Any]) -> str:
    """:func:`message_text` of the message whose :meth:`~agentsession.models.Message.payload`
    is ``payload`` (a store that has the payload at hand skips building it again)."""
    return "\n".join(s for member in _MESSAGE_MEMBERS for s in _strings(payload.get(member)))


def tool_call_text(tool: str, arguments: Any, result: Any) -> str:
    """The searchable text of one tool call (:class:`~agentsession.models.ToolCall`'s
    fields of those names): its tool name, then the strings of its arguments and of its
    result (a result that is a string is taken whole)."""
    strings = [tool, *_strings(arguments), *_strings(result)]
    return "\n".join(strings)


def indexable(text: str) -> bool:
    """Whether ``text`` (a :func:`message_text`, :func:`tool_call_text` or title) goes
    into a search index: it is not empty and none of its lines is a sealed value (the
    envelope text of :mod:`agentsession.crypto.envelope`, which holds no newline)."""
    return bool(text) and not (text.startswith(TEXT_PREFIX) or ("\n" + TEXT_PREFIX) in text)


def occurrences(text: str, query: str) -> int:
    """How many times ``query`` occurs in ``text``, ignoring case (non-overlapping)."""
    return text.lower().count(query.lower())


def snippet(text: str, query: str) -> tuple[str, int, int]:
    """The part of ``text`` around the first match of ``query`` (case ignored), at most
    :data:`SNIPPET_CHARS` characters, and the match's offsets in it.

    Returns:
        ``(snippet, start, end)``: ``snippet[start:end]`` is the matched text, offsets in
        Python characters (code points). ``(text[:SNIPPET_CHARS], 0, 0)`` when the match
        cannot be located in the original text (a character whose lower case is longer,
        such as ``İ``).
    """
    lowered = text.lower()
    at = lowered.find(query.lower())
    if at < 0 or len(lowered) != len(text):
        return text[:SNIPPET_CHARS], 0, 0
    size = len(query)
    before = max(0, (SNIPPET_CHARS - size) // 3)
    start = max(0, at - before)
    end = min(len(text), max(at + size, start + SNIPPET_CHARS))
    start = max(0, min(start, end - SNIPPET_CHARS))
    return text[start:end], at - start, at - start + size
