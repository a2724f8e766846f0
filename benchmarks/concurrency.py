"""Workload (h) of issue #14: many writers appending at once, in one process.

1, 8 and 32 concurrent writers append ~200-byte messages for a fixed time, (i) each on
its own session (``distinct``) and (ii) all on one session (``one``), at WAL +
synchronous=FULL and WAL + NORMAL. Participants (the adapters of ``peers.py``):

- ``raw``: plain sqlite3, one connection per thread, one ``BEGIN IMMEDIATE ... COMMIT``
  transaction per append (the SQL store's statements), waiting on the write lock with
  a busy timeout: its contention is part of its figure. The sync baseline.
- ``agentsession``: the sync ``SessionManager``, one thread per writer.
- ``raw_async``: the raw appends awaited through ``asyncio.to_thread``, one connection
  per task: the async baseline.
- ``agentsession_async``: the ``AsyncSessionManager``, one asyncio task per writer.
- ``openai_agents``: openai-agents ``SQLiteSession``, one asyncio task per writer (one
  session object per writer; one shared object for ``one``).

The asyncio participants all hop to the default thread pool (``asyncio.to_thread``),
which on this machine has ``min(32, cpus + 4)`` threads: that limit is each library's
own behaviour and is the same for all of them.

Every cell (participant x setting x mode x writers) runs ``seconds`` per round, for
``rounds`` rounds, with the cells in a new seeded random order each round; the figure
is appends per second over all rounds, with the p50 and p99 of single append latency.
Each figure is reported as a ratio to its baseline (sync to ``raw``, async to
``raw_async``) at the same setting, mode and writer count.
"""

from __future__ import annotations

import asyncio
import copy
import random
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import peers
import report

#: participant key -> (label, whether it is driven by asyncio tasks, its baseline).
PARTICIPANTS: dict[str, tuple[str, bool, str]] = {
    "raw": ("raw sqlite3, threads, 1 tx per append", False, "raw"),
    "agentsession": ("agentsession sync, threads", False, "raw"),
    "raw_async": ("raw sqlite3 via asyncio.to_thread, tasks", True, "raw_async"),
    "agentsession_async": ("agentsession async, tasks", True, "raw_async"),
    "openai_agents": ("openai-agents SQLiteSession, tasks", True, "raw_async"),
}
MODES = ("distinct", "one")
SETTINGS = {"FULL": peers.WAL_FULL, "NORMAL": peers.WAL_NORMAL}


@dataclass(frozen=True)
class Config:
    """Writer counts, settings, and seconds per cell per round."""

    writers: tuple[int, ...] = (1, 8, 32)
    synchronous: tuple[str, ...] = ("FULL", "NORMAL")
    modes: tuple[str, ...] = MODES
    participants: tuple[str, ...] = tuple(PARTICIPANTS)
    seconds: float = 1.5
    rounds: int = 2


QUICK = Config(seconds=0.3, rounds=1)


@dataclass
class Tally:
    """What one cell measured over its rounds (seconds)."""

    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    errors: int = 0
    first_error: str | None = None

    def failed(self, exc: BaseException) -> None:
        self.errors += 1
        self.first_error = self.first_error or repr(exc)[:200]

    def entry(self) -> dict[str, Any]:
        """``{"appends", "seconds", "aps", "p50_ms", "p99_ms", "errors"}``."""
        n = len(self.latencies)
        out: dict[str, Any] = {"appends": n, "seconds": round(self.seconds, 3), "errors": 0}
        out["aps"] = n / self.seconds if self.seconds else 0.0
        if n:
            st = report.stats(self.latencies)
            out["p50_ms"], out["p99_ms"] = st["p50"], st["p99"]
        if self.errors:
            out["errors"], out["first_error"] = self.errors, self.first_error
        return out


class _Subject:
    """One participant opened at one setting, with 32 sessions and one shared one."""

    def __init__(self, key: str, directory: Path, setting: peers.Setting, most: int) -> None:
        self.key, self.most = key, most
        cls = {
            "raw": peers.RawSQLite,
            "raw_async": peers.RawSQLite,
            "agentsession": peers.AgentSessionSync,
            "agentsession_async": peers.AgentSessionAsync,
            "openai_agents": peers.OpenAIAgents,
        }[key]
        self.p = cls(directory / key, setting)
        self.asynchronous = PARTICIPANTS[key][1]
        self.counter = 0

    async def open(self) -> None:
        self.p.path.parent.mkdir(parents=True, exist_ok=True)
        await peers.call(self.p.open)
        self.sessions = [await peers.call(self.p.new_session) for _ in range(self.most)]
        self.shared = await peers.call(self.p.new_session)

    def handles(self, mode: str, n: int) -> list[Any]:
        return self.sessions[:n] if mode == "distinct" else [self.shared] * n

    def writers(self, n: int) -> list[Any]:
        """Per-writer append targets: a raw clone with its own connection, else the
        participant itself (thread-safe / task-safe)."""
        if self.key not in ("raw", "raw_async"):
            return [self.p] * n
        clones = []
        for _ in range(n):
            clone = copy.copy(self.p)
            clone.db = self.p.connect()
            clones.append(clone)
        return clones

    def next_index(self) -> int:
        self.counter += 1
        return self.counter

    async def close(self) -> None:
        await peers.close_quietly(self.p)


def _threads(
    subject: _Subject, writers: list[Any], handles: list[Any], seconds: float, tally: Tally
) -> None:
    """Run one sync cell: a thread per writer appending until the deadline."""
    start = threading.Barrier(len(writers) + 1)
    lock = threading.Lock()
    clock = time.perf_counter

    def work(w: Any, h: Any, deadline_box: list[float]) -> None:
        local: list[float] = []
        start.wait()
        deadline = deadline_box[0]
        while clock() < deadline:
            t0 = clock()
            try:
                w.append(h, subject.next_index())
            except Exception as exc:
                with lock:
                    tally.failed(exc)
                continue
            local.append(clock() - t0)
        with lock:
            tally.latencies.extend(local)

    box = [0.0]
    threads = [
        threading.Thread(target=work, args=(w, h, box))
        for w, h in zip(writers, handles, strict=True)
    ]
    for t in threads:
        t.start()
    box[0] = clock() + seconds
    began = clock()
    start.wait()
    for t in threads:
        t.join()
    tally.seconds += clock() - began


async def _tasks(
    subject: _Subject, writers: list[Any], handles: list[Any], seconds: float, tally: Tally
) -> None:
    """Run one async cell: a task per writer appending until the deadline."""
    clock = time.perf_counter
    raw = subject.key == "raw_async"

    async def work(w: Any, h: Any, deadline: float) -> None:
        while clock() < deadline:
            t0 = clock()
            try:
                if raw:
                    await asyncio.to_thread(w.append, h, subject.next_index())
                else:
                    await w.append(h, subject.next_index())
            except Exception as exc:
                tally.failed(exc)
                continue
            tally.latencies.append(clock() - t0)

    began = clock()
    deadline = began + seconds
    await asyncio.gather(*(work(w, h, deadline) for w, h in zip(writers, handles, strict=True)))
    tally.seconds += clock() - began


async def run_concurrency(
    config: Config, seed: int, *, log: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Run workload (h); returns ``{"config", "seed", "cells": [...]}``.

    Each cell: ``{"participant", "synchronous", "mode", "writers", "appends", "seconds",
    "aps" (appends/s), "p50_ms", "p99_ms", "errors"}``. A participant that fails to open
    (e.g. openai-agents not installed) is left out with ``{"missing": {key: why}}``.
    """
    log = log or (lambda text: None)
    rng = random.Random(f"{seed}-concurrency")
    most = max(config.writers)
    cells: list[dict[str, Any]] = []
    missing: dict[str, str] = {}
    for sync in config.synchronous:
        with tempfile.TemporaryDirectory(prefix=f"agentsession-bench-h-{sync}-") as tmp:
            subjects: dict[str, _Subject] = {}
            for key in config.participants:
                subject = _Subject(key, Path(tmp), SETTINGS[sync], most)
                try:
                    await subject.open()
                except Exception as exc:
                    missing[key] = repr(exc)[:200]
                    await subject.close()
                    continue
                subjects[key] = subject
            tallies = {
                (k, m, n): Tally() for k in subjects for m in config.modes for n in config.writers
            }
            try:
                for r in range(config.rounds):
                    order = list(tallies)
                    rng.shuffle(order)
                    for key, mode, n in order:
                        subject = subjects[key]
                        writers = subject.writers(n)
                        handles = subject.handles(mode, n)
                        tally = tallies[(key, mode, n)]
                        if subject.asynchronous:
                            await _tasks(subject, writers, handles, config.seconds, tally)
                        else:
                            await asyncio.to_thread(
                                _threads, subject, writers, handles, config.seconds, tally
                            )
                        for w in writers:
                            if w is not subject.p:
                                w.db.close()
                    log(f"concurrency {sync}: round {r + 1} of {config.rounds} done")
            finally:
                for subject in subjects.values():
                    await subject.close()
            for (key, mode, n), tally in tallies.items():
                cell = {"participant": key, "synchronous": sync, "mode": mode, "writers": n}
                cells.append({**cell, **tally.entry()})
    return {
        "workload": "h",
        "config": asdict(config),
        "seed": seed,
        "cells": cells,
        "missing": missing,
    }


# ============================================================================ report


def _index(cells: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str, int], Mapping]:
    return {(c["participant"], c["synchronous"], c["mode"], c["writers"]): c for c in cells}


def baseline_ratio(cells: Sequence[Mapping[str, Any]], cell: Mapping[str, Any]) -> float | None:
    """A cell's appends/s divided by its baseline's (sync: raw; async: raw_async) at the
    same setting, mode and writer count; None when the baseline is missing."""
    base = PARTICIPANTS.get(cell["participant"], ("", False, "raw"))[2]
    other = _index(cells).get((base, cell["synchronous"], cell["mode"], cell["writers"]))
    return report.ratio(cell.get("aps"), None if other is None else other.get("aps"))


def targets(results: Mapping[str, Any]) -> list[report.Target]:
    """The issue's targets for 32 writers on distinct sessions at FULL, for each
    agentsession API: >= 5x openai-agents SQLiteSession, >= 3x raw (1 tx per append)."""
    index = _index(results.get("cells", []))
    out = []
    for who in ("agentsession", "agentsession_async"):
        ours = index.get((who, "FULL", "distinct", 32), {})
        for peer, factor in (("openai_agents", 5.0), ("raw", 3.0)):
            other = index.get((peer, "FULL", "distinct", 32), {})
            r = report.ratio(ours.get("aps"), other.get("aps"))
            detail = f"{ours.get('aps', 0):,.0f} vs {other.get('aps', 0):,.0f} appends/s"
            out.append(
                report._target(
                    "wal-full",
                    PARTICIPANTS[who][0],
                    f"32 writers, distinct sessions: appends/s vs {PARTICIPANTS[peer][0]}",
                    r,
                    at_least=factor,
                    detail=detail,
                )
            )
    return out


def markdown(results: Mapping[str, Any]) -> str:
    """Workload (h) as markdown: appends/s (ratio to baseline) and p50/p99 ms per cell,
    then its targets."""
    cells = results.get("cells", [])
    cfg = results.get("config", {})
    keys = [k for k in PARTICIPANTS if any(c["participant"] == k for c in cells)]
    lines = [
        "### (h) Concurrent writers in-process",
        "",
        f"{cfg.get('seconds', '?')} s per cell x {cfg.get('rounds', '?')} rounds, cells in a "
        f"seeded random order per round (seed {results.get('seed')}). Cell: appends/s "
        "(ratio to its baseline: sync APIs to raw sqlite3 with threads, async APIs to raw "
        "sqlite3 through asyncio.to_thread) and p50 / p99 ms of one append.",
        "",
        "| synchronous | sessions | writers | "
        + " | ".join(PARTICIPANTS[k][0] for k in keys)
        + " |",
        "|---|---|--:|" + "---|" * len(keys),
    ]
    index = _index(cells)
    combos = sorted(
        {(c["synchronous"], c["mode"], c["writers"]) for c in cells},
        key=lambda t: (t[0] != "FULL", t[1] != "distinct", t[2]),
    )
    for sync, mode, n in combos:
        row = []
        for k in keys:
            c = index.get((k, sync, mode, n))
            if c is None or not c.get("appends"):
                row.append("n/a" if c is None else f"failed: {c.get('first_error')}")
                continue
            r = report.fmt_ratio(baseline_ratio(cells, c))
            err = f", {c['errors']} errors" if c.get("errors") else ""
            row.append(f"{c['aps']:,.0f} ({r}); {c['p50_ms']:.2f} / {c['p99_ms']:.1f} ms{err}")
        label = "each its own" if mode == "distinct" else "all on one"
        lines.append(f"| {sync} | {label} | {n} | " + " | ".join(row) + " |")
    for key, why in results.get("missing", {}).items():
        lines.append(f"\n{key}: not run: {why}")
    lines += ["", *report.target_lines(targets(results)), ""]
    return "\n".join(lines) + "\n"


def plot(results: Mapping[str, Any], path: Path) -> bool:
    """Appends/s versus writers (PNG), a panel per setting and mode; False if empty."""
    cells = results.get("cells", [])
    if not cells:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    syncs = sorted({c["synchronous"] for c in cells}, key=lambda s: s != "FULL")
    modes = [m for m in MODES if any(c["mode"] == m for c in cells)]
    fig, axes = plt.subplots(
        len(modes), len(syncs), figsize=(6 * len(syncs), 4.5 * len(modes)), squeeze=False
    )
    for col, sync in enumerate(syncs):
        for row, mode in enumerate(modes):
            ax = axes[row][col]
            for key, (label, _, _) in PARTICIPANTS.items():
                pts = sorted(
                    (c["writers"], c["aps"])
                    for c in cells
                    if c["participant"] == key
                    and c["synchronous"] == sync
                    and c["mode"] == mode
                    and c.get("appends")
                )
                if pts:
                    style = "--" if key.startswith("raw") else "-"
                    ax.plot(
                        [p[0] for p in pts], [p[1] for p in pts], style, marker="o", label=label
                    )
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(sorted({c["writers"] for c in cells}))
            ax.set_xticklabels([str(n) for n in sorted({c["writers"] for c in cells})])
            ax.set_xlabel("concurrent writers")
            ax.set_ylabel("appends/s")
            where = "each on its own session" if mode == "distinct" else "all on one session"
            ax.set_title(f"WAL + {sync}, {where}", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Concurrent writers in one process (dashed: raw sqlite3 baselines)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
