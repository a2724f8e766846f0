"""Identifiers: prefixed, 128 random bits, and a strict pattern to check them by.

An id is ``<prefix>_<26 chars of lowercase base32>`` (16 random bytes from
:mod:`secrets`), e.g. ``ses_5x3k...``. The prefix tells what an id names in logs.
"""

from __future__ import annotations

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
    # The unpadded base32 of the 16 random bytes (two zero bits pad 128 to 130 bits),
    # two digits per lookup: the stdlib encoder is pure Python and twice as slow.
    bits = int.from_bytes(secrets.token_bytes(16), "big") << 2
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
