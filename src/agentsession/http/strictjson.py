"""The one strict JSON reader of the HTTP service: request bodies and JSON in query
parameters go through :func:`read_json`, so every route reads JSON the same way.

Rules (RFC 8259, RFC 9110):

* UTF-8 only. A byte order mark, UTF-16/32 or any byte sequence that is not UTF-8 is
  :class:`MalformedJson` (400): RFC 8259 section 8.1 requires UTF-8 and forbids adding
  a BOM, and guessing another encoding would read another request than a UTF-8 proxy
  in front of us does.
* A ``Content-Type`` that is not JSON (``application/json`` or ``application/*+json``),
  or that names a ``charset`` other than ``utf-8``, is :class:`UnsupportedMediaType`
  (415, RFC 9110 section 15.5.16): the sender says its bytes are in another format.
* One value per name: a duplicate object key is :class:`MalformedJson` naming the key
  and where it is; RFC 8259 section 4 leaves such a document's meaning to the reader,
  so two readers (a proxy keeping the first, Python the last) would disagree.
* At most :data:`MAX_REQUEST_DEPTH` levels of nesting, counted by a linear scan before
  parsing, so the parser never recurses deeper (no ``RecursionError``, no 500).
* ``NaN`` and ``Infinity`` are read, and refused by the stored-value policy with the
  path they sit at (:mod:`agentsession.jsonvalues`, 422).
"""

from __future__ import annotations

import json
from typing import Any

from ..jsonvalues import MAX_DEPTH, text_depth
from ..protocol import MalformedJson, UnsupportedMediaType

__all__ = ["MAX_REQUEST_DEPTH", "check_media_type", "read_json"]

#: The deepest nesting a request may hold: a stored value (at most ``MAX_DEPTH`` levels
#: below its own) sits at most 3 levels down a body (``{"messages": [{...}]}``), so
#: every value a store accepts fits, and the parser never goes deeper.
MAX_REQUEST_DEPTH = MAX_DEPTH + 3

_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")


def check_media_type(content_type: str | None) -> None:
    """Accept a JSON ``Content-Type`` in UTF-8 (or none: the route decides).

    Args:
        content_type: the header value, e.g. ``application/json; charset=utf-8``.

    Raises:
        UnsupportedMediaType: not ``application/json`` nor ``application/<x>+json``, or
            a ``charset`` parameter other than ``utf-8`` (any case).
    """
    if content_type is None:
        return
    media, _, params = content_type.partition(";")
    media = media.strip().lower()
    if media != "application/json" and not (
        media.startswith("application/") and media.endswith("+json")
    ):
        raise UnsupportedMediaType(
            f"the body must be application/json, not {media[:60]!r}", field="content-type"
        )
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() != "utf-8":
            raise UnsupportedMediaType(
                f"JSON is read as UTF-8 only, not charset {value.strip()[:40]!r}",
                field="content-type",
            )


def read_json(data: bytes | str, *, where: str) -> Any:
    """Parse one JSON text by the rules of this module.

    Args:
        data: the raw body (bytes) or a query parameter's text.
        where: what ``data`` is, for errors and paths in them: ``"body"``,
            ``"query.arguments"``.

    Returns:
        The value (dict, list, str, int, float, bool or None).

    Raises:
        MalformedJson: not UTF-8, a BOM, not JSON, a duplicate key, or nesting deeper
            than :data:`MAX_REQUEST_DEPTH`; ``field`` names ``where`` (and the path of
            a duplicate key).
    """
    text = _decode(data, where) if isinstance(data, bytes) else data
    if text_depth(text) > MAX_REQUEST_DEPTH:
        raise MalformedJson(
            f"{where} nests deeper than {MAX_REQUEST_DEPTH} levels",
            field=where,
            max_depth=MAX_REQUEST_DEPTH,
        )
    duplicates: list[tuple[dict[str, Any], str]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) != len(items) and not duplicates:
            duplicates.append((obj, _first_repeat(items)))
        return obj

    try:
        value = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise MalformedJson(
            f"{where} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", field=where
        ) from None
    except (ValueError, RecursionError) as exc:  # over 4300 digits; depth is pre-checked
        raise MalformedJson(f"{where} is not JSON: {str(exc)[:120]}", field=where) from None
    if duplicates:
        obj, key = duplicates[0]
        path = _path_of(value, obj, where)
        raise MalformedJson(
            f"{path} has the key {key[:100]!r} twice; send each key once", field=path, key=key[:100]
        )
    return value


def _decode(data: bytes, where: str) -> str:
    if data.startswith(_BOMS) or data[:4] in (b"\x00\x00\xfe\xff", b"\xff\xfe\x00\x00"):
        raise MalformedJson(
            f"{where} starts with a byte order mark; send UTF-8 without one", field=where
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedJson(
            f"{where} is not UTF-8 (byte {exc.start}); JSON is read as UTF-8 only", field=where
        ) from None


def _first_repeat(items: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _ in items:
        if key in seen:
            return key
        seen.add(key)
    raise AssertionError("called only when a key repeats")  # pragma: no cover


def _path_of(root: Any, target: dict[str, Any], where: str) -> str:
    """The path of ``target`` inside ``root`` (``body.messages[0].metadata``), found by
    an explicit stack, since the value may be as deep as the limit allows."""
    stack: list[tuple[Any, str]] = [(root, where)]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, dict):
            stack.extend((v, f"{path}.{str(k)[:100]}") for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node))
    return where  # pragma: no cover - the target is always inside the root
