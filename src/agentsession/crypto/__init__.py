"""Encryption at rest: a keyring of per-user data keys, and content sealed to its place.

* :class:`Keyring` (:mod:`.keyring`): ``Keyring.create(path)`` / ``Keyring.open(path)``,
  key-encryption keys in a private file wrapping users' data keys, which live in a
  :class:`KeyStore` (:mod:`.keystore`), never in the session database.
* :class:`Place` and the envelope (:mod:`.envelope`): AES-256-GCM with associated data
  binding each ciphertext to its store, user, session, kind and position.
* :class:`ContentCipher` (:mod:`.content`): what stores call where they serialise content.

Every failure is one typed error, :class:`agentsession.errors.KeyringError`
(docs/security.md, "Encryption at rest").
"""

from __future__ import annotations

from .content import ContentCipher
from .envelope import Place
from .keyring import Keyring, KeyringStatus
from .keystore import FileKeyStore, KeyStore, MemoryKeyStore, WrappedKey

__all__ = [
    "ContentCipher",
    "FileKeyStore",
    "KeyStore",
    "Keyring",
    "KeyringStatus",
    "MemoryKeyStore",
    "Place",
    "WrappedKey",
]
