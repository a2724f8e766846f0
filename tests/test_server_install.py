"""``make test`` and ``make test-all`` install the test servers first when they can
(``scripts/install-test-servers.sh``, as ``.ci/run`` gets them), and a run whose servers
are missing ends with a loud block naming each skipped store and the command that
installs it (``tests/servers.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import servers

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "install-test-servers.sh"


@pytest.mark.parametrize("target", ["test", "test-all"])
def test_the_test_targets_install_the_servers_before_pytest(target: str) -> None:
    plan = subprocess.run(
        ["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert plan.returncode == 0, plan.stderr
    lines = plan.stdout.splitlines()
    install = lines.index(f"bash {SCRIPT.relative_to(ROOT)}")
    assert any("-m pytest" in line for line in lines[install + 1 :]), lines


def test_ci_installs_through_make_only() -> None:
    """One install step: ``.ci/run`` leaves it to ``make test-all``."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "apt-get install" not in ci and "make lint test-all" in ci


def test_the_script_looks_where_the_tests_do() -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    assert servers._POSTGRES_INITDB in text
    assert all(directory in text for directory in servers._SBIN_DIRS)
    assert "policy-rc.d" in text and "exit 101" in text


def _stub_bin(tmp_path: Path, uid: int) -> tuple[Path, Path]:
    """A PATH of stubs: ``id`` answering ``uid``; ``apt-get`` leaving a marker file."""
    stubs, marker = tmp_path / "bin", tmp_path / "apt-get-ran"
    stubs.mkdir()
    (stubs / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (stubs / "apt-get").write_text(f"#!/bin/sh\ntouch {marker}\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    return stubs, marker


def test_the_script_without_root_says_what_is_missing_and_the_command(tmp_path: Path) -> None:
    """Not root: nothing installed, exit 0 (the tests still run), and a warning naming
    the missing packages and the command that installs them. With only the stubs on
    PATH, redis-server (in /usr/bin on Debian) is missing."""
    stubs, marker = _stub_bin(tmp_path, 1000)
    env = {"PATH": str(stubs)}
    done = subprocess.run(
        ["/bin/bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and not marker.exists(), done.stderr
    assert "redis-server" in done.stderr and "SKIPPED" in done.stderr
    assert servers.INSTALL_ALL in done.stderr
    off = subprocess.run(
        ["/bin/bash", str(SCRIPT)],
        env={**env, servers.SERVER_STORES_ENV: "0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (off.returncode, off.stdout, off.stderr) == (0, "", "")


HIDDEN_CONFTEST = """
pytest_plugins = ["servers"]


def pytest_configure(config):
    import servers

    servers._SBIN_DIRS = ()
    servers._POSTGRES_INITDB = "/nonexistent/*/bin/initdb"
"""

TESTS = """
def test_postgres(postgres_url): pass
def test_mysql(mysql_url): pass
def test_mysql_server(mysql_server): pass
def test_redis(redis_url): pass
def test_plain(): pass
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_run_without_servers_ends_naming_each_skipped_store(
    tmp_path: Path, workers: list[str]
) -> None:
    """Server binaries hidden: the last lines of the output, after pytest's own, name
    each store, its skipped tests and the command that installs its server."""
    (tmp_path / "conftest.py").write_text(HIDDEN_CONFTEST)
    (tmp_path / "test_needs_servers.py").write_text(TESTS)
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != servers.SERVER_STORES_ENV}
    env["PATH"] = str(empty)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), str(ROOT / "src")])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.rstrip().splitlines()
    block = next(i for i, line in enumerate(lines) if "SERVER STORES SKIPPED" in line)
    assert "1 passed, 4 skipped" in "\n".join(lines[:block])
    assert "SERVER STORES SKIPPED: postgres, mysql, redis" in lines[block]
    assert lines[block + 1 :] == [
        f"postgres: SKIPPED, 1 of its tests did not run; {servers._INSTALL_HINT['postgres']}",
        f"mysql: SKIPPED, 2 of its tests did not run; {servers._INSTALL_HINT['mysql']}",
        f"redis: SKIPPED, 1 of its tests did not run; {servers._INSTALL_HINT['redis']}",
        f"install every missing server: {servers.INSTALL_ALL}",
    ]
