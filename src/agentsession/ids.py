"""Identifiers: prefixed, 128 random bits, and a strict pattern to check them by; and
the mapping of any text onto a name (reversible but for the hashed long form).

An id is ``<prefix>_<26 chars of lowercase base32>`` (16 random bytes from
:mod:`secrets`), e.g. ``ses_5x3k...``. The prefix tells what an id names in logs.

Names (user ids, agents) are ``NAME_PATTERN``. Frameworks name users and apps with any
string, so :func:`encode_name` maps any non-empty text to a name, and
:func:`decode_name` maps it back. The rule, in the order tried:

1. **Plain**: a valid name that does not start with ``+`` is itself (``alice``,
   ``bob@example.com``, ``app:coding``).
2. **Escaped**: ``+`` then the text with every character other than
   ``A-Za-z0-9._:@-`` written as ``+XX`` per byte of its UTF-8 (uppercase hex):
   ``John Smith`` is ``+John+20Smith``, ``+49 30`` is ``++2B49+2030``. Used when it
   fits in 128 characters.
3. **Hashed**: ``++h`` then the hex SHA-256 of the text's UTF-8 (67 characters), for
   texts whose escaped form is longer. It is not reversible: whoever encodes keeps the
   original beside it (an adapter, in the session's metadata).

The forms cannot be confused: only escaped and hashed names start with ``+``, and in an
escaped name a ``+`` is always followed by two uppercase hex digits, never by ``h``.
So a valid name that starts with ``+`` is escaped, not kept: ``+alice`` is
``++2Balice``. Whoever encodes must do it from the first name stored on: a name stored
as it was and encoded later is another name (another user, another agent).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import TypeGuard

from .errors import ValidationError
from .fieldlimits import ID_CHARS, NAME_CHARS

__all__ = [
    "ID_PATTERN",
    "NAME_PATTERN",
    "check_id",
    "check_name",
    "decode_name",
    "derived_id",
    "encode_name",
    "is_id",
    "is_label",
    "new_id",
]

#: The shape of every generated id (use ``fullmatch``); checked before any store lookup,
#: so a malformed id never reaches a store.
ID_PATTERN = re.compile(r"[a-z]{2,5}_[a-z2-7]{26}")

#: User ids and other caller-chosen names: printable, no path separators, bounded.
NAME_PATTERN = re.compile(rf"[A-Za-z0-9._:@+\-]{{1,{NAME_CHARS}}}")


#: Every pair of lowercase RFC 4648 base32 digits, indexed by its 10 bits.
_B32_PAIRS = [
    a + b for a in "abcdefghijklmnopqrstuvwxyz234567" for b in "abcdefghijklmnopqrstuvwxyz234567"
]
#: Bit offsets of the 13 digit pairs of an id, most significant first.
_PAIR_SHIFTS = tuple(range(120, -1, -10))


def new_id(prefix: str) -> str:
    """Return a fresh id ``f"{prefix}_<26 base32 chars>"`` carrying 128 random bits."""
    return derived_id(prefix, secrets.token_bytes(16))


def derived_id(prefix: str, digest: bytes) -> str:
    """Return the id ``f"{prefix}_<26 base32 chars>"`` of the first 16 bytes of
    ``digest`` (at least 16 bytes, e.g. an HMAC): the same digest, the same id."""
    # The unpadded base32 of the 16 bytes (two zero bits pad 128 to 130 bits), two
    # digits per lookup: the stdlib encoder is pure Python and twice as slow.
    bits = int.from_bytes(digest[:16], "big") << 2
    return prefix + "_" + "".join([_B32_PAIRS[(bits >> s) & 1023] for s in _PAIR_SHIFTS])


def is_id(value: object, prefix: str) -> TypeGuard[str]:
    """Whether ``value`` is a well-formed id with ``prefix`` (e.g. ``"ses"``): a str of
    ``ID_PATTERN``, at most ``ID_CHARS`` (40) characters. The one id-shape rule."""
    return (
        type(value) is str
        and len(value) <= ID_CHARS
        and value.startswith(prefix + "_")
        and ID_PATTERN.fullmatch(value) is not None
    )


def is_label(value: object, max_chars: int) -> TypeGuard[str]:
    """Whether ``value`` is a label as tool names and tool-call ids are: a str of 1 to
    ``max_chars`` ASCII characters of ``A-Za-z0-9._:-``."""
    return (
        type(value) is str
        and 1 <= len(value) <= max_chars
        and value.isascii()
        and all(c.isalnum() or c in "._:-" for c in value)
    )


def check_id(value: object, *, field: str, prefix: str) -> str:
    """Return ``value`` if it is a well-formed id with ``prefix`` (:func:`is_id`).

    Raises:
        ValidationError: anything else (wrong type, wrong prefix, ``../x``, 10 kB strings).
    """
    if is_id(value, prefix):
        return value
    shown = repr(value)[:60]
    raise ValidationError(f"{field} {shown} is not a valid {prefix}_ id", field=field)


def check_name(value: object, *, field: str) -> str:
    """Return ``value`` if it is a valid user id / agent name / key (``NAME_PATTERN``).

    Raises:
        ValidationError: empty, too long (over ``NAME_CHARS``, 128), or holding other
            characters.
    """
    if type(value) is not str or not NAME_PATTERN.fullmatch(value):
        shown = repr(value)[:60]
        raise ValidationError(
            f"{field} {shown} must be 1-{NAME_CHARS} characters of A-Z a-z 0-9 . _ : @ + -",
            field=field,
        )
    return value


#: The first character of an escaped or hashed name (:func:`encode_name`).
_ESCAPE = "+"
#: Characters an escaped name keeps as they are: the name characters but the escape.
_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@-")
_HASHED = "++h"
_ESCAPED_BYTE = re.compile(r"\+([0-9A-F]{2})")


def encode_name(text: str) -> str:
    """Map any non-empty text to a valid name (see the module docstring for the rule).

    Args:
        text: any string of 1 or more characters (lone surrogates included).

    Returns:
        A string matching ``NAME_PATTERN``: ``text`` itself when it is a name not
        starting with ``+``, else its escaped form, else (over 128 characters) its
        hashed form. Distinct texts give distinct names.

    Raises:
        ValidationError: ``text`` is not a str or is empty.
    """
    if type(text) is not str or not text:
        raise ValidationError("a name to encode must be a non-empty string", field="name")
    if NAME_PATTERN.fullmatch(text) and not text.startswith(_ESCAPE):
        return text
    parts = [_ESCAPE]
    for char in text:
        if char in _KEPT:
            parts.append(char)
        else:
            parts += [f"+{b:02X}" for b in char.encode("utf-8", "surrogatepass")]
    escaped = "".join(parts)
    if len(escaped) <= NAME_CHARS:
        return escaped
    return _HASHED + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def decode_name(name: str) -> str:
    """The text :func:`encode_name` mapped to ``name``.

    Args:
        name: a plain or escaped name.

    Returns:
        The original text (a plain name is returned as it is).

    Raises:
        ValidationError: ``name`` is not a valid name, is a hashed name (its text is
            not in it), or is not an escaped form :func:`encode_name` makes.
    """
    check_name(name, field="name")
    if not name.startswith(_ESCAPE):
        return name
    if name.startswith(_HASHED):
        raise ValidationError(
            "a hashed name cannot be decoded: its text was kept where it was encoded", field="name"
        )
    body = name[len(_ESCAPE) :]
    data = bytearray()
    at = 0
    for match in _ESCAPED_BYTE.finditer(body):
        data += body[at : match.start()].encode("ascii")
        data.append(int(match.group(1), 16))
        at = match.end()
    data += body[at:].encode("ascii")
    try:
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        text = ""
    if not text or encode_name(text) != name:  # one name per text: no other spelling
        raise ValidationError(f"{name[:60]!r} is not an encoded name", field="name")
    return text
