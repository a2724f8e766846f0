"""Scale-out proof (issue #4, the server stores, item 5): the HTTP service behind several
worker processes, and several separate service instances, on one PostgreSQL database or
one Redis.

Three topologies, each set up the way the README says (``db upgrade``, ``keys create``,
``serve``) against a fresh database on the throwaway servers of ``tests/servers.py``:

* ``workers4``: one ``agentsession serve --workers 4`` on PostgreSQL;
* ``two_instances``: two separate ``agentsession serve`` processes on two ports, one
  PostgreSQL database; the clients are split between them (client ``i`` talks to
  instance ``i % 2``);
* ``redis_workers4``: one ``agentsession serve --workers 4`` on Redis.

Three scenarios on each, with the issue's numbers:

* 32 clients x 40 read-modify-write increments (GET the memory, whose ETag is the
  session version read with it; PUT with that ``If-Match``; on 412 back off, jittered,
  and start over): zero lost updates, the audit chain of versions contiguous. 32 writers
  on one row make this the slow one: about 55-60 s per topology on an idle 2-core
  machine (up to 190 s on a busy one), with three to four 412s per increment;
* 16 clients x 100 appends to one session, 5 % of them first sent with an artificial
  client timeout (a read timeout of a few ms) and then retried with the same
  ``Idempotency-Key``: every acknowledged message exactly once, seq gapless 1..1600,
  each client's messages in its own order;
* ``kill -9`` mid-load (appends + increments): of one uvicorn worker (``workers4``,
  ``redis_workers4``; uvicorn's supervisor starts a new one), or of a whole second
  instance (``two_instances``; its clients fail over to the survivor with the same
  idempotency keys): no acknowledged write lost or doubled, and the survivors keep
  serving.

No answer may be a 5xx in any scenario. The throwaway PostgreSQL runs with ``fsync=off``
(Redis with ``appendfsync always``): these tests prove concurrency and crash-of-a-worker
behaviour, not durability on power loss.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

import servers
from agentsession import AgentSessionError
from agentsession.client import SessionClient
from rmw import RmwTally, audit_log, check_increments, check_version_chain, increment_loop
from service import Service, running_service

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not servers.server_stores_enabled(),
        reason=f"server stores left out ({servers.SERVER_STORES_ENV}=0)",
    ),
]

T = TypeVar("T")

RMW_CLIENTS, RMW_INCREMENTS = 32, 40
APPEND_CLIENTS, APPENDS = 16, 100
RETRIED_PER_CLIENT = 5  # 5 % of 100 appends: artificial timeout, then the same key again
KILL_APPENDERS, KILL_APPENDS = 16, 50
KILL_INCREMENTERS, KILL_INCREMENTS = 8, 40


@dataclass
class Cluster:
    """The service(s) of one topology: base URLs, one API token valid on all of them,
    and what it takes to start one more instance on the same database."""

    topology: str
    urls: list[str]
    token: str
    services: list[Service]
    tmp: Path
    db_url: str

    def url_for(self, index: int) -> str:
        return self.urls[index % len(self.urls)]


@pytest.fixture(scope="module", params=["workers4", "two_instances", "redis_workers4"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """A fresh database (PostgreSQL, or an emptied Redis) and the service(s) of one
    topology on it. The server fixture is asked for here, not in the signature, so a
    missing Redis skips only its topology and a missing PostgreSQL only theirs."""
    tmp = tmp_path_factory.mktemp(request.param)
    if request.param == "redis_workers4":
        redis: servers.Server = request.getfixturevalue("redis_server")
        servers.redis_command(redis.port, "FLUSHALL")
        db_url = f"{redis.url_prefix}/0"
        with running_service(tmp, url=db_url, workers=4) as s:
            yield Cluster(request.param, [s.url], s.token, [s], tmp, db_url)
        return
    postgres: servers.Server = request.getfixturevalue("postgres_server")
    name, db_url = postgres.create_database()
    try:
        if request.param == "workers4":
            with running_service(tmp, url=db_url, workers=4) as s:
                yield Cluster(request.param, [s.url], s.token, [s], tmp, db_url)
        else:
            with (
                running_service(tmp, url=db_url, name="a") as a,
                running_service(tmp, url=db_url, name="b") as b,
            ):
                yield Cluster(request.param, [a.url, b.url], a.token, [a, b], tmp, db_url)
    finally:
        postgres.drop_database(name)


class CountingTransport(httpx.HTTPTransport):
    """Counts answers by status, replayed idempotent answers and transport errors,
    before the client's retry logic sees them."""

    def __init__(self, stats: Stats) -> None:
        super().__init__()
        self.stats = stats

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = super().handle_request(request)
        except httpx.TransportError as exc:
            self.stats.add(transport=type(exc).__name__)
            raise
        self.stats.add(
            status=response.status_code,
            replayed=response.headers.get("idempotent-replayed") == "true",
        )
        return response


@dataclass
class Stats:
    """Shared counters of one scenario (thread-safe)."""

    statuses: Counter[int] = field(default_factory=Counter)
    transport: Counter[str] = field(default_factory=Counter)
    replayed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, status: int | None = None, replayed: bool = False, transport: str = "") -> None:
        with self.lock:
            if status is not None:
                self.statuses[status] += 1
            if transport:
                self.transport[transport] += 1
            self.replayed += replayed

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)


class FailoverClient:
    """A SessionClient per base URL, starting at ``urls[0]``; a call whose retries are
    used up on a transport error is sent again, unchanged (same idempotency key), to
    the next URL: what a load balancer does when an instance dies."""

    def __init__(self, urls: list[str], token: str, stats: Stats) -> None:
        self.clients = [
            SessionClient(
                url,
                token,
                transport=CountingTransport(stats),
                timeout=60,
                max_retries=6,
                backoff=0.05,
                max_backoff=1.0,
            )
            for url in urls
        ]
        self.current = 0
        self.failovers = 0

    def call(self, fn: Callable[[SessionClient], T]) -> T:
        for _ in range(len(self.clients)):
            try:
                return fn(self.clients[self.current])
            except httpx.TransportError:
                if len(self.clients) == 1:
                    raise
                self.current = (self.current + 1) % len(self.clients)
                self.failovers += 1
        return fn(self.clients[self.current])

    def close(self) -> None:
        for c in self.clients:
            c.close()


def _urls_from(cluster_urls: list[str], index: int) -> list[str]:
    """Client ``index``'s own instance first, then the others (its failover order)."""
    start = index % len(cluster_urls)
    return cluster_urls[start:] + cluster_urls[:start]


def _append(
    fc: FailoverClient,
    sid: str,
    j: int,
    message: dict[str, Any],
    key: str,
    acked: list[tuple[int, int, str]],
    errors: list[str],
) -> bool:
    """Append message ``j`` with its idempotency key (failing over as needed); record
    ``(j, seq, message_id)`` if acknowledged, else the error. Returns whether acknowledged."""
    try:
        m = fc.call(
            lambda c: c.append_message(session_id=sid, message=message, idempotency_key=key)
        )
    except (AgentSessionError, httpx.HTTPError) as exc:
        errors.append(f"{j}: {type(exc).__name__}: {exc}")
        return False
    acked.append((j, m.seq, m.message_id))
    return True


def _all_messages(c: SessionClient, sid: str) -> list[Any]:
    """Every message, oldest first: pages of 1,000 following their cursors."""
    page = c.get_messages(session_id=sid, after=0, limit=1000)
    found = list(page.items)
    while page.next_cursor is not None:
        page = c.get_messages(session_id=sid, limit=1000, cursor=page.next_cursor)
        found += page.items
    return found


# -- read-modify-write increments ------------------------------------------------------


def test_rmw_increments_lose_nothing(cluster: Cluster) -> None:
    """32 clients x 40 increments with If-Match retries, all on one session: final
    counter == acknowledged increments == 1,280; versions contiguous; no 5xx."""
    with SessionClient(cluster.urls[0], cluster.token) as setup:
        session = setup.create_session(agent="counter", working_memory={"counter": 0})
    sid, start_version = session.session_id, session.version
    stats = Stats()

    def client(index: int) -> tuple[RmwTally, int]:
        tally = RmwTally()
        fc = FailoverClient(_urls_from(cluster.urls, index), cluster.token, stats)
        try:
            increment_loop(fc.call, sid, RMW_INCREMENTS, random.Random(index), tally)
        finally:
            fc.close()
        return tally, fc.failovers

    started = time.monotonic()
    with ThreadPoolExecutor(RMW_CLIENTS) as pool:
        results = list(pool.map(client, range(RMW_CLIENTS)))
    elapsed = time.monotonic() - started

    tallies = [t for t, _ in results]
    acknowledged = sum(t.acknowledged for t in tallies)
    errors = [e for t in tallies for e in t.errors]
    with SessionClient(cluster.urls[-1], cluster.token) as c:
        final = c.get_working_memory(session_id=sid).data["counter"]
        final_version = c.get_session(session_id=sid).version
        events = audit_log(c, sid)
    print(
        f"\n[{cluster.topology}] rmw: {RMW_CLIENTS}x{RMW_INCREMENTS} in {elapsed:.1f}s; "
        f"acknowledged={acknowledged} final={final} version={final_version} "
        f"conflicts(412)={sum(t.conflicts for t in tallies)} statuses={dict(stats.statuses)} "
        f"errors={len(errors)}"
    )
    assert errors == []
    assert stats.server_errors == 0, stats.statuses
    assert acknowledged == RMW_CLIENTS * RMW_INCREMENTS
    check_increments(
        events,
        start_version=start_version,
        final_version=final_version,
        final=final,
        acknowledged=acknowledged,
    )


# -- appends with retried timeouts -----------------------------------------------------


def test_appends_with_timeouts_retried_are_stored_exactly_once(cluster: Cluster) -> None:
    """16 clients x 100 appends to one session; 5 per client first time out on the
    client (read timeout of 1-5 ms) and are sent again with the same Idempotency-Key:
    1600 messages, each exactly once, seq 1..1600, every client's in its own order."""
    with SessionClient(cluster.urls[0], cluster.token) as setup:
        sid = setup.create_session(agent="appends").session_id
    stats = Stats()
    timeouts = Counter[str]()
    timeouts_lock = threading.Lock()

    def client(index: int) -> tuple[list[tuple[int, int, str]], list[str]]:
        rng = random.Random(1000 + index)
        retried = set(rng.sample(range(APPENDS), RETRIED_PER_CLIENT))
        acked: list[tuple[int, int, str]] = []  # (j, seq, message_id)
        errors: list[str] = []
        url = cluster.url_for(index)
        fc = FailoverClient(_urls_from(cluster.urls, index), cluster.token, stats)
        raw = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {cluster.token}"})
        try:
            for j in range(APPENDS):
                key = f"append-{index}-{j}"
                message = {"role": "user", "content": f"{index}:{j}"}
                if j in retried:
                    # The artificial client timeout: the request goes out, the client
                    # gives up on the answer, the server may or may not have committed.
                    try:
                        r = raw.post(
                            f"/v1/sessions/{sid}/messages",
                            json={"message": message},
                            headers={"Idempotency-Key": key},
                            timeout=httpx.Timeout(10.0, read=rng.uniform(0.001, 0.005)),
                        )
                        outcome = f"answered {r.status_code}"
                    except httpx.TimeoutException:
                        outcome = "timed out"
                    with timeouts_lock:
                        timeouts[outcome] += 1
                _append(fc, sid, j, message, key, acked, errors)
        finally:
            raw.close()
            fc.close()
        return acked, errors

    started = time.monotonic()
    with ThreadPoolExecutor(APPEND_CLIENTS) as pool:
        results = list(pool.map(client, range(APPEND_CLIENTS)))
    elapsed = time.monotonic() - started
    errors = [e for _, errs in results for e in errs]

    with SessionClient(cluster.urls[-1], cluster.token) as c:
        stored = _all_messages(c, sid)
        session = c.get_session(session_id=sid)
    total = APPEND_CLIENTS * APPENDS
    print(
        f"\n[{cluster.topology}] appends: {APPEND_CLIENTS}x{APPENDS} in {elapsed:.1f}s; "
        f"acknowledged={sum(len(a) for a, _ in results)} stored={len(stored)} "
        f"timeout-first={dict(timeouts)} replayed={stats.replayed} "
        f"statuses={dict(stats.statuses)} errors={len(errors)}"
    )
    assert errors == []
    assert stats.server_errors == 0, stats.statuses
    assert sum(timeouts.values()) == APPEND_CLIENTS * RETRIED_PER_CLIENT
    assert [m.seq for m in stored] == list(range(1, total + 1)), "seq has a gap or repeat"
    assert session.message_count == total
    contents = Counter(m.content for m in stored)
    assert len(contents) == total and set(contents.values()) == {1}, "a message twice"
    by_id = {m.message_id: m for m in stored}
    for index, (acked, _) in enumerate(results):
        assert [j for j, _, _ in acked] == list(range(APPENDS))
        for j, seq, message_id in acked:
            assert by_id[message_id].seq == seq
            assert by_id[message_id].content == f"{index}:{j}"
        seqs = [seq for _, seq, _ in acked]
        assert seqs == sorted(seqs), f"client {index}'s messages out of order"


# -- kill -9 mid-load ------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    """Pids whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name is in parentheses and may contain spaces: split after it.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return found


def _uvicorn_workers(pid: int) -> list[int]:
    """The worker processes of a ``serve --workers N`` supervisor (not the
    multiprocessing resource tracker)."""
    workers = []
    for child in _children(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ")
        except OSError:
            continue
        if b"resource_tracker" not in cmdline:
            workers.append(child)
    return workers


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).is_success
    except httpx.TransportError:
        return False


def test_kill_9_mid_load_loses_no_acknowledged_write(cluster: Cluster) -> None:
    """SIGKILL of a worker (workers4) or of a whole instance (two_instances) while 16
    clients append and 8 increment: every acknowledged message is stored exactly once
    with its seq, seq stays gapless, no acknowledged increment is lost (and, since
    retries carry the same idempotency key, none is doubled); the survivors keep
    serving."""
    with (
        running_service(cluster.tmp, url=cluster.db_url, name="victim")
        if cluster.topology == "two_instances"
        else contextlib.nullcontext()
    ) as victim:
        if victim is None:
            urls = cluster.urls
            workers = _uvicorn_workers(cluster.services[0].pid)
            assert len(workers) == 4, workers
            target, what = random.Random(9).choice(workers), "uvicorn worker"
        else:
            urls = [cluster.urls[0], victim.url]
            target, what = victim.pid, "second instance"
        _kill_under_load(cluster, urls, target, what)
        if victim is None:
            # uvicorn's supervisor replaces the dead worker.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                now = _uvicorn_workers(cluster.services[0].pid)
                if len(now) == 4 and target not in now:
                    break
                time.sleep(0.2)
            print(f"workers after the kill: {sorted(now)} (killed {target})")
            assert len(now) == 4 and target not in now
        else:
            assert not _ready(victim.url)
    for url in cluster.urls:
        assert _ready(url)


def _kill_under_load(cluster: Cluster, urls: list[str], target: int, what: str) -> None:
    with SessionClient(urls[0], cluster.token) as setup:
        sid = setup.create_session(agent="kill", working_memory={"counter": 0}).session_id
        start_version = setup.get_session(session_id=sid).version
    stats = Stats()
    progress = [0]
    progress_lock = threading.Lock()
    total_ops = KILL_APPENDERS * KILL_APPENDS + KILL_INCREMENTERS * KILL_INCREMENTS
    killed_at = threading.Event()
    after_kill = [0]

    def tick() -> None:
        with progress_lock:
            progress[0] += 1
            if killed_at.is_set():
                after_kill[0] += 1

    def appender(index: int) -> tuple[list[tuple[int, int, str]], list[str], int]:
        fc = FailoverClient(_urls_from(urls, index), cluster.token, stats)
        acked: list[tuple[int, int, str]] = []
        errors: list[str] = []
        try:
            for j in range(KILL_APPENDS):
                key = f"kill-{index}-{j}"
                message = {"role": "user", "content": f"{index}:{j}"}
                if _append(fc, sid, j, message, key, acked, errors):
                    tick()
        finally:
            fc.close()
        return acked, errors, fc.failovers

    def incrementer(index: int) -> tuple[RmwTally, int]:
        fc = FailoverClient(_urls_from(urls, index), cluster.token, stats)
        tally = RmwTally()
        try:
            increment_loop(fc.call, sid, KILL_INCREMENTS, random.Random(500 + index), tally, tick)
        finally:
            fc.close()
        return tally, fc.failovers

    def killer() -> None:
        while True:
            with progress_lock:
                if progress[0] >= total_ops // 3:
                    break
            time.sleep(0.01)
        os.kill(target, signal.SIGKILL)
        killed_at.set()

    started = time.monotonic()
    kill_thread = threading.Thread(target=killer)
    kill_thread.start()
    with ThreadPoolExecutor(KILL_APPENDERS + KILL_INCREMENTERS) as pool:
        appends = [pool.submit(appender, i) for i in range(KILL_APPENDERS)]
        increments = [pool.submit(incrementer, i) for i in range(KILL_INCREMENTERS)]
        append_results = [f.result() for f in appends]
        increment_results = [f.result() for f in increments]
    kill_thread.join(timeout=5)
    elapsed = time.monotonic() - started
    assert killed_at.is_set(), "the load ended before the kill"

    errors = [e for _, errs, _ in append_results for e in errs]
    errors += [e for t, _ in increment_results for e in t.errors]
    acked_incr = sum(t.acknowledged for t, _ in increment_results)
    acked_appends = sum(len(a) for a, _, _ in append_results)
    failovers = sum(f for *_, f in append_results) + sum(f for _, f in increment_results)
    with SessionClient(urls[0], cluster.token) as c:
        stored = _all_messages(c, sid)
        final = c.get_working_memory(session_id=sid).data["counter"]
        final_version = c.get_session(session_id=sid).version
        events = audit_log(c, sid)
    print(
        f"\n[{cluster.topology}] kill -9 of the {what} (pid {target}) after "
        f"{total_ops // 3} of {total_ops} writes; {elapsed:.1f}s; appends acknowledged="
        f"{acked_appends} stored={len(stored)}; increments acknowledged={acked_incr} "
        f"final={final}; acknowledged after the kill={after_kill[0]}; failovers={failovers}; "
        f"transport errors={dict(stats.transport)} replayed={stats.replayed} "
        f"statuses={dict(stats.statuses)} errors={len(errors)}"
    )
    assert errors == [], errors[:5]
    assert acked_appends == KILL_APPENDERS * KILL_APPENDS
    assert acked_incr == KILL_INCREMENTERS * KILL_INCREMENTS
    assert after_kill[0] > 0, "nothing was acknowledged after the kill"
    # Appends: every acknowledged one stored exactly once, with the seq it was given.
    assert [m.seq for m in stored] == list(range(1, len(stored) + 1)), "seq has a gap"
    assert len(stored) == acked_appends
    contents = Counter(m.content for m in stored)
    assert set(contents.values()) == {1}, "a message stored twice"
    by_id = {m.message_id: m for m in stored}
    for acked, _, _ in append_results:
        for _, seq, message_id in acked:
            assert by_id[message_id].seq == seq
    # Increments: none lost; with the same idempotency key on every resend, none doubled.
    assert final == acked_incr
    check_version_chain(events, final_version)
    assert final_version == start_version + acked_appends + acked_incr
