"""The fixed-width form of a session's external key that store indexes hold."""

from __future__ import annotations

import hashlib

__all__ = ["external_key_hash"]


def external_key_hash(*parts: str) -> str:
    """Hex SHA-256 (64 ASCII characters) of the parts' UTF-8, joined by U+001F.

    Stores index this instead of the key itself: fixed width whatever the key, and
    compared byte for byte on every backend. U+001F cannot occur in a key or a name,
    so distinct part lists never join to the same text.
    """
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
