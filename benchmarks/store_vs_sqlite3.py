"""agentsession on SQLite against raw sqlite3 doing the same work, in one run.

The baseline executes, per append, the statements agentsession's SQL store executes:
one INSERT of the message, one compare-and-set UPDATE of the session row, one INSERT of
the audit event, in one ``BEGIN IMMEDIATE`` transaction, with the same PRAGMAs (WAL,
the same ``synchronous`` level). So the ratio is our overhead, not a different amount of
work. Reads: the newest N messages by an indexed ``ORDER BY seq DESC LIMIT N``.

Run: ``make bench`` or ``.venv/bin/python benchmarks/store_vs_sqlite3.py [--messages N]``.
Prints a table of means/percentiles (milliseconds) and ratios to the baseline.
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


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "mean_ms": statistics.fmean(ordered) * 1000,
        "p50_ms": ordered[len(ordered) // 2] * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    }


def _time_each(n: int, fn: Callable[[int], object]) -> list[float]:
    samples = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - start)
    return samples


def bench_agentsession(path: Path, n: int, synchronous: str, last_n: int) -> dict[str, object]:
    """Append ``n`` messages one at a time, then read the newest ``last_n`` 200 times."""
    sm = SessionManager.from_url(
        f"sqlite:///{path}", auto_migrate=True, sqlite_synchronous=synchronous
    )
    s = sm.create_session(user_id="bench", agent="bench")
    roles = ("user", "assistant")

    def append(i: int) -> object:
        return sm.append_message(
            session_id=s.session_id,
            user_id="bench",
            message={"role": roles[i % 2], "content": CONTENT},
        )

    appends = _time_each(n, append)
    reads = _time_each(
        200, lambda i: sm.get_messages(session_id=s.session_id, user_id="bench", limit=last_n)
    )
    full = _time_each(20, lambda i: sm.get_messages(session_id=s.session_id, user_id="bench"))
    sm.close()
    return {"append": appends, "last_n": reads, "full": full}


def bench_raw(path: Path, n: int, synchronous: str, last_n: int) -> dict[str, object]:
    """The same statements through plain sqlite3 (see the module docstring)."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    db.executescript(
        """
        CREATE TABLE sessions (session_id TEXT PRIMARY KEY, version INTEGER, updated_at TEXT,
                               message_count INTEGER);
        CREATE TABLE messages (session_id TEXT, seq INTEGER, message_id TEXT, role TEXT,
                               payload TEXT, created_at TEXT, PRIMARY KEY (session_id, seq));
        CREATE TABLE audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT,
                            action TEXT, at TEXT, details TEXT);
        INSERT INTO sessions VALUES ('s', 1, '', 0);
        """
    )
    roles = ("user", "assistant")

    def append(i: int) -> None:
        now = datetime.now(UTC).isoformat()
        payload = json.dumps({"role": roles[i % 2], "content": CONTENT}, ensure_ascii=False)
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "INSERT INTO messages VALUES ('s', ?, ?, ?, ?, ?)",
            (i + 1, f"msg_{i}", roles[i % 2], payload, now),
        )
        db.execute(
            "UPDATE sessions SET version = ?, updated_at = ?, message_count = ? "
            "WHERE session_id = 's' AND version = ?",
            (i + 2, now, i + 1, i + 1),
        )
        db.execute(
            "INSERT INTO audit (session_id, action, at, details) VALUES ('s', 'append', ?, ?)",
            (now, '{"count":1}'),
        )
        db.execute("COMMIT")

    def read(limit: int | None) -> list[tuple[object, ...]]:
        sql = "SELECT seq, message_id, role, payload, created_at FROM messages "
        sql += "WHERE session_id = 's' ORDER BY seq DESC"
        rows = db.execute(sql + (f" LIMIT {limit}" if limit else "")).fetchall()
        return [(*r[:3], json.loads(r[3]), datetime.fromisoformat(r[4])) for r in rows[::-1]]

    appends = _time_each(n, append)
    reads = _time_each(200, lambda i: read(last_n))
    full = _time_each(20, lambda i: read(None))
    db.close()
    return {"append": appends, "last_n": reads, "full": full}


def main() -> None:
    """Run both benchmarks at each durability level and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--last", type=int, default=20)
    args = parser.parse_args()
    print(f"{args.messages} appends of ~200 bytes, one per transaction; last-{args.last} read")
    print(f"{'sync':7} {'figure':12} {'raw mean':>9} {'ours mean':>10} {'ours p99':>9} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for synchronous in ("FULL", "NORMAL"):
            raw = bench_raw(Path(tmp) / f"raw-{synchronous}.db", args.messages, synchronous, args.last)
            ours = bench_agentsession(
                Path(tmp) / f"ours-{synchronous}.db", args.messages, synchronous, args.last
            )
            for figure in ("append", "last_n", "full"):
                r, o = _stats(raw[figure]), _stats(ours[figure])  # type: ignore[arg-type]
                print(
                    f"{synchronous:7} {figure:12} {r['mean_ms']:9.3f} {o['mean_ms']:10.3f} "
                    f"{o['p99_ms']:9.3f} {o['mean_ms'] / r['mean_ms']:6.2f}"
                )


if __name__ == "__main__":
    main()
