"""agentsession on SQLite against raw sqlite3 doing the same work, in one run.

The baseline executes, per append, the statements agentsession's SQL store executes:
one INSERT of the message, one compare-and-set UPDATE of the session row, one INSERT of
the audit event, in one ``BEGIN IMMEDIATE`` transaction, with the same PRAGMAs (WAL,
the same ``synchronous`` level). So the ratio is our overhead, not a different amount of
work. Reads: the newest N messages by an indexed ``ORDER BY seq DESC LIMIT N``, decoded
(JSON payload, timestamp) as agentsession decodes them.

Raw and agentsession operations are interleaved one by one (raw, ours, raw, ours...), so
both see the same disk and CPU contention; a busy machine moves both columns, not the
ratio. Two ratios are printed: of the means, and of the medians (p50, the steadier one).

Sections:

1. ``--messages`` appends one at a time, then last-N reads and full loads.
2. Cost versus history length: at 100, 1k and 10k existing messages (history built with
   batch appends, the same on both sides), time ``--samples`` single appends and last-N
   reads. Flat ratios and flat absolute times mean the cost does not grow with history.

Run: ``make bench`` or ``.venv/bin/python benchmarks/store_vs_sqlite3.py [--messages N]``.
Prints means/percentiles in milliseconds and the ratios to the baseline.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from agentsession import SessionManager

CONTENT = "请检查 requirements.txt 是否缺少 requests — mixed text for a ~200 byte message. " * 2
ROLES = ("user", "assistant")
HISTORY = (100, 1_000, 10_000)


class Raw:
    """Plain sqlite3 executing the statements the SQL store executes (module docstring)."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self.db.executescript(
            """
            CREATE TABLE sessions (session_id TEXT PRIMARY KEY, version INTEGER,
                                   updated_at TEXT, message_count INTEGER);
            CREATE TABLE messages (session_id TEXT, seq INTEGER, message_id TEXT, role TEXT,
                                   payload TEXT, created_at TEXT, PRIMARY KEY (session_id, seq));
            CREATE TABLE audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT,
                                action TEXT, at TEXT, details TEXT);
            INSERT INTO sessions VALUES ('s', 1, '', 0);
            """
        )
        self.count = 0
        self.version = 1

    def append(self, k: int = 1) -> None:
        """Append ``k`` messages in one transaction (one version step, one audit row)."""
        now = datetime.now(UTC).isoformat()
        rows = []
        for i in range(self.count, self.count + k):
            payload = json.dumps({"role": ROLES[i % 2], "content": CONTENT}, ensure_ascii=False)
            rows.append((i + 1, f"msg_{i}", ROLES[i % 2], payload, now))
        insert = "INSERT INTO messages VALUES ('s', ?, ?, ?, ?, ?)"
        self.db.execute("BEGIN IMMEDIATE")
        if k == 1:
            self.db.execute(insert, rows[0])
        else:
            self.db.executemany(insert, rows)
        self.db.execute(
            "UPDATE sessions SET version = ?, updated_at = ?, message_count = ? "
            "WHERE session_id = 's' AND version = ?",
            (self.version + 1, now, self.count + k, self.version),
        )
        self.db.execute(
            "INSERT INTO audit (session_id, action, at, details) VALUES ('s', 'append', ?, ?)",
            (now, json.dumps({"count": k})),
        )
        self.db.execute("COMMIT")
        self.count += k
        self.version += 1

    def read(self, limit: int | None) -> list[tuple[object, ...]]:
        sql = "SELECT seq, message_id, role, payload, created_at FROM messages "
        sql += "WHERE session_id = 's' ORDER BY seq DESC"
        rows = self.db.execute(sql + (f" LIMIT {limit}" if limit else "")).fetchall()
        return [(*r[:3], json.loads(r[3]), datetime.fromisoformat(r[4])) for r in rows[::-1]]

    def close(self) -> None:
        self.db.close()


class Ours:
    """The same work through SessionManager on a SQLite file."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.sm = SessionManager.from_url(
            f"sqlite:///{path}", auto_migrate=True, sqlite_synchronous=synchronous
        )
        self.sid = self.sm.create_session(user_id="bench", agent="bench").session_id
        self.count = 0

    def append(self, k: int = 1) -> None:
        msgs = [{"role": ROLES[i % 2], "content": CONTENT} for i in range(self.count, self.count + k)]
        if k == 1:
            self.sm.append_message(session_id=self.sid, user_id="bench", message=msgs[0])
        else:
            self.sm.append_messages(session_id=self.sid, user_id="bench", messages=msgs)
        self.count += k

    def read(self, limit: int | None) -> object:
        return self.sm.get_messages(session_id=self.sid, user_id="bench", limit=limit)

    def close(self) -> None:
        self.sm.close()


def _interleaved(n: int, raw: Callable[[], object], ours: Callable[[], object]) -> tuple[list[float], list[float]]:
    """Time ``n`` calls of each, alternating, so contention hits both equally."""
    r_samples, o_samples = [], []
    clock = time.perf_counter
    for _ in range(n):
        start = clock()
        raw()
        mid = clock()
        ours()
        end = clock()
        r_samples.append(mid - start)
        o_samples.append(end - mid)
    return r_samples, o_samples


def _grow(side: Raw | Ours, target: int) -> None:
    while side.count < target:
        side.append(min(1000, target - side.count))


def _row(sync: str, figure: str, raw: list[float], ours: list[float]) -> str:
    r_mean, o_mean = statistics.fmean(raw) * 1e3, statistics.fmean(ours) * 1e3
    r_p50, o_p50 = statistics.median(raw) * 1e3, statistics.median(ours) * 1e3
    o_p99 = sorted(ours)[min(len(ours) - 1, int(len(ours) * 0.99))] * 1e3
    return (
        f"{sync:7} {figure:14} {r_mean:9.3f} {o_mean:10.3f} {r_p50:8.3f} {o_p50:9.3f} "
        f"{o_p99:9.3f} {o_mean / r_mean:7.2f} {o_p50 / r_p50:7.2f}"
    )


def main() -> None:
    """Run both benchmarks at each durability level and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--last", type=int, default=20)
    parser.add_argument("--samples", type=int, default=300, help="timed ops per history size")
    args = parser.parse_args()
    last = args.last
    print(
        f"{args.messages} appends of ~200 bytes, one per transaction; last-{last} read; "
        f"history {', '.join(map(str, HISTORY))} x {args.samples} samples"
    )
    print(
        f"{'sync':7} {'figure':14} {'raw mean':>9} {'ours mean':>10} {'raw p50':>8} "
        f"{'ours p50':>9} {'ours p99':>9} {'r(mean)':>7} {'r(p50)':>7}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for sync in ("FULL", "NORMAL"):
            raw, ours = Raw(Path(tmp) / f"raw-{sync}.db", sync), Ours(Path(tmp) / f"ours-{sync}.db", sync)
            print(_row(sync, "append", *_interleaved(args.messages, raw.append, ours.append)))
            print(_row(sync, f"last_{last}", *_interleaved(200, lambda: raw.read(last), lambda: ours.read(last))))
            print(_row(sync, f"full_{raw.count}", *_interleaved(20, lambda: raw.read(None), lambda: ours.read(None))))
            raw.close(), ours.close()
            raw, ours = Raw(Path(tmp) / f"raw-h-{sync}.db", sync), Ours(Path(tmp) / f"ours-h-{sync}.db", sync)
            for size in HISTORY:
                _grow(raw, size), _grow(ours, size)
                print(_row(sync, f"append@{size}", *_interleaved(args.samples, raw.append, ours.append)))
                reads = _interleaved(args.samples, lambda: raw.read(last), lambda: ours.read(last))
                print(_row(sync, f"last_{last}@{size}", *reads))
            raw.close(), ours.close()


if __name__ == "__main__":
    main()
