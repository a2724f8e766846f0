"""agentsession against raw sqlite3 and the session stores people use today, in one run.

Participants (``peers.py``, one thin adapter each): raw sqlite3 executing the statements
agentsession's SQL store executes, with ids made as agentsession makes them (the physical
limit; the baseline of every sync API), the same through ``asyncio.to_thread`` (the
baseline of every async API), agentsession's sync and async APIs in-process,
openai-agents ``SQLiteSession``, google-adk ``SqliteSessionService`` and
``DatabaseSessionService`` (sqlite+aiosqlite), and LangGraph ``SqliteSaver``. Each uses
a file-backed SQLite database of its own in a temporary directory.

Workloads (issues #5 and #14), all durations in milliseconds:

(a) append 2,000 messages (~200 bytes, mixed roles, some Chinese) one at a time to one
    session: mean, p50, p99, and the mean of messages 1-100 against 1,901-2,000;
(b) load all 2,000, and load the last 20;
(c) cost versus history length: append and last-20 read at 100, 1k, 10k and 50k
    messages (history built with each library's batch call where it has one);
(d) 1,000 sessions x 5 messages for one user: create time (session + its 5 messages)
    and list time; when one participant reaches the create budget, all stop after that
    round, so every participant lists the same count (stated in the table);
(e) working-memory update with an expected version, and a restore of (a)'s session
    after it was given 10 finished runs of 2 tool calls each (for every participant
    that records runs and tool calls; raw fetches and decodes every row it reads).
(f) over HTTP: ``agentsession serve`` (1 worker) beside the minimal FastAPI + sqlite3
    app (``minimal_app.py``), appends with 1, 8 and 32 connections under the ``wrk``
    load generator, every figure a ratio to the minimal app's (``http_load.py``; at
    FULL and NORMAL; skipped with the reason when wrk cannot be installed).
(g) cost versus size, agentsession alone (``growth.py``, also ``make bench-growth``):
    add_run_step, finish_run, get_run, restore_session, tool-call lookups and session
    listings at 10, 1,000 and 20,000 rows, each the per-call median and the factor
    20,000 vs 10 (goal: at most 2x); and the TTL sweep of 1,000 due sessions, one
    transaction per session against batched. Runs last, once, on SQLite WAL + FULL.
(h) concurrent writers in-process (``concurrency.py``): 1, 8 and 32 writers appending,
    each on its own session and all on one, at FULL and NORMAL; appends/s and p50/p99,
    each a ratio to its baseline.
(i) the inspector and the change feed (``inspector.py``, also ``make bench-inspector``):
    the inspector's newest page of a 2,000- and a 20,000-message session and its first
    Sessions page of a user with 1,000 and 10,000 sessions, each against its JSON call;
    append p50 with 100 SSE subscribers on the worker against none; an event's delay
    from its append to a subscriber. Over ``agentsession serve``, after (g).

(h) and (f) run on three disks (``disks.py``): this machine's own flush, and flushes
2 ms and 5 ms slower, as on cloud block storage (``fsyncdelay.c``, built with the C
compiler found into ``benchmarks/.build/``; the slower disks are skipped, saying why,
when there is none). Each slower disk runs in a process of its own with every
participant under the delay; ``--disks`` picks them (``native`` alone: none).

Method: operations are interleaved round-robin across participants, in a new order every
round (shuffled by ``random.Random(f"{seed}-{setting}")``, ``--seed``, recorded in
results.json), so a busy machine slows every column alike and no participant always runs
right after another's fsync.
Samples are single operations timed with ``time.perf_counter``; the garbage collector
stays on, with the objects alive before each phase frozen (``gc.freeze``), so no
participant pays for scanning another's heap. Targets are judged on medians. A participant that
exceeds a phase's time budget stops sampling there (at least 5 samples) and the figure
says so; a history length a participant cannot build within the budget is skipped and
recorded as n/a with the projected time and the reason, rather than hanging the run.

Settings: every participant runs at ``wal-full`` (WAL + synchronous=FULL) and
``wal-normal`` (WAL + synchronous=NORMAL), the PRAGMAs set on its own connections and
read back; and at its own ``default``. A participant whose defaults read back equal to
a shared setting is not run a third time: its default figures are that run's.

Output in ``--out`` (default ``benchmarks/results/``): ``results.json`` (every figure,
machine, versions, settings read back, targets), ``results.md`` (tables: each figure as
a ratio to its baseline (sync APIs to raw sqlite3, async APIs to raw sqlite3 through
``asyncio.to_thread``; the "default" block to the baseline at WAL + FULL, the durability
agentsession's default gives) and to each peer; the targets met or missed; (f)'s, (g)'s
and (h)'s tables), ``history.png`` ((c), log-log), ``concurrency.png`` ((h)). The
markdown is printed at the end.

Run: ``sh benchmarks/bench.sh [--quick]`` (creates ``benchmarks/.venv`` with the peers),
or ``benchmarks/.venv/bin/python benchmarks/run.py --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import importlib.util
import json
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import concurrency
import disks
import growth
import http_load
import inspector
import peers
import report
from peers import DEFAULT, WAL_FULL, WAL_NORMAL, Participant, Setting, call

TITLES = {
    "default": "Each at its own default settings (what a user gets out of the box)",
    "wal-full": "WAL + synchronous=FULL (equal durability: no acknowledged write lost)",
    "wal-normal": "WAL + synchronous=NORMAL (equal durability: a power loss may lose "
    "the last commits)",
}
SHORT_TITLES = {"default": "defaults", "wal-full": "WAL + FULL", "wal-normal": "WAL + NORMAL"}
MIN_SAMPLES = 5


@dataclass(frozen=True)
class Counts:
    """How much each workload does (the issue's counts, and samples per figure).

    Budgets are seconds of timed calls per participant per phase; a participant over
    budget stops sampling there (the figure says so). They keep a slow peer from taking
    the run past ~15 minutes on a 2-core machine; only LangGraph's O(history) appends
    reach the append budget in a normal run.
    """

    messages: int = 2000
    window: int = 100
    full_loads: int = 20
    last_n: int = 20
    last_reads: int = 100
    history: tuple[int, ...] = (100, 1_000, 10_000, 50_000)
    history_samples: int = 100
    sessions: int = 1000
    per_session: int = 5
    list_reads: int = 50
    memory_updates: int = 100
    restores: int = 50
    batch: int = 1000
    append_budget_s: float = 75.0
    budget_s: float = 15.0
    create_budget_s: float = 120.0
    history_budget_s: float = 5.0
    grow_budget_s: float = 30.0


QUICK = Counts(
    messages=200,
    window=20,
    full_loads=5,
    last_reads=30,
    history=(100, 1_000),
    history_samples=20,
    sessions=50,
    list_reads=5,
    memory_updates=20,
    restores=5,
    append_budget_s=10.0,
    budget_s=5.0,
    create_budget_s=10.0,
    history_budget_s=2.0,
    grow_budget_s=5.0,
)


def log(message: str) -> None:
    """Progress on stderr (stdout carries the final table)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Phase:
    """One setting's run: its participants and what they recorded."""

    setting: Setting
    parts: list[Participant]
    counts: Counts
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: dict[str, dict[str, Any]] = field(default_factory=dict)
    handles: dict[str, Any] = field(default_factory=dict)
    #: Shuffles the participants' order in every round (seeded: ``--seed``).
    rng: random.Random = field(default_factory=random.Random)
    #: Sessions each participant listed in (d) (equal for all; see workload_d).
    listed: int | None = None

    def record(self, key: str, figure: str, entry: dict[str, Any]) -> None:
        self.figures.setdefault(key, {})[figure] = entry


@dataclass
class Series:
    """Samples of one participant in one phase (seconds), and why it stopped early."""

    samples: list[float] = field(default_factory=list)
    note: str | None = None
    error: str | None = None

    def entry(self) -> dict[str, Any]:
        """The Stats dictionary (ms), or ``{"na": ...}`` when nothing was measured."""
        if self.error is not None and not self.samples:
            return {"na": f"failed: {self.error}"}
        note = (
            self.note if self.error is None else f"failed after {len(self.samples)}: {self.error}"
        )
        return report.stats(self.samples, note)


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Leave every object alive now out of garbage collection until the block ends.

    Used around each timed phase: every participant's state (ADK's in-memory events,
    LangGraph's graph, ...) is frozen, so a collection that one participant's allocations
    trigger costs what its own garbage costs, not a scan of the other participants'
    heaps. The collector stays on.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


async def round_robin(
    parts: list[Participant],
    n: int,
    op: Callable[[Participant, int], Any],
    *,
    budget_s: float,
    after: Callable[[Participant, Any], Any] | None = None,
    rng: random.Random | None = None,
    together: bool = False,
) -> dict[str, Series]:
    """Time ``n`` calls of ``op`` per participant, interleaved one by one.

    ``op(p, i)`` makes the call (a plain result or an awaitable); ``after(p, result)``
    runs untimed. A participant stops after ``budget_s`` seconds of timed calls once it
    has ``MIN_SAMPLES``, or at its first error. With ``rng`` the participants' order is
    shuffled in every round (no one always runs first, right after another's fsync);
    without, it is ``parts``' order. ``together``: when one participant reaches its
    budget, every participant stops after that round, so all made the same number of
    calls (an error still stops only the failing one).
    """
    series = {p.key: Series() for p in parts}
    active = list(parts)
    spent = dict.fromkeys(series, 0.0)
    clock = time.perf_counter
    with frozen_heap():
        for i in range(n):
            if not active:
                break
            order = list(active)
            if rng is not None:
                rng.shuffle(order)
            for p in order:
                s = series[p.key]
                try:
                    start = clock()
                    result = op(p, i)
                    if isinstance(result, Awaitable):
                        result = await result
                    elapsed = clock() - start
                    if after is not None:
                        await call(after, p, result)
                except Exception as exc:
                    s.error = repr(exc)[:300]
                    active.remove(p)
                    log(f"  {p.key}: {s.error}")
                    continue
                s.samples.append(elapsed)
                spent[p.key] += elapsed
                if spent[p.key] > budget_s and len(s.samples) >= MIN_SAMPLES and i < n - 1:
                    s.note = (
                        f"time budget of {budget_s:g} s reached after {len(s.samples):,} of {n:,}"
                    )
                    if not together:
                        active.remove(p)
                    log(f"  {p.key}: {s.note}")
            if together and any(series[p.key].note for p in active):
                for p in active:
                    series[p.key].note = series[p.key].note or (
                        f"stopped with the others after {len(series[p.key].samples):,} of {n:,}"
                    )
                break
    return series


def supporting(phase: Phase, op: str) -> list[Participant]:
    """The participants that support ``op`` (:func:`record_na` marks the others)."""
    return [p for p in phase.parts if p.supports(op)]


def record_na(phase: Phase, op: str, figure: str) -> None:
    """Record ``{"na": why}`` for ``figure`` of every participant without ``op``."""
    for p in phase.parts:
        if not p.supports(op):
            phase.record(p.key, figure, {"na": p.unsupported[op]})


async def fill(p: Participant, handle: Any, have: int, want: int, batch: int) -> None:
    """Append messages ``have..want-1`` with the batch call (untimed)."""
    while have < want:
        k = min(batch, want - have)
        await call(p.append_batch, handle, have, k)
        have += k


# ========================================================================== workloads


async def workload_a(phase: Phase) -> None:
    """(a) 2,000 single appends to one session per participant."""
    c = phase.counts
    for p in phase.parts:
        phase.handles[p.key] = await call(p.new_session)
    handles = phase.handles
    series = await round_robin(
        phase.parts,
        c.messages,
        lambda p, i: p.append(handles[p.key], i),
        budget_s=c.append_budget_s,
        rng=phase.rng,
    )
    for p in phase.parts:
        s = series[p.key]
        phase.record(p.key, "append", s.entry())
        done = len(s.samples)
        if done >= c.window:
            phase.record(p.key, "append_first", report.stats(s.samples[: c.window]))
        if done == c.messages:
            phase.record(p.key, "append_last", report.stats(s.samples[-c.window :]))
        else:
            phase.record(p.key, "append_last", {"na": f"stopped after {done:,} appends"})
            if s.error is None:
                log(f"  {p.key}: filling to {c.messages:,} messages with its batch call")
                await fill(p, handles[p.key], done, c.messages, c.batch)


async def workload_b(phase: Phase) -> None:
    """(b) load all messages of (a)'s session, and the last 20."""
    c, handles = phase.counts, phase.handles
    series = await round_robin(
        phase.parts,
        c.full_loads,
        lambda p, i: p.load_all(handles[p.key]),
        budget_s=c.budget_s,
        rng=phase.rng,
    )
    for p in phase.parts:
        phase.record(p.key, "load_all", series[p.key].entry())
    series = await round_robin(
        phase.parts,
        c.last_reads,
        lambda p, i: p.load_last(handles[p.key], c.last_n),
        budget_s=c.budget_s,
        rng=phase.rng,
    )
    for p in phase.parts:
        phase.record(p.key, "load_last", series[p.key].entry())


async def workload_e(phase: Phase) -> None:
    """(e) working-memory updates with an expected version, then restores (on (a)'s session)."""
    c, handles = phase.counts, phase.handles
    parts = supporting(phase, "update_memory")
    for p in parts:
        await call(p.before_memory, handles[p.key])
    series = await round_robin(
        parts,
        c.memory_updates,
        lambda p, i: p.update_memory(handles[p.key], i),
        budget_s=c.budget_s,
        rng=phase.rng,
    )
    for p in parts:
        phase.record(p.key, "update_memory", series[p.key].entry())
    record_na(phase, "update_memory", "update_memory")
    parts = supporting(phase, "restore")
    for p in parts:
        await call(p.prepare_restore, handles[p.key])
    series = await round_robin(
        parts,
        c.restores,
        lambda p, i: p.restore(handles[p.key]),
        budget_s=c.budget_s,
        rng=phase.rng,
    )
    for p in parts:
        phase.record(p.key, "restore", series[p.key].entry())
    record_na(phase, "restore", "restore")


@dataclass
class _Growth:
    handle: Any
    have: int = 0
    seconds_per_message: float | None = None
    stopped: str | None = None


async def _grow(p: Participant, g: _Growth, size: int, c: Counts) -> None:
    """Build ``g``'s history up to ``size`` messages, unless that would take too long."""
    remaining = size - g.have
    if remaining <= 0:
        return
    if g.seconds_per_message is not None:
        factor = (g.have + size) / (2 * g.have) if p.history_cost == "linear" and g.have else 1.0
        # x1.5: the rate was measured on a shorter history, and slow peers slow further
        # (ADK's in-memory event list, LangGraph's checkpoints); better skip than give up.
        projected = 1.5 * g.seconds_per_message * remaining * factor
        if projected > c.grow_budget_s:
            g.stopped = (
                f"not built: {remaining:,} more messages would take ~{projected:,.0f} s "
                f"({g.seconds_per_message * 1e3:.2f} ms each at {g.have:,}; budget "
                f"{c.grow_budget_s:g} s) — {p.slow_history_reason}"
            )
            return
    started = time.perf_counter()
    while g.have < size:
        k = min(c.batch, size - g.have)
        t0 = time.perf_counter()
        await call(p.append_batch, g.handle, g.have, k)
        g.seconds_per_message = (time.perf_counter() - t0) / k
        g.have += k
        if g.have < size and time.perf_counter() - started > c.grow_budget_s:
            g.stopped = (
                f"gave up building {size:,} messages after {c.grow_budget_s:g} s at "
                f"{g.have:,} — {p.slow_history_reason}"
            )
            return


async def workload_c(phase: Phase) -> None:
    """(c) append and last-20 read at each history length, on a fresh session each."""
    c = phase.counts
    growth = {p.key: _Growth(await call(p.new_session)) for p in phase.parts}
    for size in c.history:
        active = []
        for p in phase.parts:
            g = growth[p.key]
            if g.stopped is None:
                try:
                    await _grow(p, g, size, c)
                except Exception as exc:
                    g.stopped = f"failed: {exc!r}"[:300]
            if g.stopped is None:
                active.append(p)
            else:
                phase.history.setdefault(p.key, {})[str(size)] = {"na": g.stopped}
        log(f"  history {size:,}: {', '.join(p.key for p in active)}")
        appends = await round_robin(
            active,
            c.history_samples,
            lambda p, i: p.append(growth[p.key].handle, growth[p.key].have + i),
            budget_s=c.history_budget_s,
            rng=phase.rng,
        )
        for p in active:
            growth[p.key].have += len(appends[p.key].samples)
        reads = await round_robin(
            active,
            c.history_samples,
            lambda p, i: p.load_last(growth[p.key].handle, c.last_n),
            budget_s=c.history_budget_s,
            rng=phase.rng,
        )
        for p in active:
            phase.history.setdefault(p.key, {})[str(size)] = {
                "append": appends[p.key].entry(),
                "load_last": reads[p.key].entry(),
            }


async def workload_d(phase: Phase) -> None:
    """(d) 1,000 sessions of 5 messages for one user, then list them.

    Every participant creates the same number of sessions (when one reaches the time
    budget all stop after that round), so every list reads the same count.
    """
    c = phase.counts
    series = await round_robin(
        phase.parts,
        c.sessions,
        lambda p, i: p.create_with(c.per_session),
        budget_s=c.create_budget_s,
        after=lambda p, handle: p.forget(handle),
        rng=phase.rng,
        together=True,
    )
    phase.listed = max((len(s.samples) for s in series.values() if s.error is None), default=0)
    for p in phase.parts:
        phase.record(p.key, "create", series[p.key].entry())
    parts = supporting(phase, "list_sessions")
    counts: dict[str, int] = {}

    def remember(p: Participant, n: int) -> None:
        counts[p.key] = n

    series = await round_robin(
        parts, c.list_reads, lambda p, i: p.list_sessions(), budget_s=c.budget_s, after=remember
    )
    for p in parts:
        entry = series[p.key].entry()
        listed = counts.get(p.key)
        if listed is not None and listed != phase.listed and "na" not in entry:
            entry["note"] = f"listed {listed:,} sessions, not {phase.listed:,}"
        phase.record(p.key, "list", entry)
    record_na(phase, "list_sessions", "list")


#: The in-process workloads by letter, run in this order (e reuses a's session, so it
#: follows b). (f), over HTTP, and (g), cost versus size (agentsession alone), run once
#: after every setting: see :func:`run`.
WORKLOADS: dict[str, Callable[[Phase], Awaitable[None]]] = {
    "a": workload_a,
    "b": workload_b,
    "e": workload_e,
    "c": workload_c,
    "d": workload_d,
}


# ============================================================================ running


async def run_setting(
    setting: Setting,
    classes: list[type[Participant]],
    counts: Counts,
    workloads: list[str],
    seed: int = 0,
) -> Phase:
    """Run the workloads at one setting, in a fresh temporary directory."""
    with tempfile.TemporaryDirectory(prefix=f"agentsession-bench-{setting.name}-") as tmp:
        parts = [cls(Path(tmp), setting) for cls in classes]
        phase = Phase(setting, parts, counts, rng=random.Random(f"{seed}-{setting.name}"))
        try:
            for p in parts:
                await call(p.open)
            for letter in workloads:
                if "a" not in workloads and letter in ("b", "e"):
                    continue  # they read (a)'s session
                started = time.perf_counter()
                log(f"{setting.name}: workload ({letter}) ...")
                await WORKLOADS[letter](phase)
                took = time.perf_counter() - started
                log(f"{setting.name}: workload ({letter}) took {took:.1f} s")
        finally:
            for p in parts:
                await peers.close_quietly(p)
        return phase


async def probe_defaults(classes: list[type[Participant]]) -> dict[str, list[dict[str, str]]]:
    """Open each participant at its defaults, touch the database, read the PRAGMAs back."""
    observed = {}
    with tempfile.TemporaryDirectory(prefix="agentsession-bench-probe-") as tmp:
        for cls in classes:
            p = cls(Path(tmp), DEFAULT)
            try:
                await call(p.open)
                await call(p.new_session)
            finally:
                await peers.close_quietly(p)
            observed[p.key] = p.observed()
    return observed


def _same_as(observed: list[dict[str, str]], shared: list[Setting]) -> str | None:
    for s in shared:
        if observed == [{"journal_mode": s.journal_mode, "synchronous": s.synchronous}]:
            return s.name
    return None


def _block(phase: Phase) -> dict[str, Any]:
    return {
        "title": TITLES.get(phase.setting.name, phase.setting.name),
        "short_title": SHORT_TITLES.get(phase.setting.name, phase.setting.name),
        "journal_mode": phase.setting.journal_mode,
        "synchronous": phase.setting.synchronous,
        "pragmas": {p.key: p.observed() for p in phase.parts},
        "figures": phase.figures,
        "history": phase.history,
        "listed": phase.listed,
    }


def machine_info(directory: str) -> dict[str, Any]:
    """CPU model, CPU count, memory (bytes), load average, and where the databases live."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "temp_dir": directory,
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_bytes"] = int(line.split()[1]) * 1024
                break
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
        best = max(
            (m for m in mounts if directory.startswith(m[1])), key=lambda m: len(m[1]), default=None
        )
        if best is not None:
            info["temp_dir_filesystem"] = f"{best[0]} ({best[2]}) on {best[1]}"
    except OSError:
        pass
    info.setdefault("cpu", platform.processor() or platform.machine())
    return info


def versions(classes: list[type[Participant]]) -> dict[str, str]:
    """Installed versions of every participant's packages and matplotlib."""
    names = {"matplotlib"}
    for cls in classes:
        names.update(cls.packages)
    out = {}
    for name in sorted(names, key=str.lower):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every requested setting and workload; returns the results dictionary."""
    counts = QUICK if args.quick else Counts()
    wanted = set(args.participants.split(",")) if args.participants else None
    classes = [c for c in peers.PARTICIPANTS if wanted is None or c.key in wanted]
    workloads = [w for w in WORKLOADS if w in args.workloads]
    settings = {"wal-full": WAL_FULL, "wal-normal": WAL_NORMAL, "default": DEFAULT}
    names = [s for s in settings if s in args.settings.split(",")]
    started = time.perf_counter()
    results: dict[str, Any] = {
        "meta": {
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "argv": sys.argv[1:],
            "quick": args.quick,
            "seed": args.seed,
            "order": "participants shuffled in every round by random.Random(f'{seed}-{setting}')",
            "counts": asdict(counts),
            "workloads": workloads,
            "machine": machine_info(tempfile.gettempdir()),
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "versions": versions(classes),
            "shared_machine_note": "timings on a shared machine are noisy; the interleaving "
            "keeps ratios steadier than absolute times",
        },
        "participants": {
            cls.key: {
                "label": cls.label,
                "api": cls.api,
                "asynchronous": cls.asynchronous,
                "unsupported": dict(cls.unsupported),
                "caveats": dict(cls.caveats),
            }
            for cls in classes
        },
        "settings": {},
    }
    blocks: dict[str, dict[str, Any]] = {}
    shared = [settings[n] for n in names if n != "default"]
    for name in names:
        if name == "default":
            continue
        log(f"=== setting {name}")
        blocks[name] = _block(
            await run_setting(settings[name], classes, counts, workloads, args.seed)
        )
    if "default" in names:
        log("=== setting default: probing each participant's defaults")
        observed = await probe_defaults(classes)
        same = {k: s for k, o in observed.items() if (s := _same_as(o, shared)) in blocks}
        rest = [c for c in classes if c.key not in same]
        block = (
            _block(await run_setting(DEFAULT, rest, counts, workloads, args.seed)) if rest else {}
        )
        block.setdefault("title", TITLES["default"])
        block["same_as"] = same
        for key, other in same.items():
            block.setdefault("pragmas", {})[key] = observed[key]
            block.setdefault("figures", {})[key] = copy.deepcopy(
                blocks[other]["figures"].get(key, {})
            )
            if key in blocks[other]["history"]:
                block.setdefault("history", {})[key] = copy.deepcopy(blocks[other]["history"][key])
        blocks = {"default": block, **blocks}
    results["settings"] = blocks
    if "h" in args.workloads:
        log("=== workload (h): concurrent writers in-process")
        config = concurrency.QUICK if args.quick else concurrency.Config()
        results["concurrency"] = await concurrency.run_concurrency(config, args.seed, log=log)
    if "f" in args.workloads:
        log("=== workload (f): HTTP under wrk, agentsession serve vs the minimal app")
        config = http_load.QUICK if args.quick else http_load.Config()
        results["http"] = await asyncio.to_thread(http_load.run_http_load, config, log=log)
    slow = tuple(d for d in args.disks.split(",") if d.strip() and d != disks.NATIVE)
    on_disks = "".join(w for w in "hf" if w in args.workloads)
    if slow and on_disks:
        results["disks"] = disks.run_disks(
            on_disks, quick=args.quick, seed=args.seed, disks=slow, log=log
        )
    if "g" in args.workloads:
        log("=== workload (g): cost versus size (growth.py)")
        results["growth"] = growth.run_growth(
            list(growth.WORKLOADS),
            growth.QUICK_SAMPLES if args.quick else growth.SAMPLES,
            sweep_due=growth.QUICK_SWEEP_DUE if args.quick else growth.SWEEP_DUE,
        )
    if "i" in args.workloads:
        log("=== workload (i): the inspector and the change feed (inspector.py)")
        results["inspector"] = await asyncio.to_thread(inspector.run_inspector, args.quick)
    results["meta"]["wall_seconds"] = time.perf_counter() - started
    results["meta"]["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return results


def write_outputs(results: dict[str, Any], out: Path) -> str:
    """Check the targets, write results.json, results.md and history.png; return the md."""
    out.mkdir(parents=True, exist_ok=True)
    targets = report.check_targets(results)
    results["targets"] = report.targets_json(targets)
    markdown = report.render_markdown(results, targets)
    if "concurrency" in results:
        markdown += "\n" + concurrency.markdown(results["concurrency"])
    if "http" in results:
        markdown += "\n" + http_load.markdown(results["http"])
    if "disks" in results:
        markdown += "\n" + disks.markdown(results)
    if "growth" in results:
        markdown += "\n" + growth.render(results["growth"]) + "\n"
    if "inspector" in results:
        markdown += "\n" + inspector.render(results["inspector"]) + "\n"
    # The figures first: a plot that fails (matplotlib missing) must not lose a run.
    (out / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    if importlib.util.find_spec("matplotlib") is None:
        markdown += "\n(no PNG plots: matplotlib is not installed; `make bench` installs it)\n"
    else:
        if report.plot_history(results, out / "history.png"):
            markdown += "\n![cost versus history length](history.png)\n"
        if "concurrency" in results and concurrency.plot(
            results["concurrency"], out / "concurrency.png"
        ):
            markdown += "\n![concurrent writers](concurrency.png)\n"
    (out / "results.md").write_text(markdown)
    return markdown


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke test")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results",
        help="output directory (default: benchmarks/results)",
    )
    parser.add_argument(
        "--settings",
        default="wal-full,wal-normal,default",
        help="comma-separated: wal-full, wal-normal, default",
    )
    parser.add_argument(
        "--participants",
        default="",
        help="comma-separated keys (default: all): " + ", ".join(c.key for c in peers.PARTICIPANTS),
    )
    parser.add_argument(
        "--workloads",
        default="abcdefghi",
        help="letters of the workloads to run (default: abcdefghi)",
    )
    parser.add_argument(
        "--seed", type=int, default=14, help="seed of the participants' order per round"
    )
    parser.add_argument(
        "--disks",
        default=",".join(disks.DELAYS),
        help=f"disks (h) and (f) run on, comma-separated (default: {','.join(disks.DELAYS)})",
    )
    args = parser.parse_args(argv)
    unknown = set(args.disks.split(",")) - set(disks.DELAYS)
    if unknown:
        parser.error(f"unknown disks {sorted(unknown)}; known: {', '.join(disks.DELAYS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print the markdown report."""
    args = parse_args(argv)
    wall = time.perf_counter()
    results = asyncio.run(run(args))
    markdown = write_outputs(results, args.out)
    print(markdown)
    log(f"done in {time.perf_counter() - wall:.0f} s; results in {args.out}")


if __name__ == "__main__":
    main()
