"""Search cost: a search over a user's 10,000 and 100,000 messages against a last-20 read,
and an append with the search index against one without, on SQLite and PostgreSQL.

Run on demand (never a timed test): ``make bench-search``, or ``.venv/bin/python
benchmarks/search.py [--sizes 10000 100000] [--samples 30] [--json PATH]
[--no-postgres]``. PostgreSQL is the
throwaway loopback server of ``tests/servers.py`` (skipped when not installed).

State: one user with ``size`` messages in sessions of 100 (a few words of English, an
identifier and CJK text each; written through the store in batches, so the index is
built by the same writes the service makes; then :func:`settle`). ``RARE`` queries
match 20 messages at
every size; a last-20 read is ``get_messages(limit=20)`` of one session. Timed: the
median of ``samples`` calls of each, round-robin over the sizes. Appends: one message
at a time to a session of a fresh database per variant, through the SessionManager,
alternating "with index" and "without" (the index write skipped: the store's
``_index`` made a no-op for that call), so the difference is the index's.

Goals (docs/guide.md, "Search"): search <= 10x a last-20 read at the largest size;
search grows <= 2x from the smallest size to the largest; append with index <= 1.3x.
Exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import servers  # noqa: E402  (tests/servers.py: the throwaway servers)
from agentsession import SessionManager  # noqa: E402
from agentsession.ids import new_id  # noqa: E402
from agentsession.models import Message, Session  # noqa: E402
from agentsession.stores.sql.search import SearchOps  # noqa: E402

USER = "bench-user"
PER_SESSION = 100
BATCH = 2000
RARE = ("requirements.txt", "修复启动")
RARE_HITS = 20
WORDS = [
    "the",
    "build",
    "fails",
    "when",
    "the",
    "server",
    "starts",
    "please",
    "check",
    "logs",
    "config",
    "tests",
    "deploy",
]
CJK = ["帮我看看日志", "测试通过了", "部署到服务器", "配置文件错误"]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _text(i: int, rare: bool, rng: random.Random) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(12))
    extra = f"{RARE[0]} 帮我修复启动失败" if rare else f"file_{i % 997}.py {rng.choice(CJK)}"
    return f"{words} {extra} step {i}"


def fill(manager: SessionManager, size: int) -> str:
    """Write ``size`` messages of USER (sessions of PER_SESSION); return one session id."""
    rng = random.Random(size)
    rare = set(rng.sample(range(size), RARE_HITS))
    store = manager.store
    first = ""
    pending: list[Message] = []
    sessions: list[Session] = []

    def flush() -> None:
        with store.transaction(write=True) as tx:
            for s in sessions:
                tx.insert_session(s)
            tx.insert_messages(pending)
        pending.clear()
        sessions.clear()

    for n in range(0, size, PER_SESSION):
        sid = new_id("ses")
        first = first or sid
        count = min(PER_SESSION, size - n)
        sessions.append(
            Session(
                session_id=sid,
                user_id=USER,
                agent="bench",
                created_at=T0,
                updated_at=T0,
                last_active_at=T0,
                message_count=count,
            )
        )
        for k in range(count):
            i = n + k
            pending.append(
                Message(
                    message_id=new_id("msg"),
                    session_id=sid,
                    seq=k + 1,
                    created_at=T0,
                    role="user" if k % 2 == 0 else "assistant",
                    content=_text(i, i in rare, rng),
                )
            )
        if len(pending) >= BATCH:
            flush()
    if pending or sessions:
        flush()
    return first


def settle(manager: SessionManager) -> None:
    """What a store's maintenance does soon after a bulk load, before timing: PostgreSQL's
    autovacuum (statistics, and the GIN index's pending list merged), SQLite's ANALYZE.
    Without it PostgreSQL plans on empty-table statistics and reads the GIN pending list
    linearly (a search over 100,000 fresh messages: 57 ms instead of 3.5)."""
    engine = manager.store.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("VACUUM ANALYZE search_texts")
            conn.exec_driver_sql("ANALYZE sessions")
        else:
            conn.exec_driver_sql("ANALYZE")


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _time(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(open_url: Callable[[str], str], sizes: list[int], samples: int) -> dict[str, Any]:
    """Search and last-20 medians (ms) at each size, and the append medians."""
    managers = {}
    sids = {}
    for size in sizes:
        manager = SessionManager.from_url(open_url(f"s{size}"), auto_migrate=True)
        sids[size] = fill(manager, size)
        settle(manager)
        managers[size] = manager
    times: dict[str, dict[int, list[float]]] = {
        k: {s: [] for s in sizes} for k in ("last20", *RARE)
    }
    with _no_gc():
        for _ in range(samples):
            for size in sizes:
                m, sid = managers[size], sids[size]
                times["last20"][size].append(
                    _time(
                        lambda m=m, sid=sid: m.get_messages(session_id=sid, user_id=USER, limit=20)
                    )
                )
                for q in RARE:
                    hits = []
                    times[q][size].append(
                        _time(
                            lambda m=m, q=q, hits=hits: hits.append(
                                m.search(user_id=USER, query=q, limit=20)
                            )
                        )
                    )
                    assert len(hits[0].items) == RARE_HITS, (q, size, len(hits[0].items))
    result: dict[str, Any] = {
        k: {str(s): median_ms(v) for s, v in by.items()} for k, by in times.items()
    }
    for manager in managers.values():
        manager.close()
    result["append"] = appends(open_url, samples * 10)
    return result


def appends(open_url: Callable[[str], str], count: int) -> dict[str, float]:
    """Median ms of one append_message with and without the index write, alternating."""
    real = SearchOps._index
    runs: dict[str, list[float]] = {"with_index": [], "without_index": []}
    managers = {k: SessionManager.from_url(open_url(k), auto_migrate=True) for k in runs}
    sids = {
        k: m.create_session(user_id=USER, agent="bench").session_id for k, m in managers.items()
    }
    rng = random.Random(7)
    try:
        with _no_gc():
            for i in range(count):
                for key in list(runs) if i % 2 == 0 else list(runs)[::-1]:
                    message = {"role": "user", "content": _text(i, i % 50 == 0, rng)}
                    if key == "without_index":
                        SearchOps._index = lambda self, rows: None  # type: ignore[method-assign]
                    try:
                        m = managers[key]
                        runs[key].append(
                            _time(
                                lambda m=m, s=sids[key], msg=message: m.append_message(
                                    session_id=s, user_id=USER, message=msg
                                )
                            )
                        )
                    finally:
                        SearchOps._index = real  # type: ignore[method-assign]
    finally:
        for m in managers.values():
            m.close()
    return {k: median_ms(v) for k, v in runs.items()}


def ratios(r: dict[str, Any], sizes: list[int]) -> dict[str, float]:
    small, large = str(sizes[0]), str(sizes[-1])
    out = {}
    for q in RARE:
        out[f"search {q} / last-20 at {large}"] = round(r[q][large] / r["last20"][large], 2)
        out[f"search {q} {large} / {small}"] = round(r[q][large] / r[q][small], 2)
    a = r["append"]
    out["append with / without index"] = round(a["with_index"] / a["without_index"], 2)
    return out


def _missed(out: dict[str, float]) -> list[str]:
    goals = {"append": 1.3, "/ last-20": 10.0, " / ": 2.0}
    missed = []
    for name, value in out.items():
        goal = next(g for key, g in goals.items() if key in name)
        if value > goal:
            missed.append(f"{name}: {value} > {goal}")
    return missed


def sql_stores(
    tmp: Path, stack: contextlib.ExitStack, report: dict[str, Any], *, postgres: bool
) -> dict[str, Callable[[str], str]]:
    """Store name -> a function making a fresh database's URL from a name: SQLite files in
    ``tmp``, and with ``postgres`` a durable throwaway PostgreSQL stopped by ``stack``
    (not installed: ``report["postgresql"]`` says why it was skipped)."""
    stores: dict[str, Callable[[str], str]] = {"sqlite": lambda name: f"sqlite:///{tmp / name}.db"}
    if postgres:
        try:
            server = servers.start_postgres(durable=True)
            stack.callback(server.stop)
            stores["postgresql"] = lambda name: server.create_database()[1]
        except servers.ServerNotInstalled as exc:
            report["postgresql"] = {"skipped": str(exc)}
    return stores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        stores = sql_stores(Path(tmp), stack, report, postgres=not args.no_postgres)
        for name, open_url in stores.items():
            result = measure(open_url, sorted(args.sizes), args.samples)
            result["ratios"] = ratios(result, sorted(args.sizes))
            report[name] = result
            print(name, json.dumps(result, ensure_ascii=False, indent=1), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, ensure_ascii=False, indent=1))
    missed = [f"{n}: {m}" for n, r in report.items() if "ratios" in r for m in _missed(r["ratios"])]
    for line in missed:
        print("goal missed:", line, file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
