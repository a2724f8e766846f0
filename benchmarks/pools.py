"""PostgreSQL and MariaDB under ``serve``: new server connections, and 2 workers against 1.

Part of ``make bench-stores`` (``stores.py`` runs it after its table), or on its own
(``.venv/bin/python benchmarks/pools.py [--quick] [--json PATH]``). ``agentsession
serve`` runs on a database of its own on each server (PostgreSQL: with ``--workers 1``
and ``--workers 2`` side by side; MariaDB: 1 worker), set up the README way, with the
pool ``serve`` gives its store (``Settings.manager_options()``: ``pool_size`` =
``max_concurrent_requests``). ``wrk`` loads each with ``connections`` (default 32)
connections appending ~200-byte messages to 64 sessions (``http_load``'s ``append, N
sessions``), ``seconds`` per cell, the services' cells interleaved over ``rounds``
rounds after one untimed warm-up cell each. Figures:

- **new server connections per 1,000 appends** after the warm-up: the server's own
  count of connections, read before and after each timed cell (PostgreSQL
  ``pg_stat_database.sessions`` of the service's database, which every worker's
  backends add to; MariaDB ``SHOW GLOBAL STATUS LIKE 'Connections'``), over the
  messages the cell stored. Goal: at most 1.
- **2 workers against 1** on PostgreSQL: requests/s of ``--workers 2`` divided by
  ``--workers 1``'s. Goal: at least 1.3x. wrk, the workers and PostgreSQL share this
  machine's cores.

The servers are ``tests/servers.py``'s throwaway loopback instances at their durable
settings (``fsync=on``, ``synchronous_commit=on``; ``innodb_flush_log_at_trx_commit=1``).
Skipped with the reason when wrk (or a server) cannot be had.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import http_load  # noqa: E402

import servers  # noqa: E402  (tests/servers.py: the throwaway servers)

#: The issue's goals.
MAX_NEW_PER_1000 = 1.0
MIN_WORKERS_GAIN = 1.3
#: Worker counts run on each server.
WORKERS = {"postgres": (1, 2), "mysql": (1,)}


@dataclass(frozen=True)
class Config:
    """Connections, seconds per wrk cell (warm-up included), and rounds."""

    connections: int = 32
    seconds: int = 5
    warmup: int = 2
    rounds: int = 2


QUICK = Config(seconds=1, warmup=1, rounds=1)


@dataclass
class _Tally:
    """One service's timed cells: requests/s each, appends stored, connections made."""

    rps: list[float] = field(default_factory=list)
    appends: int = 0
    new_connections: int = 0
    #: connections made from before the service started to after its last cell.
    in_all: int = 0
    problems: list[str] = field(default_factory=list)

    def entry(self) -> dict[str, Any]:
        per = self.new_connections * 1000 / self.appends if self.appends else None
        return {
            "rps": self.rps,
            "mean_rps": round(sum(self.rps) / len(self.rps), 1) if self.rps else 0.0,
            "appends": self.appends,
            "new_connections": self.new_connections,
            "connections_in_all": self.in_all,
            "per_1000": None if per is None else round(per, 2),
            "problems": self.problems,
        }


def _made(server: servers.Server, database: str) -> int:
    time.sleep(0.5)  # a PostgreSQL backend reports its session once idle or at exit
    return server.connections_made(database)


def measure(
    server: servers.Server, kind: str, config: Config, log: Callable[[str], None]
) -> dict[str, Any]:
    """Run ``serve`` at each worker count of ``kind`` under wrk (see the module
    docstring); ``{"workers": {n: figures}}`` or ``{"skipped": why}``."""
    wrk, note = http_load.ensure_wrk(log)
    if wrk is None:
        return {"skipped": note}
    exe, info = http_load.server_interpreter()
    if exe is None:
        return {"skipped": info["reason"]}
    load = http_load.Config(
        duration=config.seconds, warmup=0, connections=(config.connections,), baseline=False
    )
    counts = WORKERS[kind]
    tallies = {n: _Tally() for n in counts}
    with tempfile.TemporaryDirectory(prefix="as-pools-") as tmp, contextlib.ExitStack() as stack:
        services, names, first = {}, {}, {}
        for n in counts:
            names[n], url = server.create_database()
            first[n] = server.connections_made(names[n])
            where = Path(tmp) / f"w{n}"
            where.mkdir()
            services[n] = stack.enter_context(
                http_load.running_service(where, exe, workers=n, url=url)
            )
            http_load.prepare(services[n], load)
            warm = http_load.Config(duration=config.warmup, warmup=0, baseline=False)
            http_load.run_cell(wrk, services[n], "append-many", warm, config.connections)
        for r in range(config.rounds):
            for n in counts if r % 2 == 0 else counts[::-1]:
                before = _made(server, names[n])
                cell = http_load.run_cell(wrk, services[n], "append-many", load, config.connections)
                t = tallies[n]
                t.new_connections += _made(server, names[n]) - before
                t.appends += cell["stored"]
                t.rps.append(cell["rps"])
                t.problems += cell["problems"]
                log(f"pools: {kind}, serve --workers {n}: {cell['rps']:.0f} req/s")
        for n in counts:
            tallies[n].in_all = _made(server, names[n]) - first[n]
    return {"workers": {str(n): t.entry() for n, t in tallies.items()}, "wrk": note}


def run_pools(
    config: Config,
    *,
    log: Callable[[str], None] | None = None,
    kinds: tuple[str, ...] = tuple(WORKERS),
) -> dict[str, Any]:
    """:func:`measure` on each server of ``kinds`` (each started at its durable
    settings, stopped after); one not installed is reported skipped."""
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    out: dict[str, Any] = {"config": asdict(config), "servers": {}}
    starts = {"postgres": servers.start_postgres, "mysql": servers.start_mysql}
    for kind in kinds:
        try:
            server = starts[kind](durable=True)
        except servers.ServerNotInstalled as exc:
            out["servers"][kind] = {"skipped": str(exc)}
            continue
        try:
            res = {"version": server.version, **measure(server, kind, config, log)}
        finally:
            server.stop()
        one, two = (res.get("workers", {}).get(n, {}).get("mean_rps") for n in ("1", "2"))
        res["gain"] = round(two / one, 3) if one and two else None
        out["servers"][kind] = res
    return out


def markdown(results: dict[str, Any]) -> str:
    """The figures as markdown: a row per server and worker count, each goal met or
    missed."""
    cfg = results["config"]
    lines = [
        "### Connection pools under `serve` (PostgreSQL, MariaDB)",
        "",
        f"wrk, {cfg['connections']} connections appending (64 sessions), {cfg['seconds']} s "
        f"x {cfg['rounds']} round(s) per service after a {cfg['warmup']} s warm-up, the "
        "services interleaved. New connections: counted by the server over the timed cells; "
        f"goal at most {MAX_NEW_PER_1000:g} per 1,000 appends. 2 workers against 1 on "
        f"PostgreSQL: goal at least {MIN_WORKERS_GAIN:g}x. Connections in all: made from "
        "before the service started (its `db upgrade` and `keys create` included) to after "
        "its last cell; at most the connections x workers when none is made twice.",
        "",
        "| server | serve | req/s | appends | new connections | per 1,000 appends | goal "
        "| connections in all |",
        "|---|---|--:|--:|--:|--:|---|--:|",
    ]
    gains = []
    for kind, res in results["servers"].items():
        if "skipped" in res:
            lines.append(f"| {kind} | skipped: {res['skipped']} | | | | | | |")
            continue
        figures = res["workers"]
        for n, f in figures.items():
            per = f["per_1000"]
            met = "n/a" if per is None else "met" if per <= MAX_NEW_PER_1000 else "MISSED"
            errors = f" ({'; '.join(f['problems'])})" if f["problems"] else ""
            lines.append(
                f"| {res['version']} | {n} worker{'s' if n != '1' else ''} "
                f"| {f['mean_rps']:,.0f}{errors} | {f['appends']:,} | {f['new_connections']} "
                f"| {'n/a' if per is None else f'{per:g}'} | {met} | {f['connections_in_all']} |"
            )
        if res.get("gain") is not None:
            met = "met" if res["gain"] >= MIN_WORKERS_GAIN else "MISSED"
            gains.append(f"{res['version']}: 2 workers {res['gain']:.3f}x 1 worker ({met})")
    return "\n".join(lines + (["", *gains] if gains else [])) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command line: run both measurements, print markdown, write ``--json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts, for a smoke test")
    parser.add_argument("--kinds", default="postgres,mysql")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = run_pools(QUICK if args.quick else Config(), kinds=tuple(args.kinds.split(",")))
    print(markdown(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
