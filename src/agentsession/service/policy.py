"""Tunable rules of a SessionManager: size limits and lifecycle policy.

Both are plain frozen dataclasses passed to the SessionManager constructor; the library
never reads the environment (settings are read only at the edges: CLI, HTTP service).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..fieldlimits import TITLE_CHARS

if TYPE_CHECKING:
    from ..usage import ModelPrice

__all__ = ["Limits", "Policy"]

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """Size limits, in bytes of UTF-8 JSON unless stated. Checked before any
    write, so an oversized payload never reaches a store.

    Attributes:
        max_message_bytes: one message as appended (content, tool calls, extra fields).
        max_batch_messages: messages in one ``append_messages`` call.
        max_tool_call_bytes: a tool call's arguments plus result plus error.
        max_working_memory_bytes: the whole working-memory document after an update.
        max_run_payload_bytes: a run's input/output, or one step's input/output.
        max_metadata_bytes: a session's or message's ``metadata`` object.
        max_title_chars: a session title, in characters.
        max_page_size: the largest ``limit`` a listing accepts.
        max_record_bytes: the ``data`` of one session record, in bytes.
        max_patch_ops: operations in one JSON Patch op list (working or shared
            memory), so one request cannot keep a write transaction busy for long.
        default_page_size: how many rows a listing gives when no ``limit`` is passed
            (at most ``max_page_size``), e.g. the steps ``get_run`` returns.
    """

    max_message_bytes: int = 4 * MiB
    max_batch_messages: int = 1000
    max_tool_call_bytes: int = 4 * MiB
    max_working_memory_bytes: int = 1 * MiB
    max_run_payload_bytes: int = 1 * MiB
    max_metadata_bytes: int = 16 * 1024
    max_title_chars: int = TITLE_CHARS
    max_page_size: int = 1000
    default_page_size: int = 100
    max_record_bytes: int = 8 * MiB
    max_patch_ops: int = 1000


@dataclass(frozen=True, slots=True)
class Policy:
    """Lifecycle rules (docs/semantics.md, "Lifecycle").

    Attributes:
        expired_restore_window_seconds: how long after expiry an EXPIRED session may
            still be restored; None = always, 0 = never. Default 7 days.
        idempotency_retention_seconds: how long an idempotency key is remembered.
            Default 24 hours; a key older than this is treated as new.
        restore_message_limit: how many recent messages ``restore_session`` returns
            by default.
        restore_tool_call_limit: how many recent tool calls ``restore_session`` returns.
        restore_run_limit: how many recent runs ``restore_session`` returns.
        max_retries: how often one call re-runs a transaction the store reported as
            busy (lost race, deadlock, lock timeout) before raising StoreBusy.
        max_retry_seconds: no re-run starts once the call has taken this long, so a
            lock wait that already used the store's busy timeout is not repeated.
        tombstone_key: the secret (at least 16 bytes) of the keyed hash (HMAC-SHA256)
            that stands for the user id in the tombstone of a deleted session. The same
            key gives the same hash, so an operator holding it can find a user's
            tombstones; None (default) = a random key per manager, so no tombstone can
            be linked back to a user at all. Never shown by ``repr``.
        prices: the price table of the usage ledger: model name ->
            :class:`~agentsession.usage.ModelPrice` (per million tokens of each kind,
            one currency); None (default): no prices, so every cost is None and a cost
            budget counts no cost (docs/semantics.md, "Usage and budgets").
    """

    expired_restore_window_seconds: float | None = 7 * 24 * 3600
    idempotency_retention_seconds: float = 24 * 3600
    restore_message_limit: int = 50
    restore_tool_call_limit: int = 50
    restore_run_limit: int = 20
    max_retries: int = 8
    max_retry_seconds: float = 5.0
    tombstone_key: bytes | None = field(default=None, repr=False)
    prices: Mapping[str, ModelPrice] | None = None
