"""Micro-benchmark of the in-process hot paths: our overhead over raw sqlite3.

Times, interleaved round-robin in one process, raw sqlite3 running the SQL store's
statements (:class:`peers.RawSQLite`) and agentsession's SessionManager
(:class:`peers.AgentSessionSync`) on the same operations, each on a SQLite file of its
own in WAL mode:

* ``append FULL`` / ``append NORMAL``: one message appended, at ``synchronous=FULL``
  and ``NORMAL``;
* ``last-20``: the newest 20 messages of a session, decoded;
* ``memory update``: a working-memory replace with an expected version (NORMAL);
* ``restore``: a restore of a session with 200 messages and 10 finished runs of 2 tool
  calls each (NORMAL), as :mod:`run`'s workload (e).

Each sample runs every (participant, operation) pair once, in a shuffled order; the
report is the median of each pair over all samples and the ratio ours / raw. Medians
of many interleaved samples keep the ratio fair on a loaded machine.

``--against DIR`` also times another version of agentsession in the same run, as a
third participant interleaved with the other two: ``DIR`` is that version's ``src``
directory (e.g. ``git archive <rev> src | tar -x -C /tmp/before``, then
``--against /tmp/before/src``). Its package is copied under the name
``agentsession_before`` (the package imports itself relatively), so both versions live
in one process. The table then shows both ratios, before and after.

Run from ``benchmarks/`` with the project's environment::

    ../.venv/bin/python hotpath.py [--samples 2000] [--against /tmp/before/src]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import itertools
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

OPS = ("append FULL", "append NORMAL", "last-20", "memory update", "restore")
#: Messages in the read session before timing (the read is of the newest 20).
HISTORY = 200


def before_participant(src: str, tag: str = "before") -> type[Any]:
    """An :class:`peers.AgentSessionSync` running the agentsession found in ``src``
    (copied as ``agentsession_<tag>``, importable next to the installed one)."""
    from peers import AgentSessionSync

    home = Path(tempfile.mkdtemp(prefix=f"hotpath-{tag}-"))
    shutil.copytree(Path(src) / "agentsession", home / f"agentsession_{tag}")
    sys.path.insert(0, str(home))
    module = importlib.import_module(f"agentsession_{tag}")

    class Before(AgentSessionSync):
        key = tag

        def open(self) -> None:
            self.sm = module.SessionManager.from_url(f"sqlite:///{self.path}", **self._options())
            self._read_back(self.sm)

    return Before


def _append(participant: Any, handle: Any, counter: Iterator[int]) -> None:
    participant.append(handle, next(counter))


def _update_memory(participant: Any, handle: Any, counter: Iterator[int]) -> None:
    participant.update_memory(handle, next(counter))


def measure(samples: int, seed: int = 1, against: str | None = None) -> dict[str, Any]:
    """Median seconds per call of each participant for each of :data:`OPS`.

    Returns:
        ``{op: {"raw": s, "ours": s, "ratio": ours / raw, "raw_cpu": s, "ours_cpu": s}}``
        (``*_cpu``: the median CPU time of the calling thread per call, SQLite's own
        work included), plus ``"before"``, ``"before_cpu"`` and ``"before_ratio"`` with
        ``against``.
    """
    from peers import WAL_FULL, WAL_NORMAL, AgentSessionSync, RawSQLite

    sides: list[tuple[str, type[Any]]] = [("raw", RawSQLite), ("ours", AgentSessionSync)]
    if against is not None:
        sides.append(("before", before_participant(against)))
    tmp = Path(tempfile.mkdtemp(prefix="hotpath-"))
    opened: list[Any] = []
    calls: dict[tuple[str, str], Any] = {}
    for setting, op in ((WAL_FULL, "append FULL"), (WAL_NORMAL, "append NORMAL")):
        for side, cls in sides:
            directory = tmp / f"{side}-{setting.name}"
            directory.mkdir()
            p = cls(directory, setting)
            p.open()
            opened.append(p)
            handle = p.new_session()
            calls[(op, side)] = functools.partial(_append, p, handle, itertools.count())
            if setting is WAL_NORMAL:
                reader = p.new_session()
                p.append_batch(reader, 0, HISTORY)
                calls[("last-20", side)] = functools.partial(p.load_last, reader, 20)
                memory = p.new_session()
                if hasattr(p, "before_memory"):
                    p.before_memory(memory)
                calls[("memory update", side)] = functools.partial(
                    _update_memory, p, memory, itertools.count()
                )
                restored = p.new_session()
                p.append_batch(restored, 0, HISTORY)
                p.prepare_restore(restored)
                calls[("restore", side)] = functools.partial(p.restore, restored)
    try:
        keys = list(calls)
        for key in keys:  # warm-up: compile statements, fill caches
            for _ in range(50):
                calls[key]()
        times: dict[tuple[str, str], list[float]] = {k: [] for k in keys}
        cpu: dict[tuple[str, str], list[float]] = {k: [] for k in keys}
        rng = random.Random(seed)
        clock, cpu_clock = time.perf_counter, time.thread_time
        for _ in range(samples):
            rng.shuffle(keys)
            for key in keys:
                fn = calls[key]
                c0, t0 = cpu_clock(), clock()
                fn()
                times[key].append(clock() - t0)
                cpu[key].append(cpu_clock() - c0)
    finally:
        for p in opened:
            p.close()
    out: dict[str, Any] = {}
    for op in OPS:
        med = {side: statistics.median(times[(op, side)]) for side, _cls in sides}
        used = {f"{side}_cpu": statistics.median(cpu[(op, side)]) for side, _cls in sides}
        out[op] = {**med, **used, "ratio": med["ours"] / med["raw"]}
        if against is not None:
            out[op]["before_ratio"] = med["before"] / med["raw"]
    return out


def table(results: dict[str, Any]) -> str:
    """A plain-text table of one :func:`measure` result (microseconds and ratios; the
    CPU microseconds of each call in brackets)."""

    def us(r: dict[str, Any], side: str) -> str:
        return f"{r[side] * 1e6:.1f} ({r[side + '_cpu'] * 1e6:.0f})"

    sides = ["raw", "before", "ours"] if "before" in results[OPS[0]] else ["raw", "ours"]
    names = {"raw": "raw us (cpu)", "before": "before us (cpu)", "ours": "after us (cpu)"}
    ratios = ["before_ratio", "ratio"] if "before" in sides else ["ratio"]
    heads = {"before_ratio": "before/raw", "ratio": "after/raw"}
    lines = [f"{'operation':<15}" + "".join(f"{names[s]:>18}" for s in sides)]
    lines[0] += "".join(f"{heads[r]:>12}" for r in ratios)
    for op, r in results.items():
        line = f"{op:<15}" + "".join(f"{us(r, s):>18}" for s in sides)
        lines.append(line + "".join(f"{r[k]:>12.2f}" for k in ratios))
    return "\n".join(lines)


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--against", help="src directory of a version to time as well")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    results = measure(args.samples, args.seed, args.against)
    print(json.dumps(results) if args.json else table(results))


if __name__ == "__main__":
    main()
