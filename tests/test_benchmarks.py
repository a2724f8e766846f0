"""The benchmark runner's pure parts: statistics, ratios, targets, markdown, scheduling.

Nothing here times a store or needs the peers (they live in ``benchmarks/.venv``); the
benchmark itself is ``make bench``. Timings never live in unit tests.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

#: The growth workloads the issue asks for (benchmarks/growth.py).
GROWTH_WORKLOADS = [
    "add_run_step",
    "finish_run",
    "get_run",
    "restore_session",
    "find_tool_call_by_arguments",
    "find_tool_call_by_provider_id",
    "get_tool_history",
    "list_sessions_closed",
    "list_sessions_agent",
    "list_sessions_active",
    "build_context",
    "memory_as_of",
    "rewind_session",
]


@pytest.fixture(scope="module")
def bench() -> tuple[ModuleType, ModuleType, ModuleType]:
    """``(report, peers, run)`` imported from benchmarks/ (which is not a package)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import peers
        import report
        import run
    finally:
        sys.path.remove(str(BENCHMARKS))
    return report, peers, run


def _stats(mean: float, p50: float | None = None) -> dict[str, Any]:
    p50 = mean if p50 is None else p50
    return {"n": 10, "mean": mean, "p50": p50, "p99": mean * 2, "min": p50, "max": mean * 3}


def _results(ours_append: float = 1.5, openai_append: float = 1.0) -> dict[str, Any]:
    """A small results dictionary shaped like run.py's, with round numbers (ms)."""
    history = {
        "raw": {"100": {"append": _stats(1.0), "load_last": _stats(0.1)}},
        "agentsession": {
            "100": {"append": _stats(1.5), "load_last": _stats(0.2)},
            "50000": {"append": _stats(1.5), "load_last": _stats(0.4)},
        },
        "langgraph": {"50000": {"na": "not built: too slow"}},
    }
    history["raw"]["50000"] = {"append": _stats(1.0), "load_last": _stats(0.1)}
    return {
        "meta": {"counts": {"messages": 2000, "window": 100, "sessions": 1000}},
        "participants": {
            "raw": {"label": "raw sqlite3"},
            "agentsession": {"label": "agentsession (sync)"},
            "openai_agents": {
                "label": "openai-agents",
                "unsupported": {"list_sessions": "no list API"},
            },
            "langgraph": {"label": "LangGraph", "caveats": {"load_last": "loads everything"}},
        },
        "settings": {
            "wal-full": {
                "title": "WAL + FULL",
                "pragmas": {"raw": [{"journal_mode": "wal", "synchronous": "FULL"}]},
                "figures": {
                    "raw": {
                        "append": _stats(1.0),
                        "load_last": _stats(0.1),
                        "load_all": _stats(2.0),
                        "list": _stats(30.0, p50=1.0),  # one slow outlier in the mean
                    },
                    "agentsession": {
                        "append": _stats(ours_append),
                        "load_last": _stats(0.2),
                        "load_all": _stats(4.0),
                        "list": _stats(1.5),
                    },
                    "openai_agents": {
                        "append": _stats(openai_append),
                        "list": {"na": "no list API"},
                    },
                    "langgraph": {"append": {**_stats(100.0), "note": "time budget reached"}},
                },
                "history": history,
            }
        },
    }


def test_stats_are_milliseconds_with_nearest_rank_percentiles(bench: Any) -> None:
    """stats() turns seconds into ms; p50/p99 are nearest-rank; a note is kept."""
    report, _, _ = bench
    samples = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    s = report.stats(samples, note="why")
    assert s["n"] == 100
    assert s["mean"] == pytest.approx(50.5)
    assert s["p50"] == pytest.approx(50.0)
    assert s["p99"] == pytest.approx(99.0)
    assert (s["min"], s["max"]) == (pytest.approx(1.0), pytest.approx(100.0))
    assert s["note"] == "why"
    assert report.stats([0.002])["p99"] == pytest.approx(2.0)
    with pytest.raises(ValueError):
        report.stats([])


def test_ratio_and_formatting(bench: Any) -> None:
    """Ratios are None when a side is missing; numbers print with 3 significant digits."""
    report, _, _ = bench
    assert report.ratio(3.0, 1.5) == 2.0
    assert report.ratio(None, 1.0) is None
    assert report.ratio(1.0, 0.0) is None
    assert [report.fmt_ms(x) for x in (0.01234, 1.234, 12.34, 123.4, 12345.0, None)] == [
        "0.0123",
        "1.23",
        "12.3",
        "123",
        "12,345",
        "n/a",
    ]
    assert [report.fmt_ratio(x) for x in (1.234, 12.34, 1234.0, None)] == [
        "1.23x",
        "12.3x",
        "1,234x",
        "n/a",
    ]


def test_targets_met_missed_and_not_available(bench: Any) -> None:
    """Each target is met, missed, or n/a (a peer or figure missing), judged on medians."""
    report, _, _ = bench
    targets = {t.name: t for t in report.check_targets(_results(ours_append=1.5))}
    assert targets["append vs raw sqlite3"].met is True
    assert targets["append vs raw sqlite3"].value == pytest.approx(1.5)
    assert "1.50 vs 1.00 ms" in targets["append vs raw sqlite3"].detail
    slower_than_openai = targets["append faster than openai-agents"]
    assert slower_than_openai.met is False and slower_than_openai.limit == ">= 1.5x"
    assert targets["append faster than LangGraph"].met is True  # 100 / 1.5 >= 50
    assert targets["append faster than adk_sqlite"].met is None  # not in this run
    assert targets["last-20 read vs raw sqlite3"].met is True  # 2x <= 3x
    worst = targets["last-20 read vs raw sqlite3, worst history length"]
    assert (worst.value, worst.met) == (pytest.approx(4.0), False)
    assert "50,000" in worst.detail
    flat = targets["last-20 read flat over history length"]
    assert (flat.value, flat.met) == (pytest.approx(2.0), False)
    assert targets["full load of 2,000 vs raw sqlite3"].met is False  # 2x > 1.5x
    listing = targets["list of 1,000 sessions vs raw sqlite3"]
    assert listing.met is True  # medians: 1.5x <= 2x, whatever the outlier did to the mean
    assert listing.value == pytest.approx(1.5)
    assert "ratio of means 0.05x" in listing.detail
    assert {t.participant for t in targets.values()} == {"agentsession (sync)"}
    assert report.check_targets(_results(ours_append=2.5))[0].met is False


def test_markdown_shows_ratios_na_and_notes(bench: Any) -> None:
    """The markdown has each figure with its ratio to raw, n/a with reasons, and notes."""
    report, _, _ = bench
    md = report.render_markdown(_results())
    assert "| (a) append, mean | 1.00 (1.00x) | 1.50 (1.50x) | 1.00 (1.00x) | 100‡ (100x) |" in md
    assert "| (a) append, messages 1,901-2,000, mean |" in md
    assert "| (d) list 1,000 sessions, p50 | 1.00 (1.00x) | 1.50 (1.50x) | n/a | – |" in md
    # Speed-up of agentsession over each peer: peer time / ours.
    assert "| (a) append, mean | 0.67x | 66.7x |" in md
    assert "| 50,000 | 1.00 / 0.1 | 1.50 (1.50x) / 0.4 (4.00x) | n/a |" in md
    assert "openai-agents, list_sessions: n/a — no list API." in md
    assert "LangGraph, load_last: loads everything." in md
    assert "wal-full, langgraph, history 50,000: n/a — not built: too slow." in md
    assert "‡ wal-full, langgraph, append: time budget reached." in md
    assert "| **missed** |" in md and "| met |" in md
    assert "| raw sqlite3 | wal / FULL |" in md


def test_labels_follow_the_run_counts(bench: Any) -> None:
    """A --quick run's tables name its own counts, not the issue's."""
    report, _, _ = bench
    results = _results()
    results["meta"]["counts"] = {"messages": 200, "window": 20, "sessions": 50}
    labels = [label for _, _, label in report.figure_rows(results)]
    assert "(a) append, messages 181-200, mean" in labels
    assert "(d) list 50 sessions, p50" in labels


def test_plot_needs_history(bench: Any, tmp_path: Path) -> None:
    """No equal-durability history, no plot (and no matplotlib import)."""
    report, _, _ = bench
    assert report.plot_history({"settings": {}}, tmp_path / "h.png") is False


def test_messages_are_about_200_bytes_with_mixed_roles(bench: Any) -> None:
    """The workload's messages: ~200 bytes of UTF-8 with Chinese text, several roles."""
    _, peers, _ = bench
    sizes = {len(peers.text(i).encode()) for i in range(50)}
    assert all(180 <= n <= 260 for n in sizes)
    assert any(ord(ch) > 0x4E00 for ch in peers.text(0))
    assert {peers.role(i) for i in range(7)} == {"user", "assistant", "system"}


def test_defaults_equal_to_a_shared_setting_are_not_rerun(bench: Any) -> None:
    """A participant whose defaults read back as WAL/FULL reuses the wal-full figures."""
    _, peers, run = bench
    shared = [peers.WAL_FULL, peers.WAL_NORMAL]
    assert run._same_as([{"journal_mode": "wal", "synchronous": "FULL"}], shared) == "wal-full"
    assert run._same_as([{"journal_mode": "delete", "synchronous": "FULL"}], shared) is None
    assert run._same_as([], shared) is None


class _Fake:
    """A participant stand-in that records the order of its calls (no store, no timing)."""

    def __init__(self, key: str, log: list[str], fail_at: int | None = None) -> None:
        self.key, self.log, self.fail_at = key, log, fail_at

    def op(self, i: int) -> None:
        if i == self.fail_at:
            raise RuntimeError("boom")
        self.log.append(f"{self.key}{i}")

    async def aop(self, i: int) -> None:
        self.op(i)


def test_round_robin_interleaves_and_stops_a_failing_participant(bench: Any) -> None:
    """Calls alternate participant by participant; an error ends that one's series only."""
    _, _, run = bench
    log: list[str] = []
    a, b = _Fake("a", log), _Fake("b", log, fail_at=1)
    series = asyncio.run(
        run.round_robin([a, b], 3, lambda p, i: p.op(i) if p.key == "a" else p.aop(i), budget_s=60)
    )
    assert log == ["a0", "b0", "a1", "a2"]
    assert len(series["a"].samples) == 3 and series["a"].error is None
    assert len(series["b"].samples) == 1 and "boom" in series["b"].error
    assert "failed after 1" in series["b"].entry()["note"]


def test_round_robin_budget_keeps_a_minimum_of_samples(bench: Any) -> None:
    """A participant over its time budget still gets MIN_SAMPLES, then stops with a note."""
    _, _, run = bench
    log: list[str] = []
    series = asyncio.run(run.round_robin([_Fake("a", log)], 20, lambda p, i: p.op(i), budget_s=0.0))
    assert len(series["a"].samples) == run.MIN_SAMPLES
    assert "time budget" in series["a"].note


@pytest.fixture(scope="module")
def growth() -> ModuleType:
    """benchmarks/growth.py (cost versus size), imported as a module."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import growth
    finally:
        sys.path.remove(str(BENCHMARKS))
    return growth


def test_growth_times_sizes_round_robin_and_flags_a_missed_goal(growth: ModuleType) -> None:
    """growth.py times call i at every size before call i + 1 (the first size rotating),
    runs a Prepared call's untimed step right before it, and marks a factor over the
    goal as missed."""
    order: list[Any] = []

    @contextmanager
    def fake(size: int, samples: int) -> Iterator[list[Any]]:
        yield [lambda: order.append(size)] * samples

    seconds = growth.seconds_per_call(growth.Workload("fake", fake, (1, 2, 3), "things"), 3)
    assert order == [1, 2, 3, 2, 3, 1, 3, 1, 2] and sorted(seconds) == [1, 2, 3]

    @contextmanager
    def prepared(size: int, samples: int) -> Iterator[list[Any]]:
        before, call = (lambda: order.append(("before", size))), (lambda: order.append(size))
        yield [growth.Prepared(before, call)] * samples

    order.clear()
    growth.seconds_per_call(growth.Workload("prepared", prepared, (1, 2), "things"), 1)
    assert order == [("before", 1), 1, ("before", 2), 2]
    row = {
        "workload": "fake",
        "unit": "things",
        "ms": {"1": 1.0, "2": 1.5, "3": 2.5},
        "factor": 2.5,
        "sizes": [1, 2, 3],
    }
    sweep = {"due": 7, "batch": 100, "before": 2.0, "after": 0.5}
    text = growth.markdown([row], {"journal_mode": "wal", "synchronous": "FULL"}, 3, sweep)
    assert "| workload | N counts | 1 | 2 | 3 | 3 vs 1 (goal <= 2x) | 3 vs 2 |" in text
    assert "| `fake` | things | 1.00 | 1.50 | 2.50 | 2.50x (MISSED) | 1.67x |" in text
    assert "`sweep_expired` of 7 due sessions" in text and "0.50 100 sessions" in text


def test_growth_has_the_workloads_of_the_issue_at_10_1000_and_20000(growth: ModuleType) -> None:
    """One table of workloads (no second growth script), each at 10 / 1,000 / 20,000."""
    names = {w.name for w in growth.WORKLOADS}
    assert names >= set(GROWTH_WORKLOADS)
    assert all(w.sizes == (10, 1_000, 20_000) for w in growth.WORKLOADS)


@pytest.mark.parametrize("name", GROWTH_WORKLOADS)
def test_growth_workload_runs_at_tiny_sizes(growth: ModuleType, name: str) -> None:
    """Each workload builds its state and makes its calls (which check their answers) at
    sizes 2 and 5; a number per size comes back. No timing is asserted."""
    (workload,) = [w for w in growth.WORKLOADS if w.name == name]
    tiny = growth.Workload(name, workload.prepare, (2, 5), workload.unit)
    seconds = growth.seconds_per_call(tiny, 2)
    assert sorted(seconds) == [2, 5] and all(s > 0 for s in seconds.values())


def test_growth_sweep_runs_before_and_after(growth: ModuleType) -> None:
    """The sweep section expires every due session, one per transaction and batched,
    and leaves the sweep's batch size as it was."""
    batch = growth.lifecycle.SWEEP_BATCH
    seconds = growth.measure_sweep(3)
    assert sorted(seconds) == ["after", "before"] and all(s > 0 for s in seconds.values())
    assert batch == growth.lifecycle.SWEEP_BATCH


def test_make_bench_runs_the_growth_section(bench: Any, growth: ModuleType) -> None:
    """run.py's default workloads include (g), cost versus size, rendered by growth.py."""
    _, _, run = bench
    assert "g" in run.parse_args([]).workloads
    document = {
        "settings": {"journal_mode": "wal", "synchronous": "FULL"},
        "samples": 2,
        "goal": 2.0,
        "results": [],
        "sweep": None,
    }
    assert growth.render(document).startswith("Cost versus size, SQLite (journal_mode=wal")


def test_raw_ids_are_random_128_bit_ids_as_agentsession_makes_them(bench: Any) -> None:
    """Raw sqlite3 keys rows with ids of agentsession's shape and randomness, not a counter."""
    from agentsession.ids import is_id

    _, peers, _ = bench
    ids = [peers.RawSQLite._id("msg") for _ in range(100)]
    assert all(is_id(i, "msg") for i in ids)
    assert len(set(ids)) == 100 and ids != sorted(ids)


def test_raw_restore_reads_runs_and_tool_calls(bench: Any, tmp_path: Path) -> None:
    """The restored session holds runs and tool calls; raw fetches and decodes them all
    (50 messages + RESTORE_RUNS runs + their calls)."""
    _, peers, _ = bench
    raw = peers.RawSQLite(tmp_path, peers.WAL_FULL)
    raw.open()
    try:
        sid = raw.new_session()
        raw.append_batch(sid, 0, 60)
        assert raw.restore(sid) == 50
        raw.prepare_restore(sid)
        runs, calls = peers.RESTORE_RUNS, peers.RESTORE_RUNS * peers.RESTORE_CALLS
        assert raw.restore(sid) == 50 + runs + calls
    finally:
        raw.close()


def test_raw_writes_what_the_store_writes(bench: Any, tmp_path: Path) -> None:
    """The raw baseline does the store's work of today: an append indexes its text for
    search (the FTS5 trigram table finds it), a memory update keeps one history row per
    version at the session's message count (issue #30: same work, same statements)."""
    _, peers, _ = bench
    raw = peers.RawSQLite(tmp_path, peers.WAL_NORMAL)
    raw.open()
    try:
        sid = raw.new_session()
        raw.append_batch(sid, 0, 3)
        raw.append(sid, 3)
        texts = raw.db.execute("SELECT seq, role, text FROM search_texts ORDER BY seq").fetchall()
        assert texts == [(i + 1, peers.role(i), peers.text(i)) for i in range(4)]
        found = raw.db.execute(
            "SELECT rowid FROM search_fts WHERE text LIKE ?", (f"%{peers.text(2)[:12]}%",)
        ).fetchall()
        assert len(found) == 1
        raw.update_memory(sid, 0)
        raw.update_memory(sid, 1)  # same message count: replaces the older row
        history = raw.db.execute("SELECT version, at_seq FROM memory_history").fetchall()
        assert len(history) == 1 and history[0][1] == 4
    finally:
        raw.close()


def test_outputs_are_written_without_matplotlib(
    bench: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without matplotlib a run still writes results.json and results.md (no PNG, and
    the markdown says why): a finished run is never lost to a plot."""
    _, _, run = bench
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails, find_spec: None
    markdown = run.write_outputs(_results(), tmp_path)
    assert (tmp_path / "results.json").exists() and (tmp_path / "results.md").exists()
    assert "matplotlib is not installed" in markdown
    assert not list(tmp_path.glob("*.png"))


def test_round_robin_shuffles_the_order_per_round_with_a_seed(bench: Any) -> None:
    """With an rng, each round's order is shuffled, and the same seed gives the same order."""
    import random

    _, _, run = bench

    def order(seed: int) -> list[str]:
        log: list[str] = []
        fakes = [_Fake(k, log) for k in "abcd"]
        asyncio.run(
            run.round_robin(fakes, 8, lambda p, i: p.op(i), budget_s=60, rng=random.Random(seed))
        )
        return log

    first = order(1)
    assert first == order(1)
    rounds = [tuple(x[0] for x in first[i : i + 4]) for i in range(0, 32, 4)]
    assert len(set(rounds)) > 1 and all(sorted(r) == list("abcd") for r in rounds)


def test_round_robin_together_stops_everyone_at_the_same_count(
    bench: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(d)'s creates: when one participant reaches its budget, all stop after that round,
    so every participant lists the same number of sessions. (A fake clock: the slow
    participant's calls take 10 "seconds", the fast one's none.)"""
    _, _, run = bench
    log: list[str] = []
    slow, fast = _Fake("slow", log), _Fake("fast", log)
    now = [0.0]
    monkeypatch.setattr(run.time, "perf_counter", lambda: now[0])

    def op(p: Any, i: int) -> None:
        p.op(i)
        now[0] += 10.0 if p.key == "slow" else 0.0

    series = asyncio.run(run.round_robin([slow, fast], 50, op, budget_s=25.0, together=True))
    assert len(series["slow"].samples) == len(series["fast"].samples) == run.MIN_SAMPLES
    assert "time budget" in series["slow"].note
    assert "stopped with the others" in series["fast"].note


def test_async_apis_divide_by_the_async_baseline_and_default_by_wal_full(bench: Any) -> None:
    """An async participant's ratio is to raw_async; the default block divides by the
    baseline at WAL + FULL, not raw at its own default."""
    report, _, _ = bench
    results = _results()
    results["participants"]["raw_async"] = {"label": "raw sqlite3 (async)", "asynchronous": True}
    results["participants"]["agentsession_async"] = {"label": "ours async", "asynchronous": True}
    figures = results["settings"]["wal-full"]["figures"]
    figures["raw_async"] = {"append": _stats(2.0), "load_last": _stats(0.2)}
    figures["agentsession_async"] = {"append": _stats(3.0), "load_last": _stats(0.3)}
    assert report.baseline_key(results, "agentsession_async") == "raw_async"
    assert report.baseline_key(results, "agentsession") == "raw"
    targets = [t for t in report.check_targets(results) if t.participant == "ours async"]
    append = next(t for t in targets if t.name.startswith("append vs"))
    assert append.name == "append vs raw sqlite3 (async)" and append.value == pytest.approx(1.5)
    assert append.limit == "<= 1.6x"
    results["settings"]["default"] = {
        "figures": {"raw": {"append": _stats(10.0)}, "agentsession": {"append": _stats(2.0)}}
    }
    assert report.divisor(results, "default", "agentsession")["append"]["mean"] == 1.0
    md = report.render_markdown(results)
    assert "not raw at its own default" in md


def test_concurrency_ratios_and_targets(bench: Any) -> None:
    """(h): each cell is divided by its baseline (sync: raw, async: raw_async); the
    32-writer targets compare with openai-agents (>= 5x) and raw (>= 3x)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import concurrency
    finally:
        sys.path.remove(str(BENCHMARKS))

    def cell(who: str, aps: float) -> dict[str, Any]:
        return {
            "participant": who,
            "synchronous": "FULL",
            "mode": "distinct",
            "writers": 32,
            "appends": 10,
            "aps": aps,
            "p50_ms": 1.0,
            "p99_ms": 2.0,
            "errors": 0,
        }

    cells = [
        cell("raw", 100),
        cell("agentsession", 400),
        cell("raw_async", 50),
        cell("agentsession_async", 200),
        cell("openai_agents", 100),
    ]
    assert concurrency.baseline_ratio(cells, cells[1]) == pytest.approx(4.0)
    assert concurrency.baseline_ratio(cells, cells[3]) == pytest.approx(4.0)
    results = {"cells": cells, "config": {}, "seed": 1}
    met = {(t.participant, t.name.split(" vs ")[1]): t for t in concurrency.targets(results)}
    sync = concurrency.PARTICIPANTS["agentsession"][0]
    assert met[(sync, concurrency.PARTICIPANTS["openai_agents"][0])].met is False  # 4x < 5x
    assert met[(sync, concurrency.PARTICIPANTS["raw"][0])].met is True  # 4x >= 3x
    assert "| FULL | each its own | 32 |" in concurrency.markdown(results)


def test_http_figures_are_ratios_to_the_minimal_app(bench: Any) -> None:
    """(f): serve's cells are divided by the minimal app's at the same operation,
    setting and connections; 1 connection at FULL needs 0.8x, 32 connections 2x and
    p99 < 100 ms."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import http_load
    finally:
        sys.path.remove(str(BENCHMARKS))

    def cell(service: str, conns: int, rps: float, p99: float) -> dict[str, Any]:
        return {
            "service": service,
            "operation": "append-many",
            "synchronous": "FULL",
            "connections": conns,
            "workers": 1,
            "rps": rps,
            "p99_ms": p99,
        }

    cells = [
        cell("agentsession", 1, 70, 5),
        cell("minimal", 1, 100, 4),
        cell("agentsession", 32, 900, 120),
        cell("minimal", 32, 400, 200),
    ]
    assert http_load.baseline_of(cells, cells[0]) is cells[1]
    targets = {t.name: t for t in http_load.targets({"cells": cells}) if t.setting == "wal-full"}
    assert targets["HTTP append, 1 connection, vs the minimal app"].met is False  # 0.7x
    assert targets["HTTP append, 32 connections, vs the minimal app"].met is True  # 2.25x
    assert targets["HTTP append, 32 connections, p99 (ms, not a ratio)"].met is False


def test_http_cells_alternate_the_services_round_by_round(
    bench: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(f) measures a cell in rounds, the services taking turns (the order reversed
    every other round, the warm-up in the first only): a busy spell of a shared machine
    falls on both. The cell is the rounds' sum (rps) and the median of their latency."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import http_load
    finally:
        sys.path.remove(str(BENCHMARKS))
    calls: list[tuple[str, bool]] = []
    rps = {"agentsession": iter([100, 300, 200]), "minimal": iter([50, 50, 80])}

    def run_cell(wrk: str, service: Any, op: str, config: Any, n: int, *, warm_up: bool) -> Any:
        calls.append((service.kind, warm_up))
        ok = next(rps[service.kind])
        return {
            "service": service.kind,
            "seconds": 1.0,
            "responses": ok,
            "ok_2xx": ok,
            "non_2xx": 0,
            "socket_errors_total": 0,
            "rps": float(ok),
            "p50_ms": ok / 10,
            "p90_ms": 1.0,
            "p99_ms": 2.0,
            "p999_ms": 3.0,
            "mean_ms": 1.0,
            "max_ms": ok,
            "statuses": {201: ok},
            "socket_errors": {"connect": 0},
            "problems": [],
            "loadavg_1min": [1.0, 2.0],
        }

    monkeypatch.setattr(http_load, "run_cell", run_cell)
    services = [http_load.Service("", "", 1, "FULL", Path(), Path(), kind=k) for k in rps]
    config = http_load.Config(rounds=3)
    ours, base = http_load.run_rounds("wrk", services, "append-many", config, 1)
    assert calls == [
        ("agentsession", True),
        ("minimal", True),
        ("minimal", False),
        ("agentsession", False),
        ("agentsession", False),
        ("minimal", False),
    ]
    assert ours["rps"] == 200.0 and ours["seconds"] == 3.0 and ours["p50_ms"] == 20.0
    assert base["rps"] == 60.0 and base["statuses"] == {201: 180} and base["rounds"] == 3
    assert ours["max_ms"] == 300 and ours["rps_rounds"] == [100.0, 300.0, 200.0]


def test_http_server_cpu_counts_its_worker_processes(bench: Any) -> None:
    """(f)'s CPU per request counts the server's process and its live children (the
    workers of ``serve --workers N``): a child that burns CPU shows in its parent's."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import http_load
    finally:
        sys.path.remove(str(BENCHMARKS))
    child = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    child += "time.sleep(60)"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys, time\n"
            f"subprocess.Popen([sys.executable, '-c', {child!r}])\ntime.sleep(60)",
        ],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        used = http_load.cpu_seconds(parent.pid) or 0.0
        while used < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
            used = http_load.cpu_seconds(parent.pid) or 0.0
        assert used >= 0.3
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    assert http_load.cpu_seconds(None) is None


def test_raw_async_baseline_does_the_raw_work(bench: Any, tmp_path: Path) -> None:
    """raw_async's awaited calls really write (its bodies call RawSQLite's, not its own
    coroutines, which would be created and never awaited)."""
    _, peers, _ = bench

    async def scenario() -> tuple[int, int]:
        raw = peers.RawSQLiteAsync(tmp_path, peers.WAL_NORMAL)
        raw.open()
        try:
            sid = await raw.new_session()
            await raw.append(sid, 0)
            await raw.append(sid, 1)
            created = await raw.create_with(5)
            return await raw.load_all(sid), await raw.load_all(created)
        finally:
            raw.close()

    assert asyncio.run(scenario()) == (2, 5)


def test_disks_side_by_side_with_ratios_per_disk_and_their_targets(bench: Any) -> None:
    """(h) and (f) on three disks: each disk's figures are divided by the baselines of
    the same disk; the native column is the main run's (h)/(f); a skipped disk says why;
    the targets at +2 ms and +5 ms are checked; the chart draws one bar per ratio."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import disks
    finally:
        sys.path.remove(str(BENCHMARKS))

    def h(scale: float) -> dict[str, Any]:
        aps = {"raw": 100, "agentsession": 100 * scale, "raw_async": 80}
        aps |= {"agentsession_async": 90 * scale, "openai_agents": 10}
        return {
            "cells": [
                {"participant": who, "synchronous": "FULL", "mode": "distinct", "writers": n}
                | {"appends": 10, "aps": a, "p50_ms": 1.0, "p99_ms": 2.0, "errors": 0}
                for who, a in aps.items()
                for n in (1, 8, 32)
            ]
        }

    def f(ours: float) -> dict[str, Any]:
        return {
            "cells": [
                {"service": s, "operation": "append-many", "synchronous": "FULL"}
                | {"connections": n, "workers": 1, "rps": rps}
                for s, rps in (("agentsession", ours), ("minimal", 100.0))
                for n in (1, 8, 32)
            ]
        }

    results = {
        "concurrency": h(0.2),  # native: 2x openai-agents
        "http": f(50.0),
        "disks": {
            "library": "built with cc",
            "disks": {
                "+2ms": {"delay_ms": 2.0, "concurrency": h(1.0), "http": f(500.0)},
                "+5ms": {"skipped": "no C compiler found"},
            },
        },
    }
    met = {
        (t.setting.split()[0], t.participant, t.name.split(",")[0]): t.met
        for t in disks.targets(results)
    }
    sync = disks.concurrency.PARTICIPANTS["agentsession"][0]
    assert met[("+2ms", sync, "32 writers")] is True  # 10x >= 8x
    assert met[("+2ms", sync, "8 writers")] is True  # 10x >= 5x
    assert met[("+5ms", sync, "32 writers")] is None  # skipped: n/a
    assert met[("+2ms", "serve, 1 worker", "HTTP append")] is True  # 5x >= 4x
    text = disks.markdown(results)
    assert "| native | +2ms | +5ms |" in text
    assert "- disk +5ms: **skipped**: no C compiler found" in text
    assert "| 32 | agentsession sync, threads (to openai-agents SQLiteSession, tasks) " in text
    assert "20 (2.00x) | 100 (10.0x) | n/a |" in text
    assert "| 32 | serve, 1 worker | 50 (0.50x) | 500 (5.00x) | n/a |" in text
    assert "  +2ms  32 writers, sync / openai-agents  | " + "#" * 20 + " 10.0x" in text


def test_run_takes_the_three_disks_and_refuses_others(bench: Any) -> None:
    _, _, run = bench
    assert run.parse_args([]).disks == "native,+2ms,+5ms"
    assert run.parse_args(["--disks", "native"]).disks == "native"
    with pytest.raises(SystemExit):
        run.parse_args(["--disks", "+3ms"])


def test_pools_section_judges_new_connections_per_1000_appends_and_workers(bench: Any) -> None:
    """make bench-stores' pools section: at most 1 new server connection per 1,000
    appends, and 2 workers at least 1.3x one worker; a missing server is skipped."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import pools
    finally:
        sys.path.remove(str(BENCHMARKS))

    def figures(rps: float, appends: int, new: int) -> dict[str, Any]:
        return {"rps": [rps], "mean_rps": rps, "appends": appends, "new_connections": new} | {
            "problems": []
        }

    results = {
        "config": asdict(pools.Config()),
        "servers": {
            "postgres": {
                "version": "PostgreSQL 15",
                "gain": 1.25,
                "workers": {
                    "1": figures(400, 4000, 0) | {"per_1000": 0.0, "connections_in_all": 30},
                    "2": figures(500, 5000, 10) | {"per_1000": 2.0, "connections_in_all": 70},
                },
            },
            "mysql": {"skipped": "mariadbd not installed"},
        },
    }
    text = pools.markdown(results)
    assert "| PostgreSQL 15 | 1 worker | 400 | 4,000 | 0 | 0 | met | 30 |" in text
    assert "| PostgreSQL 15 | 2 workers | 500 | 5,000 | 10 | 2 | MISSED | 70 |" in text
    assert "| mysql | skipped: mariadbd not installed |" in text
    assert "2 workers 1.250x 1 worker (MISSED)" in text


def test_metafilter_bench_counts_at_tiny_sizes_and_flags_growth() -> None:
    """benchmarks/metafilter.py: the counts it times find the filter's sessions at two
    tiny sizes (SQLite), its ratios are growth and cost in session reads, and a count
    growing more than 2x is a missed goal."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import metafilter
    finally:
        sys.path.remove(str(BENCHMARKS))
    with tempfile.TemporaryDirectory() as tmp:
        result = metafilter.measure(lambda name: f"sqlite:///{tmp}/{name}.db", [40, 80], 1)
    assert set(result) == {"get_session", *metafilter.COUNTS}
    out = metafilter.ratios(result, [40, 80])
    assert set(out) == {
        f"{name} {suffix}"
        for name in metafilter.COUNTS
        for suffix in ("80 / 40", "in get_session at 80")
    }
    flat = {"count team 80 / 40": 1.9, "count team in get_session at 80": 50.0}
    assert metafilter._missed(flat) == []
    assert metafilter._missed({"count team 80 / 40": 2.1}) == ["count team 80 / 40: 2.1 > 2.0"]
