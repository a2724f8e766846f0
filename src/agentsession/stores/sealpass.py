"""Sealing passes over a whole store: ``agentsession encrypt`` and ``agentsession
keyring reencrypt``, online, in batches, resumable.

A pass walks every session (by id), then the forks made since it started (a fork
copies its parent's rows as they are), then every shared document, then every
idempotency result, and writes each content value back through the
:class:`~.sealed.SealedStore`: opened (a plaintext value while an ``encrypt`` pass is
declared, or a value sealed with an older data key) and sealed again with the user's
newest data key, in place (the store port's "content rewrite" methods): ids, seqs,
versions and times stay. Its progress marker (:mod:`agentsession.crypto.marker`) is
saved after each batch, so a pass stopped anywhere resumes after the last batch done.

Concurrent writers: a session is rewritten whole in one write transaction that reads
the session row (locking it on the SQL stores; the memory store runs one transaction at
a time) and ends with a compare-and-set on its unchanged version, so a writer that
committed in between makes it re-run (:class:`StoreBusy`) rather than lose or
double-seal anything; a shared document is written back by compare-and-set on its
version the same way. A value is always opened before it is sealed, so nothing is
sealed twice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from ..crypto.marker import (
    PassKind,
    PassMarker,
    clear_marker,
    marker_path,
    read_marker,
    write_marker,
)
from ..errors import KeyringError, StoreBusy, ValidationError
from .base import IdempotencyRecord
from .sealed import SealedStore

__all__ = ["PassReport", "run_pass"]

T = TypeVar("T")

#: What a phase's batch did: the keys it walked (the last one is the cursor; none:
#: the phase is done) and how many items it rewrote.
_Batch = tuple[list[list[str]], int]

#: Rows read per page within a session.
PAGE = 500
#: Attempts of one item's transaction before the pass gives up (it can be resumed).
ATTEMPTS = 20


@dataclass(frozen=True, slots=True)
class PassReport:
    """What one run of a pass did.

    Attributes:
        kind: ``encrypt`` or ``reencrypt``.
        rewritten: items (sessions, shared documents, idempotency records) rewritten by
            this run.
        complete: whether the pass finished (its marker is gone); False when stopped by
            ``max_batches`` (run it again to resume).
        retired_users: after a complete ``reencrypt``, how many users' old data keys
            were dropped.
    """

    kind: PassKind
    rewritten: int
    complete: bool
    retired_users: int = 0


def declare(store: SealedStore, kind: PassKind) -> PassMarker:
    """Declare a pass of ``kind`` (write its marker) unless one is declared; return the
    marker in force.

    Raises:
        KeyringError: a pass of the other kind is unfinished (finish it first).
    """
    path = marker_path(store.keyring.path)
    marker = read_marker(path)
    if marker is None:
        marker = PassMarker.start(kind)
        write_marker(path, marker)
        store.keyring.refresh_pass_marker()
    elif marker.kind != kind:
        raise KeyringError(
            f"an unfinished {marker.kind!r} pass is declared ({path}): run it to the end first"
        )
    return marker


def run_pass(
    store: SealedStore,
    kind: PassKind,
    *,
    batch: int = 100,
    max_batches: int | None = None,
    on_batch: Callable[[PassMarker], None] | None = None,
) -> PassReport:
    """Run (or resume) a sealing pass over ``store``.

    Args:
        store: the store, wrapped with its keyring.
        kind: ``encrypt`` (a plaintext store; reads accept plaintext until the pass
            completes) or ``reencrypt`` (values sealed with old data keys, after
            ``keyring rotate --data-keys``; their keys are dropped at the end).
        batch: items per batch (each batch ends by saving the marker), at least 1.
        max_batches: stop after this many batches (None: run to the end).
        on_batch: called with the marker after each batch is saved (progress output).

    Returns:
        What this run did.

    Raises:
        ValidationError: ``batch`` is below 1.
        KeyringError: a pass of the other kind is unfinished, or a value does not open
            (nothing after the last saved batch is lost: fix it and run again).
        StoreError: the store failed; run again to resume.
    """
    if batch < 1:
        raise ValidationError("batch must be at least 1", field="batch")
    marker = declare(store, kind)
    path = marker_path(store.keyring.path)
    rewritten = batches = 0
    while True:
        if max_batches is not None and batches >= max_batches:
            return PassReport(kind, rewritten, complete=False)
        keys, count = _PHASES[marker.phase](store, marker, batch)
        if keys:
            rewritten += count
            marker = marker.model_copy(update={"after": keys[-1], "done": marker.done + count})
        else:
            following = _NEXT.get(marker.phase)
            if following is None:
                break
            marker = marker.model_copy(update={"phase": following, "after": None})
        write_marker(path, marker)
        batches += 1
        if on_batch is not None:
            on_batch(marker)
    retired = store.keyring.retire_data_keys(marker.started_at) if kind == "reencrypt" else 0
    clear_marker(path)
    store.keyring.refresh_pass_marker()
    return PassReport(kind, rewritten, complete=True, retired_users=retired)


def _retried(work: Callable[[], T]) -> T:
    """``work()``, run again when a concurrent writer won its compare-and-set."""
    for attempt in range(ATTEMPTS):
        try:
            return work()
        except StoreBusy:
            if attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def _sessions(store: SealedStore, marker: PassMarker, limit: int) -> _Batch:
    with store.transaction(write=False) as tx:
        ids = tx.list_session_ids(after=marker.after[0] if marker.after else None, limit=limit)
    for session_id in ids:
        _retried(functools.partial(_reseal_session, store, session_id))
    return [[i] for i in ids], len(ids)


def _forks(store: SealedStore, marker: PassMarker, limit: int) -> _Batch:
    """The forks made since the pass started, again: a fork copies its parent's rows as
    they are, so one made from a parent the walk had not reached yet, under an id it had
    already passed, holds plaintext copies the first walk never saw."""
    with store.transaction(write=False) as tx:
        ids = tx.list_session_ids(after=marker.after[0] if marker.after else None, limit=limit)
        started = datetime.fromisoformat(marker.started_at)
        forks = [
            s.session_id
            for s in map(tx.get_session, ids)
            if s is not None and s.parent_session_id is not None and s.created_at >= started
        ]
    for session_id in forks:
        _retried(functools.partial(_reseal_session, store, session_id))
    return [[i] for i in ids], len(forks)


def _reseal_session(store: SealedStore, session_id: str) -> None:
    """Every content value of one session, opened and sealed again, in one transaction."""
    with store.transaction(write=True) as tx:
        t: Any = tx  # the sealed transaction: it has reseal_session
        if t.reseal_session(session_id) is None:
            return  # deleted since it was listed
        after = 0
        while page := t.get_messages(session_id, after_seq=after, limit=PAGE, newest=False):
            t.rewrite_messages(page)
            after = page[-1].seq
        for rewind in t.list_rewinds(session_id):
            rewound = t.get_rewound_messages(session_id, rewind.number)
            t.rewrite_rewound_messages(session_id, rewind.number, rewound)
        memory = t.get_working_memory(session_id)
        if memory is not None:
            t.rewrite_working_memory(memory)
        before = None
        while versions := t.list_memory_history(session_id, before_seq=before, limit=PAGE):
            t.rewrite_memory_history(session_id, versions)
            if len(versions) < PAGE:
                break
            before = versions[-1].seq
        _reseal_calls_and_runs(t, session_id)
        t.rewrite_summaries(t.list_summaries(session_id))
        records = t.list_records(session_id)
        if records:
            t.put_records(records)


def _reseal_calls_and_runs(t: Any, session_id: str) -> None:
    after = None
    while calls := t.list_tool_calls(session_id, after_seq=after, limit=PAGE):
        t.rewrite_tool_calls(calls)
        after = calls[-1].seq
    after = None
    while runs := t.list_runs(session_id, after_seq=after, limit=PAGE):
        for run in runs:
            t.update_run(run)
            index = None
            while steps := t.list_run_steps(session_id, run.run_id, after_index=index, limit=PAGE):
                t.rewrite_run_steps(session_id, steps)
                index = steps[-1].index
        after = runs[-1].seq


def _shared(store: SealedStore, marker: PassMarker, limit: int) -> _Batch:
    after = marker.after
    with store.transaction(write=False) as tx:
        docs = tx.list_shared_memory(after=(after[0], after[1]) if after else None, limit=limit)

    def reseal(agent: str, user_id: str | None) -> None:
        with store.transaction(write=True) as tx:
            doc = tx.get_shared_memory(agent, user_id)
            if doc is not None:  # the same version: sealed again, not changed
                tx.put_shared_memory(doc, expected_version=doc.version)

    for d in docs:
        _retried(functools.partial(reseal, d.agent, d.user_id))
    return [[d.agent, d.user_id or ""] for d in docs], len(docs)


def _idempotency(store: SealedStore, marker: PassMarker, limit: int) -> _Batch:
    after = marker.after
    start = (after[0], after[1], after[2]) if after else None

    def reseal() -> list[IdempotencyRecord]:
        # Written once, never updated; a purge meanwhile makes the batch run again.
        with store.transaction(write=True) as tx:
            found = tx.list_idempotency(after=start, limit=limit)
            for r in found:
                tx.rewrite_idempotency(r)
        return found

    records = _retried(reseal)
    return [[r.user_id, r.scope, r.key] for r in records], len(records)


_PHASES: dict[str, Callable[[SealedStore, PassMarker, int], _Batch]] = {
    "sessions": _sessions,
    "forks": _forks,
    "shared": _shared,
    "idempotency": _idempotency,
}
_NEXT = {"sessions": "forks", "forks": "shared", "shared": "idempotency"}
