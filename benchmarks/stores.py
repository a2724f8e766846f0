"""Every store side by side: append and last-50-read times at each durability setting.

One run opens every store through ``SessionManager.from_url(url, auto_migrate=True)``:
memory, SQLite (WAL with ``synchronous=FULL``, the default, and with ``NORMAL``),
PostgreSQL, MariaDB/MySQL and Redis. The servers are the throwaway loopback instances of
``tests/servers.py``, each started twice where the setting differs: once at its durable
setting (PostgreSQL ``fsync=on``, ``synchronous_commit=on``, ``full_page_writes=on``;
MariaDB ``innodb_flush_log_at_trx_commit=1``, ``innodb_doublewrite=1``,
``sync_binlog=1`` with the binary log off; Redis ``appendonly yes``, ``appendfsync
always``) and once at the setting the test suite uses (PostgreSQL ``fsync=off``,
``synchronous_commit=off``, ``full_page_writes=off``; MariaDB
``innodb_flush_log_at_trx_commit=2``, ``innodb_doublewrite=0``). Redis's and SQLite's
test settings are their durable ones, so they have one row each. The settings printed are
read back from the running server (``SHOW``, ``SELECT @@``, ``CONFIG GET``, ``PRAGMA``),
not assumed.

Workload, per store: one session; ``--messages`` (default 2000) messages of 200 bytes of
UTF-8 (roles user/assistant/system mixed, about half of them with Chinese text) appended
one at a time with ``append_message``, each one timed; then ``get_messages(limit=50)``
(the newest 50) timed ``--reads`` (default 200) times. Before that, an untimed warm-up on
a separate session (10 appends, 5 reads) per store.

Fairness: every store is set up first (servers started, schemas migrated), then the timed
operations are interleaved round-robin: append #1 on every store, then append #2 on every
store..., and likewise for the reads; the store that goes first rotates by one each
round. So every store sees the same disk, CPU and background load (this machine's other
work, and each server's own background writers) spread over the same minutes; a busy
spell moves every row, not one. All data (server data directories and SQLite files) is
on the same filesystem (the system temporary directory). Python's garbage collector is
paused during the timed phases. A reference row, ``write+fsync``, times a 200-byte
``write`` plus ``os.fsync`` to a file on that filesystem in the same rotation: it is what
one durable commit costs on this disk at the least.

"Can lose" columns: the wording of the durability table in ``docs/deployment.md``
(checked against the file at run time: a phrase no longer found there is reported on
stderr); notes marked † say what that table does not.

Then ``pools.py``'s section (``--no-pools`` leaves it out): ``agentsession serve`` on
PostgreSQL and MariaDB under 32 connections appending, with the new server connections
per 1,000 appends and, on PostgreSQL, ``--workers 2`` against 1 worker.

Run: ``.venv/bin/python benchmarks/stores.py [--messages N] [--reads R] [--json PATH]``.
Prints a markdown table; times are in milliseconds (mean, p50, p99). A store whose
server binary or driver is missing is reported as skipped, with the reason. Exit status 1
if a store that is installed failed.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import pools  # noqa: E402

import agentsession  # noqa: E402
import servers  # noqa: E402  (tests/servers.py: the throwaway servers)
from agentsession import SessionManager  # noqa: E402

DOC = ROOT / "docs" / "deployment.md"
USER = "bench"
MESSAGE_BYTES = 200
ROLES = ("user", "assistant", "user", "assistant", "system")
TEXTS = (
    "请检查 requirements.txt 是否缺少 requests，然后重新运行测试并告诉我结果。",
    "The tests pass now; I pinned requests to 2.32 and re-ran the suite twice.",
    "会话已恢复：上次我们讨论了部署到 PostgreSQL 的步骤，接下来配置连接池。",
    "Summarise the last three tool results and list the files that still fail lint.",
)

# Wording of docs/deployment.md, section "Durability: what each store can lose".
_SQLITE_NORMAL_POWER = (
    "the last transactions acknowledged before it (the database stays consistent)"
)
_PG_ASYNC_CRASH = (
    "nothing acknowledged (a crash of the service); a crash of PostgreSQL itself may drop "
    "up to about 3 x `wal_writer_delay` (600 ms) of commits"
)
_MY_TESTS_CRASH = "nothing acknowledged on a service crash or a `mysqld` crash"


@dataclass
class Target:
    """One row of the table: a store at one setting, and what the doc says it can lose."""

    key: str
    store: str
    role: str
    setting: str
    lose_crash: str
    lose_power: str
    notes: tuple[str, ...] = ()
    # filled in by the run
    observed: str = ""
    version: str = ""
    skipped: str | None = None
    failed: str | None = None
    manager: SessionManager | None = None
    session_id: str = ""
    appends: list[float] = field(default_factory=list)
    reads: list[float] = field(default_factory=list)


def _targets() -> list[Target]:
    """The rows, in table order (keys are what ``--stores`` takes)."""
    none = "nothing acknowledged"
    return [
        Target("memory", "memory", "—", "—", "everything", "everything"),
        Target(
            "sqlite-full",
            "SQLite",
            "durable (default); the tests' setting",
            "`AGENTSESSION_SQLITE_SYNCHRONOUS=FULL` (default)",
            none,
            none,
        ),
        Target("sqlite-normal", "SQLite", "faster, opt-in", "`NORMAL`", none, _SQLITE_NORMAL_POWER),
        Target(
            "postgres",
            "PostgreSQL",
            "durable (defaults)",
            "`fsync=on`, `synchronous_commit=on`",
            none,
            none,
        ),
        Target(
            "postgres-tests",
            "PostgreSQL",
            "the tests' setting",
            "`fsync=off`, `synchronous_commit=off`, `full_page_writes=off`",
            _PG_ASYNC_CRASH,
            "anything, including corruption: never in production",
            notes=(
                "crash wording from the doc's `synchronous_commit=off` row, power-loss "
                "wording from its `fsync=off` row: the doc has no row for both together",
            ),
        ),
        Target(
            "mysql",
            "MariaDB/MySQL",
            "durable",
            "`innodb_flush_log_at_trx_commit=1` and `sync_binlog=1` (binary log off)",
            none,
            none,
        ),
        Target(
            "mysql-tests",
            "MariaDB/MySQL",
            "the tests' setting",
            "`innodb_flush_log_at_trx_commit=2`, `innodb_doublewrite=0`",
            _MY_TESTS_CRASH,
            "about the last second of commits",
            notes=(
                "not in the doc: with `innodb_doublewrite=0` a power loss can also leave "
                "torn pages, i.e. a corrupt tablespace",
            ),
        ),
        Target(
            "redis",
            "Redis",
            "durable; the tests' setting",
            "`appendonly yes`, `appendfsync always`",
            none,
            none,
        ),
    ]


def check_doc_wording(targets: list[Target], doc: Path = DOC) -> list[str]:
    """Return the "can lose" phrases of ``targets`` not found verbatim in ``doc``."""
    try:
        text = doc.read_text(encoding="utf-8")
    except OSError as exc:
        return [f"cannot read {doc}: {exc}"]
    missing = []
    for t in targets:
        for phrase in (t.lose_crash, t.lose_power):
            if phrase not in text and phrase not in missing:
                missing.append(phrase)
    return missing


def message(i: int) -> dict[str, str]:
    """The ``i``-th benchmark message: a mixed role and exactly 200 bytes of UTF-8 content."""
    text = f"#{i} {TEXTS[i % len(TEXTS)]} "
    data = text.encode()
    while len(data) > MESSAGE_BYTES:
        text = text[:-1]
        data = text.encode()
    return {"role": ROLES[i % len(ROLES)], "content": text + "." * (MESSAGE_BYTES - len(data))}


def summary(samples: list[float]) -> dict[str, float | int]:
    """Mean, p50 and p99 (nearest rank), min and max of ``samples`` (seconds), in ms."""
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    n = len(ordered)
    return {
        "n": n,
        "mean_ms": statistics.fmean(ordered) * 1e3,
        "p50_ms": statistics.median(ordered) * 1e3,
        "p99_ms": ordered[max(0, math.ceil(0.99 * n) - 1)] * 1e3,
        "min_ms": ordered[0] * 1e3,
        "max_ms": ordered[-1] * 1e3,
    }


# -- setting up each store ------------------------------------------------------------


class Setup:
    """Starts the servers the targets need, once per kind and setting, and stops them."""

    def __init__(self, stack: contextlib.ExitStack, tmp: Path) -> None:
        self.stack = stack
        self.tmp = tmp
        self.servers: dict[tuple[str, bool], servers.Server] = {}
        self.missing: dict[str, str] = {}

    def server(self, kind: str, durable: bool) -> servers.Server:
        """The running server of ``kind`` at that setting (started on first use).

        Raises:
            servers.ServerNotInstalled: its binary or driver is missing.
        """
        if kind in self.missing:
            raise servers.ServerNotInstalled(self.missing[kind])
        if (kind, durable) not in self.servers:
            try:
                if kind == "postgres":
                    server = servers.start_postgres(durable=durable)
                elif kind == "mysql":
                    server = servers.start_mysql(durable=durable)
                else:
                    if importlib.util.find_spec("redis") is None:
                        raise servers.ServerNotInstalled(
                            "redis-py not installed: pip install -e '.[dev]'"
                        )
                    server = servers.start_redis()
            except servers.ServerNotInstalled as exc:
                self.missing[kind] = str(exc)
                raise
            self.stack.callback(server.stop)
            self.servers[(kind, durable)] = server
        return self.servers[(kind, durable)]

    def open(self, t: Target) -> None:
        """Open ``t``'s store, read back its durability settings, create its session."""
        options: dict[str, Any] = {}
        if t.key == "memory":
            url = "memory://"
            t.observed, t.version = "in process", f"agentsession {agentsession.__version__}"
        elif t.key.startswith("sqlite"):
            synchronous = t.key.partition("-")[2].upper()
            url = f"sqlite:///{self.tmp / f'{t.key}.db'}"
            options["sqlite_synchronous"] = synchronous
            import sqlite3

            t.version = f"SQLite {sqlite3.sqlite_version}"
        else:
            kind = t.key.partition("-")[0]
            server = self.server(kind, durable=not t.key.endswith("-tests"))
            t.version = server.version
            url = f"{server.url_prefix}/0" if kind == "redis" else server.create_database()[1]
            t.observed = _observe_server(kind, server)
        manager = SessionManager.from_url(url, auto_migrate=True, **options)
        self.stack.callback(manager.close)
        t.manager = manager
        if t.key.startswith("sqlite"):
            t.observed = _observe_sqlite(manager)
        warm = manager.create_session(user_id=USER, agent="bench-warmup").session_id
        for i in range(10):
            manager.append_message(session_id=warm, user_id=USER, message=message(i))
        for _ in range(5):
            manager.get_messages(session_id=warm, user_id=USER, limit=5)
        t.session_id = manager.create_session(user_id=USER, agent="bench").session_id


def _observe_sqlite(manager: SessionManager) -> str:
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    with manager.store.engine.connect() as conn:  # type: ignore[attr-defined]
        journal = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
        sync = conn.exec_driver_sql("PRAGMA synchronous").scalar()
    return f"journal_mode={journal}, synchronous={names.get(sync, sync)}"


def _observe_server(kind: str, server: servers.Server) -> str:
    if kind == "postgres":
        import psycopg

        names = ("fsync", "synchronous_commit", "full_page_writes", "wal_sync_method")
        with psycopg.connect(
            host=server.host, port=server.port, user="postgres", dbname="postgres"
        ) as conn:
            values = [conn.execute(f"SHOW {n}").fetchone()[0] for n in names]
        return ", ".join(f"{n}={v}" for n, v in zip(names, values, strict=True))
    if kind == "mysql":
        import pymysql

        names = (
            "innodb_flush_log_at_trx_commit",
            "innodb_doublewrite",
            "log_bin",
            "sync_binlog",
            "innodb_flush_method",
        )
        conn = pymysql.connect(host=server.host, port=server.port, user="root")
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT " + ", ".join(f"@@{n}" for n in names))
                values = cur.fetchone()
        finally:
            conn.close()
        return ", ".join(f"{n}={v}" for n, v in zip(names, values, strict=True))
    import redis

    client = redis.Redis(host=server.host, port=server.port)
    try:
        config = client.config_get("append*")
    finally:
        client.close()
    text = {_text(k): _text(v) for k, v in config.items()}
    return ", ".join(f"{k}={text.get(k)}" for k in ("appendonly", "appendfsync"))


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


# -- the timed run ----------------------------------------------------------------------


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _round_robin(
    rounds: int,
    ops: list[tuple[str, Callable[[int], object]]],
    on_error: Callable[[str, Exception], None],
) -> dict[str, list[float]]:
    """Call each op once per round, the first op rotating; return the seconds per op."""
    samples: dict[str, list[float]] = {name: [] for name, _ in ops}
    live = list(ops)
    clock = time.perf_counter
    for r in range(rounds):
        if not live:
            break
        shift = r % len(live)
        for name, op in live[shift:] + live[:shift]:
            start = clock()
            try:
                op(r)
            except Exception as exc:  # recorded; the other stores go on
                on_error(name, exc)
                live = [o for o in live if o[0] != name]
                continue
            samples[name].append(clock() - start)
    return samples


class FsyncReference:
    """A file on the benchmark's filesystem: ``write`` 200 bytes then ``os.fsync``."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.data = b"x" * MESSAGE_BYTES

    def __call__(self, _: int) -> None:
        """One durable 200-byte append to the file."""
        os.write(self.fd, self.data)
        os.fsync(self.fd)

    def close(self) -> None:
        """Close the file (the temporary directory holding it is removed by the run)."""
        os.close(self.fd)


def run(targets: list[Target], messages: int, reads: int, last: int) -> dict[str, Any]:
    """Set up every target, time the appends and reads interleaved; return the results.

    Every ``Target`` gets its ``appends``/``reads`` samples (seconds), or ``skipped``
    (binary or driver missing) or ``failed`` (any other error) with the reason.
    """
    started = time.monotonic()
    load_before = os.getloadavg()
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="as-bench-")))
        setup = Setup(stack, tmp)
        for t in targets:
            try:
                setup.open(t)
            except servers.ServerNotInstalled as exc:
                t.skipped = str(exc)
            except Exception as exc:  # reported in the table; the others go on
                t.failed = f"{type(exc).__name__}: {exc}"
        setup_seconds = time.monotonic() - started
        live = [t for t in targets if t.manager is not None and t.failed is None]
        by_key = {t.key: t for t in live}
        fsync = FsyncReference(tmp / "fsync-reference")
        stack.callback(fsync.close)

        def fail(key: str, exc: Exception) -> None:
            if key in by_key:
                by_key[key].failed = f"{type(exc).__name__}: {exc}"

        def appender(t: Target) -> Callable[[int], object]:
            m, sid = t.manager, t.session_id
            assert m is not None
            return lambda i: m.append_message(session_id=sid, user_id=USER, message=message(i))

        def reader(t: Target) -> Callable[[int], object]:
            m, sid = t.manager, t.session_id
            assert m is not None

            def read(_: int) -> object:
                got = m.get_messages(session_id=sid, user_id=USER, limit=last).items
                if len(got) != min(last, messages) or got[-1].seq != messages:
                    raise RuntimeError(f"read {len(got)} messages ending at seq {got[-1].seq}")
                return got

            return read

        timed_start = time.monotonic()
        with _no_gc():
            ops = [(t.key, appender(t)) for t in live] + [("write+fsync", fsync)]
            append_samples = _round_robin(messages, ops, fail)
            read_ops = [(t.key, reader(t)) for t in live if t.failed is None]
            read_samples = _round_robin(reads, read_ops, fail)
        timed_seconds = time.monotonic() - timed_start
        for t in live:
            t.appends, t.reads = append_samples.get(t.key, []), read_samples.get(t.key, [])
            t.manager = None  # closed by the stack
    return {
        "setup_seconds": setup_seconds,
        "timed_seconds": timed_seconds,
        "wall_seconds": time.monotonic() - started,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "fsync_reference": summary(append_samples["write+fsync"]),
        "filesystem": tempfile.gettempdir(),
    }


# -- output --------------------------------------------------------------------------


def _ms(stats: dict[str, Any]) -> list[str]:
    if not stats.get("n"):
        return ["—", "—", "—"]
    return [f"{stats[k]:.3f}" for k in ("mean_ms", "p50_ms", "p99_ms")]


def markdown(targets: list[Target], meta: dict[str, Any], last: int) -> str:
    """The results as a markdown table, with notes and skipped/failed stores below it."""
    head = [
        "store",
        "role",
        "durability setting",
        "append mean",
        "append p50",
        "append p99",
        f"last-{last} mean",
        f"last-{last} p50",
        f"last-{last} p99",
        "can lose: process crash",
        "can lose: power loss",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    footnotes: list[str] = []
    for t in targets:
        mark = ""
        for note in t.notes:
            footnotes.append(note)
            mark += "†" * len(footnotes)
        if t.skipped or t.failed:
            timings = ["skipped" if t.skipped else "FAILED"] + ["—"] * 5
        else:
            timings = _ms(summary(t.appends)) + _ms(summary(t.reads))
        lines.append(
            "| "
            + " | ".join([t.store, t.role, t.setting, *timings, t.lose_crash, t.lose_power + mark])
            + " |"
        )
    ref = meta["fsync_reference"]
    lines.append(
        "| write+fsync (reference) | — | 200 B `write` + `fsync` on the same filesystem | "
        + " | ".join(_ms(ref))
        + " | — | — | — | — | — |"
    )
    out = "\n".join(lines) + "\n"
    for i, note in enumerate(footnotes, 1):
        out += f"\n{'†' * i} {note}\n"
    out += "\nTimes in ms. Settings read back from the running stores:\n"
    for t in targets:
        if t.skipped:
            out += f"\n- {t.key}: SKIPPED, {t.skipped}"
        elif t.failed:
            out += f"\n- {t.key}: FAILED, {t.failed}"
        else:
            out += f"\n- {t.key}: {t.version}; {t.observed}"
    return out + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the markdown table, write ``--json``; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000, help="appends per store")
    parser.add_argument("--reads", type=int, default=200, help="timed last-N reads per store")
    parser.add_argument("--last", type=int, default=50, help="N of the last-N read")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--no-pools", action="store_true", help="leave out the pools section (pools.py)"
    )
    keys = [t.key for t in _targets()]
    parser.add_argument(
        "--stores",
        default=",".join(keys),
        help=f"comma-separated subset of {','.join(keys)} (default: all)",
    )
    args = parser.parse_args(argv)
    if args.messages < 1 or args.reads < 1 or args.last < 1:
        parser.error("--messages, --reads and --last must be at least 1")
    wanted = [k.strip() for k in args.stores.split(",") if k.strip()]
    unknown = sorted(set(wanted) - set(keys))
    if unknown:
        parser.error(f"unknown store(s) {', '.join(unknown)}; choose from {', '.join(keys)}")
    targets = [t for t in _targets() if t.key in wanted]
    for phrase in check_doc_wording(targets):
        print(f"warning: not found in {DOC.relative_to(ROOT)}: {phrase!r}", file=sys.stderr)

    when = datetime.now(UTC)
    meta = run(targets, args.messages, args.reads, args.last)
    meta.update(
        started_at=when.isoformat(timespec="seconds"),
        messages=args.messages,
        message_bytes=MESSAGE_BYTES,
        reads=args.reads,
        last=args.last,
        python=platform.python_version(),
        agentsession=agentsession.__version__,
        machine=f"{platform.system()} {platform.release()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs",
        order="set up all stores, then appends and reads round-robin, first store rotating",
    )
    print(
        f"{args.messages} appends of {MESSAGE_BYTES} bytes, one per call; last-{args.last} read "
        f"x {args.reads}; {meta['machine']}; load {meta['loadavg_before'][0]:.2f} -> "
        f"{meta['loadavg_after'][0]:.2f}; set-up {meta['setup_seconds']:.1f} s, timed "
        f"{meta['timed_seconds']:.1f} s, wall {meta['wall_seconds']:.1f} s\n"
    )
    print(markdown(targets, meta, args.last))
    pooled = None if args.no_pools else pools.run_pools(pools.Config())
    if pooled is not None:
        print(pools.markdown(pooled))
    if args.json:
        rows = [
            {
                "key": t.key,
                "store": t.store,
                "role": t.role,
                "setting": t.setting,
                "observed": t.observed,
                "version": t.version,
                "status": "skipped" if t.skipped else "failed" if t.failed else "ok",
                "reason": t.skipped or t.failed,
                "append": summary(t.appends),
                "last_read": summary(t.reads),
                "can_lose_process_crash": t.lose_crash,
                "can_lose_power_loss": t.lose_power,
                "notes": list(t.notes),
            }
            for t in targets
        ]
        args.json.write_text(
            json.dumps(
                {"meta": meta, "results": rows, "pools": pooled}, ensure_ascii=False, indent=2
            )
            + "\n",
            encoding="utf-8",
        )
    return 1 if any(t.failed for t in targets) else 0


if __name__ == "__main__":
    sys.exit(main())
