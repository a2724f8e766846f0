"""Hostile clients against a real ``agentsession serve`` (its uvicorn protocol, its log
configuration): invalid HTTP -> problem+json 400; a 1 MB header, 5,000 headers or a
header section that never ends -> 431; a slow-drip body -> 408 and the connection
closed. Then the canary test: content sent everywhere a client can put it, every limit
hit, and the whole server log (stdout + stderr) holds none of it.

The same limits inside the app are tested in-process in tests/http/test_limits.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from service import EXE, Service, agentsession, free_port, running_service


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """``serve`` with 2 s header and body timeouts; every other limit at its default."""
    settings = {
        "AGENTSESSION_BODY_TIMEOUT_SECONDS": "2",
        "AGENTSESSION_HEADER_TIMEOUT_SECONDS": "2",
    }
    with running_service(tmp_path_factory.mktemp("limits"), settings=settings) as service:
        yield service


def _port(service: Service) -> int:
    return int(urlsplit(service.url).port or 0)


def _read_until_closed(sock: socket.socket, timeout: float = 10) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except OSError:
            return data
        if not chunk:
            return data
        data += chunk


def exchange(service: Service, request: bytes) -> bytes:
    """Send ``request`` raw; return everything the server sends until it closes."""
    with socket.create_connection(("127.0.0.1", _port(service)), timeout=10) as sock:
        # The server may have answered and stopped reading already.
        with contextlib.suppress(OSError):
            sock.sendall(request)
        return _read_until_closed(sock)


def parse(raw: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
    """Status, headers (lower-case names) and JSON body of one raw HTTP answer."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, json.loads(body)


def assert_raw_problem(raw: bytes, status: int, code: str) -> dict[str, Any]:
    got, headers, body = parse(raw)
    assert got == status, raw[:300]
    assert headers["content-type"] == "application/problem+json"
    assert headers["connection"] == "close"
    assert body["type"] == f"https://agentsession.dev/problems/{code}"
    assert body["status"] == status
    return body


def test_invalid_http_is_a_problem_400(served: Service) -> None:
    """A request line that is not HTTP -> 400 problem+json (uvicorn's is text/plain)."""
    raw = exchange(served, b"NOT HTTP AT ALL\r\n\r\n")
    assert_raw_problem(raw, 400, "invalid-http")


def test_one_megabyte_header_431(served: Service) -> None:
    """One header of 1 MB -> 431 problem+json (it answered 200 before)."""
    big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    body = assert_raw_problem(exchange(served, big), 431, "header-fields-too-large")
    assert body["limit_bytes"] == 16 * 1024


def test_five_thousand_headers_431(served: Service) -> None:
    """5,000 small headers -> 431 problem+json (limit 100 fields)."""
    fields = b"".join(b"X-H%d: v\r\n" % i for i in range(5000))
    raw = exchange(served, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n")
    body = assert_raw_problem(raw, 431, "header-fields-too-large")
    assert body["limit_count"] == 100


def test_header_section_that_never_ends_431(served: Service) -> None:
    """64 KB of one header value and no end of the header section: refused once the
    server holds more than the limit, not waited for."""
    with socket.create_connection(("127.0.0.1", _port(served)), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Endless: " + b"a" * 65536)
        raw = _read_until_closed(sock)
    assert_raw_problem(raw, 431, "header-fields-too-large")


def test_service_keeps_serving_after_refusals(served: Service) -> None:
    """After the hostile requests above the service answers normally."""
    exchange(served, b"NOT HTTP\r\n\r\n")
    assert httpx.get(f"{served.url}/healthz", timeout=10).status_code == 200


def _drip_until_answered(sock: socket.socket, body: bytes, pause: float, limit: float) -> None:
    """Send ``body`` a byte every ``pause`` s until the server answers (or ``limit`` s)."""
    deadline = time.monotonic() + limit
    for byte in body:
        if select.select([sock], [], [], pause)[0] or time.monotonic() > deadline:
            return
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            return


@pytest.mark.slow
def test_slow_drip_body_408_and_connection_closed(served: Service) -> None:
    """A 100-byte body sent a byte every 0.25 s (25 s in all) with a 2 s body timeout:
    408 problem+json after about 2 s (bound: under 10 s), then the server closes."""
    request = (
        b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + served.token.encode() + b"\r\nContent-Length: 100\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", _port(served)), timeout=15) as sock:
        started = time.monotonic()
        sock.sendall(request)
        _drip_until_answered(sock, b"x" * 100, 0.25, 15)
        raw = _read_until_closed(sock)
        elapsed = time.monotonic() - started
    body = assert_raw_problem(raw, 408, "request-timeout")
    assert body["limit_seconds"] == 2
    assert 1.5 <= elapsed < 10, elapsed


@pytest.mark.slow
def test_slow_drip_headers_408_and_connection_closed(served: Service) -> None:
    """A header section sent a byte every 0.25 s with a 2 s header timeout: 408
    problem+json after about 2 s (bound: under 10 s), then the server closes."""
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 100 + b"\r\n\r\n"
    with socket.create_connection(("127.0.0.1", _port(served)), timeout=15) as sock:
        started = time.monotonic()
        _drip_until_answered(sock, request, 0.25, 15)
        raw = _read_until_closed(sock)
        elapsed = time.monotonic() - started
    body = assert_raw_problem(raw, 408, "request-timeout")
    assert body["limit_seconds"] == 2
    assert 1.5 <= elapsed < 10, elapsed


# -- the canary test ----------------------------------------------------------------------

CANARY = "zq7canaryk3x"


def _send_everywhere(service: Service) -> None:
    """Canaries in bodies, query strings, paths, headers, failed requests (whose answers
    may echo input); a session with content to look up."""
    auth = service.headers(**{"User-Agent": CANARY, "X-Note": CANARY})
    with httpx.Client(base_url=service.url, timeout=10) as http:
        created = http.post(
            "/v1/sessions",
            json={"agent": "a", "title": CANARY, "metadata": {"n": CANARY}},
            headers=auth,
        )
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        base = f"/v1/sessions/{sid}"
        assert (
            http.post(
                f"{base}/messages",
                json={"message": {"role": "user", "content": CANARY}},
                headers=auth,
            ).status_code
            == 201
        )
        assert (
            http.post(
                f"{base}/tool-calls", json={"tool": "t", "arguments": {"q": CANARY}}, headers=auth
            ).status_code
            == 201
        )
        found = http.get(
            f"{base}/tool-calls/find",
            params={"tool": "t", "arguments": json.dumps({"q": CANARY})},
            headers=auth,
        )
        assert found.json()["item"] is not None
        statuses = [
            http.get("/v1/sessions", params={"agent": CANARY}, headers=auth).status_code,
            http.get(f"{base}/messages", params={"cursor": CANARY}, headers=auth).status_code,
            http.get(f"/v1/sessions/{CANARY}", headers=auth).status_code,
            http.get(f"/v1/{CANARY}/x?{CANARY}=1", headers=auth).status_code,
            http.post(
                f"{base}/messages", json={"message": {"role": CANARY}}, headers=auth
            ).status_code,
            http.post(f"{base}/messages", json={CANARY: 1}, headers=auth).status_code,
            http.post(
                f"{base}/messages", content=b'{"message": "' + CANARY.encode(), headers=auth
            ).status_code,
            http.patch(
                base, json={"title": "x"}, headers={**auth, "If-Match": f'"{CANARY}"'}
            ).status_code,
            http.request(CANARY.upper(), f"{base}?{CANARY}", headers=auth).status_code,
        ]
        assert statuses[0] == 200 and all(s >= 400 for s in statuses[1:]), statuses


def _hit_every_limit(service: Service) -> None:
    """431 (a huge and a many-field header section), 400 (invalid HTTP), 408 (two slow
    bodies, which hold no concurrency slot: /healthz is served meanwhile), 408 (a slow
    header section), 429 (bad keys). The 503 of the concurrency limit quotes nothing
    of the request (tests/http/test_limits.py)."""
    exchange(
        service,
        b"GET /?" + CANARY.encode() + b" HTTP/1.1\r\nX-A: " + CANARY.encode() * 5000 + b"\r\n\r\n",
    )
    exchange(
        service,
        b"GET /healthz HTTP/1.1\r\n"
        + b"".join(b"X-%s-%d: %s\r\n" % (CANARY.encode(), i, CANARY.encode()) for i in range(200))
        + b"\r\n",
    )
    exchange(service, CANARY.encode() + b" /" + CANARY.encode() + b"\r\n\r\n")
    held = [socket.create_connection(("127.0.0.1", _port(service)), timeout=10) for _ in (1, 2)]
    for sock in held:
        sock.sendall(
            b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
            b'Content-Type: application/json\r\n\r\n{"title": "' + CANARY.encode()
        )
    slow_head = socket.create_connection(("127.0.0.1", _port(service)), timeout=10)
    slow_head.sendall(b"GET /?" + CANARY.encode() + b" HTTP/1.1\r\nX-A: " + CANARY.encode())
    held.append(slow_head)
    time.sleep(0.3)
    # Slow bodies hold no concurrency slot, and health never counts: served.
    idle = httpx.get(f"{service.url}/healthz", headers={"X-Note": CANARY}, timeout=10)
    assert idle.status_code == 200, idle.text
    answers = [_read_until_closed(sock) for sock in held]
    for sock in held:
        sock.close()
    assert [parse(a)[0] for a in answers] == [408, 408, 408]
    with httpx.Client(base_url=service.url, timeout=10) as http:
        flood = [
            http.get("/v1/sessions", headers={"Authorization": f"Bearer {token}"}).status_code
            for token in [f"{CANARY}{i}" for i in range(3)] + [f"key_{CANARY}.{CANARY}"] * 3
        ]
    assert flood[-1] == 429, flood


@pytest.mark.slow
def test_server_log_holds_no_canary(tmp_path: Path) -> None:
    """Every request above is answered and logged (access lines, refusals), and the
    whole log of the serve process holds the canary nowhere, in any case."""
    settings = {
        "AGENTSESSION_BODY_TIMEOUT_SECONDS": "1",
        "AGENTSESSION_HEADER_TIMEOUT_SECONDS": "1",
        "AGENTSESSION_MAX_CONCURRENT_REQUESTS": "2",
        "AGENTSESSION_AUTH_FAILURES_PER_ADDRESS": "5",
    }
    with running_service(tmp_path, settings=settings) as service:
        _send_everywhere(service)
        worker = threading.Thread(target=_hit_every_limit, args=(service,))
        worker.start()
        worker.join(60)
        assert not worker.is_alive()
    # Read once the service has stopped: every line it wrote is in the file.
    text = service.log.read_text(encoding="utf-8", errors="replace")
    assert '"GET /v1/sessions/{session_id}/tool-calls/find" 200' in text
    assert '"POST /v1/sessions/{session_id}/messages" 201' in text
    for status in (400, 404, 408, 412, 422, 429):
        assert f'" {status} ' in text, status
    assert "answered 431" in text and "answered 408" in text
    assert CANARY not in text.lower()


def test_websocket_handshake_is_a_plain_404_problem(tmp_path: Path) -> None:
    """``serve`` runs without WebSocket support: a handshake to a path and query string
    holding a canary is an ordinary unknown path (404 problem+json, not uvicorn's
    text/plain 403), and the log holds no canary."""
    with running_service(tmp_path) as service:
        raw = exchange(
            service,
            b"GET /ws/" + CANARY.encode() + b"?" + CANARY.encode() + b"=1 HTTP/1.1\r\n"
            b"Host: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            b"Origin: http://" + CANARY.encode() + b"\r\n\r\n",
        )
    status, headers, body = parse(raw)
    assert status == 404 and headers["content-type"] == "application/problem+json"
    assert body["type"] == "https://agentsession.dev/problems/not-found"
    assert CANARY not in service.log.read_text(encoding="utf-8", errors="replace").lower()


def _serve_fails(env_update: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTSESSION_URL": f"sqlite:///{tmp_path / 'sessions.db'}"}
    env.pop("AGENTSESSION_TOMBSTONE_KEY", None)
    env.update(env_update)
    agentsession("db", "upgrade", env=env)
    return subprocess.run(
        [str(EXE), "serve", "--host", "127.0.0.1", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_serve_with_a_short_tombstone_key_prints_one_error_line(tmp_path: Path) -> None:
    """A tombstone key under 16 bytes: one ``error:`` line, no traceback, exit code 5."""
    out = _serve_fails({"AGENTSESSION_TOMBSTONE_KEY": "short"}, tmp_path)
    assert out.returncode == 5
    assert out.stderr.strip().splitlines() == ["error: tombstone_key must be at least 16 bytes"]
    assert "Traceback" not in out.stdout + out.stderr


def test_serve_in_an_unsafe_directory_prints_one_error_line(tmp_path: Path) -> None:
    """A database directory every user may write to: one ``error:`` line, exit 2 (the
    key file beside the database is checked, and refused, before the store opens)."""
    unsafe = tmp_path / "open"
    unsafe.mkdir()
    unsafe.chmod(0o777)
    # A missing or empty database would be refused first (exit 2): make a real one.
    with contextlib.closing(sqlite3.connect(unsafe / "sessions.db")) as db:
        db.execute("CREATE TABLE t (x)")
    env = {**os.environ, "AGENTSESSION_URL": f"sqlite:///{unsafe / 'sessions.db'}"}
    out = subprocess.run(
        [str(EXE), "serve", "--host", "127.0.0.1", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the directory "), out.stderr
    assert "Traceback" not in out.stdout + out.stderr
