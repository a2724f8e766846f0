"""Group commit on SQLite (``stores/groupcommit.py``): concurrent writes of one store
share one COMMIT, each keeps its own checks and fails alone, and none is answered before
the COMMIT holding it is durable (the kill -9 tests at the end)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from agentsession import SessionManager
from agentsession.errors import StoreBusy, StoreError, VersionConflict
from agentsession.stores.sql import groupcommit
from agentsession.stores.sql.store import SQLStore
from service import EXE, running_service

WRITERS = 8
KILL_CYCLES = 8


def _manager(path: Path, **options: Any) -> SessionManager:
    return SessionManager.from_url(f"sqlite:///{path}", auto_migrate=True, **options)


def _store(sm: SessionManager) -> SQLStore:
    store = sm.store
    assert isinstance(store, SQLStore)
    return store


def _commits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one on every COMMIT of a write transaction (each ends by
    ``end_transaction``, begun on the driver or by Core)."""
    seen: list[int] = []
    real = groupcommit.end_transaction

    def counting(conn: Any, *, commit: bool) -> None:
        if commit:
            seen.append(1)
        real(conn, commit=commit)

    monkeypatch.setattr(groupcommit, "end_transaction", counting)
    return seen


def _queued_behind_turn(sm: SessionManager, jobs: list[Callable[[], Any]]) -> list[Any]:
    """Run ``jobs`` in threads, each queued for the write turn (in list order) while this
    thread holds it, then let them go: they share batches. Returns each job's result or
    exception."""
    turn = _store(sm)._writes._turn  # type: ignore[union-attr]
    assert turn.acquire(timeout=5)
    with ThreadPoolExecutor(len(jobs)) as pool:
        try:
            futures = []
            for n, job in enumerate(jobs, start=1):
                futures.append(pool.submit(job))
                deadline = time.monotonic() + 30
                while len(turn._waiters) < n:
                    assert time.monotonic() < deadline, "writers did not queue"
                    time.sleep(0.002)
        finally:
            turn.release()
        outcomes: list[Any] = []
        for f in futures:
            try:
                outcomes.append(f.result())
            except Exception as exc:
                outcomes.append(exc)
    return outcomes


def _first_commit_fails(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the next COMMIT of a write fail (a disk I/O error, no COMMIT sent); returns
    a list that gets one item when it did."""
    return _failing_commit(
        monkeypatch, sa.exc.OperationalError("COMMIT", None, Exception("disk I/O error"))
    )


def _failing_commit(monkeypatch: pytest.MonkeyPatch, error: Exception) -> list[int]:
    """Make the next COMMIT of a write raise ``error`` before it reaches SQLite (whose
    transaction stays open); returns a list that gets one item when it did."""
    real = groupcommit.end_transaction
    failed: list[int] = []

    def failing(conn: Any, *, commit: bool) -> None:
        if commit and not failed:
            failed.append(1)
            raise error
        real(conn, commit=commit)

    monkeypatch.setattr(groupcommit, "end_transaction", failing)
    return failed


@pytest.fixture
def sm(tmp_path: Path) -> Iterator[SessionManager]:
    manager = _manager(tmp_path / "sessions.db")
    yield manager
    manager.close()


def _appender(sm: SessionManager, sid: str, text: str, **kw: Any) -> Callable[[], Any]:
    return lambda: sm.append_message(
        session_id=sid, user_id="u", message={"role": "user", "content": text}, **kw
    )


def test_queued_writers_share_one_commit(
    sm: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    sids = [sm.create_session(user_id="u").session_id for _ in range(WRITERS)]
    commits = _commits(monkeypatch)
    outcomes = _queued_behind_turn(sm, [_appender(sm, s, s) for s in sids])
    assert all(m.seq == 1 for m in outcomes), outcomes
    # The 8 queued writes: one COMMIT.
    assert len(commits) == 1
    for sid in sids:
        assert [m.content for m in sm.get_messages(session_id=sid, user_id="u").items] == [sid]


def test_without_group_commit_each_write_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sm = _manager(tmp_path / "sessions.db", group_commit=False)
    try:
        sids = [sm.create_session(user_id="u").session_id for _ in range(WRITERS)]
        commits = _commits(monkeypatch)
        outcomes = _queued_behind_turn(sm, [_appender(sm, s, s) for s in sids])
        assert all(m.seq == 1 for m in outcomes)
        assert len(commits) == WRITERS
    finally:
        sm.close()


def test_a_write_that_fails_its_check_fails_alone(sm: SessionManager) -> None:
    """Writers of one batch on one session: each one's version check sees the writes
    before it in the batch; a stale one is refused and stores nothing, the rest commit."""
    sid = sm.create_session(user_id="u").session_id
    v = sm.get_session(session_id=sid, user_id="u").version
    jobs = [_appender(sm, sid, f"m{i}", expected_version=v + i) for i in range(WRITERS)]
    jobs.insert(3, _appender(sm, sid, "stale", expected_version=v))
    outcomes = _queued_behind_turn(sm, jobs)
    assert isinstance(outcomes[3], VersionConflict)
    stored = sm.get_messages(session_id=sid, user_id="u").items
    assert [m.content for m in stored] == [f"m{i}" for i in range(WRITERS)]
    assert [m.seq for m in stored] == list(range(1, WRITERS + 1))
    assert sm.get_session(session_id=sid, user_id="u").version == v + WRITERS


def test_a_failed_body_leaves_no_trace_and_others_commit(sm: SessionManager) -> None:
    """A body that raises after writing (rows inserted, then an error) is rolled back to
    its savepoint: none of its rows are stored; the batch's other writes are."""
    store = _store(sm)
    sids = [sm.create_session(user_id="u").session_id for _ in range(4)]

    def half_written() -> None:
        with store.transaction(write=True) as tx:
            tx.delete_session(sids[0])
            raise RuntimeError("after a write")

    jobs = [_appender(sm, sids[1], "a"), half_written, _appender(sm, sids[2], "b")]
    outcomes = _queued_behind_turn(sm, jobs)
    assert isinstance(outcomes[1], RuntimeError)
    assert sm.get_session(session_id=sids[0], user_id="u").session_id == sids[0]
    assert sm.get_messages(session_id=sids[1], user_id="u").items[0].content == "a"
    assert sm.get_messages(session_id=sids[2], user_id="u").items[0].content == "b"


def test_a_write_that_breaks_the_transaction_makes_the_others_run_again(sm: SessionManager) -> None:
    """A writer whose body ends the shared transaction (SQLite rolled it back) fails the
    writes before it in the batch with StoreBusy; the unit of work runs them again, so
    every call still succeeds exactly once."""
    store = _store(sm)
    sids = [sm.create_session(user_id="u").session_id for _ in range(4)]

    def breaker() -> None:
        with store.transaction(write=True) as tx:
            driver = tx._conn.connection.dbapi_connection
            assert driver is not None
            driver.execute("ROLLBACK")
            raise RuntimeError("broke the transaction")

    jobs = [_appender(sm, sids[0], "a"), _appender(sm, sids[1], "b"), breaker]
    jobs.append(_appender(sm, sids[2], "c"))
    outcomes = _queued_behind_turn(sm, jobs)
    assert isinstance(outcomes[2], RuntimeError)
    for sid, text in zip(sids[:3], "abc", strict=True):
        assert [m.content for m in sm.get_messages(session_id=sid, user_id="u").items] == [text]


def test_the_batch_writers_see_a_direct_busy_error(sm: SessionManager) -> None:
    """At the store level (no unit of work), the writes before a broken one raise
    StoreBusy and store nothing."""
    store = _store(sm)
    sids = [sm.create_session(user_id="u").session_id for _ in range(2)]

    def deleter(sid: str) -> Callable[[], None]:
        def job() -> None:
            with store.transaction(write=True) as tx:
                tx.delete_session(sid)

        return job

    def breaker() -> None:
        with store.transaction(write=True) as tx:
            tx._conn.connection.dbapi_connection.execute("ROLLBACK")  # type: ignore[union-attr]
            raise RuntimeError("broke it")

    outcomes = _queued_behind_turn(sm, [deleter(sids[0]), deleter(sids[1]), breaker])
    assert [type(o) for o in outcomes] == [StoreBusy, StoreBusy, RuntimeError]
    for sid in sids:
        assert sm.get_session(session_id=sid, user_id="u").session_id == sid


def test_a_failed_commit_fails_every_writer_of_the_batch(
    sm: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nobody is told "stored" for a batch whose COMMIT failed."""
    sids = [sm.create_session(user_id="u").session_id for _ in range(3)]
    failed = _first_commit_fails(monkeypatch)
    outcomes = _queued_behind_turn(sm, [_appender(sm, s, s) for s in sids])
    assert [type(o) for o in outcomes] == [StoreError] * 3, outcomes
    assert failed == [1]
    monkeypatch.undo()
    for sid in sids:
        assert sm.get_messages(session_id=sid, user_id="u").items == []
    # The store goes on working after the failed COMMIT.
    m = sm.append_message(session_id=sids[0], user_id="u", message={"role": "user", "content": "x"})
    assert m.seq == 1


def test_a_commit_that_fails_at_the_driver_leaves_the_store_working(
    sm: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLITE_BUSY on COMMIT leaves SQLite's transaction open: the writer connection is
    dropped (rolling it back, freeing the write lock), the write runs again (StoreBusy)
    and it and the next writes succeed."""
    sid = sm.create_session(user_id="u").session_id
    failed = _failing_commit(monkeypatch, sqlite3.OperationalError("database is locked"))
    seqs = [
        sm.append_message(
            session_id=sid, user_id="u", message={"role": "user", "content": f"m{i}"}
        ).seq
        for i in range(4)
    ]
    assert failed == [1] and seqs == [1, 2, 3, 4]
    stored = sm.get_messages(session_id=sid, user_id="u").items
    assert [m.content for m in stored] == ["m0", "m1", "m2", "m3"]


def test_a_failed_write_waits_for_the_writes_it_read(
    sm: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append refused (session not found) because of a delete earlier in its batch is
    not answered until that batch commits; the batch's COMMIT fails, so the append runs
    again on the session that still exists, and succeeds."""
    sid = sm.create_session(user_id="u").session_id
    failed = _first_commit_fails(monkeypatch)
    outcomes = _queued_behind_turn(
        sm, [lambda: sm.delete_session(session_id=sid, user_id="u"), _appender(sm, sid, "after")]
    )
    assert failed == [1]
    assert isinstance(outcomes[0], StoreError) and not isinstance(outcomes[0], StoreBusy)
    assert outcomes[1].seq == 1
    assert [m.content for m in sm.get_messages(session_id=sid, user_id="u").items] == ["after"]


def test_a_writer_interrupted_in_the_queue_hands_the_turn_on(tmp_path: Path) -> None:
    """KeyboardInterrupt while queued for the turn: the queue forgets the waiter, so the
    batch before it still commits and later writes get their turn (no hang)."""
    sm = _manager(tmp_path / "sessions.db", busy_timeout_seconds=5)
    store = _store(sm)
    sid = sm.create_session(user_id="u").session_id
    outcome: dict[str, str] = {}

    def slow_writer() -> None:
        with store.transaction(write=True) as tx:
            time.sleep(0.6)  # holds the turn while the main thread queues
            tx.delete_session(sid)
        outcome["slow"] = "committed"

    def interrupt(*_: Any) -> None:
        raise KeyboardInterrupt

    thread = threading.Thread(target=slow_writer)
    thread.start()
    time.sleep(0.2)
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(KeyboardInterrupt):
            sm.append_message(session_id=sid, user_id="u", message={"role": "user", "content": "x"})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    thread.join(timeout=10)
    assert outcome == {"slow": "committed"}
    assert store._writes._turn._waiters == deque()  # type: ignore[union-attr]
    s2 = sm.create_session(user_id="u")
    assert sm.get_session(session_id=s2.session_id, user_id="u").version == 1
    sm.close()


def test_close_while_a_writer_holds_the_turn_keeps_its_write_whole(tmp_path: Path) -> None:
    """close() gives up waiting for a long write: that write still commits whole (never
    half), and the store is closed afterwards."""
    sm = _manager(tmp_path / "sessions.db", busy_timeout_seconds=0.3)
    store = _store(sm)
    sids = [sm.create_session(user_id="u").session_id for _ in range(2)]
    done: list[str] = []

    def writer() -> None:
        with store.transaction(write=True) as tx:
            tx.delete_session(sids[0])
            time.sleep(0.8)  # close() stops waiting after 0.3 s
            tx.delete_session(sids[1])
        done.append("ok")

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(0.1)
    store.close()
    thread.join(timeout=10)
    assert done == ["ok"]
    with sqlite3.connect(tmp_path / "sessions.db") as db:
        assert db.execute("SELECT count(*) FROM sessions").fetchone() == (0,)


# -- kill -9 -----------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import sys, threading
    from agentsession import SessionManager
    sm = SessionManager.from_url(sys.argv[1], auto_migrate=True)
    sids = sys.argv[2].split(",")
    lock = threading.Lock()
    def write(n):
        sid = sids[n % len(sids)]
        for j in range(1_000_000):
            m = sm.append_message(session_id=sid, user_id="u",
                                  message={"role": "user", "content": f"{n}:{j}"})
            with lock:
                print(sid, m.seq, m.content, flush=True)
    with lock:
        print("started", flush=True)
        for n in range(16):
            threading.Thread(target=write, args=(n,), daemon=True).start()
    threading.Event().wait()
    """
)


def _acknowledged(lines: list[str]) -> list[tuple[str, int, str]]:
    acked = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0].startswith("ses_"):
            acked.append((parts[0], int(parts[1]), parts[2]))
    return acked


def _check_stored(sm: SessionManager, acked: list[tuple[str, int, str]]) -> int:
    """Every acknowledged message is stored with its seq; seqs stay gapless."""
    by_session: dict[str, dict[int, str]] = {}
    for sid in {a[0] for a in acked}:
        kw: dict[str, Any] = {"session_id": sid, "user_id": "u", "limit": 1000}
        page = sm.get_messages(**kw, after=0)
        stored = {m.seq: str(m.content) for m in page.items}
        while page.next_cursor is not None:
            page = sm.get_messages(**kw, cursor=page.next_cursor)
            stored.update({m.seq: str(m.content) for m in page.items})
        assert sorted(stored) == list(range(1, len(stored) + 1)), "seq has a gap"
        by_session[sid] = stored
    for sid, seq, content in acked:
        assert by_session[sid].get(seq) == content, (sid, seq, content)
    return len(acked)


def _kill_library_writer(tmp_path: Path, cycles: int) -> None:
    db = tmp_path / "sessions.db"
    url = f"sqlite:///{db}"
    sm = _manager(db)
    sids = [sm.create_session(user_id="u").session_id for _ in range(4)]
    sm.close()
    rng = random.Random(14)
    total = 0
    for _ in range(cycles):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, url, ",".join(sids)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "started"
            time.sleep(rng.uniform(0.2, 0.6))
        finally:
            os.kill(proc.pid, signal.SIGKILL)  # also when the test fails: no orphan
            lines = proc.stdout.read().splitlines() if proc.stdout else []
            proc.wait()
        acked = _acknowledged(lines)
        assert acked, "nothing was acknowledged before the kill"
        sm = _manager(db)
        try:
            total += _check_stored(sm, acked)
        finally:
            sm.close()
    print(f"{cycles} kills of a 16-thread writer: {total} acknowledged appends, all stored")


def test_kill_9_of_a_writer_loses_no_acknowledged_write(tmp_path: Path) -> None:
    _kill_library_writer(tmp_path, cycles=3)


@pytest.mark.slow
def test_kill_9_of_a_writer_many_times(tmp_path: Path) -> None:
    _kill_library_writer(tmp_path, cycles=20)


def _load_and_kill(
    url: str, token: str, sids: list[str], pid: int, seed: int
) -> list[tuple[str, int, str]]:
    """32 connections append to ``sids`` until ``pid`` is killed (at a random point once
    100 appends were answered); then every answered append must be stored."""
    acked: list[tuple[str, int, str]] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def appender(n: int) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=10) as c:
            for j in range(1_000_000):
                if stop.is_set():
                    return
                sid, content = sids[n % len(sids)], f"{seed}:{n}:{j}"
                try:
                    r = c.post(
                        f"/v1/sessions/{sid}/messages",
                        json={"message": {"role": "user", "content": content}},
                    )
                except httpx.TransportError:
                    return
                with lock:
                    statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                    if r.status_code == 201:
                        acked.append((sid, r.json()["seq"], content))

    threads = [threading.Thread(target=appender, args=(n,)) for n in range(32)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(acked) < 100 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(random.Random(seed).uniform(0, 0.5))
    os.kill(pid, signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert acked, f"nothing was acknowledged before the kill: {statuses}"
    assert set(statuses) == {201}, statuses
    return acked


def _serve(env: dict[str, str], url: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [str(EXE), "serve", "--host", "127.0.0.1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).is_success:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("serve did not start")
        time.sleep(0.05)


@pytest.mark.slow
def test_kill_9_of_the_service_under_load_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """``serve`` (1 worker, group commit) under 32 concurrent appending connections,
    killed with SIGKILL ``KILL_CYCLES`` times; after each restart every answered (201)
    append is stored with the seq it was answered with."""
    total = 0
    with running_service(tmp_path, user="u") as first:
        with httpx.Client(base_url=first.url, headers=first.headers()) as client:
            sids = [
                client.post("/v1/sessions", json={"agent": "kill"}).json()["session_id"]
                for _ in range(8)
            ]
        pid = first.pid
        for cycle in range(KILL_CYCLES):
            proc = _serve(first.env, first.url) if cycle else None
            victim = proc.pid if proc is not None else pid
            acked = _load_and_kill(first.url, first.token, sids, victim, cycle)
            if proc is not None:
                proc.wait()
            sm = _manager(tmp_path / "sessions.db")
            try:
                total += _check_stored(sm, acked)
            finally:
                sm.close()
    print(json.dumps({"kills": KILL_CYCLES, "acknowledged_appends_all_stored": total}))
