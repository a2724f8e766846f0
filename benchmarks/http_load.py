"""Workload (f) of issues #5 and #14: the HTTP service under a real load generator.

What is measured: requests/s and latency (p50, p99) of ``agentsession serve`` with
``--workers`` 1 (more with ``--workers``), on its own file-backed SQLite database (WAL;
the default ``synchronous=FULL``, then ``NORMAL`` through
``AGENTSESSION_SQLITE_SYNCHRONOUS``), and of the baseline, ``minimal_app.py`` (a
minimal FastAPI + sqlite3 app: one INSERT per append request, the same WAL and
synchronous setting, one connection per worker thread, uvicorn with ``serve``'s options,
1 worker), side by side. Every figure of ``serve`` is reported as a ratio to the
baseline's at the same operation, setting and connection count. Appends run with 1, 8
and 32 connections (the concurrency workload over HTTP), reads with 8. The operations:

- ``append, 1 session``: ``POST /v1/sessions/{id}/messages`` with
  ``{"message": {"role": "user", "content": ...}}`` (200 bytes of UTF-8 content, some
  of it Chinese), every connection appending to the same session: the worst case, every
  request wants the same session row;
- ``append, N sessions``: the same request, rotating over ``sessions`` (default 64)
  sessions, so concurrent requests almost never share one: the common case of many
  agents, one session each. (wrk's Lua API has no per-connection hook; each wrk thread
  sends its own half of the sessions in turn, 4 sessions per connection by default.)
  On SQLite both cases still take turns for the one database write lock;
- ``last 20 messages``: ``GET /v1/sessions/{id}/messages?limit=20`` of a session with
  ``history`` (default 1,000) messages;
- ``get session``: ``GET /v1/sessions/{id}``.

Reads do no fsync, so they run at the first ``synchronous`` setting only.

How: the service is set up the way the README (and ``tests/service.py``) does it:
``agentsession db upgrade``, ``agentsession keys create --user bench``, ``agentsession
serve --host 127.0.0.1 --workers N`` on a free loopback port, in a temporary directory.
(``tests/service.py`` is not imported: it takes the environment from ``os.environ``
and the interpreter running it, and this module must set the synchronous mode and
choose an interpreter whose uvicorn has uvloop and httptools, as
``pip install 'agentsession[server]'`` gives a user.) The load generator is
`wrk <https://github.com/wg/wrk>`_, closed loop: ``connections`` (default 16) keep-alive
connections over ``threads`` (default 2) threads, each sending its next request as soon
as the previous answer arrived, for ``duration`` seconds (default 2) after an untimed
``warmup`` (default 1 s) of the same requests, ``rounds`` times (default 3): the
services of a cell take turns round by round (the first round's order reversed in the
next), so that a busy spell of a shared machine falls on all of them, and their
figures are summed over the rounds (``rps``) or the median of the rounds' (latency).
``http_load.lua`` (next to this file) builds the requests (Bearer token, JSON body),
counts every response by status and prints wrk's totals and latency percentiles as
one JSON line, which is parsed here.
The services of all worker counts run side by side and the cells are interleaved
(operation by operation, worker count by worker count), so a busy spell on a shared
machine spreads over every worker count rather than hitting one.

Checks, so that no error is measured as speed: before any load, an append must answer
201 with the content sent, a last-20 read 200 with 20 items, a session read 200, and a
wrong token 401; during the load, every response's status is counted (``non_2xx``) and
wrk's socket errors (connect, read, write, timeout) too; after an append cell, the
messages the sessions gained are compared with the 2xx answers wrk counted (they differ
by at most the requests in flight when wrk stopped). A cell with any error, or with an
append count that does not add up, is flagged in the table.

The figures: ``rps`` is 2xx responses per second of the timed run (requests/s);
``p50``, ``p99`` are wrk's latency percentiles in milliseconds, from sending a request to
its whole response, over every response of the timed run; with a closed loop they are
the latency at ``connections`` concurrent requests, and rps is the throughput there.
wrk and the server share the machine's cores (2 here): the load generator takes CPU the
server would otherwise have, so these are lower bounds for a server with cores of its
own.

Set-up: ``wrk`` is found on ``PATH``; when missing and running as root with apt-get, it
is installed (Debian package ``wrk``). If it cannot be had, the workload is skipped:
:func:`run_http_load` returns ``{"skipped": reason}`` and the command line says so.

Run: ``.venv/bin/python benchmarks/http_load.py [--duration S] [--rounds N] [--workers
1,2,4] [--synchronous FULL,NORMAL] [--against SRC] [--json PATH]``: prints a markdown
table (requests/s, ms). ``--against`` serves another version's ``src`` directory too
(e.g. of ``git worktree add --detach /tmp/base main``), its cells interleaved with the
others' (``serve before``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["Config", "ensure_wrk", "main", "markdown", "run_http_load"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LUA = HERE / "http_load.lua"
USER = "bench"
#: The message content: 200 bytes of UTF-8, Chinese first, then ASCII.
CONTENT = (
    (
        "请检查 requirements.txt 并修复启动失败，然后重新运行应用。"
        + " The app fails at start-up; check the imports, pin the versions." * 3
    )
    .encode()[:200]
    .decode()
)
#: Operations in the order they run: name -> (label, HTTP method).
OPERATIONS: dict[str, tuple[str, str]] = {
    "append-one": ("append, 1 session", "POST"),
    "append-many": ("append, N sessions", "POST"),
    "last-20": ("last 20 messages", "GET"),
    "session": ("get session", "GET"),
}
APPENDS = ("append-one", "append-many")
#: wrk's socket-level error counters (its "status" counter is the non-2xx/3xx one).
SOCKET_ERRORS = ("connect", "read", "write", "timeout")


@dataclass(frozen=True)
class Config:
    """What one run does. Durations in seconds (wrk takes whole seconds)."""

    duration: int = 2
    warmup: int = 1
    #: timed runs of ``duration`` per cell, the services' runs alternating (the
    #: warm-up before the first only): a busy spell of a shared machine then falls on
    #: every service of a cell alike, not on the one that happened to run then.
    rounds: int = 3
    workers: tuple[int, ...] = (1,)
    synchronous: tuple[str, ...] = ("FULL", "NORMAL")
    operations: tuple[str, ...] = tuple(OPERATIONS)
    #: connection counts of the append cells (reads use ``read_connections``).
    connections: tuple[int, ...] = (1, 8, 32)
    read_connections: int = 8
    #: wrk threads (at most the connection count).
    threads: int = 2
    #: run the minimal app (the baseline) beside ``serve``.
    baseline: bool = True
    #: sessions the ``append-many`` operation rotates over.
    sessions: int = 64
    #: messages in the session the reads read.
    history: int = 1000
    #: wrk's per-request timeout; a slower answer counts as a timeout error.
    timeout: int = 30
    #: the ``src`` directory of another version of agentsession to serve beside this
    #: one (1 worker, kind ``"before"``), its cells interleaved with the others.
    against: str | None = None


#: ``make bench BENCH_ARGS=--quick``: one second per cell, no warm-up.
QUICK = Config(duration=1, warmup=0, rounds=1)
MINIMAL = HERE / "minimal_app.py"
MINIMAL_TOKEN = "minimal-bench-token"


# ============================================================================ set-up


def ensure_wrk(log: Callable[[str], None]) -> tuple[str | None, str]:
    """``(path to wrk, note)``, installing the Debian package when missing and allowed;
    ``(None, reason)`` when wrk cannot be had."""
    found = shutil.which("wrk")
    if found is not None:
        return found, "found on PATH"
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None, "wrk is not installed, and installing it needs root and apt-get"
    log("installing wrk (apt-get install wrk) ...")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "wrk"],
    ):
        try:
            out = subprocess.run(
                cmd, env=env, capture_output=True, text=True, timeout=900, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"{' '.join(cmd)} failed: {exc}"
        if out.returncode != 0:
            tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
            return None, f"{' '.join(cmd)} failed (exit {out.returncode}): {' | '.join(tail)}"
    found = shutil.which("wrk")
    if found is None:
        return None, "apt-get installed wrk, but it is not on PATH"
    return found, "installed now with apt-get"


def wrk_version(wrk: str) -> str:
    """wrk's version line without the copyright (``wrk -v`` exits 1 by design)."""
    out = subprocess.run([wrk, "-v"], capture_output=True, text=True, timeout=10, check=False)
    first = (out.stdout or out.stderr).strip().splitlines()[0]
    return first.split(" Copyright")[0].strip()


_PROBE = """
import importlib.metadata as m, json, agentsession
def v(p):
    try:
        return m.version(p)
    except m.PackageNotFoundError:
        return None
print(json.dumps({"agentsession_file": agentsession.__file__,
                  **{p: v(p) for p in ("agentsession", "uvicorn", "fastapi", "uvloop",
                                       "httptools")}}))
"""


def server_interpreter() -> tuple[Path | None, dict[str, Any]]:
    """The ``agentsession`` console script to serve with, and its environment's versions.

    First choice: an interpreter (this one, then the repository's ``.venv``) whose
    agentsession is this checkout and whose uvicorn has uvloop and httptools, as the
    ``server`` extra installs them; else one with plain uvicorn (noted in the result).
    """
    candidates = [Path(sys.executable), ROOT / ".venv" / "bin" / "python"]
    usable: list[tuple[Path, dict[str, Any]]] = []
    for python in candidates:
        exe = python.with_name("agentsession")
        if not python.exists() or not exe.exists():
            continue
        out = subprocess.run(
            [str(python), "-c", _PROBE], capture_output=True, text=True, timeout=60, check=False
        )
        if out.returncode != 0:
            continue
        info = json.loads(out.stdout)
        if info["uvicorn"] is None or info["fastapi"] is None:
            continue
        if not Path(info["agentsession_file"]).resolve().is_relative_to(ROOT / "src"):
            continue
        info["python"] = str(python)
        if info["uvloop"] is not None and info["httptools"] is not None:
            return exe, info
        usable.append((exe, info))
    if usable:
        exe, info = usable[0]
        info["note"] = "uvicorn without uvloop/httptools (its pure-Python fallbacks)"
        return exe, info
    return None, {"reason": "no interpreter with agentsession from this checkout and uvicorn"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(exe: Path, *args: str, env: dict[str, str]) -> str:
    out = subprocess.run(
        [str(exe), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"agentsession {' '.join(args)}: {out.stdout}{out.stderr}")
    return out.stdout


@dataclass
class Service:
    """A running ``agentsession serve`` and what the workload set up in it."""

    base: str
    token: str
    workers: int
    synchronous: str
    db: Path
    log: Path
    #: "agentsession" (``serve``) or "minimal" (the baseline app).
    kind: str = "agentsession"
    #: the server's process id (its workers are its children).
    pid: int | None = None
    hot: str = ""
    many: list[str] = field(default_factory=list)
    read: str = ""
    checks: dict[str, Any] = field(default_factory=dict)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server started in its own process group: SIGTERM, then SIGKILL to the
    group after 20 s."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def running_service(
    tmp: Path,
    exe: Path,
    *,
    workers: int,
    synchronous: str = "FULL",
    url: str | None = None,
    src: str | None = None,
) -> Iterator[Service]:
    """Set up and start the service in ``tmp`` the README way; stop it on exit.

    Its store: an SQLite file in ``tmp``, or the database ``url`` names (PostgreSQL,
    MariaDB: ``synchronous`` is then SQLite's setting only and changes nothing). With
    ``src``, the agentsession of that ``src`` directory is served (``PYTHONPATH``)."""
    port = _free_port()
    db = tmp / "sessions.db"
    env = {
        **os.environ,
        **({"PYTHONPATH": src} if src is not None else {}),
        "AGENTSESSION_URL": url or f"sqlite:///{db}",
        "AGENTSESSION_PORT": str(port),
        "AGENTSESSION_SQLITE_SYNCHRONOUS": synchronous,
    }
    for var in (
        "AGENTSESSION_AUTO_MIGRATE",
        "AGENTSESSION_KEYS_FILE",
        "AGENTSESSION_API_KEY",
        "AGENTSESSION_HOST",
        "AGENTSESSION_WORKERS",
        "AGENTSESSION_MAX_BODY_BYTES",
        "AGENTSESSION_REQUIRE_IF_MATCH",
    ):
        env.pop(var, None)
    if url is not None:  # else the key file is agentsession-keys.json in the cwd
        env["AGENTSESSION_KEYS_FILE"] = str(tmp / "keys.json")
    _cli(exe, "db", "upgrade", env=env)
    token = _cli(exe, "keys", "create", "--user", USER, env=env).strip().splitlines()[0]
    log_path = tmp / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(exe), "serve", "--host", "127.0.0.1", "--workers", str(workers)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: its workers are stopped too
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 90
            ready, needed = 0, 1 if workers == 1 else 4 * workers
            while ready < needed:
                status, _ = _request("GET", f"{base}/readyz", None, None, timeout=2)
                ready = ready + 1 if status == 200 else 0
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"serve did not start:\n{log_path.read_text()}")
                if ready < needed:
                    time.sleep(0.1)
            yield Service(base, token, workers, synchronous, db, log_path, pid=proc.pid)
        finally:
            _stop(proc)


@contextlib.contextmanager
def running_minimal(tmp: Path, python: Path, *, synchronous: str) -> Iterator[Service]:
    """Start the baseline app (``minimal_app.py``) in ``tmp``; stop it on exit."""
    port = _free_port()
    db = tmp / "minimal.db"
    env = {
        **os.environ,
        "MINIMAL_DB": str(db),
        "MINIMAL_SYNCHRONOUS": synchronous,
        "MINIMAL_TOKEN": MINIMAL_TOKEN,
        "MINIMAL_PORT": str(port),
    }
    log_path = tmp / "minimal.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(python), str(MINIMAL)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while _request("GET", f"{base}/readyz", None, None, timeout=2)[0] != 200:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"minimal app did not start:\n{log_path.read_text()}")
                time.sleep(0.1)
            yield Service(
                base, MINIMAL_TOKEN, 1, synchronous, db, log_path, kind="minimal", pid=proc.pid
            )
        finally:
            _stop(proc)


def _request(
    method: str, url: str, token: str | None, body: Any, *, timeout: float = 30
) -> tuple[int, Any]:
    """``(status, parsed JSON or None)``; status 0 when the connection failed."""
    data = None if body is None else json.dumps(body, ensure_ascii=False).encode()
    headers = {"Accept": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if data is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError):
        return 0, None
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, None


def _call(service: Service, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
    status, doc = _request(method, service.base + path, service.token, body)
    if status != expect:
        raise RuntimeError(f"{method} {path}: {status}, expected {expect}: {doc}")
    return doc


def _message(i: int) -> dict[str, str]:
    return {"role": ("user", "assistant")[i % 2], "content": CONTENT}


def prepare(service: Service, config: Config) -> None:
    """Create the sessions, fill the read session, and check a few answers' status."""

    def create(title: str) -> str:
        doc = _call(service, "POST", "/v1/sessions", {"agent": "bench", "title": title}, 201)
        return str(doc["session_id"])

    service.hot = create("append, one session")
    service.many = [create(f"append, many sessions #{i}") for i in range(config.sessions)]
    service.read = create("reads")
    for start in range(0, config.history, 100):
        batch = [_message(i) for i in range(start, min(start + 100, config.history))]
        _call(service, "POST", f"/v1/sessions/{service.read}/messages", {"messages": batch}, 201)
    # The requests the load sends, once each, with their answers checked.
    sent = {"role": "user", "content": CONTENT}
    doc = _call(service, "POST", f"/v1/sessions/{service.hot}/messages", {"message": sent}, 201)
    if doc.get("content") != CONTENT or doc.get("seq") != 1:
        raise RuntimeError(f"append answered {doc}")
    doc = _call(service, "GET", f"/v1/sessions/{service.read}/messages?limit=20")
    seqs = [m["seq"] for m in doc["items"]]
    if seqs != list(range(config.history - 19, config.history + 1)):
        raise RuntimeError(f"last 20 answered seqs {seqs}")
    doc = _call(service, "GET", f"/v1/sessions/{service.read}")
    if doc.get("message_count") != config.history:
        raise RuntimeError(f"session answered {doc}")
    bad, _ = _request("GET", f"{service.base}/v1/sessions/{service.read}", "key_x.wrong", None)
    if bad != 401:
        raise RuntimeError(f"a wrong token answered {bad}, not 401")
    journal = "(not SQLite)"
    if service.db.exists():
        with contextlib.closing(sqlite3.connect(service.db)) as conn:
            journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    service.checks = {
        "append": "201, content echoed, seq 1",
        "last-20": f"200, seqs {seqs[0]}..{seqs[-1]}",
        "session": f"200, message_count {config.history}",
        "wrong token": "401",
        "journal_mode": journal,
    }


def _message_count(service: Service, sessions: list[str]) -> int:
    return sum(int(_call(service, "GET", f"/v1/sessions/{s}")["message_count"]) for s in sessions)


# ============================================================================ load


def _targets(service: Service, operation: str) -> tuple[str, list[str], str]:
    """``(method, paths, body)`` of an operation's requests on this service."""
    body = json.dumps({"message": {"role": "user", "content": CONTENT}}, ensure_ascii=False)
    if operation == "append-one":
        return "POST", [f"/v1/sessions/{service.hot}/messages"], body
    if operation == "append-many":
        return "POST", [f"/v1/sessions/{s}/messages" for s in service.many], body
    if operation == "last-20":
        return "GET", [f"/v1/sessions/{service.read}/messages?limit=20"], "-"
    return "GET", [f"/v1/sessions/{service.read}"], "-"


def wrk_run(
    wrk: str, service: Service, operation: str, seconds: int, config: Config, connections: int
) -> dict:
    """One wrk run with ``connections`` connections; its JSON line parsed (latencies
    still in microseconds)."""
    method, paths, body = _targets(service, operation)
    threads = min(config.threads, connections)
    cmd = [
        wrk,
        f"--threads={threads}",
        f"--connections={connections}",
        f"--duration={seconds}s",
        f"--timeout={config.timeout}s",
        f"--script={LUA}",
        service.base,
        "--",
        method,
        service.token,
        body,
        str(threads),
        *paths,
    ]
    out = subprocess.run(
        cmd, capture_output=True, text=True, timeout=seconds + config.timeout + 60, check=False
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("WRK_JSON ")), None)
    if out.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed (exit {out.returncode}): {out.stdout}{out.stderr}")
    return json.loads(line.removeprefix("WRK_JSON "))


def cpu_seconds(pid: int | None) -> float | None:
    """CPU seconds (user + system) that process ``pid`` and its descendants have used,
    every thread counted (Linux ``/proc``); None where it cannot be read."""
    if pid is None:
        return None
    total, todo = 0.0, [pid]
    tick = os.sysconf("SC_CLK_TCK")
    try:
        while todo:
            current = todo.pop()
            stat = Path(f"/proc/{current}/stat").read_text()
            fields = stat.rpartition(")")[2].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    except (OSError, ValueError, IndexError):
        return None
    return total


def _errors(raw: dict[str, Any]) -> int:
    """Non-2xx responses plus socket errors of one wrk run."""
    ok = sum(n for code, n in raw["statuses"].items() if 200 <= int(code) < 300)
    return raw["requests"] - ok + sum(raw["errors"][k] for k in SOCKET_ERRORS)


def run_cell(
    wrk: str,
    service: Service,
    operation: str,
    config: Config,
    connections: int,
    *,
    warm_up: bool = True,
) -> dict[str, Any]:
    """Warm up (unless ``warm_up`` is false), then measure one operation on one
    service for ``config.duration`` seconds; the figures of that run."""
    sessions = {"append-one": [service.hot], "append-many": service.many}.get(operation, [])
    load_before = os.getloadavg()[0]
    warm = (
        wrk_run(wrk, service, operation, config.warmup, config, connections)
        if config.warmup and warm_up
        else None
    )
    before = _message_count(service, sessions) if sessions else 0
    cpu_before = cpu_seconds(service.pid)
    raw = wrk_run(wrk, service, operation, config.duration, config, connections)
    cpu_after = cpu_seconds(service.pid)
    stored = _message_count(service, sessions) - before if sessions else None
    statuses = {int(k): v for k, v in raw["statuses"].items()}
    ok = sum(n for code, n in statuses.items() if 200 <= code < 300)
    socket_errors = sum(raw["errors"][k] for k in SOCKET_ERRORS)
    seconds = raw["duration_us"] / 1e6
    lat = raw["latency_us"]
    cell: dict[str, Any] = {
        "operation": operation,
        "label": OPERATIONS[operation][0],
        "service": service.kind,
        "connections": connections,
        "workers": service.workers,
        "synchronous": service.synchronous,
        "sessions": len(sessions) if sessions else 1,
        "seconds": round(seconds, 3),
        "responses": raw["requests"],
        "ok_2xx": ok,
        "rps": round(ok / seconds, 1) if seconds else 0.0,
        "p50_ms": lat["p50"] / 1000,
        "p90_ms": lat["p90"] / 1000,
        "p99_ms": lat["p99"] / 1000,
        "p999_ms": lat["p999"] / 1000,
        "mean_ms": round(lat["mean"] / 1000, 3),
        "max_ms": lat["max"] / 1000,
        "statuses": statuses,
        "non_2xx": raw["requests"] - ok,
        "socket_errors": raw["errors"],
        "socket_errors_total": socket_errors,
        "warmup_errors": None if warm is None else _errors(warm),
        "loadavg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "cpu_seconds": (
            None if cpu_before is None or cpu_after is None else round(cpu_after - cpu_before, 3)
        ),
    }
    cell["cpu_us"] = _per_request(cell["cpu_seconds"], raw["requests"])
    if stored is not None:
        # Requests in flight when wrk stops are not counted by wrk but may be stored.
        cell["stored"] = stored
        cell["stored_ok"] = 0 <= stored - ok <= 2 * connections
    problems = []
    if cell["non_2xx"]:
        problems.append(f"{cell['non_2xx']} non-2xx")
    if socket_errors:
        problems.append(f"{socket_errors} socket errors")
    if stored is not None and not cell["stored_ok"]:
        problems.append(f"stored {stored} vs {ok} 2xx")
    if ok == 0:
        problems.append("no 2xx response")
    cell["problems"] = problems
    return cell


def _per_request(seconds: float | None, requests: int) -> float | None:
    """Microseconds of server CPU per response (None: not measured)."""
    return None if seconds is None or not requests else round(seconds / requests * 1e6, 1)


def run_rounds(
    wrk: str, services: list[Service], operation: str, config: Config, connections: int
) -> list[dict[str, Any]]:
    """One cell per service: ``config.rounds`` runs of each (:func:`run_cell`), the
    services taking turns (the order reversed every other round), merged by
    :func:`merge_runs`."""
    runs: list[list[dict[str, Any]]] = [[] for _ in services]
    order = list(range(len(services)))
    for r in range(max(1, config.rounds)):
        for i in order if r % 2 == 0 else order[::-1]:
            runs[i].append(
                run_cell(wrk, services[i], operation, config, connections, warm_up=r == 0)
            )
    return [merge_runs(one) for one in runs]


def merge_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The cell of several runs of one operation on one service: counts and seconds
    summed (``rps`` is 2xx responses over the seconds of every run), each latency
    percentile the median of the runs' (a percentile of the whole is not known), the
    problems of every run, the load average before the first and after the last."""
    if len(runs) == 1:
        return runs[0]
    first, merged = runs[0], dict(runs[0])
    for key in ("seconds", "responses", "ok_2xx", "non_2xx", "socket_errors_total", "stored"):
        if key in first:
            merged[key] = sum(r[key] for r in runs)
    measured = all(r.get("cpu_seconds") is not None for r in runs)
    merged["cpu_seconds"] = round(sum(r["cpu_seconds"] for r in runs), 3) if measured else None
    merged["cpu_us"] = _per_request(merged["cpu_seconds"], merged["responses"])
    merged["seconds"] = round(merged["seconds"], 3)
    merged["rps"] = round(merged["ok_2xx"] / merged["seconds"], 1) if merged["seconds"] else 0.0
    for key in ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "mean_ms"):
        merged[key] = statistics.median(r[key] for r in runs)
    merged["max_ms"] = max(r["max_ms"] for r in runs)
    statuses: dict[int, int] = {}
    for r in runs:
        for code, n in r["statuses"].items():
            statuses[code] = statuses.get(code, 0) + n
    merged["statuses"] = statuses
    merged["socket_errors"] = {
        k: sum(r["socket_errors"][k] for r in runs) for k in first["socket_errors"]
    }
    if "stored_ok" in first:
        merged["stored_ok"] = all(r["stored_ok"] for r in runs)
    merged["problems"] = [p for r in runs for p in r["problems"]]
    merged["loadavg_1min"] = [first["loadavg_1min"][0], runs[-1]["loadavg_1min"][1]]
    merged["rounds"] = len(runs)
    merged["rps_rounds"] = [r["rps"] for r in runs]
    return merged


def _name(service: Service) -> str:
    """How a service is named in tables: ``serve, 1 worker`` or ``minimal app``."""
    if service.kind == "minimal":
        return "minimal app"
    if service.kind == "before":
        return "serve before, 1 worker"
    return f"serve, {service.workers} worker{'s' if service.workers > 1 else ''}"


def _start(
    stack: contextlib.ExitStack, tmp: Path, exe: Path, python: Path, sync: str, config: Config
) -> list[Service]:
    """Start ``serve`` for each worker count and, with ``config.baseline``, the minimal
    app, each prepared (sessions made, answers checked); ``stack`` stops them."""
    services = []
    for workers in config.workers:
        where = tmp / f"{sync.lower()}-w{workers}"
        where.mkdir()
        services.append(
            stack.enter_context(running_service(where, exe, workers=workers, synchronous=sync))
        )
    if config.against is not None:
        where = tmp / f"{sync.lower()}-before"
        where.mkdir()
        before = running_service(where, exe, workers=1, synchronous=sync, src=config.against)
        services.append(stack.enter_context(before))
        services[-1].kind = "before"
    if config.baseline:
        where = tmp / f"{sync.lower()}-minimal"
        where.mkdir()
        services.append(stack.enter_context(running_minimal(where, python, synchronous=sync)))
    for service in services:
        prepare(service, config)
    return services


def run_http_load(
    config: Config | None = None, *, log: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Run workload (f) and return its results as a JSON-able dict.

    Returns ``{"skipped": reason, ...}`` when wrk or a server interpreter is missing;
    else ``{"cells": [...], "wrk": ..., "server": ..., "config": ..., "machine": ...}``
    with one cell per operation x synchronous x workers (``rps`` in requests/s,
    latencies in ms, ``non_2xx``, ``socket_errors``, ``problems``; see the module
    docstring). Raises ``RuntimeError`` when the service fails to start, answers a
    check wrongly, or wrk itself fails (e.g. it cannot connect at all).
    """
    config = config or Config()
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    unknown = set(config.operations) - set(OPERATIONS)
    if unknown:
        raise ValueError(f"unknown operations: {sorted(unknown)}")
    result: dict[str, Any] = {
        "workload": "f",
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": asdict(config),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "note": (
                f"wrk ({config.threads} threads) runs on the same {os.cpu_count()} cores "
                "as the server"
            ),
        },
        "units": {"rps": "2xx responses per second", "latency": "milliseconds"},
    }
    wrk, note = ensure_wrk(log)
    if wrk is None:
        log(f"workload (f) skipped: {note}")
        return {**result, "skipped": note}
    result["wrk"] = {"path": wrk, "version": wrk_version(wrk), "how": note}
    exe, server = server_interpreter()
    if exe is None:
        log(f"workload (f) skipped: {server['reason']}")
        return {**result, "skipped": server["reason"]}
    result["server"] = server
    cells: list[dict[str, Any]] = []
    checks: dict[str, Any] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentsession-http-load-") as tmp:
        for i, sync in enumerate(config.synchronous):
            ops = [o for o in config.operations if i == 0 or o in APPENDS]
            if not ops:
                continue
            with contextlib.ExitStack() as stack:
                services = _start(stack, Path(tmp), exe, Path(server["python"]), sync, config)
                checks.update({f"{sync} {_name(s)}": s.checks for s in services})
                log(
                    f"http: synchronous={sync}: {', '.join(map(_name, services))} up, checks passed"
                )
                for op in ops:
                    conns = config.connections if op in APPENDS else (config.read_connections,)
                    for n in conns:
                        for service, cell in zip(
                            services, run_rounds(wrk, services, op, config, n), strict=True
                        ):
                            cells.append(cell)
                            flag = (
                                f"  PROBLEMS: {'; '.join(cell['problems'])}"
                                if cell["problems"]
                                else ""
                            )
                            log(
                                f"http: {sync} {cell['label']}, {_name(service)}, {n} conn: "
                                f"{cell['rps']:.0f} req/s, p50 {cell['p50_ms']:.2f} ms, "
                                f"p99 {cell['p99_ms']:.2f} ms{flag}"
                            )
    result["checks"] = checks
    result["cells"] = cells
    result["problems"] = sum(1 for c in cells if c["problems"])
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


# ============================================================================ output


def baseline_of(cells: list[dict[str, Any]], cell: dict[str, Any]) -> dict[str, Any] | None:
    """The minimal app's cell at ``cell``'s operation, setting and connection count."""
    for other in cells:
        if other.get("service") == "minimal" and all(
            other.get(k) == cell.get(k) for k in ("operation", "synchronous", "connections")
        ):
            return other
    return None


def targets(results: dict[str, Any]) -> list[Any]:
    """The issue's HTTP targets for ``serve`` with 1 worker (appends on distinct
    sessions): 1 connection >= 0.8x the minimal app at FULL (this machine's flush: issue
    #30) and >= 0.6x at NORMAL; 32 connections at FULL >= 2x the minimal app, and p99
    under 100 ms (the +2 ms disk's 4x is :mod:`disks`')."""
    import report

    cells = results.get("cells", [])
    out = []

    def find(sync: str, conns: int) -> tuple[dict[str, Any], dict[str, Any]]:
        for c in cells:
            if (
                c.get("service"),
                c["operation"],
                c["synchronous"],
                c.get("connections"),
                c["workers"],
            ) == ("agentsession", "append-many", sync, conns, 1):
                return c, baseline_of(cells, c) or {}
        return {}, {}

    def detail(ours: dict[str, Any], base: dict[str, Any]) -> str:
        return (
            f"{ours.get('rps', 0):,.0f} vs {base.get('rps', 0):,.0f} req/s; p99 "
            f"{ours.get('p99_ms', 0):.1f} vs {base.get('p99_ms', 0):.1f} ms"
        )

    for sync in ("FULL", "NORMAL"):
        ours, base = find(sync, 1)
        r = report.ratio(ours.get("rps"), base.get("rps"))
        out.append(
            report._target(
                f"wal-{sync.lower()}",
                "serve, 1 worker",
                "HTTP append, 1 connection, vs the minimal app",
                r,
                at_least=0.8 if sync == "FULL" else 0.6,
                detail=detail(ours, base),
            )
        )
    ours, base = find("FULL", 32)
    r = report.ratio(ours.get("rps"), base.get("rps"))
    out.append(
        report._target(
            "wal-full",
            "serve, 1 worker",
            "HTTP append, 32 connections, vs the minimal app",
            r,
            at_least=2.0,
            detail=detail(ours, base),
        )
    )
    p99 = ours.get("p99_ms")
    out.append(
        report.Target(
            "wal-full",
            "serve, 1 worker",
            "HTTP append, 32 connections, p99 (ms, not a ratio)",
            "< 100 ms",
            p99,
            None if p99 is None else p99 < 100,
            detail(ours, base),
        )
    )
    return out


def markdown(results: dict[str, Any]) -> str:
    """The results as a markdown table with a short header: each ``serve`` figure with
    its ratio to the minimal app's, then the HTTP targets."""
    if "skipped" in results:
        return f"Workload (f), HTTP: skipped: {results['skipped']}\n"
    import report

    cfg = results["config"]
    server = results["server"]
    lines = [
        "### (f) HTTP: `agentsession serve` against the minimal FastAPI + sqlite3 app",
        "",
        f"{results['wrk']['version']}, {cfg.get('rounds', 1)} runs of {cfg['duration']} s per "
        f"cell after {cfg['warmup']} s warm-up, the services' runs alternating (p50/p99: the "
        f"median of the runs'); at most {cfg['threads']} wrk threads. "
        f"{results['machine']['note']}; other work may have been running. uvicorn "
        f"{server['uvicorn']}"
        + (
            f", uvloop {server['uvloop']}, httptools {server['httptools']}"
            if server.get("uvloop") and server.get("httptools")
            else f" ({server.get('note')})"
        )
        + ". Baseline: `benchmarks/minimal_app.py` (one INSERT per append request, same "
        "WAL and synchronous, one connection per worker thread, 1 worker). req/s: 2xx "
        "responses per second (ratio to the minimal app's at the same operation, setting "
        "and connections; for p50/p99 and CPU the ratio is ours / its, lower is better). "
        "CPU µs/req: the server's CPU time (every thread and worker process) over the timed "
        "runs, per response. "
        f"`append, N sessions` rotates over {cfg['sessions']} sessions (concurrent requests "
        f"almost never share one); last-20 reads a session of {cfg['history']} messages.",
        "",
        "| operation | synchronous | connections | server | req/s | p50 ms | p99 ms "
        "| CPU µs/req | errors | check | load 1 min |",
        "|---|---|--:|---|--:|--:|--:|--:|--:|---|---|",
    ]
    cells = results["cells"]
    for c in cells:
        if "stored" in c:
            check = f"stored {c['stored']} / {c['ok_2xx']} 2xx"
            check += "" if c["stored_ok"] else " MISMATCH"
        else:
            check = "ok" if not c["problems"] else "; ".join(c["problems"])
        base = baseline_of(cells, c) if c.get("service") != "minimal" else None
        server_name = {"minimal": "minimal app", "before": "serve before, 1 w"}.get(
            c.get("service", ""), f"serve, {c['workers']} w"
        )

        def rel(key: str, c: dict[str, Any] = c, base: dict[str, Any] | None = base) -> str:
            if base is None:
                return ""
            return f" ({report.fmt_ratio(report.ratio(c.get(key), base.get(key)))})"

        cpu = "n/a" if c.get("cpu_us") is None else f"{c['cpu_us']:,.0f}{rel('cpu_us')}"

        lines.append(
            f"| {c['label']} | {c['synchronous']} | {c.get('connections', '?')} | {server_name} "
            f"| {c['rps']:,.0f}{rel('rps')} | {c['p50_ms']:.2f}{rel('p50_ms')} "
            f"| {c['p99_ms']:.1f}{rel('p99_ms')} | {cpu} "
            f"| {c['non_2xx'] + c['socket_errors_total']} | {check} "
            f"| {c['loadavg_1min'][0]:.1f} -> {c['loadavg_1min'][1]:.1f} |"
        )
    if results.get("problems"):
        lines += ["", f"**{results['problems']} cell(s) had errors: their figures are not valid.**"]
    lines += ["", *report.target_lines(targets(results))]
    return "\n".join(lines) + "\n"


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _words(text: str) -> tuple[str, ...]:
    return tuple(x.strip().upper() for x in text.split(",") if x.strip())


def main(argv: list[str] | None = None) -> int:
    """Command line: run, print the markdown table, optionally write the JSON.

    Exit status 0 when every cell was free of errors, 1 when some had errors, 2 when
    the workload was skipped (no wrk, no server interpreter).
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=Config.duration, help="seconds per cell")
    parser.add_argument("--warmup", type=int, default=Config.warmup, help="seconds per cell")
    parser.add_argument(
        "--rounds", type=int, default=Config.rounds, help="timed runs per cell, alternating"
    )
    parser.add_argument("--workers", type=_ints, default=Config.workers, help="e.g. 1,2,4")
    parser.add_argument(
        "--synchronous", type=_words, default=Config.synchronous, help="e.g. FULL,NORMAL"
    )
    parser.add_argument(
        "--operations",
        type=lambda s: tuple(x.strip() for x in s.split(",") if x.strip()),
        default=Config.operations,
        help=f"a subset of {','.join(OPERATIONS)}",
    )
    parser.add_argument("--connections", type=_ints, default=Config.connections, help="e.g. 1,8,32")
    parser.add_argument("--threads", type=int, default=Config.threads)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--against", help="src directory of another version to serve beside this one"
    )
    args = parser.parse_args(argv)
    unknown = set(args.operations) - set(OPERATIONS)
    if unknown:
        parser.error(f"unknown operations {sorted(unknown)}; known: {', '.join(OPERATIONS)}")
    if (
        args.duration < 1
        or args.warmup < 0
        or args.rounds < 1
        or args.threads < 1
        or min(args.connections) < 1
    ):
        parser.error(
            "--duration >= 1, --warmup >= 0, --rounds >= 1, --connections >= 1, --threads >= 1"
        )
    config = Config(
        duration=args.duration,
        warmup=args.warmup,
        rounds=args.rounds,
        against=args.against,
        workers=args.workers,
        synchronous=args.synchronous,
        operations=args.operations,
        connections=args.connections,
        threads=args.threads,
    )
    results = run_http_load(config)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(markdown(results))
    if "skipped" in results:
        return 2
    return 1 if results["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
