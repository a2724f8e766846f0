"""The longest value of every bounded text field, in characters: the one table.

Validation refuses a longer value before anything is written (``ValidationError``; the
HTTP request models state the same bounds), and every SQL column holding one of these
fields is at least this wide (:mod:`agentsession.stores.sql.schema`), so a value validation
accepts is stored whole on every store, never cut short and never a database error.
``tests/test_field_limits.py`` checks each field against its columns. Memory and Redis
have no widths; SQLite ignores them.

Lengths count characters (code points), as Python's ``len`` and the ``VARCHAR(n)`` of
PostgreSQL and MariaDB (utf8mb4) do. Fields limited to ASCII say so.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "API_KEY_NAME_CHARS",
    "CALL_ID_CHARS",
    "EXTERNAL_KEY_CHARS",
    "IDEMPOTENCY_KEY_CHARS",
    "ID_CHARS",
    "MODEL_CHARS",
    "NAME_CHARS",
    "REASON_CHARS",
    "RECORD_KEY_CHARS",
    "RECORD_NAMESPACE_CHARS",
    "REQUEST_ID_CHARS",
    "SEARCH_QUERY_CHARS",
    "STEP_KIND_CHARS",
    "STEP_NAME_CHARS",
    "STEP_STATUS_CHARS",
    "SUMMARY_LABEL_CHARS",
    "TEXT_CHARS",
    "TITLE_CHARS",
    "TOOL_NAME_CHARS",
]

#: An API key's name (``agentsession keys create --name``): printable text.
API_KEY_NAME_CHARS: Final = 200
#: Generated ids, ``<prefix>_<26 chars>`` (:func:`agentsession.ids.is_id`).
ID_CHARS: Final = 40
#: User ids (so also audit actors), agent names: ``A-Za-z0-9._:@+-`` (``ids.NAME_PATTERN``).
NAME_CHARS: Final = 128
#: A session's caller-chosen ``external_key``: any Unicode text but control characters
#: (at most 4 bytes of UTF-8 a character, so at most 1024 bytes).
EXTERNAL_KEY_CHARS: Final = 256
#: A run step's ``kind`` and ``status``: names like ``NAME_CHARS``.
STEP_KIND_CHARS: Final = NAME_CHARS
STEP_STATUS_CHARS: Final = NAME_CHARS
#: A run step's ``name`` (any text). PostgreSQL stores it escaped (``\\`` and NUL take
#: two characters, :class:`~agentsession.stores.sql.columns.PlainText`), so its column is
#: at least twice as wide.
STEP_NAME_CHARS: Final = 120
#: Idempotency keys: printable ASCII.
IDEMPOTENCY_KEY_CHARS: Final = 255
#: A model's name in the usage ledger and the price table: printable ASCII, no space
#: (``models/gemini-1.5-pro``, ``anthropic.claude-3-5-sonnet-20241022-v2:0``).
MODEL_CHARS: Final = 128
#: Tool names of recorded tool calls: ``A-Za-z0-9._:-``.
TOOL_NAME_CHARS: Final = 128
#: Caller-chosen ids of recorded tool calls: ``A-Za-z0-9._:-``.
CALL_ID_CHARS: Final = 128
#: A session title: the default of ``Limits.max_title_chars`` (a TEXT column: any
#: configured limit fits).
TITLE_CHARS: Final = 512
#: The reason of a close or expire (a TEXT column).
REASON_CHARS: Final = 500
#: A request id tagging audit events (the HTTP ``X-Request-ID``).
REQUEST_ID_CHARS: Final = 128
#: A search query (``SessionManager.search``; never stored).
SEARCH_QUERY_CHARS: Final = 200
#: Free texts such as error messages of runs, steps and tool calls (TEXT columns).
TEXT_CHARS: Final = 100_000
#: A session record's namespace and key (any text but control characters). Their
#: primary key with the session id must fit MariaDB's 3072-byte InnoDB key limit at 4
#: bytes a character: 64 + 128 + 512 characters = 2816 bytes.
RECORD_NAMESPACE_CHARS: Final = 128
RECORD_KEY_CHARS: Final = 512
#: A summary's ``author``, ``model`` and tokenizer name (any text but control characters).
SUMMARY_LABEL_CHARS: Final = 255
