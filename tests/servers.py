"""Throwaway database servers for the tests: PostgreSQL, MariaDB/MySQL and Redis.

Each server is started once per test session (once per worker under pytest-xdist), on
loopback, on a free port, with its data in a fresh temporary directory, and stopped
(directory removed) when the session ends. :meth:`Server.halt` and :meth:`Server.resume`
stop a server and start it again on the same port and data, as an outage would.
No Docker and no system service: the binaries come from the Debian packages
``postgresql``, ``mariadb-server`` and ``redis-server`` (``make test`` and ``make
test-all`` install them when they can: ``scripts/install-test-servers.sh``, as root with
apt-get). A missing binary skips the tests that need it with a reason naming the
command that installs it; :func:`pytest_terminal_summary` prints one line per server
store, and the run's output ends, after pytest's own last line, with a red
``SERVER STORES SKIPPED`` block naming each skipped store, its skipped tests and that
command (:func:`pytest_sessionfinish`).

Fixtures (import them into ``tests/conftest.py``):

* ``postgres_server`` / ``mysql_server`` / ``redis_server``: the session-wide
  :class:`Server` (skips if not installed; errors if installed but it fails to start).
* ``postgres_url`` / ``mysql_url``: a URL of a fresh, empty database for one test
  (``CREATE DATABASE t_<n>``, dropped afterwards).
* ``redis_url``: ``redis://127.0.0.1:<port>/0``, flushed (``FLUSHALL``) before the test.

Settings that differ from a production server, chosen for speed; a test about
durability must not rely on them:

* PostgreSQL: ``fsync=off``, ``synchronous_commit=off``, ``full_page_writes=off``;
  cluster ``initdb -E UTF8 --locale=C`` (byte-order collation), trust authentication.
* MariaDB: ``innodb_flush_log_at_trx_commit=2``, ``innodb_doublewrite=0``,
  ``sync_binlog=0`` (binary log off); ``character_set_server=utf8mb4``
  (``collation_server=utf8mb4_general_ci``, the server default; the store's tables say
  ``utf8mb4_bin`` themselves); root without a password.
* Redis: none. ``appendonly yes``, ``appendfsync always``, no RDB snapshots (``save ''``).

``start_postgres(durable=True)`` and ``start_mysql(durable=True)`` (used by
``benchmarks/stores.py``, never by the fixtures) run the servers at their durable settings
instead: PostgreSQL ``fsync=on``, ``synchronous_commit=on``, ``full_page_writes=on`` (and
``initdb`` syncs its files); MariaDB ``innodb_flush_log_at_trx_commit=1``,
``innodb_doublewrite=1``, ``sync_binlog=1`` (the binary log stays off, as by default).
Redis already runs durable.

When the tests run as root (CI), PostgreSQL and MariaDB refuse to: their processes run
as the system users the Debian packages create (``postgres``, ``mysql``), or ``nobody``,
and the temporary directory is handed to that user.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "SERVER_STORES_ENV",
    "Server",
    "mysql_server",
    "mysql_url",
    "postgres_server",
    "postgres_url",
    "pytest_terminal_summary",
    "redis_command",
    "redis_server",
    "redis_url",
    "server_stores_enabled",
]

#: Environment variable that, set to 0, leaves the server stores (postgres, mysql, redis) out.
SERVER_STORES_ENV = "AGENTSESSION_TEST_SERVERS"

START_TIMEOUT = 60.0  # seconds a server may take to accept connections

# kind -> what happened this session: ("started", seconds, version) or ("skipped", reason).
# Under pytest-xdist each worker starts its own servers; the controller gathers the
# workers' entries (pytest_testnodedown) into _WORKER_REPORTS for the summary.
_REPORT: dict[str, tuple[str, Any, Any]] = {}
_WORKER_REPORTS: list[dict[str, tuple[str, Any, Any]]] = []
_INSTALL_HINT = {
    "postgres": "PostgreSQL server not installed: sudo apt-get install -y postgresql",
    "mysql": "MariaDB server not installed: sudo apt-get install -y mariadb-server",
    "redis": "Redis server not installed: sudo apt-get install -y redis-server",
}
#: Installs every missing server at once, their system services left stopped.
INSTALL_ALL = "sudo make test-servers"
#: Where the server binaries are looked for besides PATH (Debian's mariadbd is in
#: /usr/sbin), and Debian's PostgreSQL binaries, one directory per major version.
#: The install script looks in the same places.
_SBIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")
_POSTGRES_INITDB = "/usr/lib/postgresql/*/bin/initdb"


def server_stores_enabled() -> bool:
    """Whether the server stores are in ``STORES``: yes, unless ``AGENTSESSION_TEST_SERVERS``
    is ``0`` (a quick local run); a server that is not installed skips either way."""
    return os.environ.get(SERVER_STORES_ENV, "").strip().lower() not in ("0", "false", "no")


class ServerNotInstalled(Exception):
    """A server binary is missing; the message says which package installs it."""


@dataclass
class Server:
    """A running throwaway server.

    Attributes:
        kind: ``postgres``, ``mysql`` or ``redis``.
        version: the server's version string.
        host, port: where it listens (always 127.0.0.1).
        url_prefix: URL without the database part, e.g. ``postgresql+psycopg://postgres@127.0.0.1:5433``.
        startup_seconds: wall time from ``initdb``/``install-db`` to accepting connections.
        log: the server's log file (its tail is shown when something fails).
    """

    kind: str
    version: str
    host: str
    port: int
    url_prefix: str
    startup_seconds: float
    log: Path
    _stop: Callable[[], None]
    _admin: Any = None
    _halt: Callable[[], None] | None = None
    _resume: Callable[[], Any] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def create_database(self) -> tuple[str, str]:
        """Create a fresh, empty database; return ``(name, url)``."""
        name = f"t_{next(self._counter)}"
        with self._lock:
            if self.kind == "postgres":
                self._admin.execute(f"CREATE DATABASE {name}")
            else:
                with self._admin.cursor() as cur:
                    cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
        return name, f"{self.url_prefix}/{name}"

    def drop_database(self, name: str) -> None:
        """Drop a database made by :meth:`create_database`, closing its connections."""
        with self._lock:
            if self.kind == "postgres":
                self._admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            else:
                with self._admin.cursor() as cur:
                    cur.execute(f"DROP DATABASE IF EXISTS {name}")

    def connections_made(self, database: str) -> int:
        """How many connections the server has accepted so far, read on the server.

        PostgreSQL: ``pg_stat_database.sessions`` of ``database`` (sessions established
        to it; a backend reports its own at its first idle moment or its exit, so read
        after the work is done). MariaDB: ``SHOW GLOBAL STATUS LIKE 'Connections'``,
        every connection attempt to the server, whatever the database: compare two
        readings with nothing else connecting in between.
        """
        with self._lock:
            if self.kind == "postgres":
                self._admin.execute("SELECT pg_stat_clear_snapshot()")
                row = self._admin.execute(
                    "SELECT sessions FROM pg_stat_database WHERE datname = %s", (database,)
                ).fetchone()
                return int(row[0])
            with self._admin.cursor() as cur:
                cur.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
                return int(cur.fetchone()[1])

    def halt(self) -> None:
        """Stop the server process as an outage would (its open connections are closed),
        keeping its data directory and port for :meth:`resume`."""
        assert self._halt is not None
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None
        self._halt()

    def resume(self) -> None:
        """Start a server stopped by :meth:`halt` again, on the same port and data; return
        once it accepts connections."""
        assert self._resume is not None
        self._admin = self._resume()

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
        self._stop()


# -- helpers ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _which(*names: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN_DIRS])
    for name in names:
        found = shutil.which(name, path=path)
        if found:
            return found
    return None


@dataclass
class _RunAs:
    """Who the server processes run as: the current user, or (as root) a system user."""

    uid: int | None = None
    gid: int | None = None

    @classmethod
    def for_root(cls, *candidates: str) -> _RunAs:
        if os.geteuid() != 0:
            return cls()
        for name in (*candidates, "nobody"):
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                continue
            return cls(entry.pw_uid, entry.pw_gid)
        raise RuntimeError("running as root and no unprivileged user to run the server as")

    @property
    def name(self) -> str | None:
        return None if self.uid is None else pwd.getpwuid(self.uid).pw_name

    def popen_args(self) -> dict[str, Any]:
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def own(self, path: Path) -> None:
        if self.uid is not None:
            os.chown(path, self.uid, self.gid or -1)


def _tempdir(kind: str, run_as: _RunAs) -> Path:
    # Not pytest's tmp_path: that is 0700 under root's directory, which the server user
    # (CI runs as root) cannot enter. Short path: Unix socket names are limited to 107 bytes.
    path = Path(tempfile.mkdtemp(prefix=f"as-{kind}-"))
    run_as.own(path)
    return path


def _run(cmd: list[str], run_as: _RunAs, log: Path, **kwargs: Any) -> None:
    with log.open("ab") as out:
        proc = subprocess.run(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=START_TIMEOUT,
            check=False,
            **run_as.popen_args(),
            **kwargs,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed (exit {proc.returncode}):\n{_tail(log)}")


def _tail(log: Path, lines: int = 30) -> str:
    """The error lines of ``log`` (a server's own ``[ERROR]`` or ``FATAL`` lines, which a
    tool's generic help text after them would hide) and its last lines, plus where a
    copy of the whole log is kept (the server's directory is removed after a failure)."""
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    errors = [line for line in text if _ERROR_LINE.search(line)][-20:]
    kept = _KEPT_LOGS / f"{log.parent.name}-{log.name}"
    try:
        _KEPT_LOGS.mkdir(exist_ok=True)
        shutil.copyfile(log, kept)
        where = f"(the whole log: {kept})"
    except OSError:
        where = ""
    shown = [*errors, "...", *text[-lines:]] if errors else text[-lines:]
    return "\n".join([*shown, where])


#: A server's or its install tool's own error line.
_ERROR_LINE = re.compile(r"\[ERROR\]|FATAL|PANIC|error:", re.IGNORECASE)

#: Where the log of a server that failed to start is kept.
_KEPT_LOGS = Path(tempfile.gettempdir()) / "agentsession-server-logs"


def _wait(ready: Callable[[], bool], what: str, log: Path, alive: Callable[[], bool]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    delay = 0.02
    while time.monotonic() < deadline:
        if ready():
            return
        if not alive():
            raise RuntimeError(f"{what} exited during start-up:\n{_tail(log)}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)
    raise RuntimeError(f"{what} did not accept connections within {START_TIMEOUT} s:\n{_tail(log)}")


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- PostgreSQL ------------------------------------------------------------------------


def _postgres_bin() -> Path:
    def version(path: str) -> tuple[int, ...]:
        part = Path(path).parent.parent.name
        return tuple(int(x) for x in part.split(".") if x.isdigit())

    candidates = sorted(glob.glob(_POSTGRES_INITDB), key=version)
    if candidates:
        return Path(candidates[-1]).parent
    found = _which("initdb")
    if found:
        return Path(found).resolve().parent
    raise ServerNotInstalled(_INSTALL_HINT["postgres"])


def start_postgres(*, durable: bool = False) -> Server:
    """Start a throwaway PostgreSQL cluster (see the module docstring).

    Args:
        durable: ``fsync=on``, ``synchronous_commit=on``, ``full_page_writes=on`` (the
            production defaults) instead of the tests' fast settings (all three off).
    """
    bindir = _postgres_bin()
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        raise ServerNotInstalled("psycopg not installed: pip install -e '.[dev]'") from exc
    run_as = _RunAs.for_root("postgres")
    started = time.monotonic()
    tmp = _tempdir("pg", run_as)
    data, log = tmp / "data", tmp / "server.log"
    log.touch()
    run_as.own(log)
    port = _free_port()
    try:
        _run(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                *([] if durable else ["--no-sync"]),
                "--no-instructions",
            ],
            run_as,
            log,
            cwd=tmp,
        )
        flag = "on" if durable else "off"
        opts = (
            f"-k {tmp} -p {port} -c listen_addresses=127.0.0.1 -c fsync={flag} "
            f"-c synchronous_commit={flag} -c full_page_writes={flag} -c max_connections=200"
        )
        pg_ctl = [str(bindir / "pg_ctl"), "-D", str(data), "-w", "-t", str(int(START_TIMEOUT))]
        _run([*pg_ctl, "-l", str(log), "-o", opts, "start"], run_as, log, cwd=tmp)
    except BaseException:
        _stop_postgres(bindir, data, run_as, tmp)
        raise
    startup = time.monotonic() - started

    def connect() -> Any:
        return psycopg.connect(
            host="127.0.0.1", port=port, user="postgres", dbname="postgres", autocommit=True
        )

    def resume() -> Any:
        _run([*pg_ctl, "-l", str(log), "-o", opts, "start"], run_as, log, cwd=tmp)
        return connect()

    admin = connect()
    version = admin.execute("SHOW server_version").fetchone()[0]
    return Server(
        kind="postgres",
        version=f"PostgreSQL {version}",
        host="127.0.0.1",
        port=port,
        url_prefix=f"postgresql+psycopg://postgres@127.0.0.1:{port}",
        startup_seconds=startup,
        log=log,
        _stop=lambda: _stop_postgres(bindir, data, run_as, tmp),
        _admin=admin,
        _halt=lambda: _run([*pg_ctl, "-m", "fast", "stop"], run_as, log, cwd=tmp),
        _resume=resume,
    )


def _stop_postgres(bindir: Path, data: Path, run_as: _RunAs, tmp: Path) -> None:
    if (data / "postmaster.pid").exists():
        subprocess.run(
            [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
            cwd=tmp,
            **run_as.popen_args(),
        )
    shutil.rmtree(tmp, ignore_errors=True)


# -- MariaDB / MySQL -------------------------------------------------------------------


def start_mysql(*, durable: bool = False) -> Server:
    """Start a throwaway MariaDB (or MySQL) server (see the module docstring).

    Args:
        durable: ``innodb_flush_log_at_trx_commit=1``, ``innodb_doublewrite=1`` and
            ``sync_binlog=1`` instead of the tests' ``2``, ``0`` and (the default) ``0``.
    """
    server = _which("mariadbd", "mysqld")
    install = _which("mariadb-install-db", "mysql_install_db")
    if server is None or install is None:
        raise ServerNotInstalled(_INSTALL_HINT["mysql"])
    try:
        import pymysql
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        raise ServerNotInstalled("PyMySQL not installed: pip install -e '.[dev]'") from exc
    run_as = _RunAs.for_root("mysql")
    started = time.monotonic()
    tmp = _tempdir("my", run_as)
    data, log, sock = tmp / "data", tmp / "server.log", tmp / "mysqld.sock"
    port = _free_port()
    user_args = [f"--user={run_as.name}"] if run_as.name else []
    proc: subprocess.Popen[bytes] | None = None

    def stop() -> None:
        if proc is not None:
            _terminate(proc)
        shutil.rmtree(tmp, ignore_errors=True)

    try:
        _run(
            [
                install,
                "--no-defaults",
                f"--datadir={data}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
                *user_args,
            ],
            _RunAs(),
            log,
            cwd=tmp,
        )

        def launch() -> None:
            nonlocal proc
            with log.open("ab") as out:
                proc = subprocess.Popen(
                    args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp
                )

        args = [
            server,
            "--no-defaults",
            f"--datadir={data}",
            f"--socket={sock}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--pid-file={tmp / 'server.pid'}",
            "--skip-name-resolve",
            "--character-set-server=utf8mb4",
            f"--innodb-flush-log-at-trx-commit={1 if durable else 2}",
            f"--innodb-doublewrite={1 if durable else 0}",
            *(["--sync-binlog=1"] if durable else []),
            "--innodb-buffer-pool-size=128M",
            "--max-connections=300",
            *user_args,
        ]
        launch()

        def connect() -> Any:
            return pymysql.connect(unix_socket=str(sock), user="root", autocommit=True)

        def ready() -> bool:
            # A raw socket, not pymysql (which leaks its socket when a connect fails):
            # the server is up once it sends its handshake packet.
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(5)
                    s.connect(str(sock))
                    return len(s.recv(4)) == 4
            except OSError:
                return False

        def alive() -> bool:
            return proc is not None and proc.poll() is None

        def resume() -> Any:
            launch()
            _wait(ready, "mariadbd", log, alive)
            return connect()

        def halt() -> None:
            if proc is not None:
                _terminate(proc)

        _wait(ready, "mariadbd", log, alive)
        admin = connect()
        with admin.cursor() as cur:
            # --skip-name-resolve: root@localhost only matches the socket; tests use TCP.
            cur.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'")
            cur.execute("GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
            cur.execute("SELECT VERSION()")
            version = cur.fetchone()[0]
    except BaseException:
        stop()
        raise
    return Server(
        kind="mysql",
        version=f"{'MariaDB' if 'mariadb' in version.lower() else 'MySQL'} {version}",
        host="127.0.0.1",
        port=port,
        url_prefix=f"mysql+pymysql://root@127.0.0.1:{port}",
        startup_seconds=time.monotonic() - started,
        log=log,
        _stop=stop,
        _admin=admin,
        _halt=halt,
        _resume=resume,
    )


# -- Redis -----------------------------------------------------------------------------


def redis_command(port: int, *args: str, host: str = "127.0.0.1") -> Any:
    """Send one command to Redis and return the decoded reply (no client library needed).

    Supports the reply types the tests need: simple string, error (raised as
    ``RuntimeError``), integer and bulk string.
    """
    request = f"*{len(args)}\r\n".encode()
    for arg in args:
        data = arg.encode()
        request += b"$%d\r\n%s\r\n" % (len(data), data)
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(request)
        reader = s.makefile("rb")
        line = reader.readline().rstrip(b"\r\n")
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            return None if size < 0 else reader.read(size + 2)[:-2].decode()
        raise RuntimeError(f"unsupported Redis reply {line!r}")


def start_redis() -> Server:
    """Start a throwaway Redis server (see the module docstring)."""
    binary = _which("redis-server")
    if binary is None:
        raise ServerNotInstalled(_INSTALL_HINT["redis"])
    started = time.monotonic()
    tmp = _tempdir("redis", _RunAs())
    log = tmp / "server.log"
    port = _free_port()
    args = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--dir",
        str(tmp),
        "--daemonize",
        "no",
        "--protected-mode",
        "yes",
    ]
    procs: list[subprocess.Popen[bytes]] = []

    def launch() -> None:
        with log.open("ab") as out:
            procs.append(
                subprocess.Popen(
                    args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp
                )
            )

    def stop() -> None:
        _terminate(procs[-1])
        shutil.rmtree(tmp, ignore_errors=True)

    def ready() -> bool:
        try:
            return redis_command(port, "PING") == "PONG"
        except (OSError, RuntimeError):
            return False

    def resume() -> None:
        launch()
        _wait(ready, "redis-server", log, lambda: procs[-1].poll() is None)

    launch()
    try:
        _wait(ready, "redis-server", log, lambda: procs[-1].poll() is None)
        info = redis_command(port, "INFO", "server")
    except BaseException:
        stop()
        raise
    version = next(
        (line.split(":", 1)[1] for line in info.splitlines() if line.startswith("redis_version:")),
        "?",
    )
    return Server(
        kind="redis",
        version=f"Redis {version.strip()}",
        host="127.0.0.1",
        port=port,
        url_prefix=f"redis://127.0.0.1:{port}",
        startup_seconds=time.monotonic() - started,
        log=log,
        _stop=stop,
        _halt=lambda: _terminate(procs[-1]),
        _resume=resume,
    )


# -- pytest fixtures and report --------------------------------------------------------


#: Starts of a server before its failure fails the tests that need it: once,
#: ``mariadb-install-db`` exited 1 under a loaded machine and started the next time, and
#: a session server's error is every one of its tests' error.
_STARTS = 2


def _session_server(kind: str, start: Callable[[], Server]) -> Iterator[Server]:
    for attempt in range(1, _STARTS + 1):
        try:
            server = start()
            break
        except ServerNotInstalled as exc:
            _REPORT[kind] = ("skipped", str(exc), None)
            pytest.skip(str(exc))
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            if attempt == _STARTS:
                raise
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            print(f"\n{kind} failed to start ({first}); starting it again", file=sys.stderr)
    _REPORT[kind] = ("started", server.startup_seconds, server.version)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    """A throwaway PostgreSQL server for the whole test session."""
    yield from _session_server("postgres", start_postgres)


@pytest.fixture(scope="session")
def mysql_server() -> Iterator[Server]:
    """A throwaway MariaDB/MySQL server for the whole test session."""
    yield from _session_server("mysql", start_mysql)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Server]:
    """A throwaway Redis server for the whole test session."""
    yield from _session_server("redis", start_redis)


def _database(server: Server) -> Iterator[str]:
    name, url = server.create_database()
    try:
        yield url
    finally:
        server.drop_database(name)


@pytest.fixture
def postgres_url(postgres_server: Server) -> Iterator[str]:
    """URL of a fresh, empty PostgreSQL database, dropped after the test."""
    yield from _database(postgres_server)


@pytest.fixture
def mysql_url(mysql_server: Server) -> Iterator[str]:
    """URL of a fresh, empty MariaDB/MySQL database, dropped after the test."""
    yield from _database(mysql_server)


@pytest.fixture
def redis_url(redis_server: Server) -> str:
    """URL of the Redis server's db 0, emptied (``FLUSHALL``) before the test."""
    redis_command(redis_server.port, "FLUSHALL")
    return f"{redis_server.url_prefix}/0"


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, None, None]:
    """On an xdist worker, hand this worker's servers to the controller. Elsewhere, once
    pytest has printed its last line (this wrapper is the outermost), end the output
    with the skipped server stores, in red: one line each with the number of its
    skipped tests and the command that installs its server, then the one for all."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["agentsession_servers"] = {k: list(v) for k, v in _REPORT.items()}
    result = yield
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = _skipped_stores()
    if workeroutput is None and reporter is not None and skipped:
        counts = _skipped_tests(reporter, skipped)
        reporter.write_sep("!", f"SERVER STORES SKIPPED: {', '.join(skipped)}", red=True, bold=True)
        for kind, reason in skipped.items():
            line = f"{kind}: SKIPPED, {counts[kind]} of its tests did not run; {reason}"
            reporter.write_line(line, red=True, bold=True)
        reporter.write_line(f"install every missing server: {INSTALL_ALL}", red=True, bold=True)
    return result


def _entries(kind: str) -> list[tuple[str, Any, Any]]:
    """What this process and every finished xdist worker say of the ``kind`` server."""
    return [r[kind] for r in (_REPORT, *_WORKER_REPORTS) if kind in r]


def _skipped_stores() -> dict[str, str]:
    """kind -> skip reason, for each server store no process of this run started."""
    skipped = {}
    for kind in ("postgres", "mysql", "redis"):
        entries = _entries(kind)
        if entries and not any(e[0] == "started" for e in entries):
            skipped[kind] = str(entries[0][1])
    return skipped


def _skipped_tests(reporter: Any, skipped: dict[str, str]) -> dict[str, int]:
    """kind -> how many of the run's skipped tests gave that store's skip reason."""
    reasons = [
        str(r.longrepr[-1])
        for r in reporter.stats.get("skipped", ())
        if isinstance(r.longrepr, tuple)
    ]
    return {kind: sum(reason in text for text in reasons) for kind, reason in skipped.items()}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the xdist controller: collect a finished worker's servers."""
    report = getattr(node, "workeroutput", {}).get("agentsession_servers")
    if report:
        _WORKER_REPORTS.append({k: tuple(v) for k, v in report.items()})


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line per server store: started (version, start-up time; one time per xdist
    worker), skipped (why), or not enabled."""
    lines = []
    for kind in ("postgres", "mysql", "redis"):
        entries = _entries(kind)
        started = [e for e in entries if e[0] == "started"]
        if started:
            times = ", ".join(f"{e[1]:.2f} s" for e in started)
            lines.append(f"{kind}: {started[0][2]}, started in {times}")
        elif entries:
            lines.append(f"{kind}: SKIPPED, {entries[0][1]}")
    if not server_stores_enabled():
        lines.append(f"postgres, mysql, redis stores: left out of STORES ({SERVER_STORES_ENV}=0)")
    if lines:
        terminalreporter.write_sep("-", "server stores")
        for line in lines:
            terminalreporter.write_line(line)
