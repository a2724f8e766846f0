"""The JSON value policy shared by every store: what may be stored, and how big.

Policy, identical on every store:

* Only JSON values are stored: ``None``, ``bool``, ``int`` (within 64 bits), finite
  ``float``, ``str``,
  ``list`` and ``dict`` with ``str`` keys. Anything else (bytes, datetime, Decimal, UUID,
  set, tuple, NaN/Infinity, custom objects) raises :class:`UnsupportedValue` naming the
  path of the value; callers encode such values themselves (base64 for bytes, ISO 8601
  for datetimes), which keeps round trips exact.
* Strings are kept exactly, NUL (``\\x00``) included: the stored form is JSON text, in
  which NUL is the escape ``\\u0000``. Lone surrogates cannot be UTF-8 and are rejected.
* Text is stored as real UTF-8 (``ensure_ascii=False``), never ``\\uXXXX`` escapes,
  and never Unicode-normalised (NFC and NFD stay distinct).
* Sizes are bytes of the UTF-8 JSON encoding, checked before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
from itertools import accumulate, repeat
from typing import Any

import orjson

from .errors import PayloadTooLarge, UnsupportedValue

__all__ = ["MAX_DEPTH", "canonical_hash", "check_json", "dumps", "loads", "text_depth"]

#: The deepest nesting of a stored value (the value itself is level 0).
MAX_DEPTH = 64
_INT_BOUND = 2**64  # integers must fit in 64 bits (signed or unsigned) to be stored

# Possessive quantifiers: a long string costs one linear pass, never backtracking.
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")
# Each bracket as a step: an opener 2 - 1 = +1, a closer 0 - 1 = -1.
_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def check_json(value: Any, *, field: str, limit_bytes: int | None = None, depth: int = 0) -> str:
    """Validate that ``value`` is a storable JSON value and return its JSON text.

    Args:
        value: the value to check.
        field: the name reported in errors, e.g. ``"message.content"``.
        limit_bytes: maximum size of the UTF-8 JSON encoding, or None for no limit.
        depth: the level ``value`` sits at inside a larger document (0 = the top),
            so at most ``MAX_DEPTH - depth`` more levels are allowed below it.

    Returns:
        The JSON text (``dumps(value)``), so callers need not encode twice.

    Raises:
        UnsupportedValue: a value that is not JSON; ``field`` names its path.
        PayloadTooLarge: the encoding is larger than ``limit_bytes``.
    """
    _walk(value, field, depth)
    text = dumps(value)
    # len(text) <= bytes <= 4*len(text): skip the encode when it cannot matter.
    if limit_bytes is not None and len(text) * 4 > limit_bytes:
        size = len(text.encode("utf-8"))
        if size > limit_bytes:
            raise PayloadTooLarge(
                f"{field} is {size} bytes of JSON; the limit is {limit_bytes} bytes",
                field=field,
                limit_bytes=limit_bytes,
                size_bytes=size,
            )
    return text


def _walk(value: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise UnsupportedValue(f"{path} nests deeper than {MAX_DEPTH} levels", field=path)
    kind = type(value)
    if value is None or kind is bool:
        return
    if kind is int:
        if not -_INT_BOUND <= value < _INT_BOUND:
            raise UnsupportedValue(f"{path} is an integer outside 64 bits", field=path)
        return
    if kind is str:
        _check_str(value, path)
        return
    if kind is float:
        if not math.isfinite(value):
            raise UnsupportedValue(f"{path} is {value!r}, which JSON cannot hold", field=path)
        return
    if kind is list:
        for i, item in enumerate(value):
            _walk(item, f"{path}[{i}]", depth + 1)
        return
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise UnsupportedValue(
                    f"{path} has a key of type {type(key).__name__}; JSON keys are strings",
                    field=path,
                )
            _check_str(key, f"{path}.{_printable(key)}")
            _walk(item, f"{path}.{_printable(key)}", depth + 1)
        return
    raise UnsupportedValue(
        f"{path} is a {kind.__name__}, which is not a JSON value "
        "(encode it yourself, e.g. base64 for bytes, ISO 8601 for datetimes)",
        field=path,
    )


def _printable(key: str) -> str:
    """``key`` as it can appear in an error's field path: lone surrogates escaped, so the
    error itself can always be encoded (e.g. in an HTTP problem body)."""
    if key.isascii():
        return key
    return key.encode("utf-8", "backslashreplace").decode("utf-8")


def _check_str(text: str, path: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsupportedValue(
            f"{path} holds a lone surrogate, which is not valid Unicode text", field=path
        ) from None


def text_depth(text: str) -> int:
    """The deepest bracket nesting of JSON text outside its strings, in one linear pass
    (no recursion), so a parser is never handed text deeper than a caller allows.

    Args:
        text: JSON text (or any text: only brackets outside strings count).

    Returns:
        The bracket depth: 0 for a scalar, 1 for ``[]`` or ``{}``, 2 for ``[[]]``...; a
        value whose deepest container sits ``n`` levels below it (``check_json``'s
        levels) has depth ``n + 1``.
    """
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    steps = brackets.encode("ascii").translate(_STEPS)
    return max(accumulate(map(operator.sub, steps, repeat(1))), default=0)


# One encoder each, built once: json.dumps with any keyword argument builds a new
# JSONEncoder per call, which costs more than encoding a small value.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def dumps(value: Any) -> str:
    """Encode a checked JSON value as compact JSON text with real UTF-8 characters."""
    return _ENCODER.encode(value)


_DECODER = json.JSONDecoder()


def loads(text: str) -> Any:
    """Decode JSON text written by :func:`dumps`, to exactly the value (and the error)
    the standard library's decoder gives.

    orjson decodes several times faster. Its answer is taken when it holds no float:
    orjson reads an integer beyond 64 bits as a float, and may round a long decimal
    otherwise. Its other differences (NaN, Infinity, lone surrogates, overflowing
    floats) it refuses. Any of these is decoded by the standard library instead.

    Raises:
        json.JSONDecodeError: not JSON text.
    """
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _DECODER.decode(text)
    return _DECODER.decode(text) if _has_float(value) else value


def _has_float(value: Any) -> bool:
    """Whether a decoded JSON value holds a float anywhere."""
    kind = type(value)
    if kind is float:
        return True
    if kind is dict:
        value = value.values()
    elif kind is not list:
        return False
    for item in value:
        kind = type(item)
        if kind is float or ((kind is dict or kind is list) and _has_float(item)):
            return True
    return False


def canonical_hash(value: Any) -> str:
    """Return the hex SHA-256 of ``value``'s canonical JSON (sorted keys, compact).

    Used to compare tool-call arguments and idempotent requests independent of key order.
    """
    text = _CANONICAL.encode(value)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
