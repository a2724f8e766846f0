"""The progress marker of a sealing pass (``agentsession encrypt``, ``agentsession
keyring reencrypt``): a private file next to the keyring, ``<keyring>.pass``.

It holds which pass runs, when it started and the last item it finished, so a pass
stopped anywhere continues from there. While an ``encrypt`` marker exists, every
process with this keyring reads plaintext values as well as ciphertexts (a store
being encrypted holds both); once the pass completes it removes the marker and reads
fail closed again. The marker lives beside the keyring, not in the session database,
so that whoever can write the database alone cannot turn plaintext reads back on:
the keyring's directory is the operator's (docs/security.md, "Encryption at rest").
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticError

from ..errors import KeyringError, StoreError
from ..privatefiles import check_directory, check_secret_file, locked_rewrite

__all__ = ["PassMarker", "clear_marker", "marker_path", "read_marker", "write_marker"]

_FORMAT = "agentsession-sealing-pass"

PassKind = Literal["encrypt", "reencrypt"]
Phase = Literal["sessions", "forks", "shared", "idempotency"]


class PassMarker(BaseModel):
    """Where a sealing pass stands.

    Attributes:
        kind: ``encrypt`` (plaintext to ciphertext) or ``reencrypt`` (old data keys
            to the newest).
        started_at: ISO 8601 UTC: data keys made before it are retired by a
            completed ``reencrypt``.
        phase: what the pass walks now: sessions (each with all its content), then
            the forks made since it started, then shared documents, then idempotency
            results.
        after: the key of the last item done in this phase (None: none yet).
        done: how many items (sessions, documents, records) were rewritten so far.
    """

    model_config = ConfigDict(extra="forbid")

    format: str = _FORMAT
    kind: PassKind
    started_at: str
    phase: Phase = "sessions"
    after: list[str] | None = None
    done: int = 0

    @classmethod
    def start(cls, kind: PassKind) -> PassMarker:
        """A new pass of ``kind``, started now."""
        return cls(kind=kind, started_at=datetime.now(UTC).isoformat(timespec="microseconds"))


def marker_path(keyring_path: Path) -> Path:
    """The marker of the keyring file ``keyring_path``: ``<keyring>.pass``."""
    return keyring_path.with_name(keyring_path.name + ".pass")


def read_marker(path: Path) -> PassMarker | None:
    """The marker at ``path``, or None if no pass is declared.

    Raises:
        StoreError: it could have been written by another user.
        KeyringError: it is not a marker file.
    """
    try:
        check_directory(path.parent, (path,))
        check_secret_file(path)
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read the sealing-pass marker {path}: {exc}") from exc
    try:
        marker = PassMarker.model_validate_json(raw)
    except PydanticError:
        marker = None
    if marker is None or marker.format != _FORMAT:
        raise KeyringError(f"{path} is not a sealing-pass marker")
    return marker


def write_marker(path: Path, marker: PassMarker) -> None:
    """Replace the marker at ``path`` atomically (mode 0600)."""
    with locked_rewrite(path) as write:
        write(marker.model_dump_json().encode())


def clear_marker(path: Path) -> None:
    """Remove the marker: the pass is complete (reads fail closed again)."""
    with locked_rewrite(path), contextlib.suppress(FileNotFoundError):
        path.unlink()
