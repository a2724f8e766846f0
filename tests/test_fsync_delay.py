"""The benchmark's cloud-like disk (``benchmarks/fsyncdelay.c``) really delays flushes.

Built with the C compiler found (skipped with the reason when there is none) and loaded
with ``LD_PRELOAD`` into a child Python, it must sleep ``FSYNC_DELAY_MS`` in every
``fsync`` and ``fdatasync`` (SQLite's commits included) and still make the real call.
Checked by counting the calls and by a lower bound only (N flushes take at least N x
the delay), never against a speed target.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
try:
    import fsyncdelay
finally:
    sys.path.pop(0)

pytestmark = pytest.mark.skipif(
    fsyncdelay.compiler() is None, reason="no C compiler ($CC, cc, gcc, clang) to build it"
)

DELAY_MS = 25
FLUSHES = 8

# Runs in the child: the flushes, timed, with the library's call counter read around them.
CHILD = """
import ctypes, errno, json, os, sqlite3, sys, time
lib = ctypes.CDLL(None)
lib.fsyncdelay_calls.restype = ctypes.c_ulong
n, where = int(sys.argv[1]), sys.argv[2]
out = {}
fd = os.open(os.path.join(where, "file"), os.O_WRONLY | os.O_CREAT)
for name, flush in (("fsync", os.fsync), ("fdatasync", os.fdatasync)):
    before, t0 = lib.fsyncdelay_calls(), time.perf_counter()
    for _ in range(n):
        os.write(fd, b"x")
        flush(fd)
    out[name] = [lib.fsyncdelay_calls() - before, time.perf_counter() - t0]
db = sqlite3.connect(os.path.join(where, "db"), isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE t (x)")
before, t0 = lib.fsyncdelay_calls(), time.perf_counter()
for i in range(n):
    db.execute("INSERT INTO t VALUES (?)", (i,))
out["sqlite"] = [lib.fsyncdelay_calls() - before, time.perf_counter() - t0]
try:
    os.fsync(987654)
except OSError as exc:
    out["bad_fd_errno"] = errno.errorcode[exc.errno]
print(json.dumps(out))
"""


def _child(tmp_path: Path, delay_ms: float | None) -> dict[str, Any]:
    library, how = fsyncdelay.build(tmp_path / "build" / "libfsyncdelay.so")
    assert library is not None, how
    env = fsyncdelay.environment(library, delay_ms or 0)
    if delay_ms is None:
        del env["FSYNC_DELAY_MS"]
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(FLUSHES), str(tmp_path)],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_every_fsync_and_fdatasync_waits_the_delay_then_flushes(tmp_path: Path) -> None:
    result = _child(tmp_path, DELAY_MS)
    for name in ("fsync", "fdatasync"):
        calls, seconds = result[name]
        assert calls == FLUSHES, name
        assert seconds >= FLUSHES * DELAY_MS / 1000, name
    # The real call still runs: its error reaches the caller unchanged.
    assert result["bad_fd_errno"] == "EBADF"


def test_sqlite_commits_at_full_wait_the_delay(tmp_path: Path) -> None:
    calls, seconds = _child(tmp_path, DELAY_MS)["sqlite"]
    assert calls >= FLUSHES  # at least one flush per commit of WAL + FULL
    assert seconds >= calls * DELAY_MS / 1000


def test_without_a_delay_calls_are_counted_only(tmp_path: Path) -> None:
    result = _child(tmp_path, None)
    assert result["fsync"][0] == FLUSHES
    assert result["bad_fd_errno"] == "EBADF"


def test_the_preload_keeps_one_already_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_PRELOAD", "/opt/other.so")
    env = fsyncdelay.environment(tmp_path / "lib.so", 2)
    assert env == {"LD_PRELOAD": f"{tmp_path / 'lib.so'} /opt/other.so", "FSYNC_DELAY_MS": "2"}
