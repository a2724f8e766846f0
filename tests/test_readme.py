"""The README runs as printed: every ```python block, each in a fresh process in a fresh
directory, and the command-line examples say what the commands do."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

README = Path(__file__).resolve().parents[1] / "README.md"

#: A fence that opens or closes a code block, and its language (empty when none).
_FENCE = re.compile(r"^```(\S*)\s*$")
#: Languages a reader would take for Python; every block in one of them runs.
_PYTHON = {"python", "py", "python3", "pycon"}

#: What a block prints (a part of its stdout), by its id: the heading of its section and
#: its number in that section. A block missing here must still run and exit 0.
EXPECTED = {
    "Quick start (Python) #1": (
        "we found 'requests' is missing; next: check and fix requirements.txt"
    ),
    "Context for the model: `build_context` #1": "Goal: book a flight",
    "Compaction: stored summaries #1": "[91, 92, 93, 94, 95, 96, 97, 98, 99, 100]",
    "Rewind #1": "['a bad answer']",
    "Fork: try another path from any point #1": (
        "['Plan a trip', 'Paris or Rome?', 'Rome']\n{'plan': 'trip'}\n1\n"
    ),
    "Run leases: a dead worker's run recovers by itself #1": "INTERRUPTED\nrun-lease-expired\n",
}


def python_blocks(text: str) -> dict[str, str]:
    """Every Python code block of a Markdown ``text``, in order, by id (see EXPECTED).

    Raises:
        AssertionError: an unclosed fence.
    """
    blocks: dict[str, str] = {}
    heading, count, language, lines = "(top)", 0, None, []
    for line in text.splitlines():
        fence = _FENCE.match(line)
        if language is None:
            if fence:
                language, lines = fence.group(1), []
            elif line.startswith("#"):
                heading, count = line.lstrip("#").strip(), 0
        elif fence and not fence.group(1):
            if language in _PYTHON:
                count += 1
                blocks[f"{heading} #{count}"] = "\n".join(lines) + "\n"
            language = None
        else:
            lines.append(line)
    assert language is None, "README ends inside a code block"
    return blocks


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_the_block_finder_sees_every_python_block() -> None:
    """Headings inside code are not headings; each language a reader takes for Python
    counts; ids number the blocks of a section."""
    text = (
        "# A\n```python\nprint(1)\n# not a heading\n```\n"
        "```sh\nls\n```\n```py\nx\n```\n## B\n```\n```\n"
    )
    assert python_blocks(text) == {"A #1": "print(1)\n# not a heading\n", "A #2": "x\n"}
    assert len(BLOCKS) >= 8 and set(EXPECTED) <= set(BLOCKS)


@pytest.mark.parametrize("block_id", list(BLOCKS))
def test_every_python_block_runs_as_printed(block_id: str, tmp_path: Path) -> None:
    """The block, exactly as printed, in a fresh Python process in an empty directory:
    exit 0, and the output its comments promise (EXPECTED)."""
    done = subprocess.run(
        [sys.executable, "-c", BLOCKS[block_id]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert EXPECTED.get(block_id, "") in done.stdout, done.stdout
    if block_id.startswith("Quick start"):
        assert (tmp_path / "sessions.db").exists()


def test_the_command_line_examples_say_what_the_commands_do() -> None:
    """``db upgrade``'s comment names the head revision (what the command prints), and
    the ADK import's source is not the store file the examples use."""
    from agentsession.stores.migrate import head_revision

    text = README.read_text(encoding="utf-8")
    assert re.findall(r"schema at revision (\S+)", text) == [head_revision()]
    sources = re.findall(r"agentsession import google-adk (\S+)", text)
    assert sources and "sessions.db" not in sources


def test_delete_is_shown_with_yes() -> None:
    """A ``delete`` copied from the README runs without a terminal: every line that
    calls the command passes ``--yes``, an option the command has."""
    from agentsession.cli.app import build_app

    lines = [
        line
        for line in README.read_text(encoding="utf-8").splitlines()
        if re.match(r"\s*(\.venv/bin/)?agentsession\b.*[ |]delete\b", line)
    ]
    assert lines and all("--yes" in line.split("#")[0] for line in lines), lines
    help_text = CliRunner().invoke(build_app(), ["delete", "--help"], terminal_width=200).output
    assert "--yes" in help_text
