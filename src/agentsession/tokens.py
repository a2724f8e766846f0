"""Token counting for context windows: a small pluggable protocol and a default estimate.

A :class:`Tokenizer` has a ``name`` and ``count(text) -> int``. ``build_context`` counts
every part it returns with one (docs/semantics.md, "Context assembly"):

* a message: ``count`` of its canonical JSON (:func:`message_text`: the payload as
  appended without ``metadata`` and ``run_id``, which are not sent to a model, keys
  sorted, no spaces) plus :data:`MESSAGE_OVERHEAD`, the few tokens a provider's chat
  template adds around each message;
* the system text and a summary: ``count`` of the text plus the same overhead.

The default, :class:`ByteEstimate`, needs no download: ``ceil(UTF-8 bytes / 4)``. It is
an *estimate* (English prose is about four bytes a token; code and non-Latin text take
more tokens a byte), so leave headroom under a model's hard limit, or plug in a real
tokenizer::

    import tiktoken

    class Tiktoken:
        name = "tiktoken:o200k_base"

        def __init__(self) -> None:
            self._enc = tiktoken.get_encoding("o200k_base")

        def count(self, text: str) -> int:
            return len(self._enc.encode(text))

    manager.build_context(..., tokenizer=Tiktoken())
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from .jsonvalues import dumps

if TYPE_CHECKING:
    from .models import Message

__all__ = [
    "DEFAULT_TOKENIZER",
    "MESSAGE_OVERHEAD",
    "ByteEstimate",
    "Tokenizer",
    "message_text",
    "message_tokens",
    "text_tokens",
]

#: Tokens added per message (role markers and separators of a chat template).
MESSAGE_OVERHEAD: Final = 4

#: Payload fields a model never sees: kept out of the count.
_NOT_SENT: Final = ("metadata", "run_id")


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens: ``name`` names it (returned in the context), ``count(text)`` is
    the number of tokens of ``text`` (an int >= 0). Must be deterministic."""

    name: str

    def count(self, text: str) -> int:
        """The number of tokens of ``text``."""
        ...


class ByteEstimate:
    """The default tokenizer: ``ceil(len(text.encode("utf-8")) / 4)`` tokens, an
    estimate needing no download (see the module docstring)."""

    name = "bytes/4"

    def count(self, text: str) -> int:
        """``ceil(UTF-8 bytes of text / 4)``."""
        return -(-len(text.encode("utf-8")) // 4)


#: The tokenizer used when none is given.
DEFAULT_TOKENIZER: Final = ByteEstimate()


def message_text(m: Message) -> str:
    """The text a message is counted by: its canonical JSON without the fields a model
    is not sent."""
    payload = m.payload()
    for key in _NOT_SENT:
        payload.pop(key, None)
    return dumps(payload)


def message_tokens(tokenizer: Tokenizer, m: Message) -> int:
    """Tokens of one message: ``count(message_text(m)) + MESSAGE_OVERHEAD``."""
    return tokenizer.count(message_text(m)) + MESSAGE_OVERHEAD


def text_tokens(tokenizer: Tokenizer, text: str) -> int:
    """Tokens of a system or summary text: 0 for "", else ``count(text) +
    MESSAGE_OVERHEAD``."""
    return tokenizer.count(text) + MESSAGE_OVERHEAD if text else 0
