"""`agentsession demo`: workspace safety (fast) and the real two-process run (slow)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentsession.demo import DemoError
from agentsession.demo.workspace import use_project


def test_demo_refuses_to_empty_a_directory_it_did_not_make(tmp_path: Path) -> None:
    """A non-empty --workdir without the demo's marker is left alone."""
    (tmp_path / "precious.txt").write_text("keep me")
    project = tmp_path.parent / f"{tmp_path.name}-project"
    project.mkdir()
    with pytest.raises(DemoError, match="not made by the demo"):
        use_project(tmp_path, project, "python app.py")
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_demo_refuses_a_project_inside_the_workdir(tmp_path: Path) -> None:
    """--project inside --workdir would be deleted, so it is refused."""
    (tmp_path / "proj").mkdir()
    with pytest.raises(DemoError, match="must not be inside"):
        use_project(tmp_path, tmp_path / "proj", "python app.py")


def test_demo_command_rejects_project_without_cmd(tmp_path: Path) -> None:
    """--project without --cmd is a usage error (exit 2), reported on one line."""
    from typer.testing import CliRunner

    from agentsession.cli import build_app

    result = CliRunner().invoke(build_app(), ["demo", "--project", str(tmp_path)])
    assert result.exit_code == 2 and result.stderr.startswith("error: --project needs --cmd")


@pytest.mark.slow
def test_demo_end_to_end(tmp_path: Path) -> None:
    """The real demo: two PIDs, requests found and fixed, runs 1-3 SUCCEEDED, verified."""
    workdir = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "agentsession", "demo", "--workdir", str(workdir), "--lang", "en"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    pid1 = re.search(r"process 1 · pid (\d+)", out)
    pid2 = re.search(r"process 2 · pid (\d+) \(parent pid (\d+)\)", out)
    assert pid1 and pid2 and pid1.group(1) != pid2.group(1) and pid2.group(2) == pid1.group(1)
    assert "ModuleNotFoundError: No module named 'requests'" in out
    assert "We already found `requests` missing" in out and "NOT re-run" in out
    for seq, task in ((1, "diagnose"), (2, "fix requirements.txt"), (3, "verify")):
        assert re.search(rf"{seq} {task}[^,\n]* SUCCEEDED", out), seq
    assert "final verification: ok" in out
    assert "diagnosis repeated after restore: no" in out
    requirements = (workdir / "project" / "requirements.txt").read_text().split()
    assert requirements == ["flask", "requests"]
