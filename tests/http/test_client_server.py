"""The Python client against a real ``uvicorn`` process (the app factory, an SQLite
store, a key file), plus the async client in-process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentsession import (
    RecordWrite,
    RunNotRunning,
    SessionManager,
    SessionNotActive,
    SessionNotFound,
    ValidationError,
    VersionConflict,
)
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import FileKeyStore, MemoryKeyStore
from agentsession.ids import new_id
from agentsession.protocol import ServerError, Unauthenticated
from agentsession.settings import Settings
from agentsession.stores.memory.store import MemoryStore
from service import free_port


class Server:
    """A running service: its base URL and two API tokens."""

    def __init__(self, url: str, alice: str, bob: str) -> None:
        self.url, self.alice, self.bob = url, alice, bob


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Start ``uvicorn agentsession.http.app:create_app --factory`` on a free port."""
    tmp = tmp_path_factory.mktemp("server")
    keys = FileKeyStore(tmp / "keys.json")
    alice = keys.create(user_id="alice")[1]
    bob = keys.create(user_id="bob")[1]
    port = free_port()
    env = {
        **os.environ,
        "AGENTSESSION_URL": f"sqlite:///{tmp / 'sessions.db'}",
        "AGENTSESSION_AUTO_MIGRATE": "true",
        "AGENTSESSION_KEYS_FILE": str(tmp / "keys.json"),
    }
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "agentsession.http.app:create_app",
        "--factory",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    log = open(tmp / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((tmp / "server.log").read_text())
            time.sleep(0.1)
        yield Server(base, alice, bob)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class FlakyTransport(httpx.HTTPTransport):
    """Lets the request reach the server, then answers 503 instead (lost answer), for
    the first ``drops`` POST/PUT requests; fails to connect ``refuse`` times first."""

    def __init__(self, drops: int = 0, refuse: int = 0) -> None:
        super().__init__()
        self.drops, self.refuse = drops, refuse
        self.seen: list[tuple[str, str | None]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.refuse > 0:
            self.refuse -= 1
            raise httpx.ConnectError("injected", request=request)
        response = super().handle_request(request)
        self.seen.append((request.method, request.headers.get("idempotency-key")))
        if request.method in ("POST", "PUT") and self.drops > 0:
            self.drops -= 1
            response.read()
            response.close()
            return httpx.Response(503, headers={"Retry-After": "0"}, request=request)
        return response


def test_client_round_trip_and_typed_errors(server: Server) -> None:
    """Same methods, same models, same typed errors as SessionManager."""
    with SessionClient(server.url, server.alice) as c:
        s = c.create_session(user_id="ignored", agent="coding", title="t")
        sid = s.session_id
        m = c.append_message(session_id=sid, message={"role": "user", "content": "héllo 👩‍💻"})
        assert m.seq == 1 and m.payload() == {"role": "user", "content": "héllo 👩‍💻"}
        batch = c.append_messages(
            session_id=sid,
            messages=[{"role": "assistant", "content": str(i)} for i in range(4)],
            working_memory_patch={"goal": "g"},
        )
        assert [x.seq for x in batch] == [2, 3, 4, 5]
        assert [x.seq for x in c.get_messages(session_id=sid, limit=2).items] == [4, 5]
        assert len(c.get_messages(session_id=sid).items) == 5
        assert c.get_working_memory(session_id=sid).goal == "g"
        call = c.record_tool_call(session_id=sid, tool="t", arguments={"a": 1}, result=2)
        found = c.find_tool_call(session_id=sid, tool="t", arguments={"a": 1})
        assert found == call.model_copy(update={"session_version": None})
        assert c.find_tool_call(session_id=sid, tool="t", arguments={"a": 2}) is None
        run = c.start_run(session_id=sid, input="x")
        c.add_run_step(session_id=sid, run_id=run.run_id, kind="model")
        done = c.finish_run(session_id=sid, run_id=run.run_id, status="SUCCEEDED")
        assert c.get_run(session_id=sid, run_id=run.run_id).steps[0].kind == "model"
        assert [r.run_id for r in c.list_runs(session_id=sid).items] == [done.run_id]
        current = c.get_session(session_id=sid)
        with pytest.raises(VersionConflict) as conflict:
            c.update_session(session_id=sid, title="x", expected_version=current.version - 1)
        assert conflict.value.current_version == current.version
        updated = c.update_session(session_id=sid, title=None, expected_version=current.version)
        assert updated.title is None and updated.version == current.version + 1
        c.close_session(session_id=sid)
        with pytest.raises(SessionNotActive):
            c.append_message(session_id=sid, message={"role": "user"})
        restored = c.restore_session(session_id=sid, message_limit=2)
        assert restored.session.status == "ACTIVE" and len(restored.messages) == 2
        with pytest.raises(ValidationError) as bad:
            c.append_message(session_id=sid, message={"role": "wizard"})
        assert bad.value.field == "messages[0].role"
        assert c.get_audit_log(session_id=sid).items[0].action == "session.created"
        assert c.list_sessions().items[0].session_id == sid
        c.delete_session(session_id=sid)
        with pytest.raises(SessionNotFound) as missing:
            c.get_session(session_id=sid)
        assert missing.value.session_id == sid
    with SessionClient(server.url, server.bob) as bob, pytest.raises(SessionNotFound):
        bob.get_session(session_id=s.session_id)
    with SessionClient(server.url, "nope") as anon, pytest.raises(Unauthenticated):
        anon.list_sessions()


def test_client_retries_lost_answers_with_the_same_key(server: Server) -> None:
    """An injected 503 after the server stored the write, and a refused connection: the
    client retries with the same Idempotency-Key and one copy is stored."""
    with SessionClient(server.url, server.bob) as plain:
        before = len(plain.list_sessions(limit=100).items)
    flaky = FlakyTransport(drops=2, refuse=1)
    with SessionClient(server.url, server.bob, transport=flaky, backoff=0.01) as c:
        sid = c.create_session().session_id
        m = c.append_message(session_id=sid, message={"role": "user", "content": "once"})
        assert [x.message_id for x in c.get_messages(session_id=sid).items] == [m.message_id]
        assert len(c.list_sessions(limit=100).items) == before + 1
    posts = [key for method, key in flaky.seen if method == "POST"]
    assert len(posts) == 4 and posts[0] is not None
    assert posts[0] == posts[1] == posts[2] != posts[3]
    with (
        SessionClient(
            server.url, server.bob, transport=FlakyTransport(drops=5), max_retries=2, backoff=0.01
        ) as c,
        pytest.raises(ServerError),
    ):
        c.create_session()


def test_modify_working_memory_loses_no_update(server: Server) -> None:
    """8 threads x 20 increments through modify_working_memory -> counter 160."""
    with SessionClient(server.url, server.alice) as setup:
        sid = setup.create_session(working_memory={"counter": 0}).session_id

    def worker() -> None:
        with SessionClient(server.url, server.alice) as c:
            for _ in range(20):
                c.modify_working_memory(
                    session_id=sid,
                    fn=lambda m: {**m, "counter": m["counter"] + 1},
                    max_attempts=200,
                )

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with SessionClient(server.url, server.alice) as c:
        assert c.get_working_memory(session_id=sid).data["counter"] == 160


def test_modify_working_memory_survives_lost_put_answers(server: Server) -> None:
    """A PUT whose answer is lost is retried with its Idempotency-Key: applied once."""
    with SessionClient(server.url, server.alice) as setup:
        sid = setup.create_session(working_memory={"counter": 0}).session_id
    flaky = FlakyTransport(drops=2)
    with SessionClient(server.url, server.alice, transport=flaky, backoff=0.01) as c:
        memory = c.modify_working_memory(
            session_id=sid, fn=lambda m: {**m, "counter": m["counter"] + 1}
        )
        assert memory.data["counter"] == 1
        assert c.get_working_memory(session_id=sid).data["counter"] == 1


def test_async_client_in_process() -> None:
    """The async client through ASGITransport: same results and errors."""
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    app = create_app(SessionManager(MemoryStore()), Settings(url="memory://"), keys=keys)

    async def main() -> Any:
        transport = httpx.ASGITransport(app=app)
        async with AsyncSessionClient("http://t", token, transport=transport) as c:
            s = await c.create_session(agent="a")
            await c.append_message(session_id=s.session_id, message={"role": "user"})
            memory = await c.modify_working_memory(
                session_id=s.session_id, fn=lambda m: {**m, "goal": "async"}
            )
            assert memory.goal == "async"
            with pytest.raises(SessionNotFound):
                await c.get_session(session_id="ses_aaaaaaaaaaaaaaaaaaaaaaaaaa")
            return (await c.get_messages(session_id=s.session_id)).items

    assert [m.seq for m in asyncio.run(main())] == [1]


def test_keys_file_stores_only_hashes(tmp_path: Path) -> None:
    """The key file never holds a token; revoke works across store instances."""
    path = tmp_path / "keys.json"
    key, token = FileKeyStore(path).create(user_id="carol", admin=True)
    text = path.read_text()
    assert token not in text and token.split(".")[1] not in text
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    other = FileKeyStore(path, reload_interval=0)
    principal = other.authenticate(token)
    assert principal is not None and principal.admin and principal.user_id == "carol"
    assert FileKeyStore(path).revoke(key.key_id)
    assert other.authenticate(token) is None


def test_keys_cli(tmp_path: Path) -> None:
    """`keys create` prints the token once; `keys revoke` disables it."""
    from typer.testing import CliRunner

    from agentsession.cli.server import keys_app

    path = str(tmp_path / "k.json")
    out = CliRunner().invoke(keys_app, ["create", "--user", "dave", "--keys-file", path])
    assert out.exit_code == 0, out.output
    token = out.stdout.strip().splitlines()[0]
    assert FileKeyStore(path).authenticate(token) is not None
    revoked = CliRunner().invoke(keys_app, ["revoke", token.split(".")[0], "--keys-file", path])
    assert revoked.exit_code == 0
    assert FileKeyStore(path).authenticate(token) is None


def test_client_records_round_trip(server: Server) -> None:
    """The blocking client's record methods, over a real server and SQLite: bytes
    round-trip through base64, an absent record is None, a missing session raises."""
    data = bytes(range(256))
    with SessionClient(server.url, server.alice) as c:
        sid = c.create_session(agent="records").session_id
        put = c.put_records(session_id=sid, records=[RecordWrite("ns", "k", data, {"t": "x"})])
        assert put.written == 1
        got = c.get_record(session_id=sid, namespace="ns", key="k")
        assert got is not None and (got.data, got.meta, got.version) == (
            data,
            {"t": "x"},
            put.session_version,
        )
        assert c.get_record(session_id=sid, namespace="ns", key="absent") is None
        assert [r.key for r in c.list_records(session_id=sid, namespace="ns")] == ["k"]
        assert c.delete_records(session_id=sid, prefix="k").removed == 1
        with pytest.raises(SessionNotFound):
            c.list_records(session_id=new_id("ses"))


def test_sync_client_leases_a_run_and_heartbeats(server: Server) -> None:
    """SessionClient.start_run(lease_seconds=) and heartbeat_run: the lease moves, the
    session version does not; a finished run's heartbeat is RunNotRunning."""
    with SessionClient(server.url, server.alice) as c:
        sid = c.create_session(agent="coding").session_id
        run = c.start_run(session_id=sid, lease_seconds=600)
        assert run.lease_seconds == 600 and run.lease_expires_at is not None
        beat = c.heartbeat_run(session_id=sid, run_id=run.run_id, lease_seconds=900)
        assert beat.lease_seconds == 900 and beat.lease_expires_at > run.lease_expires_at
        assert beat.session_version == run.session_version
        assert c.get_session(session_id=sid).lease_expires_at == beat.lease_expires_at
        c.finish_run(session_id=sid, run_id=run.run_id, status="SUCCEEDED")
        with pytest.raises(RunNotRunning):
            c.heartbeat_run(session_id=sid, run_id=run.run_id)
