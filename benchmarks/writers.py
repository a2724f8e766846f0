"""Many sync writers appending at once, this version against another, interleaved.

The threads half of workload (h) (:mod:`concurrency`): 1, 8 and 32 threads append
~200-byte messages for ``--seconds`` per cell, each on its own session (``distinct``)
or all on one (``one``), at WAL + ``synchronous=FULL`` and ``NORMAL``. Participants:
raw sqlite3 (one connection per thread, one transaction per append), this
agentsession (``ours``) and, with ``--against [TAG=]DIR`` (repeatable), other versions'
``src`` directories (each copied as the package ``agentsession_<TAG>``, TAG ``before``
by default, as :mod:`hotpath` does). Cells run in a new shuffled order each round, so
every version shares the machine's load; the figures are appends/s over all rounds and
the p50/p99 append latency in ms. A loaded machine moves them by tens of percent from
run to run: compare versions within one run, over several rounds.

``--fsync-delay-ms 2`` runs it on a cloud-like disk: the process starts itself again
with ``fsyncdelay.c`` preloaded (:mod:`fsyncdelay`), every flush of every side that much
slower.

Run from ``benchmarks/``::

    ../.venv/bin/python writers.py [--rounds 3] [--seconds 1.5] [--against /tmp/before/src]
        [--against v1=/tmp/v1/src --sides raw,before,v1,ours] [--writers 1,8,32]
        [--fsync-delay-ms 2]
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import fsyncdelay
import peers
from hotpath import before_participant

WRITERS = (1, 8, 32)
MODES = ("distinct", "one")


def _open(cls: type[Any], directory: Path, setting: Any) -> tuple[Any, list[Any], Any]:
    """Open a participant with 32 sessions and one shared one."""
    p = cls(directory, setting)
    p.path.parent.mkdir(parents=True, exist_ok=True)
    p.open()
    return p, [p.new_session() for _ in range(max(WRITERS))], p.new_session()


def _cell(p: Any, raw: bool, handles: list[Any], seconds: float) -> tuple[int, list[float]]:
    """Run one cell: a thread per handle appending until the deadline."""
    writers = []
    for _ in handles:
        if raw:
            clone = copy.copy(p)
            clone.db = p.connect()
            writers.append(clone)
        else:
            writers.append(p)
    latencies: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(len(handles) + 1)
    clock = time.perf_counter
    counter = iter(range(10**9))

    def work(w: Any, h: Any) -> None:
        local: list[float] = []
        start.wait()
        deadline = box[0]
        while clock() < deadline:
            t0 = clock()
            w.append(h, next(counter))
            local.append(clock() - t0)
        with lock:
            latencies.extend(local)

    box = [0.0]
    threads = [
        threading.Thread(target=work, args=(w, h)) for w, h in zip(writers, handles, strict=True)
    ]
    for t in threads:
        t.start()
    box[0] = clock() + seconds
    start.wait()
    for t in threads:
        t.join()
    if raw:
        for w in writers:
            w.db.close()
    return len(latencies), latencies


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument(
        "--against",
        action="append",
        default=[],
        metavar="[TAG=]DIR",
        help="src directory of a version to time as well (repeatable; tag: before)",
    )
    parser.add_argument("--settings", default="FULL,NORMAL")
    parser.add_argument("--writers", default="1,8,32")
    parser.add_argument("--sides", default="raw,before,ours", help="participants, in order")
    parser.add_argument("--fsync-delay-ms", type=float, default=0.0, help="flush delay (ms)")
    args = parser.parse_args()
    if args.fsync_delay_ms and "FSYNC_DELAY_MS" not in os.environ:
        library, how = fsyncdelay.build()
        if library is None:
            parser.error(f"--fsync-delay-ms needs the library: {how}")
        env = {**os.environ, **fsyncdelay.environment(library, args.fsync_delay_ms)}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    sides: dict[str, type[Any]] = {"raw": peers.RawSQLite, "ours": peers.AgentSessionSync}
    for spec in args.against:
        tag, _, src = spec.rpartition("=")
        sides[tag or "before"] = before_participant(src, tag or "before")
    wanted = [s for s in args.sides.split(",") if s in sides]
    settings = {"FULL": peers.WAL_FULL, "NORMAL": peers.WAL_NORMAL}
    tmp = Path(tempfile.mkdtemp(prefix="writers-"))
    opened: dict[tuple[str, str], tuple[Any, list[Any], Any]] = {}
    for name in args.settings.split(","):
        for side in wanted:
            opened[(side, name)] = _open(sides[side], tmp / f"{side}-{name}" / "db", settings[name])
    cells = [
        (side, name, mode, n)
        for side, name in opened
        for mode in MODES
        for n in map(int, args.writers.split(","))
    ]
    totals: dict[Any, list[Any]] = {c: [0, 0.0, []] for c in cells}
    rng = random.Random(1)
    for _ in range(args.rounds):
        rng.shuffle(cells)
        for cell in cells:
            side, name, mode, n = cell
            p, sessions, shared = opened[(side, name)]
            handles = sessions[:n] if mode == "distinct" else [shared] * n
            began = time.perf_counter()
            count, lat = _cell(p, side == "raw", handles, args.seconds)
            totals[cell][0] += count
            totals[cell][1] += time.perf_counter() - began
            totals[cell][2].extend(lat)
    for p, _s, _h in opened.values():
        p.close()
    print(f"{'setting':<8}{'mode':<10}{'n':>3}  " + "".join(f"{s:>26}" for s in wanted))
    for name in args.settings.split(","):
        for mode in MODES:
            for n in map(int, args.writers.split(",")):
                row = f"{name:<8}{mode:<10}{n:>3}  "
                for side in wanted:
                    count, secs, lat = totals[(side, name, mode, n)]
                    lat.sort()
                    p50 = statistics.median(lat) * 1e3 if lat else 0
                    p99 = lat[int(len(lat) * 0.99)] * 1e3 if lat else 0
                    row += f"{count / secs:>9.0f}/s {p50:>6.1f} {p99:>6.1f}ms"
                print(row)


if __name__ == "__main__":
    main()
