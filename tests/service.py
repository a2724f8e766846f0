"""A real ``agentsession serve`` for the tests, set up the way the README says: on an
SQLite file in a temporary directory (or the database ``url`` names), ``agentsession db
upgrade``, ``agentsession keys create --user USER``, then ``agentsession serve`` on a
free loopback port.

Importable from every test module (``tests/`` is on ``sys.path``)::

    with running_service(tmp_path, user="alice", workers=2) as service:
        SessionClient(service.url, service.token)...

Several instances on one database: the same ``tmp`` (hence one key file) and ``url``,
a different ``name`` each (their logs are ``<name>.log``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

__all__ = ["Service", "agentsession", "free_port", "running_service"]

#: The ``agentsession`` console script of the interpreter running the tests.
EXE = Path(sys.executable).with_name("agentsession")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def agentsession(*args: str, env: dict[str, str]) -> str:
    """Run ``agentsession ARGS`` to completion; assert exit 0 and return its stdout."""
    out = subprocess.run(
        [str(EXE), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@dataclass
class Service:
    """A running service: base URL, the API token of its user, its log file, the
    environment it was started with (``AGENTSESSION_URL`` names its database), and the
    pid of the ``agentsession serve`` process (with several workers, their supervisor)."""

    url: str
    token: str
    log: Path
    env: dict[str, str]
    pid: int = 0

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **extra}


@contextmanager
def running_service(
    tmp: Path,
    *,
    user: str = "alice",
    workers: int = 1,
    url: str | None = None,
    name: str = "server",
    settings: dict[str, str] | None = None,
    keys: str = "file",
) -> Iterator[Service]:
    """Set up and start the service in ``tmp``; stop it on exit.

    Args:
        url: the store URL; default an SQLite file in ``tmp``. With another URL the key
            file is ``tmp/keys.json`` (set explicitly: the default would be the cwd).
        keys: ``store``: no key file; the key is created in (and read from) the session
            store, as on several machines (the service runs in ``tmp``, its own folder).
        name: the log file's name (``<name>.log``), for several instances in one ``tmp``.
        settings: more ``AGENTSESSION_*`` variables for the service, e.g.
            ``{"AGENTSESSION_BODY_TIMEOUT_SECONDS": "1"}``.

    Ready when ``/readyz`` answers; with several workers, a few times in a row (so that
    every worker is likely up).
    """
    port = free_port()
    env = {
        **os.environ,
        "AGENTSESSION_URL": url or f"sqlite:///{tmp / 'sessions.db'}",
        "AGENTSESSION_PORT": str(port),
    }
    for var in (
        "AGENTSESSION_AUTO_MIGRATE",
        "AGENTSESSION_KEYS_FILE",
        "AGENTSESSION_KEYS",
        "AGENTSESSION_API_KEY",
    ):
        env.pop(var, None)
    if keys == "store":
        env["AGENTSESSION_KEYS"] = "store"
    elif url is not None:
        env["AGENTSESSION_KEYS_FILE"] = str(tmp / "keys.json")
    env.update(settings or {})
    agentsession("db", "upgrade", env=env)
    token = agentsession("keys", "create", "--user", user, env=env).strip().splitlines()[0]
    log_path = tmp / f"{name}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [str(EXE), "serve", "--host", "127.0.0.1", "--workers", str(workers)],
        env=env,
        cwd=tmp,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        ready, needed = 0, 1 if workers == 1 else 4
        while ready < needed:
            try:
                ready = ready + 1 if httpx.get(f"{base}/readyz", timeout=1).is_success else 0
            except httpx.TransportError:
                ready = 0
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(log_path.read_text())
            if ready < needed:
                time.sleep(0.1)
        yield Service(base, token, log_path, env, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
