"""Micro-benchmark of the in-process hot paths: our overhead over raw sqlite3.

Times, interleaved round-robin in one process, raw sqlite3 running the SQL store's
statements (:class:`peers.RawSQLite`) and agentsession's SessionManager
(:class:`peers.AgentSessionSync`) on the same operations, each on a SQLite file of its
own in WAL mode:

* ``append FULL`` / ``append NORMAL``: one message appended, at ``synchronous=FULL``
  and ``NORMAL``;
* ``last-20``: the newest 20 messages of a session, decoded.

Each sample runs every (participant, operation) pair once, in a shuffled order; the
report is the median of each pair over all samples and the ratio ours / raw. Medians
of many interleaved samples keep the ratio fair on a loaded machine.

``--against DIR`` compares two versions of agentsession in one run: ``DIR`` is the
``src`` directory of the other version (e.g. ``git archive <rev> src | tar -x -C DIR/..``);
the benchmark then runs itself alternately on that source and on the installed one,
``--rounds`` times each, and prints the median ratios of each version.

Run from ``benchmarks/`` with the project's environment::

    ../.venv/bin/python hotpath.py [--samples 2000] [--against /tmp/base/src --rounds 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

OPS = ("append FULL", "append NORMAL", "last-20")
#: Messages in the read session before timing (the read is of the newest 20).
HISTORY = 200


def measure(samples: int, seed: int = 1) -> dict[str, dict[str, float]]:
    """Median seconds per call of raw and ours for each of :data:`OPS`.

    Returns:
        ``{op: {"raw": s, "ours": s, "ratio": ours / raw}}``.
    """
    from peers import WAL_FULL, WAL_NORMAL, AgentSessionSync, RawSQLite

    tmp = Path(tempfile.mkdtemp(prefix="hotpath-"))
    opened: list[Any] = []
    calls: dict[tuple[str, str], Any] = {}
    for setting, op in ((WAL_FULL, "append FULL"), (WAL_NORMAL, "append NORMAL")):
        for side, cls in (("raw", RawSQLite), ("ours", AgentSessionSync)):
            directory = tmp / f"{side}-{setting.name}"
            directory.mkdir()
            p = cls(directory, setting)
            p.open()
            opened.append(p)
            handle = p.new_session()
            counter = iter(range(10**9))
            calls[(op, side)] = (lambda p, h, c: lambda: p.append(h, next(c)))(p, handle, counter)
            if setting is WAL_NORMAL:
                reader = p.new_session()
                p.append_batch(reader, 0, HISTORY)
                calls[("last-20", side)] = (lambda p, h: lambda: p.load_last(h, 20))(p, reader)
    try:
        keys = list(calls)
        for key in keys:  # warm-up: compile statements, fill caches
            for _ in range(50):
                calls[key]()
        times: dict[tuple[str, str], list[float]] = {k: [] for k in keys}
        rng = random.Random(seed)
        clock = time.perf_counter
        for _ in range(samples):
            rng.shuffle(keys)
            for key in keys:
                fn = calls[key]
                t0 = clock()
                fn()
                times[key].append(clock() - t0)
    finally:
        for p in opened:
            p.close()
    out = {}
    for op in OPS:
        raw = statistics.median(times[(op, "raw")])
        ours = statistics.median(times[(op, "ours")])
        out[op] = {"raw": raw, "ours": ours, "ratio": ours / raw}
    return out


def table(results: dict[str, dict[str, float]]) -> str:
    """A plain-text table of one :func:`measure` result (microseconds and ratios)."""
    lines = [f"{'operation':<15}{'raw us':>10}{'ours us':>10}{'ratio':>8}"]
    for op, r in results.items():
        lines.append(f"{op:<15}{r['raw'] * 1e6:>10.1f}{r['ours'] * 1e6:>10.1f}{r['ratio']:>8.2f}")
    return "\n".join(lines)


def compare(against: str, rounds: int, samples: int) -> None:
    """Alternate runs on ``against`` (before) and the installed source (after); print
    the median over rounds of each version's ratios."""
    runs: dict[str, list[dict[str, dict[str, float]]]] = {"before": [], "after": []}
    for i in range(rounds):
        for label, src in (("before", against), ("after", None)):
            argv = [sys.executable, __file__, "--samples", str(samples), "--json"]
            argv += ["--seed", str(i + 1)]
            if src is not None:
                argv += ["--src", src]
            done = subprocess.run(argv, check=True, capture_output=True, text=True)
            runs[label].append(json.loads(done.stdout))
            print(f"round {i + 1} {label}:", file=sys.stderr)
            print(table(runs[label][-1]), file=sys.stderr)
    print(f"{'operation':<15}{'before':>9}{'after':>9}   (median ratio ours/raw)")
    for op in OPS:
        med = {k: statistics.median(r[op]["ratio"] for r in v) for k, v in runs.items()}
        print(f"{op:<15}{med['before']:>9.2f}{med['after']:>9.2f}")


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--src", help="import agentsession from this src directory")
    parser.add_argument("--against", help="src directory of the version to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    if args.against:
        compare(args.against, args.rounds, args.samples)
        return
    if args.src:
        sys.path.insert(0, args.src)
    results = measure(args.samples, args.seed)
    print(json.dumps(results) if args.json else table(results))


if __name__ == "__main__":
    main()
