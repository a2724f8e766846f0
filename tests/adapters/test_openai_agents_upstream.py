"""openai-agents' own session and runner tests, run on the adapter.

The tests come from the PyPI source distribution of the installed openai-agents version
(downloaded by pip at test time into ``.cache/upstream/``, kept there for the next run,
never copied into this repository; without network the tests are skipped). A pytest
run inside the unpacked sdist loads the plugin ``openai_agents_shim``, which makes
every ``SQLiteSession`` the tests build an ``AgentSessionSession`` on agentsession's
SQLite store. Tests that reach into
SQLiteSession's own internals are deselected, each with its reason (``INTERNALS``).
Both tests are slow (about 30 and 60 s): ``make test-all`` runs them.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("agents", reason="openai-agents not installed: pip install -e '.[dev]'")
pytest.importorskip(
    "pytest_asyncio", reason="pytest-asyncio not installed: pip install -e '.[dev]'"
)

HERE = Path(__file__).resolve().parent
CACHE = HERE.parents[1] / ".cache" / "upstream"

_CONNECTIONS = (
    "drives SQLiteSession's own sqlite3 connections, locks or transactions (private "
    "attributes, patched connection methods); the adapter has none"
)
_CORRUPT_ROWS = (
    "writes undecodable rows into SQLiteSession's tables with sqlite3; agentsession "
    "stores only valid JSON messages"
)
_CLOSED = (
    "SQLiteSession.close() closes its database so later writes raise; the adapter's "
    "close() only lets its worker threads go, the backend belongs to the caller"
)

#: Upstream tests left out, and why: each reaches into SQLiteSession itself.
INTERNALS: dict[str, str] = {
    **{
        f"tests/memory/test_session.py::{name}": _CONNECTIONS
        for name in (
            "test_sqlite_session_close_closes_worker_thread_connections",
            "test_sqlite_session_reaps_connections_from_exited_worker_threads",
            "test_sqlite_session_closes_retired_connections_before_the_next_allocation",
            "test_sqlite_session_keeps_connections_of_live_worker_threads",
            "test_sqlite_session_file_lock_is_shared_across_instances",
            "test_sqlite_session_failed_add_items_releases_write_lock",
            "test_sqlite_session_failed_clear_session_rolls_back",
            "test_sqlite_session_failed_pop_item_releases_write_lock",
            "test_sqlite_session_rollback_failure_evicts_connection",
            "test_sqlite_session_close_retries_quarantined_connection",
            "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome",
        )
    },
    **{
        f"tests/memory/test_session.py::{name}": _CORRUPT_ROWS
        for name in (
            "test_sqlite_session_pop_item_skips_corrupt_most_recent",
            "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows",
            "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows",
            "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows",
        )
    },
    "tests/memory/test_session.py::test_sqlite_session_closed_rejects_empty_add_items": _CLOSED,
    "tests/test_run_impl_resume_paths.py::test_handoff_resume_after_cancelled_compaction_commits": (
        "writes its history with SQLiteSession._insert_items, a private method"
    ),
}


def upstream_sdist() -> Path:
    """The unpacked sdist of the installed openai-agents version: downloaded by pip and
    unpacked on first use, then reused. Parallel test processes take turns under a file
    lock; the sdist is unpacked into a temporary directory and moved into place whole,
    and a marker file written last proves it complete. Without network (the download
    fails) the test is skipped."""
    version = importlib.metadata.version("openai-agents")
    root = CACHE / f"openai_agents-{version}"
    marker = CACHE / f"openai_agents-{version}.complete"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            _unpack(version, root)
            marker.write_text("unpacked\n")
    return root


def _unpack(version: str, root: Path) -> None:
    """Download the sdist (if not there yet) and unpack it to ``root``, replacing what
    an interrupted earlier run left there."""
    archive = CACHE / f"openai_agents-{version}.tar.gz"
    if not archive.exists():
        with tempfile.TemporaryDirectory(dir=CACHE) as download:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--quiet",
                    "--no-deps",
                    "--no-binary",
                    ":all:",
                    "-d",
                    download,
                    f"openai-agents=={version}",
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if done.returncode != 0:
                pytest.skip(f"cannot download the openai-agents {version} sdist: {done.stderr}")
            os.replace(Path(download) / archive.name, archive)
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(scratch, filter="data")
            else:  # Python < 3.11.4 has no extraction filters: plain files, no escapes
                tar.extractall(scratch, members=_plain_members(tar))
        shutil.rmtree(root, ignore_errors=True)
        os.replace(Path(scratch) / root.name, root)


def _plain_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """The archive's files and folders whose paths stay inside the target.

    Raises:
        ValueError: a member with an absolute path, a ``..`` part, or a link.
    """
    for member in tar.getmembers():
        parts = Path(member.name).parts
        if (
            Path(member.name).is_absolute()
            or ".." in parts
            or not (member.isfile() or member.isdir())
        ):
            raise ValueError(f"unsafe member in the openai-agents sdist: {member.name!r}")
    return tar.getmembers()


class Outcome:
    """Counts of one upstream pytest run, from its summary lines."""

    def __init__(self, output: str) -> None:
        self.output = output
        ends = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed)", line)]
        summary = ends[-1] if ends else ""
        counts = dict((word, int(n)) for n, word in re.findall(r"(\d+) (\w+)", summary))
        self.passed, self.failed = counts.get("passed", 0), counts.get("failed", 0)
        self.skipped, self.deselected = counts.get("skipped", 0), counts.get("deselected", 0)
        self.errors = counts.get("error", 0) + counts.get("errors", 0)
        used = re.search(r"agentsession adapter used by (\d+) tests", output)
        self.on_adapter = int(used.group(1)) if used else 0

    def report(self, what: str) -> str:
        """The line the closing note quotes."""
        return (
            f"upstream openai-agents {what}: {self.passed} passed, {self.skipped} skipped, "
            f"{self.deselected} deselected; {self.on_adapter} tests built an adapter session"
        )


def run_upstream(paths: list[str], *options: str) -> Outcome:
    """Run the upstream tests ``paths`` with the shim and pytest ``options``,
    ``INTERNALS`` deselected, and return the counts."""
    root = upstream_sdist()
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "openai_agents_shim",
        *paths,
    ]
    args += options
    for node in INTERNALS:
        if node.split("::")[0] in paths:
            args += ["--deselect", node]
    # No empty entry: it would put the sdist root (the cwd) on sys.path.
    paths_before = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *paths_before])}
    done = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    return Outcome(done.stdout + done.stderr)


@pytest.mark.slow
def test_upstream_session_tests_pass_on_the_adapter() -> None:
    """openai-agents' session tests (tests/memory/test_session.py, test_session_limit.py):
    Runner runs (run, run_sync, run_streamed) with sessions, limits, pop, clear, unicode,
    SQL-injection strings and concurrent access, all on the adapter."""
    outcome = run_upstream(["tests/memory/test_session.py", "tests/memory/test_session_limit.py"])
    print(outcome.report("session tests"))
    assert outcome.failed == 0 and outcome.errors == 0, outcome.output[-5000:]
    assert outcome.passed >= 50, outcome.output[-5000:]
    assert outcome.on_adapter >= 45


@pytest.mark.slow
def test_upstream_runner_tests_with_sessions_pass_on_the_adapter() -> None:
    """openai-agents' Runner tests whose code builds a ``SQLiteSession`` (retries that
    rewind a session's tail, resumed and interrupted runs, tool failures, turn limits),
    on the adapter."""
    outcome = run_upstream(
        [
            "tests/test_agent_runner.py",
            "tests/test_agent_runner_streamed.py",
            "tests/test_run_impl_resume_paths.py",
            "tests/test_tool_batch_failure_history.py",
            "tests/test_max_turns.py",
            "tests/test_soft_cancel.py",
            "tests/test_native_tool_failure_history.py",
            "tests/test_tool_failure_boundaries.py",
            "tests/test_programmatic_tool_calling.py",
        ],
        "--session-tests-only",
    )
    print(outcome.report("runner tests"))
    assert outcome.failed == 0 and outcome.errors == 0, outcome.output[-5000:]
    assert outcome.passed >= 160, outcome.output[-5000:]
    assert outcome.on_adapter >= 150
