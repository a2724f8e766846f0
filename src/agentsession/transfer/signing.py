"""Signed exports: an Ed25519 signature of an export file, kept beside it, and checking
it (docs/export.md, "Signed exports").

The signature file (``<export>.sig``) is one JSON object::

    {"algorithm": "Ed25519", "public_key_sha256": "<hex>", "signature": "<base64>"}

``signature`` is the Ed25519 signature (RFC 8032) of the ASCII bytes
``agentsession-export sha256:<hex>``, where ``<hex>`` is the SHA-256 of the export
file's bytes: the file is read once, in blocks, however large. ``public_key_sha256``
names the key (SHA-256 of its raw 32 bytes) so a wrong key is told from a changed file.
Keys are PEM files: the private key PKCS #8 (written 0600, checked like every secret
file before use), the public key SubjectPublicKeyInfo.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ..errors import ValidationError
from ..privatefiles import check_secret_file, open_private

__all__ = ["generate_key_pair", "sign_export", "signature_path", "verify_export"]

_ALGORITHM = "Ed25519"
_BLOCK = 1 << 20


def signature_path(export: Path) -> Path:
    """Where the signature of ``export`` is kept: ``<export>.sig``."""
    return export.with_name(export.name + ".sig")


def generate_key_pair(private: Path) -> Path:
    """Make a new Ed25519 key pair: the private key at ``private`` (created 0600; an
    existing file is refused), the public key beside it at ``<private>.pub``.

    Returns:
        The public key's path.

    Raises:
        ValidationError: ``private`` or the public file exists, or cannot be written.
    """
    public = private.with_name(private.name + ".pub")
    for path in (private, public):
        if path.exists():
            raise ValidationError(f"{path} exists: not overwritten", field="key")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    try:
        fd = open_private(private, os.O_WRONLY | os.O_EXCL)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        public.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
    except OSError as exc:
        raise ValidationError(f"cannot write {exc.filename}: {exc.strerror}", field="key") from None
    return public


def sign_export(export: Path, private: Path) -> Path:
    """Sign the file ``export`` with the private key file ``private``; write the
    signature to :func:`signature_path` and return that path.

    Raises:
        ValidationError: the key file is missing, not an Ed25519 private key, or not
            private (:func:`~agentsession.privatefiles.check_secret_file`); a file
            cannot be read or written.
        StoreError: the key file is a link, another user's, or writable by others.
    """
    check_secret_file(private)
    try:
        key = serialization.load_pem_private_key(_read(private, "key"), password=None)
    except (ValueError, TypeError):
        key = None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValidationError(f"{private} is not an Ed25519 private key", field="key")
    record = {
        "algorithm": _ALGORITHM,
        "public_key_sha256": _key_id(key.public_key()),
        "signature": base64.b64encode(key.sign(_message(export))).decode("ascii"),
    }
    out = signature_path(export)
    try:
        out.write_text(json.dumps(record) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"cannot write {out}: {exc.strerror}", field="out") from None
    return out


def verify_export(export: Path, public: Path, signature: Path | None = None) -> None:
    """Check the signature of ``export`` (at ``signature``, else
    :func:`signature_path`) against the public key file ``public``.

    Raises:
        ValidationError: the signature does not match (the file changed, or it was
            signed with another key: the message says which), or a file is missing or
            malformed.
    """
    try:
        key = serialization.load_pem_public_key(_read(public, "key"))
    except ValueError:
        raise ValidationError(f"{public} is not a PEM public key", field="key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise ValidationError(f"{public} is not an Ed25519 public key", field="key")
    sig_path = signature or signature_path(export)
    try:
        record = json.loads(_read(sig_path, "signature"))
        raw = base64.b64decode(record["signature"], validate=True)
        named = record["public_key_sha256"]
        if record["algorithm"] != _ALGORITHM:
            raise ValueError(record["algorithm"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise ValidationError(f"{sig_path} is not a signature file", field="signature") from None
    if named != _key_id(key):
        message = f"{export} was signed with another key than {public}"
        raise ValidationError(message, field="key")
    try:
        key.verify(raw, _message(export))
    except InvalidSignature:
        message = f"{export} does not match its signature: it changed since it was signed"
        raise ValidationError(message, field="file") from None


def _key_id(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def _message(export: Path) -> bytes:
    """The signed message: the export's SHA-256, read in blocks."""
    digest = hashlib.sha256()
    try:
        with export.open("rb") as f:
            while block := f.read(_BLOCK):
                digest.update(block)
    except OSError as exc:
        raise ValidationError(f"cannot read {export}: {exc.strerror}", field="file") from None
    return f"agentsession-export sha256:{digest.hexdigest()}".encode("ascii")


def _read(path: Path, field: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"cannot read {path}: {exc.strerror}", field=field) from None
