"""The session chain: a store-wide hash chain of session creations and deletions, so
``audit verify`` notices a session removed together with every audit event it had.

Each session's own audit chain (:mod:`agentsession.auditchain`) shows an event changed,
removed or reordered, but not a session whose row and events were all deleted by hand:
nothing of it is left to check. So each creation (or fork) and each deletion of a
session appends a link to one chain of the whole store, in the same transaction:
``seq`` (1, 2, 3... without gaps), ``session_id``, ``kind`` (``created`` /
``deleted``), ``event_hash`` (the hash of the creation, fork or tombstone audit event)
and ``prev_hash``; its ``hash`` is SHA-256 (hex) of the compact JSON (keys sorted,
separators ``,`` and ``:``) of those five fields. The store keeps the newest link as
``<seq>:<hash>`` in its metadata (:data:`HEAD`). A session created and never deleted
stays live; deleted, it leaves a ``deleted`` link and its tombstone event.

Only creations and deletions are links, not every write: an append changes its
session's own chain and head, never this one, so the append path takes no store-wide
lock. A creation or deletion holds the chain's head until it commits (they take turns).
Sessions created before the chain existed have no link.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence

from .auditchain import TOMBSTONE
from .models import AuditBreak, AuditEvent
from .stores.base import ChainLink, StoreTransaction

__all__ = ["CREATED", "DELETED", "HEAD", "append_links", "find_chain_break", "link_hash"]

#: The store-metadata name of the chain's head (``<seq>:<hash>``).
HEAD = "session_chain"
CREATED = "created"
DELETED = "deleted"

_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def link_hash(seq: int, session_id: str, kind: str, event_hash: str, prev_hash: str | None) -> str:
    """SHA-256 (hex) of a link's canonical encoding (module docstring)."""
    fields = {
        "seq": seq,
        "session_id": session_id,
        "kind": kind,
        "event_hash": event_hash,
        "prev_hash": prev_hash,
    }
    return hashlib.sha256(_ENCODER.encode(fields).encode("utf-8")).hexdigest()


def parse_head(value: str | None) -> tuple[int, str | None]:
    """The (seq, hash) of a stored head; (0, None) for an empty chain."""
    if not value:
        return 0, None
    seq, _, digest = value.partition(":")
    return int(seq), digest


def append_links(tx: StoreTransaction, entries: Sequence[tuple[str, str, str]]) -> None:
    """Append one link per ``(session_id, kind, event_hash)`` to the chain, after its
    head (read and locked in ``tx``), and store the new head. Call it last in the
    write transaction, so the head is held for as short a time as possible."""
    if not entries:
        return
    seq, prev = parse_head(tx.get_store_meta(HEAD))
    links = []
    for session_id, kind, event_hash in entries:
        seq += 1
        digest = link_hash(seq, session_id, kind, event_hash, prev)
        links.append(ChainLink(seq, session_id, kind, event_hash, prev, digest))
        prev = digest
    tx.insert_chain_links(links)
    tx.put_store_meta(HEAD, f"{seq}:{prev}")


def _break(link: ChainLink, problem: str, detail: str) -> AuditBreak:
    return AuditBreak(session_id=link.session_id, problem=problem, detail=detail)


def find_chain_break(
    links: Iterable[ChainLink],
    head: str | None,
    live: Mapping[str, object],
    events: Mapping[str, Sequence[AuditEvent]],
) -> AuditBreak | None:
    """Check the session chain: ``links`` in seq order (read after the others), ``head``
    the stored head read before ``live`` (the ids of live sessions) and ``events`` (the
    kept audit events by session). Return the first broken link, or None.

    Rules: seqs run 1, 2, 3...; each link's hash matches its content and its
    ``prev_hash`` is the previous link's hash; the head names a link that is there; a
    link at or below the head whose session is not live has a ``deleted`` link or a
    tombstone (else the session was **removed** without one); a ``deleted`` link at or
    below the head has its tombstone event; a live session holds its ``created``
    link's event.
    """
    head_seq, head_hash = parse_head(head)
    prev: ChainLink | None = None
    deleted: set[str] = set()
    kept: list[ChainLink] = []
    for link in links:
        want = 1 if prev is None else prev.seq + 1
        if link.seq != want:
            return _break(link, "removed", f"session-chain link {want} is missing")
        if link_hash(link.seq, link.session_id, link.kind, link.event_hash, link.prev_hash) != (
            link.hash
        ):
            return _break(link, "changed", f"session-chain link {link.seq} changed")
        if link.prev_hash != (None if prev is None else prev.hash):
            return _break(link, "changed", f"session-chain link {link.seq} is not chained")
        if link.seq == head_seq and link.hash != head_hash:
            return _break(link, "changed", "the session chain's head names another link")
        if link.kind == DELETED:
            deleted.add(link.session_id)
        prev = link
        kept.append(link)
    if head_seq and (prev is None or prev.seq < head_seq):
        detail = f"the session chain ends before its head (link {head_seq})"
        return AuditBreak(
            session_id="" if prev is None else prev.session_id, problem="removed", detail=detail
        )
    for link in kept:
        if link.seq > head_seq:
            break  # written after the other reads began
        hashes = {e.hash for e in events.get(link.session_id, ())}
        if link.kind == DELETED and link.event_hash not in hashes:
            return _break(link, "removed", "the tombstone of a deleted session is missing")
        if link.kind != DELETED and link.session_id in live and link.event_hash not in hashes:
            return _break(link, "removed", "the creation event of a live session is missing")
        gone = link.session_id not in live and link.session_id not in deleted
        if link.kind != DELETED and gone and not _has_tombstone(events.get(link.session_id, ())):
            return _break(
                link, "removed", "the session is gone, with neither a tombstone nor a deletion"
            )
    return None


def _has_tombstone(events: Sequence[AuditEvent]) -> bool:
    return any(e.action == TOMBSTONE for e in events)
