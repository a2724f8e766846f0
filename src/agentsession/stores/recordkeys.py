"""Selecting session records by key: the upper bound of a key prefix (SQL and Redis
ranges), and the filter of the stores that select records in Python (memory, and Redis
across namespaces).

Python compares ``str`` by code point, the order every store lists records in.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["key_matches", "prefix_end", "select_keys"]

_MAX = chr(0x10FFFF)


def prefix_end(prefix: str) -> str | None:
    """The least string above every string that starts with ``prefix`` (non-empty), in
    code-point order (= UTF-8 byte order): the exclusive upper bound of a prefix range.
    None when there is none (``prefix`` is all U+10FFFF)."""
    stem = prefix.rstrip(_MAX)
    if not stem:
        return None
    point = ord(stem[-1]) + 1
    if 0xD800 <= point <= 0xDFFF:  # surrogates are no text: the next code point is U+E000
        point = 0xE000
    return stem[:-1] + chr(point)


def key_matches(key: str, *, prefix: str | None, after: str | None, before: str | None) -> bool:
    """Whether ``key`` starts with ``prefix`` and lies strictly between ``after`` and
    ``before`` (None = no condition)."""
    return (
        (prefix is None or key.startswith(prefix))
        and (after is None or key > after)
        and (before is None or key < before)
    )


def select_keys(
    keys: Iterable[tuple[str, str]],
    *,
    namespace: str | None,
    prefix: str | None,
    after: str | None,
    before: str | None,
    limit: int | None,
    descending: bool,
) -> list[tuple[str, str]]:
    """The ``(namespace, key)`` pairs of ``keys`` that match, in ``(namespace, key)``
    order (reversed when ``descending``), at most ``limit`` of them."""
    chosen = sorted(
        (ns, key)
        for ns, key in keys
        if (namespace is None or ns == namespace)
        and key_matches(key, prefix=prefix, after=after, before=before)
    )
    if descending:
        chosen.reverse()
    return chosen if limit is None else chosen[:limit]
