"""Content sealing at a store's serialisation boundary: JSON values, texts and bytes.

A store with a keyring passes each content value through :class:`ContentCipher` where it
serialises it (one function per content kind), naming its :class:`~.envelope.Place`.
A sealed text is the envelope's text form (``"$as1$..."``), a sealed JSON value the
object ``{"$as1": text form}`` (an object, so a field typed as one still holds it),
sealed bytes ``b"$as1$"`` and the envelope: no column changes type.

Fail closed: reading a value that is not sealed raises :class:`KeyringError`, unless
the cipher was made with ``accept_plaintext=True``, or while an ``agentsession
encrypt`` pass is declared next to the keyring (:mod:`.marker`): a store being
encrypted holds both kinds of value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import KeyringError
from ..jsonvalues import dumps, loads
from .envelope import TEXT_PREFIX, Place, aad_head, from_text, is_sealed_text, open_known, to_text
from .keyring import Keyring

__all__ = ["SEALED_KEY", "ContentCipher"]

#: The one key of a sealed JSON value's object.
SEALED_KEY = "$as1"

_BYTES_PREFIX = TEXT_PREFIX.encode("ascii")


class ContentCipher:
    """Seals and opens content values with a keyring.

    Args:
        keyring: the store's keyring.
        accept_plaintext: let reads return values not sealed yet (a migration only).
    """

    def __init__(self, keyring: Keyring, *, accept_plaintext: bool = False) -> None:
        self.keyring = keyring
        self.accept_plaintext = accept_plaintext

    def seal_json(self, value: Any, place: Place) -> dict[str, str]:
        """A JSON value as ``{"$as1": the envelope text of its JSON text}``."""
        return {SEALED_KEY: to_text(self.keyring.encrypt(dumps(value).encode("utf-8"), place))}

    def open_json(self, stored: Any, place: Place) -> Any:
        """The JSON value a stored value holds (``stored`` as the column decoded it).

        Raises:
            KeyringError: not sealed (fail closed), or it does not open.
        """
        if type(stored) is dict and len(stored) == 1:
            text = stored.get(SEALED_KEY)
            if isinstance(text, str) and is_sealed_text(text):
                opened = self.keyring.decrypt(from_text(text, place), place)
                return loads(opened.decode("utf-8"))
        return self.plaintext(stored, place)

    def seal_text(self, text: str | None, place: Place) -> str | None:
        """A text as its envelope text; None stays None (absence is not content)."""
        if text is None:
            return None
        return to_text(self.keyring.encrypt(text.encode("utf-8"), place))

    def open_text(self, stored: str | None, place: Place) -> str | None:
        """The text a stored text holds (None stays None).

        Raises:
            KeyringError: not sealed (fail closed), or it does not open.
        """
        if stored is None:
            return None
        if is_sealed_text(stored):
            return self.keyring.decrypt(from_text(stored, place), place).decode("utf-8")
        text: str | None = self.plaintext(stored, place)
        return text

    def text_opener(
        self, user_id: str, session_id: str, kind: str
    ) -> Callable[[str, str | int], str]:
        """:meth:`open_text` for the sealed texts (:func:`~.envelope.is_sealed_text`)
        of one user's session and kind, given each one's position: what one read of
        many rows calls. It takes the user's keys as the keyring knows them when made
        (:meth:`Keyring.known_keys`), and again after a value that needed the general
        path (:meth:`Keyring.decrypt`): make one per read, so that a key destroyed
        meanwhile is missing from the next read.

        Returns:
            ``open(stored, position) -> text``, raising as :meth:`open_text`.
        """
        ring = self.keyring
        keys = ring.known_keys(user_id)
        head = aad_head(ring.store_id, user_id, session_id, kind)

        def open_text(stored: str, position: str | int) -> str:
            nonlocal keys
            opened = open_known(keys, stored, head, position)
            if opened is None:  # the general path decides, names the error, learns the key
                place = Place(user_id, session_id, kind, position)
                opened = ring.decrypt(from_text(stored, place), place)
                keys = ring.known_keys(user_id)
            return opened.decode("utf-8")

        return open_text

    def seal_bytes(self, data: bytes, place: Place) -> bytes:
        """Bytes as ``b"$as1$"`` and their envelope."""
        return _BYTES_PREFIX + self.keyring.encrypt(data, place)

    def open_bytes(self, stored: bytes, place: Place) -> bytes:
        """The bytes a stored value holds.

        Raises:
            KeyringError: not sealed (fail closed), or it does not open.
        """
        if stored.startswith(_BYTES_PREFIX):
            return self.keyring.decrypt(stored[len(_BYTES_PREFIX) :], place)
        data: bytes = self.plaintext(stored, place)
        return data

    def plaintext(self, stored: Any, place: Place) -> Any:
        """``stored``, a value found unsealed, if plaintext reads are accepted.

        Raises:
            KeyringError: they are not (fail closed).
        """
        if self.accept_plaintext or self.keyring.accepts_plaintext():
            return stored
        raise KeyringError(
            f"the stored value at {place.describe()} is plaintext where a ciphertext is "
            "expected: a store written without a keyring is not opened with one"
        )
