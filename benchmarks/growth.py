"""Cost versus size: does one call get slower as the thing it works on grows?

Each workload is a function ``(size, samples)`` that builds its state at ``size``
(untimed) and yields ``samples`` calls of one operation, ready to time. :data:`WORKLOADS`
lists them by name, each with the sizes it runs at. :func:`seconds_per_call` times a
workload at every size, the median of its calls per size; the report gives the per-call
time at every size and the factor largest-size-vs-smallest (the goal: at most 2x, i.e.
the cost does not grow with the size).

Fairness: all sizes of a workload are built first, then their calls are timed
round-robin (call 1 at every size, then call 2...; the size that goes first rotates), so
a busy spell of the machine (other processes' fsyncs) slows every size alike instead of
inflating one of them.

Workloads (SQLite file, WAL + ``synchronous=FULL``, the store's default, read back):

``add_run_step``  a RUNNING run with N steps; time adding one more step.
``finish_run``    a RUNNING run with N steps; time finishing it (one run per sample,
                  each in its own session).

States are built through the store in batches of ``FILL_BATCH`` steps per transaction
(``insert_run_step`` per step), so 20,000 steps take seconds, not 20,000 fsyncs; the
timed calls go through the SessionManager as an agent makes them. Each workload and size
gets a fresh database in a temporary directory. Python's garbage collector is paused
while timing.

To add a workload: write a generator ``def my_workload(size: int, samples: int) ->
Iterator[list[Call]]`` decorated with ``@contextmanager`` that builds the state and
yields the calls (cleaning up after the ``yield``), and add
``Workload("my_workload", my_workload, sizes=(...), unit="...")`` to :data:`WORKLOADS`.

Run: ``.venv/bin/python benchmarks/growth.py [--quick] [--only NAME ...] [--json PATH]``
(``make bench-growth``). Prints a markdown table; exit status 1 if a factor exceeds the
goal.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from agentsession import SessionManager  # noqa: E402
from agentsession.models import RunStep  # noqa: E402
from agentsession.stores.sql import SQLStore  # noqa: E402

USER = "bench"
GOAL = 2.0
FILL_BATCH = 5_000  # steps per setup transaction


#: One timed operation (its result is ignored).
Call = Callable[[], object]


@dataclass(frozen=True)
class Workload:
    """One named workload: ``prepare(size, samples)`` is a context manager that builds
    the state at ``size`` and gives ``samples`` calls to time; ``unit`` names the size."""

    name: str
    prepare: Callable[[int, int], AbstractContextManager[list[Call]]]
    sizes: tuple[int, ...]
    unit: str


@contextmanager
def sqlite_manager() -> Iterator[SessionManager]:
    """A SessionManager on a fresh SQLite file (WAL + synchronous=FULL, the default)."""
    with tempfile.TemporaryDirectory(prefix="as-growth-") as tmp:
        manager = SessionManager.from_url(f"sqlite:///{tmp}/growth.db", auto_migrate=True)
        try:
            yield manager
        finally:
            manager.close()


def sqlite_settings() -> dict[str, str]:
    """``journal_mode`` and ``synchronous`` as a store connection reads them back."""
    with sqlite_manager() as manager:
        store = manager.store
        assert isinstance(store, SQLStore)
        with store.engine.connect() as conn:
            mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
            sync = conn.exec_driver_sql("PRAGMA synchronous").scalar()
    return {"journal_mode": str(mode), "synchronous": {0: "OFF", 1: "NORMAL", 2: "FULL",
                                                       3: "EXTRA"}.get(sync, str(sync))}


def seconds_per_call(workload: Workload, samples: int) -> dict[int, float]:
    """Median seconds of one call at each size of ``workload``, timed round-robin across
    the sizes with the garbage collector paused (see the module docstring)."""
    times: dict[int, list[float]] = {size: [] for size in workload.sizes}
    with ExitStack() as stack:
        calls = {size: stack.enter_context(workload.prepare(size, samples))
                 for size in workload.sizes}  # fmt: skip
        gc.collect()
        gc.disable()
        try:
            for i in range(samples):
                turn = i % len(workload.sizes)
                for size in workload.sizes[turn:] + workload.sizes[:turn]:
                    start = time.perf_counter()
                    calls[size][i]()
                    times[size].append(time.perf_counter() - start)
        finally:
            gc.enable()
    return {size: statistics.median(t) for size, t in times.items()}


def running_run_with_steps(manager: SessionManager, steps: int) -> tuple[str, str]:
    """A new session with a RUNNING run of ``steps`` steps; returns (session_id, run_id)."""
    sid = manager.create_session(user_id=USER, agent="growth").session_id
    run_id = manager.start_run(session_id=sid, user_id=USER, input="task").run_id
    now = datetime.now(UTC)
    for start in range(0, steps, FILL_BATCH):
        with manager.store.transaction(write=True) as tx:
            tx.get_session(sid)
            for index in range(start, min(start + FILL_BATCH, steps)):
                step = RunStep(run_id=run_id, index=index, kind="tool", name="read_file",
                               input={"path": f"src/m{index}.py"}, output={"bytes": index},
                               started_at=now, ended_at=now)  # fmt: skip
                tx.insert_run_step(sid, step)
    return sid, run_id


@contextmanager
def add_run_step(size: int, samples: int) -> Iterator[list[Call]]:
    """Adding one step to a run that has ``size`` steps (it grows by one per call)."""
    with sqlite_manager() as m:
        sid, run_id = running_run_with_steps(m, size)
        kw = {"session_id": sid, "user_id": USER, "run_id": run_id}

        def step() -> object:
            return m.add_run_step(**kw, kind="model", name="decide", output={"reply": False})

        yield [step] * samples


@contextmanager
def finish_run(size: int, samples: int) -> Iterator[list[Call]]:
    """Finishing a RUNNING run that has ``size`` steps (a fresh run per call)."""
    with sqlite_manager() as m:
        runs = [running_run_with_steps(m, size) for _ in range(samples)]

        def finisher(sid: str, run_id: str) -> Call:
            return lambda: m.finish_run(session_id=sid, user_id=USER, run_id=run_id,
                                        status="SUCCEEDED", output={"ok": True})  # fmt: skip

        yield [finisher(sid, run_id) for sid, run_id in runs]


RUN_SIZES = (10, 1_000, 20_000)

WORKLOADS: tuple[Workload, ...] = (
    Workload("add_run_step", add_run_step, RUN_SIZES, "steps in the run"),
    Workload("finish_run", finish_run, RUN_SIZES, "steps in the run"),
)


def measure_all(chosen: list[Workload], samples: int) -> list[dict[str, Any]]:
    """Run each workload at each of its sizes; one result row per workload."""
    rows = []
    for w in chosen:
        seconds = seconds_per_call(w, samples)
        for size in w.sizes:
            print(f"  {w.name} at {size:,} {w.unit}: {seconds[size] * 1e3:.2f} ms",
                  file=sys.stderr)  # fmt: skip
        factor = seconds[w.sizes[-1]] / seconds[w.sizes[0]]
        rows.append({"workload": w.name, "unit": w.unit, "ms": {
            str(k): round(v * 1e3, 3) for k, v in seconds.items()}, "factor": round(factor, 2),
            "sizes": list(w.sizes)})  # fmt: skip
    return rows


def markdown(rows: list[dict[str, Any]], settings: dict[str, str], samples: int) -> str:
    """The results as a markdown table (median ms per call, factor largest vs smallest)."""
    lines = [
        f"Cost versus size, SQLite (journal_mode={settings['journal_mode']}, "
        f"synchronous={settings['synchronous']}); median of {samples} calls, ms per call.",
        "",
        f"| workload | size | ms per call | factor (goal <= {GOAL:g}x) |",
        "|---|---|---|---|",
    ]
    for row in rows:
        sizes = row["sizes"]
        for i, size in enumerate(sizes):
            factor = ""
            if i == len(sizes) - 1:
                verdict = "ok" if row["factor"] <= GOAL else "MISSED"
                factor = f"{row['factor']:.2f}x {sizes[-1]:,} vs {sizes[0]:,} ({verdict})"
            lines.append(f"| {row['workload']} | {size:,} {row['unit']} | "
                         f"{row['ms'][str(size)]:.2f} | {factor} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse options, run the chosen workloads, print the table; 1 if a goal is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 samples per size (default 25)")
    parser.add_argument("--samples", type=int, help="samples per size (overrides --quick)")
    names = [w.name for w in WORKLOADS]
    parser.add_argument("--only", nargs="+", choices=names, help="run only these workloads")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    samples = args.samples or (5 if args.quick else 25)
    chosen = [w for w in WORKLOADS if not args.only or w.name in args.only]
    settings = sqlite_settings()
    rows = measure_all(chosen, samples)
    print(markdown(rows, settings, samples))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        document = {"settings": settings, "samples": samples, "goal": GOAL, "results": rows}
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0 if all(row["factor"] <= GOAL for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
