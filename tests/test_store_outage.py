"""The database server stopped and started again under load (its own throwaway server
per test, on the same port and data directory: :meth:`servers.Server.halt` and
:meth:`~servers.Server.resume`).

Writers through the library, the LangGraph saver and ``serve`` (in-process) run all
along. While the server is down every call fails with StoreUnavailable, or a 503 with
``Retry-After`` over HTTP, never anything else (no 500); once it is back, calls
succeed again without restarting anything; and every write that was acknowledged is
stored afterwards.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient

import servers
from agentsession import SessionManager, StoreUnavailable
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings

pytestmark = pytest.mark.slow

#: Seconds of load before the stop, of the outage, and after the start.
BEFORE, DOWN, AFTER = 1.0, 2.0, 2.0
#: Seconds after the start by which no call may be unavailable any more.
RECOVERY = 1.0

_STARTERS: dict[str, Callable[[], servers.Server]] = {
    "postgres": servers.start_postgres,
    "mysql": servers.start_mysql,
    "redis": servers.start_redis,
}


@pytest.fixture(params=["postgres", "mysql", "redis"])
def own_server(request: pytest.FixtureRequest) -> Iterator[tuple[servers.Server, str]]:
    """A server of this test's own (it is stopped mid-test), and a store URL on it."""
    try:
        server = _STARTERS[request.param]()
    except servers.ServerNotInstalled as exc:
        pytest.skip(str(exc))
    try:
        url = server.url_prefix + "/0" if server.kind == "redis" else server.create_database()[1]
        yield server, url
    finally:
        server.stop()


@dataclass
class Outcomes:
    """What the writers saw: acknowledged writes, unavailable answers, anything else."""

    acked: list[str] = field(default_factory=list)
    unavailable: list[float] = field(default_factory=list)  # when (monotonic)
    other: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, value: Any) -> None:
        with self.lock:
            getattr(self, kind).append(value)


def _library_writer(manager: SessionManager, sid: str, out: Outcomes) -> Callable[[int], None]:
    def write(n: int) -> None:
        content = f"lib-{n}"
        try:
            manager.append_message(
                session_id=sid,
                user_id="alice",
                message={"role": "user", "content": content},
                idempotency_key=content,
            )
        except StoreUnavailable:
            out.add("unavailable", time.monotonic())
        except Exception as exc:  # every other outcome fails the test
            out.add("other", f"{content}: {exc!r}")
        else:
            out.add("acked", content)

    return write


def _http_writer(app: Any, token: str, sid: str, out: Outcomes) -> Callable[[int], None]:
    http = TestClient(app, raise_server_exceptions=False)
    headers = {"Authorization": f"Bearer {token}"}

    def write(n: int) -> None:
        content = f"http-{n}"
        r = http.post(
            f"/v1/sessions/{sid}/messages",
            json={"message": {"role": "user", "content": content}},
            headers={**headers, "Idempotency-Key": content},
        )
        if r.status_code == 201:
            out.add("acked", content)
        elif (
            r.status_code == 503
            and r.headers.get("retry-after") == "1"
            and r.json()["type"].endswith("/store-unavailable")
        ):
            out.add("unavailable", time.monotonic())
        else:
            out.add("other", f"{content}: {r.status_code} {r.text[:200]}")

    return write


def _saver_writer(manager: SessionManager, out: Outcomes) -> Callable[[int], None] | None:
    try:
        from langgraph.checkpoint.conformance.test_utils import (
            generate_checkpoint,
            generate_config,
            generate_metadata,
        )
    except ImportError:
        return None
    from agentsession.adapters.langgraph import AgentSessionSaver

    saver = AgentSessionSaver(manager, user_id="alice")

    def write(n: int) -> None:
        try:
            saved = saver.put(
                generate_config("thread"), generate_checkpoint(), generate_metadata(), {}
            )
        except StoreUnavailable:
            out.add("unavailable", time.monotonic())
        except Exception as exc:
            out.add("other", f"checkpoint {n}: {exc!r}")
        else:
            out.add("acked", "cp-" + saved["configurable"]["checkpoint_id"])

    return write


def _run(writers: list[Callable[[int], None]], stop: threading.Event) -> list[threading.Thread]:
    counter = itertools.count()

    def loop(write: Callable[[int], None]) -> None:
        while not stop.is_set():
            write(next(counter))
            time.sleep(0.01)

    threads = [threading.Thread(target=loop, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    return threads


def _contents(manager: SessionManager, sid: str) -> set[Any]:
    """The content of every message of the session (following the cursors)."""
    found: set[Any] = set()
    after = 0
    while True:
        page = manager.get_messages(session_id=sid, user_id="alice", after=after, limit=500)
        if not page.items:
            return found
        found |= {m.content for m in page.items}
        after = page.items[-1].seq


def test_server_restarted_under_load(own_server: tuple[servers.Server, str]) -> None:
    """Stop the server for a while under load and start it again: StoreUnavailable or
    503 + Retry-After while it is down, never a 500; calls succeed again after it is
    back, in the same process; every acknowledged write is stored."""
    server, url = own_server
    manager = SessionManager.from_url(url, auto_migrate=True)
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    app = create_app(manager, Settings(url="memory://"), keys=keys)
    sid = manager.create_session(user_id="alice").session_id
    out = Outcomes()
    writers = [_library_writer(manager, sid, out), _http_writer(app, token, sid, out)]
    saver = _saver_writer(manager, out)
    if saver is not None:
        writers.append(saver)
    stop = threading.Event()
    threads = _run(writers, stop)
    try:
        time.sleep(BEFORE)
        server.halt()
        time.sleep(DOWN)
        server.resume()
        resumed = time.monotonic()
        time.sleep(AFTER)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert out.other == []
    assert out.unavailable, "no call saw the outage"
    acked_before = len(out.acked)
    for write in writers:  # recovered: each path works now, first time
        write(10**6)
    assert len(out.acked) == acked_before + len(writers), out.other
    # Recovered within moments of the server accepting connections again.
    assert max(out.unavailable) < resumed + RECOVERY
    messages = _contents(manager, sid)
    assert {a for a in out.acked if not a.startswith("cp-")} <= messages
    if saver is not None:
        from agentsession.adapters.langgraph import AgentSessionSaver

        again = AgentSessionSaver(manager, user_id="alice")
        stored = {
            "cp-" + t.config["configurable"]["checkpoint_id"]
            for t in again.list({"configurable": {"thread_id": "thread"}})
        }
        assert {a for a in out.acked if a.startswith("cp-")} <= stored
    manager.close()
