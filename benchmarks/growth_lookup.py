"""Lookups, listings and the TTL sweep as the data grows, on SQLite.

Goal: a lookup or a page of a listing costs the same whatever the size of what it looks
through; the factor between the largest and the smallest size stays within 2x.

Per size N (10, 1,000 and 20,000 rows; ``--quick``: 10, 100 and 1,000), on a fresh
SQLite file (WAL, ``synchronous=FULL``, the default), timed through the SessionManager:

* ``find_tool_call`` of the oldest call of a session of N tool calls, by tool and
  arguments, and by its provider call id;
* one tool's history (``get_tool_history(tool=...)``): 5 calls of that tool among N;
* ``list_sessions`` of a user with N sessions: ``status="CLOSED"`` and
  ``agent="rare"`` (5 sessions match each), and a first page of 5 of
  ``status="ACTIVE"`` (about N match).

The rows are inserted directly in one store transaction per size (untimed); each
operation then runs ``--calls`` times after 5 warm-up calls, and the p50 per call is
printed in milliseconds with the factor N=max vs N=10.

The sweep: ``sweep_expired`` of 1,000 due sessions (``--quick``: 200) on a fresh file,
before (one write transaction per session, as the sweep was: ``SWEEP_BATCH = 1``) and
after (``SWEEP_BATCH`` sessions to a transaction, the default), total seconds.

Run: ``.venv/bin/python benchmarks/growth_lookup.py [--quick] [--calls K] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agentsession import SessionManager
from agentsession.jsonvalues import canonical_hash
from agentsession.models import Session, SessionStatus, ToolCall
from agentsession.service import lifecycle
from agentsession.stores.sql import SQLStore

USER = "bench"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
MATCHING = 5  # sessions of the rare status / agent, calls of the rare tool


def _session(n: int, *, sid: str | None = None, **fields: Any) -> Session:
    at = T0 + timedelta(seconds=n)
    values: dict[str, Any] = {
        "session_id": sid or f"ses_{n:026d}",
        "user_id": USER,
        "agent": "main",
        "created_at": at,
        "updated_at": at,
        "last_active_at": at,
    }
    return Session.model_validate({**values, **fields})


def _call(sid: str, seq: int, n: int) -> ToolCall:
    rare = seq % max(1, n // MATCHING) == 0 and seq // max(1, n // MATCHING) <= MATCHING
    arguments = {"path": f"src/module_{seq}.py"}
    return ToolCall(
        call_id=f"call_{seq}",
        session_id=sid,
        seq=seq,
        provider_call_id="call_first" if seq == 1 else f"call_{seq % 8}",
        tool="rare_tool" if rare else "read_file",
        arguments=arguments,
        arguments_hash=canonical_hash(arguments),
        started_at=T0,
        ended_at=T0,
        duration_ms=1.0,
        created_at=T0,
    )


def _fill(store: SQLStore, n: int) -> str:
    """A session of ``n`` tool calls, and ``n`` sessions of the user (5 CLOSED, 5 of
    agent "rare"); returns the id of the session with the tool calls."""
    sid = "ses_" + "t" * 26
    every = max(1, n // MATCHING)
    with store.transaction(write=True) as tx:
        tx.insert_session(_session(n + 1, sid=sid, tool_call_count=n))
        for seq in range(1, n + 1):
            tx.insert_tool_call(_call(sid, seq, n))
        for i in range(n):
            special = i % every == 0 and i // every < MATCHING
            tx.insert_session(
                _session(
                    i,
                    status=SessionStatus.CLOSED if special else SessionStatus.ACTIVE,
                    agent="rare" if special else "main",
                )
            )
    return sid


def _p50_ms(fn: Callable[[], object], calls: int) -> float:
    for _ in range(5):
        fn()
    times = []
    gc.disable()
    try:
        for _ in range(calls):
            start = time.perf_counter_ns()
            fn()
            times.append(time.perf_counter_ns() - start)
    finally:
        gc.enable()
    return statistics.median(times) / 1e6


def _operations(m: SessionManager, sid: str) -> dict[str, Callable[[], object]]:
    oldest = {"path": "src/module_1.py"}
    kw: dict[str, Any] = {"user_id": USER}

    def found(call: ToolCall | None) -> ToolCall:
        assert call is not None and call.seq == 1, call
        return call

    def listed(page: Any, size: int) -> None:
        assert len(page.items) == size, len(page.items)

    return {
        "find_tool_call(tool, arguments) of the oldest": lambda: found(
            m.find_tool_call(session_id=sid, **kw, tool="read_file", arguments=oldest)
        ),
        "find_tool_call(provider_call_id) of the oldest": lambda: found(
            m.find_tool_call(session_id=sid, **kw, provider_call_id="call_first")
        ),
        "get_tool_history(tool) (5 of N)": lambda: m.get_tool_history(
            session_id=sid, **kw, tool="rare_tool"
        ),
        "list_sessions(status=CLOSED) (5 of N)": lambda: listed(
            m.list_sessions(**kw, status="CLOSED"), MATCHING
        ),
        "list_sessions(agent=rare) (5 of N)": lambda: listed(
            m.list_sessions(**kw, agent="rare"), MATCHING
        ),
        "list_sessions(status=ACTIVE) first 5": lambda: listed(
            m.list_sessions(**kw, status="ACTIVE", limit=MATCHING), MATCHING
        ),
    }


def measure_lookups(sizes: list[int], calls: int, tmp: Path) -> dict[str, dict[int, float]]:
    """p50 ms per operation and size."""
    results: dict[str, dict[int, float]] = {}
    for n in sizes:
        store = SQLStore(f"sqlite:///{tmp / f'lookups_{n}.db'}", auto_migrate=True)
        try:
            sid = _fill(store, n)
            m = SessionManager(store)
            for name, fn in _operations(m, sid).items():
                results.setdefault(name, {})[n] = _p50_ms(fn, calls)
        finally:
            store.close()
    return results


def measure_sweep(due: int, tmp: Path) -> dict[str, float]:
    """Seconds to sweep ``due`` due sessions, one transaction each vs batched."""
    out: dict[str, float] = {}
    default = lifecycle.SWEEP_BATCH
    runs = (("before (1 per transaction)", 1), (f"after ({default} per transaction)", default))
    for label, batch in runs:
        store = SQLStore(f"sqlite:///{tmp / f'sweep_{batch}.db'}", auto_migrate=True)
        try:
            with store.transaction(write=True) as tx:
                for i in range(due):
                    tx.insert_session(
                        _session(i, ttl_seconds=60.0, expires_at=T0 + timedelta(seconds=60 + i))
                    )
            m = SessionManager(store)
            lifecycle.SWEEP_BATCH = batch
            start = time.perf_counter()
            result = m.sweep_expired(limit=due)
            out[label] = time.perf_counter() - start
            assert len(result.expired_session_ids) == due, len(result.expired_session_ids)
        finally:
            lifecycle.SWEEP_BATCH = default
            store.close()
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the tables (and write JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes 10/100/1,000, sweep 200")
    parser.add_argument("--calls", type=int, default=None, help="timed calls per operation")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    sizes = [10, 100, 1_000] if args.quick else [10, 1_000, 20_000]
    calls = args.calls or (50 if args.quick else 200)
    due = 200 if args.quick else 1_000
    with tempfile.TemporaryDirectory(prefix="as-growth-") as tmp:
        lookups = measure_lookups(sizes, calls, Path(tmp))
        sweep = measure_sweep(due, Path(tmp))
    big, small = sizes[-1], sizes[0]
    print(f"SQLite, p50 ms per call ({calls} calls); goal: N={big:,} within 2x of N={small}\n")
    print("| operation | " + " | ".join(f"N={n:,}" for n in sizes) + " | factor | goal |")
    print("|---|" + "---|" * (len(sizes) + 2))
    for name, by_size in lookups.items():
        factor = by_size[big] / by_size[small]
        cells = " | ".join(f"{by_size[n]:.3f}" for n in sizes)
        print(f"| {name} | {cells} | {factor:.2f}x | {'met' if factor <= 2 else 'missed'} |")
    print(f"\nsweep_expired of {due:,} due sessions (SQLite, synchronous=FULL), seconds\n")
    for label, seconds in sweep.items():
        print(f"- {label}: {seconds:.2f} s")
    if args.json is not None:
        data = {"sizes": sizes, "calls": calls, "lookups_ms_p50": lookups, "sweep_s": sweep}
        args.json.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
