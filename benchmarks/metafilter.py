"""Metadata filter cost: ``count_sessions`` with a metadata filter at 1,000 and 100,000
sessions of one user, against a session read, on SQLite and PostgreSQL.

Run on demand (never a timed test): ``make bench-search`` runs it after
``benchmarks/search.py``, or ``.venv/bin/python benchmarks/metafilter.py [--sizes 1000
100000] [--samples 30] [--json PATH] [--no-postgres]``. PostgreSQL is the throwaway
loopback server of ``tests/servers.py`` (skipped when not installed).

State: one user with ``size`` sessions (and another user with as many), written through
the store in batches (``insert_session``, so the metadata index is built by the writes
the service makes; then ANALYZE). Every session has ``team`` (one of 50), ``env`` and a
number; :data:`RARE` of them, at every size, have ``team=rare``, half of those
``env=prod``. Timed, the median of ``samples`` calls each, round-robin over the sizes:
``count_sessions(metadata={"team": "rare"})``, the same with ``env=prod`` too, the
same with ``status=ACTIVE``, and the baseline ``get_session`` of one session.

Goal (docs/performance.md, "Metadata filters"): each count is flat, at most 2x from
the smallest size to the largest. Exits 1 when it is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from search import _no_gc, _time, median_ms, sql_stores  # noqa: E402

from agentsession import SessionManager  # noqa: E402
from agentsession.ids import new_id  # noqa: E402
from agentsession.models import Session  # noqa: E402

USERS = ("bench-user", "bench-other")
RARE = 20
BATCH = 2000
T0 = datetime(2026, 1, 1, tzinfo=UTC)

#: What is timed: name -> count_sessions filters (the baseline is "get_session").
COUNTS: dict[str, dict[str, Any]] = {
    "count team": {"metadata": {"team": "rare"}},
    "count team+env": {"metadata": {"team": "rare", "env": "prod"}},
    "count team+status": {"metadata": {"team": "rare"}, "status": "ACTIVE"},
}


def fill(manager: SessionManager, size: int) -> str:
    """Write ``size`` sessions of each user; return the id of one of the first's."""
    rng = random.Random(size)
    rare = set(rng.sample(range(size), RARE))
    pending: list[Session] = []
    first = ""

    def flush() -> None:
        with manager.store.transaction(write=True) as tx:
            for s in pending:
                tx.insert_session(s)
        pending.clear()

    for user in USERS:
        for i in range(size):
            team = "rare" if i in rare and user == USERS[0] else f"t{i % 50}"
            env = "prod" if i % 2 else "dev"
            sid = new_id("ses")
            first = first or sid
            pending.append(
                Session(
                    session_id=sid,
                    user_id=user,
                    agent="bench",
                    created_at=T0,
                    updated_at=T0,
                    last_active_at=T0,
                    metadata={"team": team, "env": env, "n": i},
                )
            )
            if len(pending) >= BATCH:
                flush()
    if pending:
        flush()
    return first


def settle(manager: SessionManager) -> None:
    """ANALYZE, as the store's maintenance would after a bulk load."""
    engine = manager.store.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("VACUUM ANALYZE session_metadata")
            conn.exec_driver_sql("ANALYZE sessions")
        else:
            conn.exec_driver_sql("ANALYZE")


def measure(open_url: Callable[[str], str], sizes: list[int], samples: int) -> dict[str, Any]:
    """Medians (ms) of each count and of the baseline read at each size."""
    managers, sids = {}, {}
    for size in sizes:
        manager = SessionManager.from_url(open_url(f"m{size}"), auto_migrate=True)
        sids[size] = fill(manager, size)
        settle(manager)
        managers[size] = manager
    names = ["get_session", *COUNTS]
    times: dict[str, dict[int, list[float]]] = {n: {s: [] for s in sizes} for n in names}
    expected = {"count team": RARE, "count team+env": None, "count team+status": RARE}
    with _no_gc():
        for _ in range(samples):
            for size in sizes:
                m, sid = managers[size], sids[size]
                times["get_session"][size].append(
                    _time(lambda m=m, sid=sid: m.get_session(session_id=sid, user_id=USERS[0]))
                )
                for name, filters in COUNTS.items():
                    found: list[int] = []
                    times[name][size].append(
                        _time(
                            lambda m=m, f=filters, found=found: found.append(
                                m.count_sessions(user_id=USERS[0], **f)
                            )
                        )
                    )
                    assert expected[name] in (None, found[0]), (name, size, found)
    for manager in managers.values():
        manager.close()
    return {n: {str(s): median_ms(v) for s, v in by.items()} for n, by in times.items()}


def ratios(r: dict[str, Any], sizes: list[int]) -> dict[str, float]:
    """Each count's growth (largest / smallest size) and its cost in session reads."""
    small, large = str(sizes[0]), str(sizes[-1])
    out = {}
    for name in COUNTS:
        out[f"{name} {large} / {small}"] = round(r[name][large] / r[name][small], 2)
        out[f"{name} in get_session at {large}"] = round(
            r[name][large] / r["get_session"][large], 2
        )
    return out


def _missed(out: dict[str, float]) -> list[str]:
    return [f"{name}: {v} > 2.0" for name, v in out.items() if " / " in name and v > 2.0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {}
    sizes = sorted(args.sizes)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        stores = sql_stores(Path(tmp), stack, report, postgres=not args.no_postgres)
        for name, open_url in stores.items():
            result = measure(open_url, sizes, args.samples)
            result["ratios"] = ratios(result, sizes)
            report[name] = result
            print(name, json.dumps(result, indent=1), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    missed = [f"{n}: {m}" for n, r in report.items() if "ratios" in r for m in _missed(r["ratios"])]
    for line in missed:
        print("goal missed:", line, file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
