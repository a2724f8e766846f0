"""Encryption at rest: the cost of a keyring on SQLite, as ratios measured in one run.

Run on demand (never a timed test): ``make bench-encryption``, or
``.venv/bin/python benchmarks/encryption.py [--samples 300] [--json PATH]``.

State: two SQLite databases in one temporary directory, one plain and one with a
keyring (``SessionManager.from_url(url, keyring=...)``), each with the same session of
:data:`HISTORY` messages (chat turns of a few hundred bytes, a tool call and a finished
run, like an agent's). Timed, alternating plain and sealed call by call so both see the
same machine: an append of one message (to a session of its own per variant), a
last-20 read (``get_messages(limit=20)``), and a restore (``restore_session`` of the
session, closed untimed before each sample: a write, then its bounded windows of
messages, tool calls and runs). The median of ``samples`` calls of each.

Goals (docs/security.md, "Encryption at rest"): append with a keyring <= 1.2x without,
last-20 <= 1.3x, restore <= 1.3x. Exits 1 when a goal is missed.
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
from pathlib import Path
from typing import Any

from agentsession import SessionManager
from agentsession.crypto import Keyring

USER = "bench-user"
HISTORY = 200
GOALS = {"append": 1.2, "last_20": 1.3, "restore": 1.3}
TEXT = (
    "The build fails when the server starts with the new configuration; the log shows "
    "a missing key in settings.toml and the retry loop gives up after three attempts. "
)


def _fill(sm: SessionManager) -> tuple[str, str]:
    """A session with :data:`HISTORY` messages, a tool call and a finished run; and an
    empty session for the appends."""
    sid = sm.create_session(user_id=USER, title="bench", metadata={"k": "v"}).session_id
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    for start in range(0, HISTORY, 50):
        batch = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} {TEXT}"}
            for i in range(start, start + 50)
        ]
        sm.append_messages(**kw, messages=batch)
    sm.update_working_memory(**kw, data={"goal": TEXT, "notes": {"a": TEXT}})
    sm.record_tool_call(**kw, tool="read", arguments={"path": "settings.toml"}, result=TEXT)
    run = sm.start_run(**kw, input={"task": TEXT})
    sm.finish_run(**kw, run_id=run.run_id, status="SUCCEEDED", output={"answer": TEXT})
    other = sm.create_session(user_id=USER).session_id
    return sid, other


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _sample(sm: SessionManager, sid: str, other: str) -> dict[str, float]:
    """One timed call of each workload on ``sm`` (the close before a restore untimed)."""
    message = {"role": "user", "content": TEXT}
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    append = _timed(lambda: sm.append_message(session_id=other, user_id=USER, message=message))
    last_20 = _timed(lambda: sm.get_messages(**kw, limit=20))
    sm.close_session(**kw)
    return {
        "append": append,
        "last_20": last_20,
        "restore": _timed(lambda: sm.restore_session(**kw)),
    }


def measure(directory: Path, samples: int) -> dict[str, dict[str, float]]:
    """Medians in milliseconds per workload and variant, and the ratios."""
    ring = Keyring.create(directory / "store.keyring")
    managers = {
        "plain": SessionManager.from_url(f"sqlite:///{directory / 'plain.db'}", auto_migrate=True),
        "sealed": SessionManager.from_url(
            f"sqlite:///{directory / 'sealed.db'}", auto_migrate=True, keyring=ring
        ),
    }
    sessions = {name: _fill(sm) for name, sm in managers.items()}
    times: dict[str, dict[str, list[float]]] = {w: {"plain": [], "sealed": []} for w in GOALS}
    gc.disable()
    try:
        for _ in range(samples):
            for name, sm in managers.items():
                for workload, seconds in _sample(sm, *sessions[name]).items():
                    times[workload][name].append(seconds)
    finally:
        gc.enable()
        for sm in managers.values():
            sm.close()
    out: dict[str, dict[str, float]] = {}
    for workload, by in times.items():
        plain, sealed = (statistics.median(by[v]) * 1000 for v in ("plain", "sealed"))
        out[workload] = {"plain_ms": plain, "sealed_ms": sealed, "ratio": sealed / plain}
    return out


def main() -> int:
    """Run, print a table, write ``--json``; exit 1 when a goal is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = measure(Path(tmp), args.samples)
    missed = []
    print(f"{'workload':<10} {'plain ms':>9} {'keyring ms':>11} {'ratio':>6} {'goal':>5}")
    for workload, r in results.items():
        goal = GOALS[workload]
        print(
            f"{workload:<10} {r['plain_ms']:>9.3f} {r['sealed_ms']:>11.3f} "
            f"{r['ratio']:>5.2f}x {goal:>4.1f}x"
        )
        if r["ratio"] > goal:
            missed.append(workload)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    if missed:
        print(f"goal missed: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
