"""The change feed's Server-Sent Events across ``agentsession serve --workers 2``: a
real subprocess, on an SQLite file and on PostgreSQL.

Two subscribers are opened, one held by each worker, and two keep-alive writer
connections, one per worker (which worker holds a connection is read from ``/proc``:
the socket inodes of each worker's open files against the established TCP connections
to the service's port; the second of a pair is opened while the first's worker is
stopped, so the other one accepts it). Every event written through either
worker reaches every subscriber, whichever worker serves it, exactly once and in
order; a subscriber that disconnects and resumes with ``Last-Event-ID`` (on whichever
worker its new connection lands) gets exactly what was written meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import servers
from service import Service, running_service

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc"),
]

#: Writes per writer connection in the first round, and while a subscriber is away.
ROUND, AWAY = 15, 10


def _workers(supervisor: int) -> list[int]:
    """The pids of the supervisor's children: uvicorn's workers (and multiprocessing's
    resource tracker, which holds no connection)."""
    text = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text()
    return [int(pid) for pid in text.split()]


def _holders(port: int, workers: list[int]) -> dict[int, int]:
    """Peer port -> the worker pid holding the established connection to ``port``."""
    inodes: dict[str, int] = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        cols = line.split()
        local, remote, state, inode = cols[1], cols[2], cols[3], cols[9]
        if state == "01" and int(local.split(":")[1], 16) == port:
            inodes[inode] = int(remote.split(":")[1], 16)
    held: dict[int, int] = {}
    for pid in workers:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = fd.readlink().as_posix()
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    held[inodes[target[8:-1]]] = pid
    return held


def _local_port(response: httpx.Response) -> int:
    stream: Any = response.extensions["network_stream"]
    return int(stream.get_extra_info("client_addr")[1])


class Subscriber:
    """One SSE connection to the whole feed of the service's user."""

    def __init__(self, service: Service, last_event_id: str) -> None:
        self.client = httpx.Client(base_url=service.url, timeout=30)
        headers = service.headers(Accept="text/event-stream", **{"Last-Event-ID": last_event_id})
        self._stack = self.client.stream("GET", "/v1/changes", headers=headers)
        self.response = self._stack.__enter__()
        assert self.response.status_code == 200
        self.port = _local_port(self.response)
        self._lines = self.response.iter_lines()

    def take(self, n: int) -> list[tuple[str, dict[str, Any]]]:
        """The next ``n`` events: ``(id, data)``."""
        got: list[tuple[str, dict[str, Any]]] = []
        fields: dict[str, str] = {}
        for line in self._lines:
            if line == "" and "data" in fields:
                got.append((fields["id"], json.loads(fields["data"])))
                if len(got) == n:
                    return got
            if line == "":
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
        raise AssertionError(f"the stream ended after {len(got)} of {n} events")

    def close(self) -> None:
        self._stack.__exit__(None, None, None)
        self.client.close()


def _on_both(service: Service, port: int, make: Any) -> Iterator[Any]:
    """Two connections made with ``make()``, one held by each worker; yield each with
    the pid of its worker. The second is made while the first's worker is stopped
    (SIGSTOP, then SIGCONT): the kernel hands an idle service's connections to one
    worker, so only a stopped one makes the other accept."""
    workers = _workers(service.pid)

    def holder(local: int) -> int:
        deadline = time.monotonic() + 5
        while (pid := _holders(port, workers).get(local)) is None:
            assert time.monotonic() < deadline, "no worker holds the connection"
            time.sleep(0.05)
        return pid

    first, local = make()
    busy = holder(local)
    yield first, busy
    os.kill(busy, signal.SIGSTOP)
    try:
        second, local = make()
        other = holder(local)
    finally:
        os.kill(busy, signal.SIGCONT)
    assert other != busy
    yield second, other


@pytest.fixture(params=["sqlite", "postgres"])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Service]:
    if request.param == "sqlite":
        with running_service(tmp_path, workers=2) as s:
            yield s
        return
    if not servers.server_stores_enabled():
        pytest.skip(f"server stores left out ({servers.SERVER_STORES_ENV}=0)")
    postgres: servers.Server = request.getfixturevalue("postgres_server")
    name, url = postgres.create_database()
    try:
        with running_service(tmp_path, url=url, workers=2) as s:
            yield s
    finally:
        postgres.drop_database(name)


def test_events_reach_subscribers_on_either_worker_and_resume_loses_nothing(
    service: Service,
) -> None:
    port = int(service.url.rsplit(":", 1)[1])
    api = httpx.Client(base_url=service.url, headers=service.headers(), timeout=30)
    sid = api.post("/v1/sessions", json={}).json()["session_id"]
    start = api.get("/v1/changes").json()["next_cursor"]

    def subscriber() -> tuple[Subscriber, int]:
        s = Subscriber(service, start)
        return s, s.port

    def writer() -> tuple[httpx.Client, int]:
        client = httpx.Client(base_url=service.url, headers=service.headers(), timeout=30)
        r = client.get(f"/v1/sessions/{sid}")  # opens the keep-alive connection
        return client, _local_port(r)

    subscribers = [s for s, _ in _on_both(service, port, subscriber)]
    writers = {pid: c for c, pid in _on_both(service, port, writer)}
    assert len(writers) == 2
    try:
        texts = []
        for i in range(ROUND):
            for pid, client in writers.items():
                text = f"{pid}-{i}"
                body = {"messages": [{"role": "user", "content": text}]}
                assert client.post(f"/v1/sessions/{sid}/messages", json=body).status_code == 201
                texts.append(text)
        want = api.get("/v1/changes", params={"after": start, "limit": 500}).json()["items"]
        assert len(want) == 2 * ROUND
        for s in subscribers:
            got = s.take(2 * ROUND)
            assert [c for c, _ in got] == [w["cursor"] for w in want]
            assert [d["version_after"] for _, d in got] == [w["version_after"] for w in want]
        # One subscriber goes away; writes go on through both workers; it resumes.
        away = subscribers.pop()
        last = want[-1]["cursor"]
        away.close()
        for i in range(AWAY):
            for client in writers.values():
                body = {"messages": [{"role": "user", "content": f"away-{i}"}]}
                assert client.post(f"/v1/sessions/{sid}/messages", json=body).status_code == 201
        meanwhile = api.get("/v1/changes", params={"after": last, "limit": 500}).json()["items"]
        assert len(meanwhile) == 2 * AWAY
        for resumed, _ in _on_both(service, port, lambda: _resumed(service, last)):
            got = resumed.take(2 * AWAY)
            assert [c for c, _ in got] == [w["cursor"] for w in meanwhile]
            resumed.close()
        for s in subscribers:  # those that stayed got the same, once
            assert [c for c, _ in s.take(2 * AWAY)] == [w["cursor"] for w in meanwhile]
    finally:
        for s in subscribers:
            s.close()
        for client in writers.values():
            client.close()
        api.close()


def _resumed(service: Service, last: str) -> tuple[Subscriber, int]:
    s = Subscriber(service, last)
    return s, s.port
