"""Pure functions of the benchmark: statistics, ratios, the issue's targets, the markdown.

Nothing here times anything or imports a peer library (matplotlib is imported inside
:func:`plot_history` only), so ``tests/test_benchmarks.py`` runs it in the project's own
environment. The runner (``run.py``) produces a results dictionary; this module reads it.

Results layout (``results.json``), all durations in milliseconds::

    {"meta": {...machine, versions, counts...},
     "participants": {key: {"label", "api", "unsupported": {op: why}, "caveats": {op: note}}},
     "settings": {name: {
         "title": "WAL + synchronous=FULL",
         "pragmas": {key: [{"journal_mode": "wal", "synchronous": "FULL"}]},
         "same_as": {key: other setting name},        # default run only: not re-run
         "figures": {key: {figure: Stats | {"na": why}}},
         "history": {key: {size: {"append": Stats, "load_last": Stats} | {"na": why}}}}},
     "targets": [Target...]}

A ``Stats`` is ``{"n", "mean", "p50", "p99", "min", "max"}`` (ms) with an optional
``"note"`` (why fewer samples than asked, e.g. a time budget).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: Participants whose figures the targets are about.
OURS = ("agentsession", "agentsession_async")
RAW = "raw"
#: The async APIs' baseline: raw sqlite3 through ``asyncio.to_thread``.
RAW_ASYNC = "raw_async"
BASELINES = (RAW, RAW_ASYNC)
#: The setting whose baseline divides the "default" block: every participant's default
#: is synchronous=FULL, agentsession's is WAL + FULL; raw at its own default (rollback
#: journal) would be a different durability cost, not the same-work limit.
DEFAULT_DIVISOR = "wal-full"
#: The settings at which all participants run with equal durability (targets apply).
EQUAL_SETTINGS = ("wal-full", "wal-normal")
#: "Flat" last-20 reads: the p50 at the longest history is at most this times the p50 at
#: the shortest (100 messages).
FLAT_LIMIT = 1.5

#: Table rows: (figure key, statistic, label). Figure keys are what the runner records;
#: labels are formatted with the run's counts (``meta.counts``, see :func:`counts_of`).
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("append", "mean", "(a) append, mean"),
    ("append", "p50", "(a) append, p50"),
    ("append", "p99", "(a) append, p99"),
    ("append_first", "mean", "(a) append, messages 1-{window:,}, mean"),
    ("append_last", "mean", "(a) append, messages {last_from:,}-{messages:,}, mean"),
    ("load_all", "p50", "(b) load all {messages:,}, p50"),
    ("load_last", "p50", "(b) load last {last_n}, p50"),
    ("create", "p50", "(d) create session + {per_session} messages, p50"),
    ("list", "p50", "(d) list {listed:,} sessions, p50"),
    ("update_memory", "p50", "(e) working-memory update (expected version), p50"),
    ("restore", "p50", "(e) restore, p50"),
)
#: The issue's counts, used when a results dictionary does not say.
FULL_COUNTS = {"messages": 2000, "window": 100, "last_n": 20, "per_session": 5, "sessions": 1000}


def counts_of(results: Mapping[str, Any], block: Mapping[str, Any] | None = None) -> dict[str, int]:
    """The counts a run used (the issue's by default), plus ``last_from`` for labels and
    ``listed``: the sessions every participant listed in ``block`` (they are equal)."""
    counts = {**FULL_COUNTS, **results.get("meta", {}).get("counts", {})}
    counts["last_from"] = counts["messages"] - counts["window"] + 1
    counts["listed"] = (block or {}).get("listed") or counts["sessions"]
    return counts


def figure_rows(
    results: Mapping[str, Any], block: Mapping[str, Any] | None = None
) -> list[tuple[str, str, str]]:
    """:data:`FIGURES` with the labels filled in from the run's counts."""
    counts = counts_of(results, block)
    return [(figure, stat, label.format(**counts)) for figure, stat, label in FIGURES]


def baseline_key(results: Mapping[str, Any], key: str) -> str:
    """The participant ``key``'s figures are divided by: ``raw_async`` for an async API
    when the run has it, else ``raw``."""
    participants = results.get("participants", {})
    if participants.get(key, {}).get("asynchronous") and RAW_ASYNC in participants:
        return RAW_ASYNC
    return RAW


def divisor(results: Mapping[str, Any], setting: str, key: str) -> Mapping[str, Any]:
    """The baseline figures that divide ``key``'s at ``setting``: its baseline's at the
    same setting; for ``default``, at :data:`DEFAULT_DIVISOR` when that was run."""
    settings = results.get("settings", {})
    if setting == "default" and DEFAULT_DIVISOR in settings:
        setting = DEFAULT_DIVISOR
    figures: Mapping[str, Any] = settings.get(setting, {}).get("figures", {})
    return figures.get(baseline_key(results, key), {})


def stats(samples_s: Sequence[float], note: str | None = None) -> dict[str, Any]:
    """Summarise durations given in seconds as a Stats dictionary in milliseconds.

    Percentiles are nearest-rank (p99 of 2,000 samples is the 1,980th smallest).

    Raises:
        ValueError: no samples.
    """
    if not samples_s:
        raise ValueError("no samples")
    ordered = sorted(samples_s)
    n = len(ordered)

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p * n) - 1)] * 1e3

    result: dict[str, Any] = {
        "n": n,
        "mean": statistics.fmean(ordered) * 1e3,
        "p50": rank(0.50),
        "p99": rank(0.99),
        "min": ordered[0] * 1e3,
        "max": ordered[-1] * 1e3,
    }
    if note is not None:
        result["note"] = note
    return result


def value(figures: Mapping[str, Any], figure: str, stat: str = "mean") -> float | None:
    """One statistic (ms) of one figure, or None when the figure is n/a or missing."""
    entry = figures.get(figure)
    if not isinstance(entry, Mapping) or stat not in entry:
        return None
    return float(entry[stat])


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``, or None if either is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def fmt_ms(ms: float | None) -> str:
    """A duration in ms with 3 significant digits (``0.0123``, ``1.23``, ``123``, ``1,234``)."""
    if ms is None:
        return "n/a"
    if ms >= 1000:
        return f"{ms:,.0f}"
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3g}"


def fmt_ratio(x: float | None) -> str:
    """A ratio as ``1.23x`` (two decimals below 10, one below 100, none above)."""
    if x is None:
        return "n/a"
    if x >= 100:
        return f"{x:,.0f}x"
    if x >= 10:
        return f"{x:.1f}x"
    return f"{x:.2f}x"


# ============================================================================ targets


@dataclass(frozen=True)
class Target:
    """One of the issue's targets, checked for one API at one setting.

    ``value`` is the measured ratio; ``met`` is None when a figure is missing (n/a).
    """

    setting: str
    participant: str
    name: str
    limit: str
    value: float | None
    met: bool | None
    detail: str


def _target(
    setting: str,
    who: str,
    name: str,
    value_: float | None,
    *,
    at_most: float | None = None,
    at_least: float | None = None,
    detail: str = "",
) -> Target:
    if at_most is not None:
        limit, met = f"<= {at_most:g}x", None if value_ is None else value_ <= at_most
    elif at_least is not None:
        limit, met = f">= {at_least:g}x", None if value_ is None else value_ >= at_least
    else:  # pragma: no cover - every caller passes one bound
        raise ValueError("a bound is required")
    return Target(setting, who, name, limit, value_, met, detail)


#: Issue #14: in-process append p50 at most this times its baseline's, per setting; the
#: last-20 read at most READ_LIMIT times.
APPEND_LIMITS = {"wal-full": 1.6, "wal-normal": 2.5}
READ_LIMIT = 2.5

#: Peers that agentsession's append must beat, by how much (issue #5).
SPEEDUP_TARGETS = (
    ("openai_agents", 1.5),
    ("adk_sqlite", 20.0),
    ("adk_database", 20.0),
    ("langgraph", 50.0),
)


def check_targets(results: Mapping[str, Any]) -> list[Target]:
    """The issue's targets for each agentsession API at each equal-durability setting.

    Ratios are of medians (p50: on a shared machine the steadier statistic; a few slow
    outliers move a mean of 10 samples), with the ratio of means in ``detail``; all at
    the same setting of the same run. Flatness compares the last-20 p50 at the longest
    and shortest history.
    """
    out: list[Target] = []
    labels = {k: v.get("label", k) for k, v in results.get("participants", {}).items()}
    for setting in EQUAL_SETTINGS:
        block = results.get("settings", {}).get(setting)
        if block is None:
            continue
        figures = block.get("figures", {})
        counts = counts_of(results, block)
        for who in OURS:
            ours = figures.get(who)
            if ours is None:
                continue
            base = baseline_key(results, who)
            raw = figures.get(base, {})
            base_label = labels.get(base, base)

            def vs_raw(
                figure: str, ours: Mapping[str, Any] = ours, raw: Mapping[str, Any] = raw
            ) -> tuple[float | None, str]:
                r_mean = ratio(value(ours, figure), value(raw, figure))
                r_p50 = ratio(value(ours, figure, "p50"), value(raw, figure, "p50"))
                detail = (
                    f"p50 {fmt_ms(value(ours, figure, 'p50'))} vs "
                    f"{fmt_ms(value(raw, figure, 'p50'))} ms; ratio of means {fmt_ratio(r_mean)}"
                )
                return r_p50, detail

            who_label = labels.get(who, who)
            r, d = vs_raw("append")
            limit = APPEND_LIMITS.get(setting, 2.5)
            name = f"append vs {base_label}"
            out.append(_target(setting, who_label, name, r, at_most=limit, detail=d))
            for peer, factor in SPEEDUP_TARGETS:
                other = figures.get(peer, {})
                speedup = ratio(value(other, "append", "p50"), value(ours, "append", "p50"))
                means = ratio(value(other, "append"), value(ours, "append"))
                detail = (
                    f"p50 {fmt_ms(value(other, 'append', 'p50'))} vs "
                    f"{fmt_ms(value(ours, 'append', 'p50'))} ms; ratio of means {fmt_ratio(means)}"
                )
                name = f"append faster than {labels.get(peer, peer)}"
                out.append(
                    _target(setting, who_label, name, speedup, at_least=factor, detail=detail)
                )
            r, d = vs_raw("load_last")
            name = f"last-{counts['last_n']} read vs {base_label}"
            out.append(_target(setting, who_label, name, r, at_most=READ_LIMIT, detail=d))
            history = block.get("history", {})
            worst, worst_size = _worst_history_ratio(history.get(who, {}), history.get(base, {}))
            out.append(
                _target(
                    setting,
                    who_label,
                    f"last-{counts['last_n']} read vs {base_label}, worst history length",
                    worst,
                    at_most=READ_LIMIT,
                    detail=f"at {worst_size:,} messages (p50 ratio)" if worst_size else "",
                )
            )
            growth, detail = _flatness(history.get(who, {}))
            out.append(
                _target(
                    setting,
                    who_label,
                    f"last-{counts['last_n']} read flat over history length",
                    growth,
                    at_most=FLAT_LIMIT,
                    detail=detail,
                )
            )
            r, d = vs_raw("load_all")
            name = f"full load of {counts['messages']:,} vs {base_label}"
            out.append(_target(setting, who_label, name, r, at_most=1.5, detail=d))
            r, d = vs_raw("list")
            name = f"list of {counts['listed']:,} sessions vs {base_label}"
            out.append(_target(setting, who_label, name, r, at_most=2, detail=d))
    return out


def _sizes(history: Mapping[str, Any]) -> list[int]:
    return sorted(int(size) for size, entry in history.items() if "load_last" in entry)


def _worst_history_ratio(
    ours: Mapping[str, Any], raw: Mapping[str, Any]
) -> tuple[float | None, int | None]:
    worst: float | None = None
    worst_size: int | None = None
    for size in _sizes(ours):
        r = ratio(
            value(ours[str(size)], "load_last", "p50"),
            value(raw.get(str(size), {}), "load_last", "p50"),
        )
        if r is not None and (worst is None or r > worst):
            worst, worst_size = r, size
    return worst, worst_size


def _flatness(history: Mapping[str, Any]) -> tuple[float | None, str]:
    sizes = _sizes(history)
    if len(sizes) < 2:
        return None, "fewer than two history lengths measured"
    first = value(history[str(sizes[0])], "load_last", "p50")
    last = value(history[str(sizes[-1])], "load_last", "p50")
    growth = ratio(last, first)
    detail = f"p50 {fmt_ms(first)} ms at {sizes[0]:,} -> {fmt_ms(last)} ms at {sizes[-1]:,}"
    return growth, detail


def target_lines(targets: Iterable[Target]) -> list[str]:
    """The targets as a markdown table."""
    lines = [
        "| setting | API | target | limit | measured | result | detail |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in targets:
        result = "n/a" if t.met is None else "met" if t.met else "**missed**"
        measured = fmt_ratio(t.value) if not t.limit.endswith("ms") else f"{fmt_ms(t.value)} ms"
        lines.append(
            f"| {t.setting} | {t.participant} | {t.name} | {t.limit} | "
            f"{measured} | {result} | {t.detail} |"
        )
    return lines


# =========================================================================== markdown


def bar_chart(rows: Sequence[tuple[str, float | None]], *, unit: float) -> list[str]:
    """A text bar chart of ratios, a line per ``(label, value)``: the label, one ``#``
    per ``unit`` of the value (rounded), and the value as :func:`fmt_ratio` writes it;
    ``n/a`` for a missing value. For a fenced code block in markdown."""
    width = max((len(label) for label, _ in rows), default=0)
    lines = []
    for label, x in rows:
        bar = "" if x is None else "#" * max(0, round(x / unit))
        lines.append(f"{label:<{width}} | {bar} {fmt_ratio(x)}".rstrip())
    return lines


def _cell(figures: Mapping[str, Any], raw: Mapping[str, Any], figure: str, stat: str) -> str:
    entry = figures.get(figure)
    if isinstance(entry, Mapping) and "na" in entry:
        return "n/a"
    ms = value(figures, figure, stat)
    if ms is None:
        return "–"
    r = ratio(ms, value(raw, figure, stat))
    mark = "‡" if isinstance(entry, Mapping) and entry.get("note") else ""
    return f"{fmt_ms(ms)}{mark} ({fmt_ratio(r)})" if r is not None else f"{fmt_ms(ms)}{mark}"


def _order(results: Mapping[str, Any], block: Mapping[str, Any]) -> list[str]:
    keys = list(results.get("participants", {}))
    present = block.get("figures", {})
    return [k for k in keys if k in present]


def setting_lines(results: Mapping[str, Any], name: str) -> list[str]:
    """The tables of one setting: figures with ratio to raw, speed-ups over each peer,
    cost versus history length."""
    block = results["settings"][name]
    labels = {k: v.get("label", k) for k, v in results.get("participants", {}).items()}
    keys = _order(results, block)
    figures = block.get("figures", {})
    rows = figure_rows(results, block)
    lines = [f"### {block.get('title', name)}", ""]
    same = block.get("same_as", {})
    if same:
        reused = ", ".join(f"{labels.get(k, k)} (= {v})" for k, v in same.items())
        lines += [
            f"Defaults read back equal to a shared setting, so these were not run twice; "
            f"their figures are copied from that run: {reused}.",
            "",
        ]
    where = "at this setting"
    if name == "default" and DEFAULT_DIVISOR in results.get("settings", {}):
        where = (
            f"at {DEFAULT_DIVISOR}: every default here is synchronous=FULL and agentsession's "
            "is WAL + FULL, so the divisor is raw sqlite3 at that durability, not raw at its "
            "own default (rollback journal)"
        )
    listed = counts_of(results, block)["listed"]
    lines += [
        "Each cell: time in ms (ratio to its baseline "
        f"{where}: sync APIs to raw sqlite3, async APIs to raw sqlite3 through "
        "asyncio.to_thread). ‡ fewer samples than asked (see notes). "
        f"(d): every participant created and listed the same {listed:,} sessions.",
        "",
        "| figure | " + " | ".join(labels.get(k, k) for k in keys) + " |",
        "|---|" + "---|" * len(keys),
    ]
    for figure, stat, label in rows:
        cells = [_cell(figures.get(k, {}), divisor(results, name, k), figure, stat) for k in keys]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    peers = [k for k in keys if k not in (*BASELINES, *OURS)]
    ours = [k for k in OURS if k in keys]
    if peers and ours:
        lines += [
            "",
            "Speed-up of agentsession over each peer (peer's time / agentsession's time; "
            "above 1x agentsession is faster). Cells: sync API / async API.",
            "",
            "| figure | " + " | ".join(labels.get(k, k) for k in peers) + " |",
            "|---|" + "---|" * len(peers),
        ]
        for figure, stat, label in rows:
            cells = []
            for peer in peers:
                parts = [
                    fmt_ratio(
                        ratio(
                            value(figures.get(peer, {}), figure, stat),
                            value(figures.get(who, {}), figure, stat),
                        )
                    )
                    for who in ours
                ]
                cells.append(" / ".join(parts))
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += history_lines(results, name)
    return lines


def history_lines(results: Mapping[str, Any], name: str) -> list[str]:
    """(c) as a table: p50 in ms of append and last-20 read at each history length."""
    block = results["settings"][name]
    history = block.get("history", {})
    if not history:
        return []
    labels = {k: v.get("label", k) for k, v in results.get("participants", {}).items()}
    keys = [k for k in results.get("participants", {}) if k in history]
    sizes = sorted({int(s) for k in keys for s in history[k]})
    lines = [
        "",
        "(c) Cost versus history length: p50 in ms (ratio to its baseline), append / last-20 read.",
        "",
        "| messages | " + " | ".join(labels.get(k, k) for k in keys) + " |",
        "|---|" + "---|" * len(keys),
    ]
    for size in sizes:
        cells = []
        for k in keys:
            entry = history[k].get(str(size), {})
            if "na" in entry:
                cells.append("n/a")
                continue
            parts = []
            raw = history.get(baseline_key(results, k), {})
            for op in ("append", "load_last"):
                ms = value(entry, op, "p50")
                r = ratio(ms, value(raw.get(str(size), {}), op, "p50"))
                mark = "‡" if isinstance(entry.get(op), Mapping) and entry[op].get("note") else ""
                parts.append(
                    f"{fmt_ms(ms)}{mark}"
                    + (f" ({fmt_ratio(r)})" if k not in BASELINES and r else "")
                )
            cells.append(" / ".join(parts))
        lines.append(f"| {size:,} | " + " | ".join(cells) + " |")
    return lines


def notes_lines(results: Mapping[str, Any]) -> list[str]:
    """What is n/a and why, how timed calls differ, and where a budget cut samples."""
    lines = ["### Notes", ""]
    for key, info in results.get("participants", {}).items():
        label = info.get("label", key)
        for op, why in info.get("unsupported", {}).items():
            lines.append(f"- {label}, {op}: n/a — {why}.")
        for op, note in info.get("caveats", {}).items():
            lines.append(f"- {label}, {op}: {note}.")
    seen: set[tuple[str, str, str]] = set()
    for name, block in results.get("settings", {}).items():
        copied = block.get("same_as", {})  # their notes are the other setting's
        for key, figures in block.get("figures", {}).items():
            if key in copied:
                continue
            for figure, entry in figures.items():
                text = entry.get("note") if isinstance(entry, Mapping) else None
                if text and "na" not in entry:
                    lines.append(f"- ‡ {name}, {key}, {figure}: {text}.")
        for key, sizes in block.get("history", {}).items():
            if key in copied:
                continue
            for size, entry in sizes.items():
                text = entry.get("na")
                if text and (name, key, text) not in seen:
                    seen.add((name, key, text))
                    lines.append(f"- {name}, {key}, history {int(size):,}: n/a — {text}.")
                for op in ("append", "load_last"):
                    sub = entry.get(op)
                    if isinstance(sub, Mapping) and sub.get("note"):
                        lines.append(f"- ‡ {name}, {key}, {op} at {int(size):,}: {sub['note']}.")
    return lines


def pragma_lines(results: Mapping[str, Any]) -> list[str]:
    """What each participant actually ran at, read back from its connections."""
    names = list(results.get("settings", {}))
    labels = {k: v.get("label", k) for k, v in results.get("participants", {}).items()}
    lines = [
        "### Settings read back (journal_mode / synchronous)",
        "",
        "| participant | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for key in results.get("participants", {}):
        cells = []
        for name in names:
            block = results["settings"][name]
            observed = block.get("pragmas", {}).get(key)
            if observed is None:
                cells.append("–")
                continue
            text = ", ".join(f"{o['journal_mode']} / {o['synchronous']}" for o in observed)
            if key in block.get("same_as", {}):
                text += f" (= {block['same_as'][key]})"
            cells.append(text or "–")
        lines.append(f"| {labels.get(key, key)} | " + " | ".join(cells) + " |")
    return lines


def render_markdown(results: Mapping[str, Any], targets: Sequence[Target] | None = None) -> str:
    """The whole report as markdown: targets, one block of tables per setting, notes."""
    meta = results.get("meta", {})
    if targets is None:
        targets = check_targets(results)
    lines = ["## Benchmark results", ""]
    if meta:
        machine = meta.get("machine", {})
        lines += [
            f"Run {meta.get('started', '?')}, {meta.get('wall_seconds', 0):.0f} s, "
            f"{'quick' if meta.get('quick') else 'full'} counts; "
            f"{machine.get('cpu', '?')}, {machine.get('cpus', '?')} CPUs, "
            f"load average {machine.get('loadavg_start', '?')} at start; "
            f"SQLite {meta.get('sqlite', '?')}, Python {meta.get('python', '?')}.",
            "",
            "Versions: "
            + ", ".join(f"{k} {v}" for k, v in sorted(meta.get("versions", {}).items()))
            + ".",
            "",
        ]
    lines += [
        "### Targets (issues #5 and #14), at equal durability",
        "",
        *target_lines(targets),
        "",
    ]
    for name in results.get("settings", {}):
        lines += setting_lines(results, name)
        lines.append("")
    lines += pragma_lines(results)
    lines.append("")
    lines += notes_lines(results)
    return "\n".join(lines) + "\n"


def targets_json(targets: Iterable[Target]) -> list[dict[str, Any]]:
    """Targets as JSON-ready dictionaries."""
    return [asdict(t) for t in targets]


# =============================================================================== plot


def plot_history(results: Mapping[str, Any], path: Path) -> bool:
    """Draw (c) to ``path`` (PNG): p50 ms versus history length, log-log, one line per
    participant; a row per operation, a column per equal-durability setting.

    Returns:
        False if there was nothing to draw.
    """
    settings = [s for s in EQUAL_SETTINGS if results.get("settings", {}).get(s, {}).get("history")]
    if not settings:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {k: v.get("label", k) for k, v in results.get("participants", {}).items()}
    fig, axes = plt.subplots(2, len(settings), figsize=(6 * len(settings), 8), squeeze=False)
    for col, name in enumerate(settings):
        block = results["settings"][name]
        for row, (op, title) in enumerate((("append", "append one message"),
                                           ("load_last", "read the last 20"))):  # fmt: skip
            ax = axes[row][col]
            for key in results.get("participants", {}):
                points = [
                    (int(size), value(entry, op, "p50"))
                    for size, entry in block["history"].get(key, {}).items()
                    if value(entry, op, "p50") is not None
                ]
                if not points:
                    continue
                points.sort()
                style = "--" if key in BASELINES else "-"
                ax.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    style,
                    marker="o",
                    label=labels.get(key, key),
                )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("messages already in the session")
            ax.set_ylabel("p50 (ms)")
            ax.set_title(f"{title} — {block.get('short_title', name)}", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Cost versus history length (p50, log-log; dashed: raw sqlite3)")
    fig.text(
        0.5,
        0.005,
        "A line that stops: that history was not built within the run's time budget "
        "(the reason is in results.md).",
        ha="center",
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
