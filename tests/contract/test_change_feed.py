"""The change feed: every committed write exactly once, in version order per session,
never a rolled-back one, owner-scoped, resumable after a disconnect and a restart, and
cleaned by erasure as the audit log is."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from contract_support import ADMIN, OTHER, USER, ProxyStore, audit_of, run_threads, user_msg

from agentsession import SessionManager
from agentsession.errors import Forbidden, SessionNotFound, StoreError, ValidationError
from agentsession.models import Change
from agentsession.service import AsyncSessionManager
from agentsession.stores.base import SessionStore


def every_change(m: SessionManager, *, limit: int = 7, **query: Any) -> list[Change]:
    """The whole feed from its start, read in pages of ``limit``."""
    out: list[Change] = []
    cursor: str | None = None
    while True:
        page = m.changes(after=cursor, limit=limit, **query)
        out += page.items
        assert page.next_cursor is not None or not out
        if not page.has_more:
            # Caught up: the cursor stays put when nothing is new.
            again = m.changes(after=page.next_cursor, limit=limit, **query)
            assert again.items == [] and again.next_cursor == page.next_cursor
            return out
        cursor = page.next_cursor


def assert_version_order(changes: list[Change]) -> None:
    """Per session, the versions follow each other without a gap or a repeat."""
    last: dict[str, int] = {}
    for c in changes:
        if c.version_after is None:
            continue
        if c.session_id in last:
            assert c.version_before == last[c.session_id], c
        last[c.session_id] = c.version_after


@contextmanager
def reopened(store: SessionStore) -> Iterator[SessionStore]:
    """The same store opened again from its URL (a restarted server); memory is itself."""
    if store.url == "memory://":
        yield store
        return
    if store.url.startswith("redis"):
        from agentsession.stores.redis.store import RedisStore

        again: SessionStore = RedisStore(store.url)
    else:
        from agentsession.stores.sql.store import SQLStore

        again = SQLStore(store.url)
    try:
        yield again
    finally:
        again.close()


def _writes(m: SessionManager, user: str, n: int) -> str:
    sid = m.create_session(user_id=user, agent="feed").session_id
    for i in range(n):
        m.append_message(session_id=sid, user_id=user, message=user_msg(f"m{i}"))
    m.update_working_memory(session_id=sid, user_id=user, data={"n": n})
    return sid


def test_every_committed_write_once_in_version_order(manager: SessionManager) -> None:
    """The feed holds each audit event of each write once, in seq order, as the audit
    log has them; pages and cursors neither skip nor repeat."""
    sids = [_writes(manager, USER, 3), _writes(manager, OTHER, 2), _writes(manager, USER, 4)]
    mine = every_change(manager, user_id=USER)
    audit = sorted(
        (e for sid in (sids[0], sids[2]) for e in audit_of(manager, sid)), key=lambda e: e.seq
    )
    assert [c.model_dump(exclude={"cursor"}) for c in mine] == [e.model_dump() for e in audit]
    assert len({c.cursor for c in mine}) == len(mine)
    assert_version_order(mine)
    # The content-free facts of the write: the seq range an append touched.
    appended = [c for c in mine if c.action == "message.appended"]
    assert [c.details["first_seq"] for c in appended[:3]] == [1, 2, 3]
    everyone = every_change(manager, user_id=ADMIN, all_users=True, admin=True)
    assert {c.session_id for c in everyone} == set(sids)
    assert_version_order(everyone)
    one = every_change(manager, user_id=USER, session_id=sids[2])
    assert [c.seq for c in one] == [e.seq for e in audit_of(manager, sids[2])]


def test_owner_scoped(manager: SessionManager) -> None:
    """Another user's session is not found; every user needs admin; an admin names a user."""
    theirs = _writes(manager, OTHER, 1)
    assert every_change(manager, user_id=USER) == []
    with pytest.raises(SessionNotFound):
        manager.changes(user_id=USER, session_id=theirs)
    with pytest.raises(Forbidden):
        manager.changes(user_id=USER, all_users=True)
    named = every_change(manager, user_id=OTHER, admin=True)
    assert {c.session_id for c in named} == {theirs}
    assert every_change(manager, user_id=ADMIN, admin=True, session_id=theirs) == named


def test_bad_cursor_and_limit(manager: SessionManager) -> None:
    """A cursor that is not this store's feed's, or a bad limit, is a ValidationError;
    ``limit=0`` reads nothing and keeps the cursor."""
    _writes(manager, USER, 1)
    for bad in ("x", "-1", "1.5", "1-2-3", ""):
        with pytest.raises(ValidationError):
            manager.changes(user_id=USER, after=bad)
    with pytest.raises(ValidationError):
        manager.changes(user_id=USER, limit=-1)
    first = manager.changes(user_id=USER, limit=1)
    empty = manager.changes(user_id=USER, after=first.next_cursor, limit=0)
    assert empty.items == [] and empty.next_cursor == first.next_cursor
    for bad in ("x", ""):  # limit=0 checks the cursor too
        with pytest.raises(ValidationError):
            manager.changes(user_id=USER, after=bad, limit=0)


def _past(cursor: str) -> str:
    """A cursor of the same form one position past ``cursor`` (its last number + 1)."""
    *head, last = cursor.split("-")
    return "-".join([*head, str(int(last) + 1)])


def test_a_cursor_ahead_of_the_feed_is_refused(manager: SessionManager) -> None:
    """A cursor past the feed's newest event was never issued (e.g. the database was
    restored from an older backup): a ValidationError, never a silent wait that misses
    every new event; the newest event's own cursor stays valid, for every reader."""
    sid = _writes(manager, USER, 1)
    _writes(manager, OTHER, 1)
    head = every_change(manager, user_id=ADMIN, all_users=True, admin=True)[-1].cursor
    mine = manager.changes(user_id=USER, after=head)
    assert mine.items == [] and mine.next_cursor == head
    assert manager.changes(user_id=USER, after=head, session_id=sid).items == []
    beyond = "-".join("9" * 20 for _ in head.split("-"))
    for ahead in (_past(head), beyond, "99999999999" if "-" not in head else "99999999999999-0"):
        for limit in (None, 0, 1):
            with pytest.raises(ValidationError, match="not a change feed cursor"):
                manager.changes(user_id=USER, after=ahead, limit=limit)
    manager.close_session(session_id=sid, user_id=USER)
    assert [c.action for c in manager.changes(user_id=USER, after=head).items] == ["session.closed"]
    manager.changes(user_id=USER, after=_past(head))  # a position the feed has reached


def test_rolled_back_write_never_appears(store: SessionStore) -> None:
    """A write that fails after its audit event was inserted leaves nothing in the feed."""
    proxy = ProxyStore(store)
    m = SessionManager(proxy)
    sid = m.create_session(user_id=USER).session_id
    before = every_change(m, user_id=USER)
    proxy.fail("insert_audit", StoreError("injected failure after the audit insert"))
    with pytest.raises(StoreError, match="injected"):
        m.append_message(session_id=sid, user_id=USER, message=user_msg("lost"))
    assert proxy.failures[0].fired
    assert every_change(m, user_id=USER) == before
    m.append_message(session_id=sid, user_id=USER, message=user_msg("kept"))
    after = every_change(m, user_id=USER)
    assert after[: len(before)] == before
    assert [c.action for c in after[len(before) :]] == ["message.appended"]
    assert_version_order(after)


def test_resume_after_disconnect_and_restart(store: SessionStore) -> None:
    """A reader that keeps its cursor and comes back (or a new manager on the same
    store, as after a restart) gets exactly what was committed meanwhile."""
    m = SessionManager(store)
    sid = _writes(m, USER, 2)
    seen = every_change(m, user_id=USER)
    cursor = seen[-1].cursor
    m.append_message(session_id=sid, user_id=USER, message=user_msg("while away"))
    m.close_session(session_id=sid, user_id=USER)
    with reopened(store) as again:
        fresh = SessionManager(again)
        page = fresh.changes(user_id=USER, after=cursor)
        assert [c.action for c in page.items] == ["message.appended", "session.closed"]
        assert every_change(fresh, user_id=USER) == seen + page.items


def test_concurrent_writers_and_a_polling_reader(manager: SessionManager) -> None:
    """Writers on several sessions at once while a reader polls from its cursor: the
    reader gets every event exactly once, in version order per session."""
    sids = [manager.create_session(user_id=USER).session_id for _ in range(4)]
    got: list[Change] = []
    done = threading.Event()

    def poll() -> None:
        cursor = manager.changes(user_id=USER, limit=0).next_cursor
        while True:
            finished = done.is_set()
            page = manager.changes(user_id=USER, after=cursor, limit=5)
            got.extend(page.items)
            cursor = page.next_cursor
            if finished and not page.has_more and not page.items:
                return

    reader = threading.Thread(target=poll)
    reader.start()

    def write(i: int) -> None:
        for n in range(6):
            manager.append_message(
                session_id=sids[i % 4], user_id=USER, message=user_msg(f"{i}-{n}")
            )

    errors = [r for r in run_threads(8, write) if r is not None]
    done.set()
    reader.join(timeout=60)
    assert not errors and not reader.is_alive()
    audit = sorted((e for sid in sids for e in audit_of(manager, sid)), key=lambda e: e.seq)
    assert sorted(c.seq for c in got) == [e.seq for e in audit]
    assert_version_order(got)


def test_watch_follows_new_writes(manager: SessionManager) -> None:
    """watch() yields what was committed after its cursor, then each new write as it
    commits, and ends at its timeout or when stopped."""
    sid = manager.create_session(user_id=USER).session_id
    start = manager.changes(user_id=USER).next_cursor

    def later() -> None:
        for n in range(3):
            manager.append_message(session_id=sid, user_id=USER, message=user_msg(f"{n}"))

    writer = threading.Timer(0.1, later)
    writer.start()
    stop = threading.Event()
    got: list[Change] = []
    for change in manager.watch(
        user_id=USER, after=start, timeout=20, poll_interval=0.05, stop=stop
    ):
        got.append(change)
        if len(got) == 3:
            stop.set()
    writer.join()
    assert [c.action for c in got] == ["message.appended"] * 3
    assert list(manager.watch(user_id=USER, after=got[-1].cursor, timeout=0.1)) == []
    with pytest.raises(SessionNotFound):
        manager.watch(user_id=OTHER, session_id=sid)


def test_erasure_takes_the_events_along(manager: SessionManager) -> None:
    """After a user's erasure the feed holds none of their events, only the
    content-free tombstones (keyed hash for the user), still readable by the id."""
    sid = _writes(manager, USER, 2)
    kept = _writes(manager, OTHER, 1)
    manager.erase_user(user_id=USER)
    left = every_change(manager, user_id=USER)
    assert [c.action for c in left] == ["session.deleted"]
    assert left[0].session_id == sid and left[0].user_id.startswith("hmac-sha256:")
    everyone = every_change(manager, user_id=ADMIN, all_users=True, admin=True)
    assert {c.user_id for c in everyone} == {left[0].user_id, OTHER}
    assert {c.session_id for c in everyone if c.user_id == OTHER} == {kept}
    assert every_change(manager, user_id=USER, session_id=sid) == left


def test_the_tail_is_where_now_starts(store: SessionStore) -> None:
    """change_tail() is the newest final event's cursor: reading after it gives only
    what commits later."""
    m = SessionManager(store)
    assert store.change_tail() is None
    sid = _writes(m, USER, 1)
    _writes(m, OTHER, 1)
    tail = store.change_tail()
    assert tail == every_change(m, user_id=ADMIN, all_users=True, admin=True)[-1].cursor
    assert m.changes(user_id=ADMIN, all_users=True, admin=True, after=tail).items == []
    m.close_session(session_id=sid, user_id=USER)
    assert [c.action for c in m.changes(user_id=USER, after=tail).items] == ["session.closed"]


@pytest.mark.store_independent
def test_async_watch_follows_and_stops(manager: SessionManager) -> None:
    """AsyncSessionManager.watch: the same changes, waiting on the loop; stop ends it."""
    sid = manager.create_session(user_id=USER).session_id

    async def main() -> list[str]:
        am = AsyncSessionManager(manager)
        stop = asyncio.Event()
        got: list[str] = []

        async def write() -> None:
            await asyncio.sleep(0.05)
            await am.append_message(session_id=sid, user_id=USER, message=user_msg("x"))

        task = asyncio.create_task(write())
        async for change in am.watch(user_id=USER, timeout=20, poll_interval=0.05, stop=stop):
            got.append(change.action)
            if len(got) == 2:
                stop.set()
        await task
        with pytest.raises(SessionNotFound):
            async for _ in am.watch(user_id=OTHER, session_id=sid):
                pass
        am.stop_threads()
        return got

    assert asyncio.run(main()) == ["session.created", "message.appended"]
