"""CPU per HTTP request of ``agentsession serve``'s app, in process, beside the minimal app.

What is measured: the CPU time (``time.process_time``: every thread of the process, so
the store's worker thread too) and the wall time per request of the hot routes, each
app called directly as an ASGI application (no socket, no uvicorn: what is left is the
app's own cost, which the HTTP workload (f) of :mod:`http_load` measures under uvicorn
and wrk). The routes:

- ``append``: ``POST /v1/sessions/{id}/messages`` with one 200-byte message, rotating
  over 16 sessions;
- ``last-20``: ``GET /v1/sessions/{id}/messages?limit=20`` of a session of 200 messages;
- ``session``: ``GET /v1/sessions/{id}``;
- ``memory``: ``PUT /v1/sessions/{id}/memory`` with ``If-Match`` (the ETag of the last
  answer), a small document.

The participants: ``serve`` (this checkout's :func:`agentsession.http.app.create_app`,
set up as ``agentsession serve`` sets it up: an SQLite file in WAL, its key file, the
settings of the environment), ``minimal`` (``minimal_app.py``, the baseline of (f); it
has no memory route), and with ``--against DIR`` ``before``: the ``create_app`` of the
agentsession in ``DIR`` (a ``src`` directory, e.g. of ``git worktree add --detach
/tmp/base main``), imported under another name beside this one. Every answer's status
is checked.

Each round runs ``--requests`` requests of every (participant, route) pair, the pairs in
a shuffled order; the report is the median over ``--rounds`` rounds of the CPU and wall
microseconds per request, with the range, and the ratio to the minimal app (CPU). SQLite
runs at ``--synchronous`` (default ``NORMAL``, so that the flush's wait does not hide in
the wall time; the CPU is the same).

Run from ``benchmarks/`` with the project's environment::

    ../.venv/bin/python http_cpu.py [--rounds 5] [--requests 300] [--against DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROUTES = ("append", "last-20", "session", "memory")
#: Messages in the session the reads read.
HISTORY = 200
#: Sessions the appends rotate over.
SESSIONS = 16
CONTENT = "The app fails at start-up; check the imports, pin the versions. " * 3
APPEND = json.dumps({"message": {"role": "user", "content": CONTENT[:200]}}).encode()
ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class Client:
    """Calls an ASGI app in process, as uvicorn would with one keep-alive request."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.headers = [
            (b"host", b"127.0.0.1"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"accept", b"application/json"),
        ]

    async def call(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        query: bytes = b"",
        headers: tuple[tuple[bytes, bytes], ...] = (),
    ) -> tuple[int, dict[bytes, bytes], bytes]:
        """``(status, headers, body)`` of one request."""
        extra = [(b"content-type", b"application/json")] if body else []
        extra.append((b"content-length", str(len(body)).encode()))
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query,
            "root_path": "",
            "headers": [*self.headers, *extra, *headers],
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        pending = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            if pending:
                return pending.pop()
            await asyncio.Event().wait()  # a disconnect never comes
            raise AssertionError("unreachable")

        answer: dict[str, Any] = {"body": b""}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                answer["headers"] = dict(message.get("headers", []))
            else:
                answer["body"] += message.get("body", b"")

        await self.app(scope, receive, send)
        return answer["status"], answer["headers"], answer["body"]

    async def ok(self, method: str, path: str, expect: int, **kw: Any) -> tuple[dict, bytes]:
        """Headers and body of a request that must answer ``expect``."""
        status, headers, body = await self.call(method, path, **kw)
        if status != expect:
            raise RuntimeError(f"{method} {path}: {status}, expected {expect}: {body[:300]!r}")
        return headers, body


class Participant:
    """One app with its sessions and the requests each route sends."""

    def __init__(self, name: str, app: ASGIApp, token: str, *, memory: bool = True) -> None:
        self.name = name
        self.client = Client(app, token)
        self.routes = [r for r in ROUTES if memory or r != "memory"]
        self.sessions: list[str] = []
        self.read = ""
        self.memory = ""
        self.etag = b""
        self.turn = 0

    async def prepare(self) -> None:
        """Create the sessions, fill the read session."""
        c = self.client
        for _ in range(SESSIONS + 2):
            _, body = await c.ok("POST", "/v1/sessions", 201, body=b'{"agent": "bench"}')
            self.sessions.append(json.loads(body)["session_id"])
        self.read, self.memory = self.sessions.pop(), self.sessions.pop()
        batch = [{"role": "user", "content": f"message {i}"} for i in range(HISTORY)]
        path = f"/v1/sessions/{self.read}/messages"
        for start in range(0, HISTORY, 100):
            await c.ok(
                "POST",
                path,
                201,
                body=json.dumps({"messages": batch[start : start + 100]}).encode(),
            )
        if "memory" in self.routes:
            headers, _ = await c.ok("GET", f"/v1/sessions/{self.memory}", 200)
            self.etag = headers[b"etag"]

    async def run(self, route: str) -> None:
        """One request of ``route``, its answer checked."""
        c = self.client
        if route == "append":
            self.turn += 1
            sid = self.sessions[self.turn % len(self.sessions)]
            await c.ok("POST", f"/v1/sessions/{sid}/messages", 201, body=APPEND)
        elif route == "last-20":
            _, body = await c.ok(
                "GET", f"/v1/sessions/{self.read}/messages", 200, query=b"limit=20"
            )
            if len(json.loads(body)["items"]) != 20:
                raise RuntimeError(f"last-20 answered {body[:200]!r}")
        elif route == "session":
            await c.ok("GET", f"/v1/sessions/{self.read}", 200)
        else:
            self.turn += 1
            doc = json.dumps({"step": self.turn, "plan": ["read", "fix", "test"]}).encode()
            headers, _ = await c.ok(
                "PUT",
                f"/v1/sessions/{self.memory}/memory",
                200,
                body=doc,
                headers=((b"if-match", self.etag),),
            )
            self.etag = headers[b"etag"]


def _import(src: str, tag: str) -> Any:
    """The agentsession package of ``src``, imported as ``agentsession_<tag>``."""
    from hotpath import load_copy

    return load_copy(src, tag)


def _serve_app(package: Any, name: str, tmp: Path, synchronous: str) -> Participant:
    """``create_app`` of ``package`` over an SQLite file, with a key in its key file."""
    os.environ["AGENTSESSION_SQLITE_SYNCHRONOUS"] = synchronous
    settings_mod = importlib.import_module(f"{package.__name__}.settings")
    keys_mod = importlib.import_module(f"{package.__name__}.http.keys")
    app_mod = importlib.import_module(f"{package.__name__}.http.app")
    settings = settings_mod.Settings(url=f"sqlite:///{tmp / name}.db")
    options = {**settings.manager_options(), "auto_migrate": True}
    manager = package.SessionManager.from_url(settings.url, **options)
    keys = keys_mod.open_key_store(settings, manager.store)
    token = keys.create(user_id="bench")[1]
    return Participant(name, app_mod.create_app(manager, settings), token)


def _minimal_app(tmp: Path, synchronous: str) -> Participant:
    """The minimal app of workload (f), its schema made."""
    os.environ.update(
        MINIMAL_DB=str(tmp / "minimal.db"),
        MINIMAL_SYNCHRONOUS=synchronous,
        MINIMAL_TOKEN="minimal-cpu-token",
    )
    minimal = importlib.import_module("minimal_app")
    minimal._schema()
    return Participant("minimal", minimal.app, "minimal-cpu-token", memory=False)


async def measure(
    rounds: int, requests: int, synchronous: str, against: str | None, seed: int
) -> dict[str, Any]:
    """``{participant: {route: {"cpu_us": [...], "wall_us": [...]}}}``, one figure per
    round (microseconds per request)."""
    import agentsession

    tmp = Path(tempfile.mkdtemp(prefix="http-cpu-"))
    parts = [_serve_app(agentsession, "serve", tmp, synchronous), _minimal_app(tmp, synchronous)]
    if against is not None:
        parts.append(_serve_app(_import(against, "before"), "before", tmp, synchronous))
    for p in parts:
        await p.prepare()
        for route in p.routes:  # warm-up: caches, compiled statements, lazy routes
            for _ in range(50):
                await p.run(route)
    pairs = [(p, route) for p in parts for route in p.routes]
    out: dict[str, Any] = {
        p.name: {r: {"cpu_us": [], "wall_us": []} for r in p.routes} for p in parts
    }
    rng = random.Random(seed)
    for _ in range(rounds):
        rng.shuffle(pairs)
        for p, route in pairs:
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(requests):
                await p.run(route)
            cell = out[p.name][route]
            cell["cpu_us"].append((time.process_time() - c0) / requests * 1e6)
            cell["wall_us"].append((time.perf_counter() - w0) / requests * 1e6)
    return out


def table(results: dict[str, Any]) -> str:
    """Median CPU µs per request (range), wall µs, and the CPU ratio to the minimal app."""
    names = list(results)
    lines = [
        "| route | "
        + " | ".join(f"{n} CPU µs (range) / wall µs" for n in names)
        + " | "
        + " | ".join(f"{n} / minimal" for n in names if n != "minimal")
        + " |",
        "|---|" + "--:|" * (len(names) + len(names) - 1),
    ]
    for route in ROUTES:
        cells, ratios = [], []
        base = results.get("minimal", {}).get(route)
        for n in names:
            r = results[n].get(route)
            if r is None:
                cells.append("")
                if n != "minimal":
                    ratios.append("")
                continue
            cpu = statistics.median(r["cpu_us"])
            cells.append(
                f"{cpu:,.0f} ({min(r['cpu_us']):,.0f}-{max(r['cpu_us']):,.0f}) / "
                f"{statistics.median(r['wall_us']):,.0f}"
            )
            if n != "minimal":
                ratios.append(f"{cpu / statistics.median(base['cpu_us']):.2f}x" if base else "")
        lines.append(f"| {route} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300, help="per cell of a round")
    parser.add_argument("--synchronous", default="NORMAL", choices=("NORMAL", "FULL"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--against", help="src directory of a version to time as well")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    load = os.getloadavg()[0]
    results = asyncio.run(
        measure(args.rounds, args.requests, args.synchronous, args.against, args.seed)
    )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"SQLite WAL, synchronous={args.synchronous}; {args.rounds} rounds of {args.requests} "
        f"requests per cell; load average {load:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    print(table(results))


if __name__ == "__main__":
    main()
