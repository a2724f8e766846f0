"""The change feed on PostgreSQL and MariaDB when transactions commit in another order
than they got their seqs (the trap of polling by an auto-increment id).

Transaction A takes seq n and pauses before its COMMIT; transaction B takes seq n + 1
and commits; a reader polls in between. A reader that returned n + 1 then would resume
after it and never see n. The feed must hold n + 1 back until A has ended, then give
both, in seq order; and whatever A does, the reader never skips a committed event.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime

import pytest

import servers
from agentsession.ids import new_id
from agentsession.models import AuditEvent
from agentsession.stores.sql.store import SQLStore

pytestmark = pytest.mark.skipif(
    not servers.server_stores_enabled(),
    reason=f"server stores left out ({servers.SERVER_STORES_ENV}=0)",
)

USER = "racer"


@pytest.fixture(params=["postgres", "mysql"])
def sql_store(request: pytest.FixtureRequest) -> Iterator[SQLStore]:
    store = SQLStore(request.getfixturevalue(f"{request.param}_store_url"), auto_migrate=True)
    try:
        yield store
    finally:
        store.close()


def _event(session_id: str) -> AuditEvent:
    return AuditEvent(
        seq=0,
        session_id=session_id,
        user_id=USER,
        actor=USER,
        action="message.appended",
        at=datetime.now(UTC),
        version_before=1,
        version_after=2,
    )


def _read(store: SQLStore, after: str | None) -> list[tuple[str, int]]:
    found = store.read_changes(after=after, user_ids=[USER], session_id=None, limit=100)
    return [(cursor, e.seq) for cursor, e in found.changes]


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_c27_smaller_seq_committed_later_is_not_skipped(sql_store: SQLStore, outcome: str) -> None:
    """A holds seq n open while B commits n + 1: a read in between returns neither;
    once A ends, the reader resumes and gets n (if A committed) and n + 1, in order."""
    with ExitStack() as a_tx:
        a = a_tx.enter_context(sql_store.transaction(write=True))
        first = a.insert_audit(_event(new_id("ses")))

        def b() -> None:
            with sql_store.transaction(write=True) as tx:
                tx.insert_audit(_event(new_id("ses")))

        writer = threading.Thread(target=b)
        writer.start()
        writer.join(timeout=30)
        assert not writer.is_alive()
        # B has committed n + 1; A has n, still open. A reader polls now.
        assert _read(sql_store, None) == []
        if outcome == "rollback":
            a_tx.pop_all().__exit__(RuntimeError, RuntimeError("abandoned"), None)
    after = _read(sql_store, None)
    seqs = [seq for _, seq in after]
    assert seqs == ([first, first + 1] if outcome == "commit" else [first + 1])
    assert _read(sql_store, after[-1][0]) == []


def test_c27_racing_writers_and_a_polling_reader(sql_store: SQLStore) -> None:
    """Many writers whose transactions pause before COMMIT for different times, so they
    commit out of seq order, and a reader polling from its cursor all along: it sees
    every committed event exactly once, in seq order."""
    stop = threading.Event()
    seen: list[int] = []

    def poll() -> None:
        cursor: str | None = None
        while True:
            finished = stop.is_set()
            found = _read(sql_store, cursor)
            seen.extend(seq for _, seq in found)
            cursor = found[-1][0] if found else cursor
            if finished and not found:
                return

    def write(i: int) -> None:
        for n in range(5):
            with sql_store.transaction(write=True) as tx:
                tx.insert_audit(_event(new_id("ses")))
                # The earlier seqs wait longest: commits come out of seq order.
                stop.wait(0.002 * ((i * 7 + n * 3) % 11))

    reader = threading.Thread(target=poll)
    reader.start()
    writers = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in writers:
        t.start()
    for t in writers:
        t.join(timeout=60)
    stop.set()
    reader.join(timeout=60)
    assert not reader.is_alive()
    everything = [seq for _, seq in _read(sql_store, None)]
    assert len(everything) == 40
    assert seen == everything
