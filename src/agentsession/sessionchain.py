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

__all__ = [
    "CREATED",
    "DELETED",
    "HEAD",
    "append_links",
    "find_chain_break",
    "find_link_break",
    "link_hash",
]

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
    return AuditBreak(session_id=link.session_id, link=link.seq, problem=problem, detail=detail)


def find_chain_break(
    links: Iterable[ChainLink],
    head: str | None,
    live: Mapping[str, object],
    events: Mapping[str, Sequence[AuditEvent]],
    *,
    head_after: str | None,
) -> AuditBreak | None:
    """Check the session chain: ``links`` in seq order (read after the others), ``head``
    the stored head read before ``live`` (the ids of live sessions) and ``events`` (the
    kept audit events by session), ``head_after`` the stored head read again after
    ``links``. Return the first broken link, or None.

    Rules: seqs run 1, 2, 3...; each link's hash matches its content and its
    ``prev_hash`` is the previous link's hash; the head names a link that is there, and
    (read after the links) names the last one or a later one: a chain with links has a
    head; then :func:`find_link_break` on every link. A missing link is named by its
    seq and, where its hash is known (the next link's ``prev_hash``, or the head), by
    the session whose creation or tombstone event it was made of.
    """
    head_seq, head_hash = parse_head(head)
    prev: ChainLink | None = None
    kept: list[ChainLink] = []
    for link in links:
        want = 1 if prev is None else prev.seq + 1
        if link.seq != want:
            known = link.prev_hash if link.seq == want + 1 else None
            return _missing(want, known, prev, events, f"session-chain link {want} is missing")
        if link_hash(link.seq, link.session_id, link.kind, link.event_hash, link.prev_hash) != (
            link.hash
        ):
            return _break(link, "changed", f"session-chain link {link.seq} changed")
        if link.prev_hash != (None if prev is None else prev.hash):
            return _break(link, "changed", f"session-chain link {link.seq} is not chained")
        if link.seq == head_seq and link.hash != head_hash:
            return _break(link, "changed", "the session chain's head names another link")
        prev = link
        kept.append(link)
    last = 0 if prev is None else prev.seq
    if head_seq > last:
        known = head_hash if head_seq == last + 1 else None
        detail = f"the session chain ends before its head (link {head_seq})"
        return _missing(last + 1, known, prev, events, detail)
    if parse_head(head_after)[0] < last:
        named = "is missing" if not head_after else f"names link {parse_head(head_after)[0]}"
        detail = f"the session chain's head {named}, before its last link {last}"
        return AuditBreak(session_id="", problem="removed", detail=detail)
    return find_link_break(kept, head, live, events)


def find_link_break(
    links: Sequence[ChainLink],
    head: str | None,
    live: Mapping[str, object],
    events: Mapping[str, Sequence[AuditEvent]],
) -> AuditBreak | None:
    """Check each link of ``links`` (in seq order; all of the chain's, or all of one
    session's) at or below ``head`` against the sessions: a link whose session is not
    live has a ``deleted`` link or a tombstone (else the session was **removed**
    without one); a ``deleted`` link has its tombstone event; a live session holds its
    ``created`` link's event. Arguments as :func:`find_chain_break`'s."""
    head_seq, _ = parse_head(head)
    deleted = {link.session_id for link in links if link.kind == DELETED}
    for link in links:
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


def _missing(
    seq: int,
    digest: str | None,
    prev: ChainLink | None,
    events: Mapping[str, Sequence[AuditEvent]],
    detail: str,
) -> AuditBreak:
    """The break of missing link ``seq`` whose hash is ``digest`` (None: not known),
    after ``prev``: named by the session one of whose kept events, as a ``created`` or
    ``deleted`` link after ``prev``, hashes to ``digest`` (``""`` when none does)."""
    prev_hash = None if prev is None else prev.hash
    for session_id, kept in events.items() if digest else ():
        for e in kept:
            for kind in (CREATED, DELETED):
                if e.hash and link_hash(seq, session_id, kind, e.hash, prev_hash) == digest:
                    return AuditBreak(
                        session_id=session_id, link=seq, problem="removed", detail=detail
                    )
    return AuditBreak(session_id="", link=seq, problem="removed", detail=detail)


def _has_tombstone(events: Sequence[AuditEvent]) -> bool:
    return any(e.action == TOMBSTONE for e in events)
