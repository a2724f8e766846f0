"""Metadata filters of session listings and counts: which metadata entries a store
indexes, and how a filter's values match them.

One module for every store and surface, so each answers the same rule:

* a filter is a mapping of at most :data:`MAX_FILTER_KEYS` keys to values; a session
  matches when, for every key, its metadata has that top-level key with a value whose
  match text (:func:`match_text`) equals the filter value's (an AND of exact
  comparisons, case kept);
* the match text of a string is the string itself; of ``true``/``false`` the words
  ``"true"``/``"false"``; of a number its shortest decimal form (``3`` for ``3`` and
  ``3.0``, ``0.5``, ``1e-07`` as Python writes a float). So a filter value
  ``"3"`` (all an HTTP query or the CLI can send) matches a stored ``3``, ``3.0`` and
  ``"3"``; ``"true"`` matches ``true`` and ``"true"``. ``null``, arrays and objects
  have no match text and match no filter;
* a key is 1..:data:`MAX_KEY_CHARS` characters of letters, digits and ``_ . : / -``
  (:data:`KEY_PATTERN`); a value's match text is 1..:data:`MAX_VALUE_CHARS` characters
  with no NUL. A stored entry outside these bounds could never equal a valid filter,
  so stores index only the entries inside them (:func:`indexed_entries`): the index
  stays small and exact.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from .errors import ValidationError
from .fieldlimits import METADATA_KEY_CHARS, METADATA_VALUE_CHARS

__all__ = [
    "KEY_PATTERN",
    "MAX_FILTER_KEYS",
    "MAX_KEY_CHARS",
    "MAX_VALUE_CHARS",
    "MetadataFilter",
    "check_filter",
    "indexed_entries",
    "match_text",
    "matches",
]

#: The most keys one filter may have.
MAX_FILTER_KEYS: Final = 8
#: The longest key a filter may name, in characters.
MAX_KEY_CHARS: Final = METADATA_KEY_CHARS
#: The longest match text a filter value may have, in characters.
MAX_VALUE_CHARS: Final = METADATA_VALUE_CHARS
#: The characters of a filter key (an HTTP query parameter ``metadata.<key>``).
KEY_PATTERN: Final = re.compile(rf"[A-Za-z0-9_.:/-]{{1,{MAX_KEY_CHARS}}}")

#: A checked filter: key -> match text, keys sorted.
MetadataFilter = dict[str, str]


def match_text(value: Any) -> str | None:
    """The text a metadata value matches filters by (module docstring), or None for a
    value that matches none (null, an array, an object, a non-finite number)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):  # before int: bool is one
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
    return None


def _fits(key: str, text: str | None) -> bool:
    return (
        text is not None
        and KEY_PATTERN.fullmatch(key) is not None
        and 0 < len(text) <= MAX_VALUE_CHARS
        and "\x00" not in text
    )


def indexed_entries(metadata: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ``(key, match text)`` pairs of a session's metadata that a filter can name,
    sorted by key: what a store indexes for the session."""
    pairs = ((k, match_text(v)) for k, v in metadata.items())
    return sorted((k, t) for k, t in pairs if t is not None and _fits(k, t))


def check_filter(metadata: Mapping[str, Any] | None) -> MetadataFilter | None:
    """The filter ``metadata`` (None or empty: no filter) as key -> match text.

    Raises:
        ValidationError: not a mapping, more than :data:`MAX_FILTER_KEYS` keys, a key
            outside :data:`KEY_PATTERN`, or a value that is not a string, number or
            boolean, or whose match text is empty, longer than
            :data:`MAX_VALUE_CHARS` or holds a NUL (``field``: ``metadata`` or
            ``metadata.<key>``).
    """
    if not metadata:
        return None
    if not isinstance(metadata, Mapping):
        raise ValidationError("a metadata filter is a mapping of keys to values", field="metadata")
    if len(metadata) > MAX_FILTER_KEYS:
        raise ValidationError(
            f"a metadata filter has at most {MAX_FILTER_KEYS} keys, not {len(metadata)}",
            field="metadata",
        )
    checked: MetadataFilter = {}
    for key, value in sorted(metadata.items()):
        if not isinstance(key, str) or KEY_PATTERN.fullmatch(key) is None:
            raise ValidationError(
                f"a metadata filter key is 1..{MAX_KEY_CHARS} letters, digits or _ . : / -",
                field=f"metadata.{str(key)[:MAX_KEY_CHARS]}",
            )
        text = match_text(value)
        if text is None or not _fits(key, text):
            raise ValidationError(
                "a metadata filter value is a string, number or boolean of "
                f"1..{MAX_VALUE_CHARS} characters without NUL",
                field=f"metadata.{key}",
            )
        checked[key] = text
    return checked


def matches(metadata: Mapping[str, Any], wanted: MetadataFilter | None) -> bool:
    """Whether a session's ``metadata`` passes the checked filter ``wanted`` (None:
    every session does): the row-by-row test a store's index answers."""
    return wanted is None or all(
        key in metadata and match_text(metadata[key]) == text for key, text in wanted.items()
    )
