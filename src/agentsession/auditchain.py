"""The hash chain of the audit log: how an event's hash is made, and checking a chain.

Each audit event of a session carries ``prev_hash`` (the hash of the session's previous
event; None for the first hashed one) and ``hash``: SHA-256, as 64 lowercase hex digits,
of the event's canonical encoding. The canonical encoding is the UTF-8 of the compact
JSON object (keys sorted, separators ``,`` and ``:``, non-ASCII kept as is) of these
fields: ``session_id``, ``user_id``, ``actor``, ``action``, ``at`` (UTC,
``YYYY-MM-DDTHH:MM:SS.ffffffZ``), ``version_before``, ``version_after``,
``request_id``, ``details`` and ``prev_hash``. ``seq`` is left out: the store gives it
after the hash is made. The session row keeps the newest hash (``audit_head``), so an
append reads no event to chain the next one.

A deleted session keeps only its tombstone event (``session.deleted``): its
``prev_hash`` is the hash of the session's last event and ``version_before`` its last
version, so the tombstone says where the removed chain ended. Events written before the
chain existed have no hash; a session's chain starts at its first hashed event.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .models import AuditBreak, AuditEvent

__all__ = ["TOMBSTONE", "canonical", "event_hash", "find_break", "new_event"]

#: The action of a deleted session's tombstone event.
TOMBSTONE = "session.deleted"


#: One encoder for every event (``json.dumps`` with options builds one per call).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _utc(at: datetime) -> str:
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return at.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def canonical(event: AuditEvent, prev_hash: str | None) -> bytes:
    """The canonical encoding of ``event`` chained after ``prev_hash`` (module doc)."""
    return _canonical(event.__dict__, prev_hash)


def _canonical(values: Mapping[str, Any], prev_hash: str | None) -> bytes:
    """:func:`canonical` of the event whose fields are ``values`` (by field name)."""
    fields = {
        "session_id": values["session_id"],
        "user_id": values["user_id"],
        "actor": values["actor"],
        "action": values["action"],
        "at": _utc(values["at"]),
        "version_before": values["version_before"],
        "version_after": values["version_after"],
        "request_id": values["request_id"],
        "details": values["details"],
        "prev_hash": prev_hash,
    }
    return _ENCODER.encode(fields).encode("utf-8")


def event_hash(event: AuditEvent, prev_hash: str | None) -> str:
    """SHA-256 (hex) of :func:`canonical` ``(event, prev_hash)``."""
    return hashlib.sha256(canonical(event, prev_hash)).hexdigest()


def new_event(values: dict[str, Any], prev_hash: str | None) -> AuditEvent:
    """The event of ``values`` (every :class:`AuditEvent` field but ``prev_hash`` and
    ``hash``, each already of its field's type: the write pipeline's own) chained
    after ``prev_hash``: equal to ``AuditEvent(**values, prev_hash=prev_hash,
    hash=...)`` (values, fields set), with no validation."""
    digest = hashlib.sha256(_canonical(values, prev_hash)).hexdigest()
    event = object.__new__(AuditEvent)
    setattr_ = object.__setattr__
    setattr_(event, "__dict__", {**values, "prev_hash": prev_hash, "hash": digest})
    setattr_(event, "__pydantic_fields_set__", set(_EVENT_FIELDS))
    setattr_(event, "__pydantic_extra__", None)
    setattr_(event, "__pydantic_private__", None)
    return event


#: Every field of an event, in declaration order (each is set on a new event).
_EVENT_FIELDS = tuple(AuditEvent.model_fields)


def _broken(session_id: str, event: AuditEvent, problem: str, detail: str) -> AuditBreak:
    after = event.version_after
    version = after if after is not None else event.version_before
    return AuditBreak(session_id=session_id, version=version, problem=problem, detail=detail)


def find_break(
    session_id: str, events: Sequence[AuditEvent], head: str | None
) -> AuditBreak | None:
    """Check one session's audit events (in stored order, oldest first) against each
    other and against ``head``, the session row's ``audit_head`` (None for a deleted
    session or one never hashed). Return the first broken link, or None if intact.

    Rules: every hashed event's hash matches its content; each hashed event's
    ``prev_hash`` is the hash of the hashed event before it (the first hashed one:
    None, or, for a tombstone, the end of the removed chain); no unhashed event follows
    a hashed one; the last hash is ``head`` when the session exists.
    """
    start = next((i for i, e in enumerate(events) if e.hash is not None), len(events))
    hashed = list(events[start:])
    for e in hashed:
        if e.hash is None:
            return _broken(session_id, e, "changed", f"event {e.seq} lost its hash")
    known = {e.hash for e in hashed}
    prev: str | None = None
    for i, e in enumerate(hashed):
        if event_hash(e, e.prev_hash) != e.hash:
            return _broken(session_id, e, "changed", f"event {e.seq} changed")
        first_ok = i == 0 and (e.prev_hash is None or e.action == TOMBSTONE)
        if e.prev_hash != prev and not first_ok:
            problem = "reordered" if e.prev_hash in known else "removed"
            detail = f"event {e.seq} follows another event than it was written after"
            return _broken(session_id, e, problem, detail)
        prev = e.hash
    if head is not None and head != prev:
        problem = "unchained" if not hashed else "removed"
        detail = "the session's newest audit event is missing"
        return AuditBreak(session_id=session_id, problem=problem, detail=detail)
    return None
