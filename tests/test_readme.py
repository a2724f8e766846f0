"""The README's Python quick start runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_quick_start_runs_and_restores(tmp_path: Path) -> None:
    """The quick start's code block runs in a fresh directory and prints the restored memory."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "README has no python block"
    done = subprocess.run(
        [sys.executable, "-c", blocks[0]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "we found 'requests' is missing; next: check and fix requirements.txt" in done.stdout
    assert (tmp_path / "sessions.db").exists()


def test_the_command_line_examples_say_what_the_commands_do() -> None:
    """``db upgrade``'s comment names the head revision (what the command prints), and
    the ADK import's source is not the store file the examples use."""
    from agentsession.stores.migrate import head_revision

    text = README.read_text(encoding="utf-8")
    assert re.findall(r"schema at revision (\S+)", text) == [head_revision()]
    sources = re.findall(r"agentsession import google-adk (\S+)", text)
    assert sources and "sessions.db" not in sources


def test_the_run_lease_example_runs() -> None:
    """The run-lease section's code block runs and prints what its comments say."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Run leases", 1)[1]
    block = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    done = subprocess.run(
        [sys.executable, "-c", block], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["INTERRUPTED", "run-lease-expired"]


def test_the_context_compaction_and_fork_examples_run(tmp_path: Path) -> None:
    """The examples of "Context for the model", "Compaction" and "Fork" run as written."""
    text = README.read_text(encoding="utf-8")
    for heading, expected in (
        ("## Context for the model", "Goal: book a flight"),
        ("## Compaction", "[91, 92, 93, 94, 95, 96, 97, 98, 99, 100]"),
        ("## Fork", "['Plan a trip', 'Paris or Rome?', 'Rome']\n{'plan': 'trip'}\n1\n"),
    ):
        section = text.split(heading, 1)[1]
        block = re.findall(r"```python\n(.*?)```", section, re.S)[0]
        done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert expected in done.stdout, done.stdout
