"""A real ``agentsession serve --workers 2`` process on an SQLite file, set up the way
the README says (``db upgrade``, ``keys create``), under concurrent clients:
no lost update (issue 3) and idempotent POSTs (C04) across two worker processes."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from agentsession.client import SessionClient
from rmw import RmwTally, audit_log, check_increments, increment_loop
from service import Service, running_service

pytestmark = pytest.mark.slow

CLIENTS = 32
INCREMENTS = 50


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """``agentsession db upgrade``, ``keys create --user alice``, ``serve --workers 2``."""
    with running_service(tmp_path_factory.mktemp("workers"), user="alice", workers=2) as service:
        yield service


class CountingTransport(httpx.HTTPTransport):
    """Counts every answer by status, before the client's retry logic sees it."""

    def __init__(self, statuses: Counter[int], lock: threading.Lock) -> None:
        super().__init__()
        self.statuses, self.lock = statuses, lock

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        with self.lock:
            self.statuses[response.status_code] += 1
        return response


def test_no_lost_update_32_clients_2_workers(served: Service) -> None:
    """32 clients x 50 read-modify-write increments (GET memory, PUT with its ETag as
    If-Match, retry on 412): final counter == acknowledged increments; the audit
    chain of versions has no gap and no repeat; no 5xx or "database is locked"."""
    with SessionClient(served.url, served.token) as setup:
        session = setup.create_session(agent="counter", working_memory={"counter": 0})
    sid, start_version = session.session_id, session.version
    statuses: Counter[int] = Counter()
    lock = threading.Lock()

    def client(index: int) -> RmwTally:
        tally = RmwTally()
        transport = CountingTransport(statuses, lock)
        with SessionClient(served.url, served.token, transport=transport, timeout=60) as c:
            increment_loop(lambda fn: fn(c), sid, INCREMENTS, random.Random(index), tally)
        return tally

    started = time.monotonic()
    with ThreadPoolExecutor(CLIENTS) as pool:
        tallies = list(pool.map(client, range(CLIENTS)))
    elapsed = time.monotonic() - started

    acknowledged = sum(t.acknowledged for t in tallies)
    conflicts = sum(t.conflicts for t in tallies)
    errors = [e for t in tallies for e in t.errors]
    server_errors = sum(n for status, n in statuses.items() if status >= 500)
    with SessionClient(served.url, served.token) as c:
        final = c.get_working_memory(session_id=sid).data["counter"]
        final_version = c.get_session(session_id=sid).version
        events = audit_log(c, sid)
    print(
        f"lost-update: {CLIENTS}x{INCREMENTS} in {elapsed:.1f}s; acknowledged={acknowledged} "
        f"final={final} conflicts(412)={conflicts} statuses={dict(statuses)} errors={len(errors)}"
    )
    assert errors == []
    assert server_errors == 0, statuses
    assert "database is locked" not in served.log.read_text(errors="replace")
    assert acknowledged == CLIENTS * INCREMENTS
    check_increments(
        events,
        start_version=start_version,
        final_version=final_version,
        final=final,
        acknowledged=acknowledged,
    )


def test_idempotent_post_10_sequential_50_concurrent(served: Service) -> None:
    """C04 across two workers: 10 sequential and 50 concurrent identical POSTs with one
    Idempotency-Key -> one write, the same answer each time; a different body -> 422."""
    with httpx.Client(base_url=served.url, timeout=60) as http:
        created = http.post("/v1/sessions", json={"agent": "idem"}, headers=served.headers())
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        path = f"/v1/sessions/{sid}/messages"
        body = {"message": {"role": "user", "content": "exactly once"}}
        headers = served.headers(**{"Idempotency-Key": "idem-key-1"})

        sequential = [http.post(path, json=body, headers=headers) for _ in range(10)]

    def post(_: int) -> httpx.Response:
        with httpx.Client(base_url=served.url, timeout=60) as own:
            return own.post(path, json=body, headers=headers)

    with ThreadPoolExecutor(50) as pool:
        concurrent = list(pool.map(post, range(50)))

    answers = sequential + concurrent
    assert [r.status_code for r in answers] == [201] * 60, [r.text for r in answers[:3]]
    assert len({(r.json()["message_id"], r.json()["seq"]) for r in answers}) == 1
    assert sum(r.headers.get("idempotent-replayed") == "true" for r in answers) == 59

    with httpx.Client(base_url=served.url, timeout=60) as http:
        other = http.post(
            path, json={"message": {"role": "user", "content": "other"}}, headers=headers
        )
        assert other.status_code == 422
        assert other.headers["content-type"].startswith("application/problem+json")
        assert other.json()["type"].endswith("/idempotency-key-reused")
        session = http.get(f"/v1/sessions/{sid}", headers=served.headers()).json()
        messages = http.get(path, headers=served.headers()).json()["items"]
    assert session["message_count"] == 1
    assert [m["content"] for m in messages] == ["exactly once"]
    assert session["version"] == created.json()["version"] + 1
