"""Workloads (h) and (f) on a cloud-like disk: flushes 2 ms and 5 ms slower.

On this machine's own disk a flush costs 0.2-0.3 ms, so many writers are bound by
Python's CPU and group commit has little to share; on cloud block storage a flush costs
2-5 ms, and sharing it is what sets the throughput. ``fsyncdelay.c``
(:mod:`fsyncdelay`), loaded with ``LD_PRELOAD``, adds ``FSYNC_DELAY_MS`` to every
``fsync``/``fdatasync`` of a process. The delay applies to whole processes, so each
slower disk's set of workloads runs in a child process of its own (this module's
command line, :func:`child`) with the variables set: the concurrency workload (h) with
every participant in that one process, and the HTTP workload (f), whose ``serve`` and
minimal-app servers are the child's children and inherit them. Every participant thus
runs under the same delay, and each figure is a ratio to the baseline measured on the
same disk in the same run, as on the native disk, whose figures are (h) and (f) of the
main run.

On the slower disks the workloads run at ``synchronous=FULL`` only (with WAL, ``NORMAL``
flushes at checkpoints, not at commits: a slower flush barely changes it), and (f) runs
its append operations only (reads do not flush).

Results: ``{"library": how it was built, "disks": {name: {"delay_ms", "concurrency",
"http"} | {"skipped": why}}}``; :func:`markdown` puts the three disks side by side, with
a chart (:func:`report.bar_chart`) of the ratios the issue sets targets for.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import concurrency
import fsyncdelay
import http_load
import report

HERE = Path(__file__).resolve().parent
#: The flush delays (ms) the benchmark adds, by the name its tables give the disk.
DELAYS = {"native": 0.0, "+2ms": 2.0, "+5ms": 5.0}
NATIVE = "native"

#: The issue's targets on the slower disks: (disk, figure, at least).
WRITER_TARGETS = (("+2ms", 32, 8.0), ("+2ms", 8, 5.0), ("+5ms", 32, 15.0))
HTTP_TARGETS = (("+2ms", 32, 4.0),)


def slow_configs(quick: bool) -> tuple[concurrency.Config, http_load.Config]:
    """(h)'s and (f)'s configurations on a slower disk: FULL only, appends only."""
    h = concurrency.QUICK if quick else concurrency.Config()
    f = http_load.QUICK if quick else http_load.Config()
    return (
        dataclasses.replace(h, synchronous=("FULL",)),
        dataclasses.replace(f, synchronous=("FULL",), operations=http_load.APPENDS),
    )


def child(workloads: str, quick: bool, seed: int) -> dict[str, Any]:
    """Run (h) and/or (f) in this process, on the disk its environment sets; the
    results, with the flushes the library counted in this process."""
    h_config, f_config = slow_configs(quick)
    out: dict[str, Any] = {"delay_ms": float(os.environ.get("FSYNC_DELAY_MS", "0") or 0)}

    def log(text: str) -> None:
        print(f"  [{out['delay_ms']:g} ms] {text}", file=sys.stderr, flush=True)

    if "h" in workloads:
        out["concurrency"] = asyncio.run(concurrency.run_concurrency(h_config, seed, log=log))
    if "f" in workloads:
        out["http"] = http_load.run_http_load(f_config, log=log)
    try:
        counter = ctypes.CDLL(None).fsyncdelay_calls
        counter.restype = ctypes.c_ulong
        out["flushes_delayed"] = int(counter())
    except AttributeError:  # not loaded: the parent said why
        out["flushes_delayed"] = None
    return out


def run_disks(
    workloads: str,
    *,
    quick: bool,
    seed: int,
    disks: tuple[str, ...] = ("+2ms", "+5ms"),
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Build the library, then run ``workloads`` ("h", "f" or both) on each of ``disks``
    in a child process; a disk is ``{"skipped": why}`` when the library cannot be built
    (no C compiler) or its child failed."""
    library, how = fsyncdelay.build()
    result: dict[str, Any] = {"library": how, "disks": {}}
    for name in disks:
        if library is None:
            log(f"disk {name}: skipped: {how}")
            result["disks"][name] = {"skipped": how}
            continue
        log(f"=== workloads ({','.join(workloads)}) on a disk whose flush is {name} slower")
        env = {**os.environ, **fsyncdelay.environment(library, DELAYS[name])}
        with tempfile.TemporaryDirectory(prefix="agentsession-disk-") as tmp:
            out = Path(tmp) / "result.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), "--workloads", workloads]
            cmd += ["--seed", str(seed), "--json", str(out), *(["--quick"] if quick else [])]
            done = subprocess.run(cmd, env=env, cwd=HERE, check=False)
            if done.returncode != 0 or not out.exists():
                why = f"its process exited {done.returncode} (see the log above)"
                result["disks"][name] = {"skipped": why}
                continue
            result["disks"][name] = json.loads(out.read_text())
    return result


# ============================================================================ report


def _by_disk(results: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Every disk's results in table order, the native one from the main run."""
    disks: dict[str, Mapping[str, Any]] = {}
    if "concurrency" in results or "http" in results:
        disks[NATIVE] = {
            "delay_ms": 0.0,
            "concurrency": results.get("concurrency", {}),
            "http": results.get("http", {}),
        }
    disks.update(results.get("disks", {}).get("disks", {}))
    return disks


def _writer_cell(
    h: Mapping[str, Any], who: str, writers: int, peer: str
) -> tuple[float | None, float | None]:
    """(appends/s of ``who``, its ratio to ``peer``) at FULL, distinct sessions."""
    cells = {
        (c["participant"], c["writers"]): c
        for c in h.get("cells", [])
        if c["synchronous"] == "FULL" and c["mode"] == "distinct"
    }
    ours, other = cells.get((who, writers), {}), cells.get((peer, writers), {})
    return ours.get("aps"), report.ratio(ours.get("aps"), other.get("aps"))


def _http_cell(f: Mapping[str, Any], connections: int) -> tuple[float | None, float | None]:
    """(req/s of serve, its ratio to the minimal app) for appends on N sessions at FULL."""
    for c in f.get("cells", []):
        if (c.get("service"), c["operation"], c["synchronous"], c.get("connections")) == (
            "agentsession",
            "append-many",
            "FULL",
            connections,
        ):
            base = http_load.baseline_of(f["cells"], c) or {}
            return c["rps"], report.ratio(c["rps"], base.get("rps"))
    return None, None


def targets(results: Mapping[str, Any]) -> list[report.Target]:
    """The issue's targets on the slower disks (:data:`WRITER_TARGETS`,
    :data:`HTTP_TARGETS`): agentsession (sync and async) against openai-agents
    ``SQLiteSession`` with many writers, ``serve`` against the minimal app."""
    disks, out = _by_disk(results), []
    for disk, writers, factor in WRITER_TARGETS:
        h = disks.get(disk, {}).get("concurrency", {})
        for who in ("agentsession", "agentsession_async"):
            _, r = _writer_cell(h, who, writers, "openai_agents")
            out.append(
                report._target(
                    f"{disk} fsync, WAL + FULL",
                    concurrency.PARTICIPANTS[who][0],
                    f"{writers} writers, distinct sessions: appends/s vs openai-agents",
                    r,
                    at_least=factor,
                )
            )
    for disk, conns, factor in HTTP_TARGETS:
        _, r = _http_cell(disks.get(disk, {}).get("http", {}), conns)
        out.append(
            report._target(
                f"{disk} fsync, WAL + FULL",
                "serve, 1 worker",
                f"HTTP append, {conns} connections, vs the minimal app",
                r,
                at_least=factor,
            )
        )
    return out


def markdown(results: Mapping[str, Any]) -> str:
    """The disks side by side: (h) and (f) tables with a column per disk, a chart of
    the ratios, the targets; a skipped disk says why."""
    disks = _by_disk(results)
    names = list(disks)
    lib = results.get("disks", {}).get("library", "not run")
    lines = [
        "### (h) and (f) on three disks: the native fsync, +2 ms and +5 ms",
        "",
        "Each column is one disk: `native` is this machine's own flush (the (h) and (f) "
        "runs above); `+2ms` and `+5ms` add 2 and 5 ms to every `fsync`/`fdatasync`, as "
        "cloud block storage costs (`benchmarks/fsyncdelay.c` preloaded into a process of "
        f"their own that runs every participant; library: {lib}). WAL + "
        "synchronous=FULL, writers each on their own session; ratio in brackets.",
        "",
    ]
    for name, d in disks.items():
        if "skipped" in d:
            lines.append(f"- disk {name}: **skipped**: {d['skipped']}")
        elif d.get("flushes_delayed") is not None:
            lines.append(
                f"- disk {name}: {d['flushes_delayed']:,} flushes delayed in the (h) process"
            )
    head = " | ".join(names)
    lines += [
        "",
        "| writers | appends/s: who (ratio to whom) | " + head + " |",
        "|--:|---|" + "--:|" * len(names),
    ]
    rows = (
        ("agentsession", "openai_agents"),
        ("agentsession_async", "openai_agents"),
        ("agentsession", "raw"),
        ("openai_agents", "raw_async"),
    )
    for writers in (1, 8, 32):
        for who, peer in rows:
            cells = []
            for d in disks.values():
                aps, r = _writer_cell(d.get("concurrency", {}), who, writers, peer)
                cells.append("n/a" if aps is None else f"{aps:,.0f} ({report.fmt_ratio(r)})")
            label = f"{concurrency.PARTICIPANTS[who][0]} (to {concurrency.PARTICIPANTS[peer][0]})"
            lines.append(f"| {writers} | {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| connections | HTTP append, N sessions: serve req/s (ratio to the minimal app) | "
        + head
        + " |",
        "|--:|---|" + "--:|" * len(names),
    ]
    for conns in (1, 8, 32):
        cells = []
        for d in disks.values():
            rps, r = _http_cell(d.get("http", {}), conns)
            cells.append("n/a" if rps is None else f"{rps:,.0f} ({report.fmt_ratio(r)})")
        lines.append(f"| {conns} | serve, 1 worker | " + " | ".join(cells) + " |")
    bars = []
    for name, d in disks.items():
        h, f = d.get("concurrency", {}), d.get("http", {})
        bars += [
            (
                f"{name:>6}  32 writers, sync / openai-agents",
                _writer_cell(h, "agentsession", 32, "openai_agents")[1],
            ),
            (
                f"{name:>6}  32 writers, async / openai-agents",
                _writer_cell(h, "agentsession_async", 32, "openai_agents")[1],
            ),
            (
                f"{name:>6}   8 writers, sync / openai-agents",
                _writer_cell(h, "agentsession", 8, "openai_agents")[1],
            ),
            (f"{name:>6}  HTTP 32 conn / minimal app", _http_cell(f, 32)[1]),
        ]
    lines += [
        "",
        "Ratios by disk (x; one `#` per 0.5x):",
        "",
        "```",
        *report.bar_chart(bars, unit=0.5),
        "```",
        "",
        *report.target_lines(targets(results)),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """The child's command line: run the workloads here, write the results as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="hf", help="h, f or both")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    args.json.write_text(json.dumps(child(args.workloads, args.quick, args.seed), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
