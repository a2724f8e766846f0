"""Racing duplicates across worker processes (C33): identical requests sent at once
with one Idempotency-Key to ``agentsession serve --workers 2`` make one object, and
exactly one answer is the original; every other one says it is a replay."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from service import Service, running_service

# A multi-process server (about 10 s with its start-up): out of `make test`.
pytestmark = pytest.mark.slow

DUPLICATES = 8
ROUNDS = 10


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """``agentsession serve --workers 2`` on an SQLite file, set up as the README says."""
    tmp: Path = tmp_path_factory.mktemp("c33")
    with running_service(tmp, user="alice", workers=2) as service:
        yield service


@pytest.fixture
def clients(served: Service) -> Iterator[list[httpx.Client]]:
    """One keep-alive connection per duplicate sender."""
    opened = [httpx.Client(base_url=served.url, timeout=60) for _ in range(DUPLICATES)]
    yield opened
    for c in opened:
        c.close()


def _at_once(
    served: Service, clients: list[httpx.Client], method: str, path: str, body: Any, key: str
) -> list[httpx.Response]:
    """Send one identical request per client, on its own connection, released together."""
    gate = threading.Barrier(len(clients))
    headers = served.headers(**{"Idempotency-Key": key})

    def send(http: httpx.Client) -> httpx.Response:
        request = http.build_request(method, path, json=body, headers=headers)
        gate.wait()
        return http.send(request)

    with ThreadPoolExecutor(len(clients)) as pool:
        return list(pool.map(send, clients))


def _one_original(answers: list[httpx.Response], status: int) -> dict[str, Any]:
    """All answers alike and successful; exactly one without ``Idempotent-Replayed``."""
    assert [a.status_code for a in answers] == [status] * DUPLICATES, answers[0].text
    bodies = [a.json() for a in answers]
    assert all(b == bodies[0] for b in bodies)
    flags = [a.headers.get("idempotent-replayed") for a in answers]
    assert flags.count(None) == 1 and flags.count("true") == DUPLICATES - 1, flags
    return bodies[0]  # type: ignore[no-any-return]


def test_c33_racing_duplicates_one_original(served: Service, clients: list[httpx.Client]) -> None:
    """C33: per round, 8 identical creates, appends, memory PUTs and PATCHes and session
    PATCHes sent at once with one key each -> one session, one message, one version
    step per write; one original answer and 7 replays each time."""
    http = clients[0]
    for round_ in range(ROUNDS):
        race = [
            ("POST", "", {"agent": "c33"}, 201),
            ("POST", "/messages", {"message": {"role": "user", "content": f"{round_}"}}, 201),
            ("PUT", "/memory", {"n": round_}, 200),
            ("PATCH", "/memory", {"k": 1}, 200),
            ("PATCH", "", {"title": "t"}, 200),
        ]
        base = "/v1/sessions"
        for step, (method, path, body, status) in enumerate(race):
            key = f"c33-{round_}-{step}"
            answers = _at_once(served, clients, method, base + path, body, key)
            answer = _one_original(answers, status)
            if step == 0:
                base = f"/v1/sessions/{answer['session_id']}"
        now = http.get(base, headers=served.headers()).json()
        assert (now["message_count"], now["version"]) == (1, 5)
    listed = http.get(
        "/v1/sessions", params={"agent": "c33", "limit": 100}, headers=served.headers()
    ).json()
    assert len(listed["items"]) == ROUNDS and not listed["has_more"]
