"""Project tools: confinement to the project directory, atomic edits, bounded output."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from agentsession.engine import ProjectTools, ToolError


@pytest.fixture
def tools(tmp_path: Path) -> ProjectTools:
    """Tools over an empty project directory inside tmp_path."""
    root = tmp_path / "project"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("outside")
    return ProjectTools(root, timeout_s=5, max_output_chars=100)


@pytest.mark.parametrize("path", ["../secret.txt", "/etc/passwd", "a/../../secret.txt"])
def test_paths_outside_the_project_are_refused(tools: ProjectTools, path: str) -> None:
    """read_file and edit_file refuse paths that resolve outside the root."""
    assert "outside the project" in (tools.execute("read_file", {"path": path}).error or "")
    outcome = tools.execute("edit_file", {"path": path, "append_line": "x"})
    assert outcome.error is not None and "outside the project" in outcome.error
    assert (tools.root.parent / "secret.txt").read_text() == "outside"


def test_symlink_escaping_the_project_is_refused(tools: ProjectTools) -> None:
    """A symlink inside the project that points outside it is not followed."""
    (tools.root / "link").symlink_to(tools.root.parent / "secret.txt")
    with pytest.raises(ToolError):
        tools.resolve("link")


def test_edit_file_replaces_once_or_appends(tools: ProjectTools) -> None:
    """Replace needs exactly one occurrence; append adds a missing final newline first."""
    (tools.root / "r.txt").write_text("flask")
    assert tools.execute("edit_file", {"path": "r.txt", "append_line": "requests"}).ok
    assert (tools.root / "r.txt").read_text() == "flask\nrequests\n"
    ok = tools.execute("edit_file", {"path": "r.txt", "old": "flask", "new": "flask>=3"})
    assert ok.ok and ok.result["mode"] == "replace"
    missing = tools.execute("edit_file", {"path": "r.txt", "old": "django", "new": "x"})
    assert "occurs 0 times" in (missing.error or "")
    assert (tools.root / "r.txt").read_text() == "flask>=3\nrequests\n"
    assert [p.name for p in tools.root.iterdir()] == ["r.txt"]  # no temp files left


def test_run_command_captures_exit_code_and_bounds_output(tools: ProjectTools) -> None:
    """Non-zero exit is an error outcome; stdout is cut to its last max_output_chars."""
    code = "import sys; print('x' * 500); sys.exit(3)"
    outcome = tools.execute("run_command", {"command": shlex.join([sys.executable, "-c", code])})
    assert outcome.error == "exit code 3" and outcome.result["exit_code"] == 3
    assert outcome.result["stdout_tail"].endswith("x" * 50 + "\n")
    assert "characters dropped" in outcome.result["stdout_tail"]


def test_run_command_times_out(tools: ProjectTools) -> None:
    """A command past its timeout is stopped and reported, not waited for."""
    command = shlex.join([sys.executable, "-c", "import time; time.sleep(30)"])
    outcome = tools.execute("run_command", {"command": command, "timeout_s": 0.5})
    assert outcome.result["timed_out"] is True and "timed out" in (outcome.error or "")


def test_run_command_runs_in_the_project(tools: ProjectTools) -> None:
    """The working directory is the project root; a missing program is a tool error."""
    pwd = shlex.join([sys.executable, "-c", "import os; print(os.getcwd())"])
    assert tools.execute("run_command", {"command": pwd}).result["stdout_tail"].strip() == str(
        tools.root
    )
    assert "cannot run" in (
        tools.execute("run_command", {"command": "no-such-prog-xyz"}).error or ""
    )
