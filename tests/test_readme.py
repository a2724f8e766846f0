"""The README and the docs pages run as printed: every ```python block of the pages listed
in RUN_PAGES, each in a fresh process in a fresh directory; the command-line examples
say what the commands do; every link between the pages reaches its page and heading;
the README stays short enough for a newcomer."""

from __future__ import annotations

import re
import subprocess
import sys
from ast import PyCF_ALLOW_TOP_LEVEL_AWAIT, PyCF_ONLY_AST
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: Every Markdown page a reader is sent to: the README and docs/.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

#: The pages whose Python blocks run as printed, each in a fresh process: the README
#: and the pages its examples moved to. Listed by hand, so leaving a page out is a
#: decision (see test_every_python_block_is_run_or_compiled).
RUN_PAGES = (
    "README.md",
    "docs/guide.md",
    "docs/http.md",
    "docs/cli.md",
    "docs/storage.md",
    "docs/performance.md",
)
#: Pages whose Python blocks are excerpts of a framework's code (top-level ``await``, a
#: framework's objects): they cannot run alone, so they only have to compile.
EXCERPT_PAGES = ("docs/adapters.md",)

#: The most lines the README may have: it is the page a newcomer reads first.
MAX_README_LINES = 400

#: A fence that opens or closes a code block, and its language (empty when none).
_FENCE = re.compile(r"^```(\S*)\s*$")
#: Languages a reader would take for Python; every block in one of them runs.
_PYTHON = {"python", "py", "python3", "pycon"}
#: A Markdown link to a local file: its target and optional #anchor.
_LINK = re.compile(r"\]\((?!https?:|mailto:)([^)#\s]*)(?:#([^)\s]+))?\)")

#: What a block prints (a part of its stdout), by its id: its page, the heading of its
#: section and its number in that section. A block missing here must still run and exit 0.
EXPECTED = {
    "README.md: Quick start (Python) #1": (
        "we found 'requests' is missing; next: check and fix requirements.txt"
    ),
    "docs/guide.md: Context for the model: `build_context` #1": "Goal: book a flight",
    "docs/guide.md: Compaction: stored summaries #1": "[91, 92, 93, 94, 95, 96, 97, 98, 99, 100]",
    "docs/guide.md: Rewind #1": "['a bad answer']",
    "docs/guide.md: Fork: try another path from any point #1": (
        "['Plan a trip', 'Paris or Rome?', 'Rome']\n{'plan': 'trip'}\n1\n"
    ),
    "docs/guide.md: Run leases: a dead worker's run recovers by itself #1": (
        "INTERRUPTED\nrun-lease-expired\n"
    ),
}


def python_blocks(text: str) -> dict[str, str]:
    """Every Python code block of a Markdown ``text``, in order, by its heading and its
    number in that section (``"Rewind #1"``).

    Raises:
        AssertionError: an unclosed fence.
    """
    blocks: dict[str, str] = {}
    heading, count = "(top)", 0
    language: str | None = None
    lines: list[str] = []
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
    assert language is None, "the page ends inside a code block"
    return blocks


def page_blocks(pages: tuple[str, ...]) -> dict[str, str]:
    """The Python blocks of ``pages`` (paths under the repository root), by id
    ``"<page>: <heading> #<n>"`` (see EXPECTED)."""
    return {
        f"{page}: {block_id}": code
        for page in pages
        for block_id, code in python_blocks((ROOT / page).read_text(encoding="utf-8")).items()
    }


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown ``text``: lower case, every
    character but letters, digits, ``-`` and ``_`` dropped, spaces as ``-``, a repeated
    anchor numbered ``-1``, ``-2``... Headings inside code blocks are not headings."""
    anchors: set[str] = set()
    in_code = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_code = not in_code
        elif not in_code and re.match(r"#{1,6} ", line):
            slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            anchor, n = slug, 0
            while anchor in anchors:
                n += 1
                anchor = f"{slug}-{n}"
            anchors.add(anchor)
    return anchors


BLOCKS = page_blocks(RUN_PAGES)


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def test_the_block_finder_sees_every_python_block() -> None:
    """Headings inside code are not headings; each language a reader takes for Python
    counts; ids number the blocks of a section."""
    text = (
        "# A\n```python\nprint(1)\n# not a heading\n```\n"
        "```sh\nls\n```\n```py\nx\n```\n## B\n```\n```\n"
    )
    assert python_blocks(text) == {"A #1": "print(1)\n# not a heading\n", "A #2": "x\n"}
    assert len(BLOCKS) >= 8 and set(EXPECTED) <= set(BLOCKS)


def test_every_python_block_is_run_or_compiled() -> None:
    """A page with Python blocks is either run (RUN_PAGES) or holds excerpts that
    compile (EXCERPT_PAGES), so a block moved to a page nobody listed fails here."""
    listed = set(RUN_PAGES) | set(EXCERPT_PAGES)
    with_blocks = {str(page.relative_to(ROOT)) for page in PAGES if python_blocks(_text(page))}
    assert with_blocks <= listed, sorted(with_blocks - listed)
    for block_id, code in page_blocks(EXCERPT_PAGES).items():
        compile(code, block_id, "exec", PyCF_ONLY_AST | PyCF_ALLOW_TOP_LEVEL_AWAIT)


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
    if block_id.startswith("README.md: Quick start"):
        assert (tmp_path / "sessions.db").exists()


def test_the_readme_stays_short() -> None:
    """The README is the newcomer's page: at most MAX_README_LINES lines, and it keeps
    the two commands."""
    text = _text(README)
    assert len(text.splitlines()) <= MAX_README_LINES
    assert "make demo" in text and "make test" in text


def test_every_link_reaches_its_page_and_heading() -> None:
    """Each local link of the README and docs/ names a file that exists and, when it
    has an ``#anchor`` into a Markdown page, a heading of that page."""
    broken = []
    for page in PAGES:
        for target, anchor in _LINK.findall(_text(page)):
            path = (page.parent / target).resolve() if target else page
            if not path.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and path.suffix == ".md" and anchor not in heading_anchors(_text(path)):
                broken.append(f"{page.name}: {target}#{anchor}")
    assert not broken, broken


def test_the_command_line_examples_say_what_the_commands_do() -> None:
    """``db upgrade``'s comment names the head revision (what the command prints), and
    the ADK import's source is not the store file the examples use."""
    from agentsession.stores.sql.migrate import head_revision

    text = "\n".join(_text(page) for page in PAGES)
    revisions = re.findall(r"schema at revision (\S+)", text)
    assert revisions and set(revisions) == {head_revision()}
    sources = re.findall(r"agentsession import google-adk (\S+)", text)
    assert sources and "sessions.db" not in sources


def test_delete_is_shown_with_yes() -> None:
    """A ``delete`` copied from the README or a docs page runs without a terminal: every
    line that calls the command passes ``--yes``, an option the command has."""
    from agentsession.cli.app import build_app

    lines = [
        line
        for page in PAGES
        for line in _text(page).splitlines()
        if re.match(r"\s*(\.venv/bin/)?agentsession\b.*[ |]delete\b", line)
    ]
    assert lines and all("--yes" in line.split("#")[0] for line in lines), lines
    help_text = CliRunner().invoke(build_app(), ["delete", "--help"], terminal_width=200).output
    assert "--yes" in help_text


#: A command line in a shell block: ``agentsession`` at the start of a line (after
#: ``$ ``), after ``(``, ``/`` (``.venv/bin/``) or ``-m ``, up to a comment, a closing
#: ``)``, a redirection or the end of a command.
_SHELL_CALL = re.compile(r"(?:^\s*(?:\$ )?|[(/]|-m )agentsession ([^)#;&>\n]*)")
#: An inline code span that is a command line.
_INLINE_CALL = re.compile(r"`agentsession ([^`]*)`")
_SHELL = {"", "sh", "bash", "shell", "console"}


def command_lines(text: str) -> list[str]:
    """The words after ``agentsession`` of every command line of a Markdown ``text``:
    in its shell code blocks and in inline code spans (a pipe ``a | b`` ends one)."""
    calls: list[str] = []
    language: str | None = None
    for line in text.splitlines():
        fence = _FENCE.match(line)
        if fence:
            language = fence.group(1) if language is None else None
        elif language in _SHELL:
            calls += [m.group(1) for m in _SHELL_CALL.finditer(line)]
        elif language is None:
            calls += [m.group(1) for m in _INLINE_CALL.finditer(line)]
    return [call.split(" | ")[0].strip() for call in calls]


def command_problem(command: Any, words: list[str], path: tuple[str, ...] = ()) -> str | None:
    """What is wrong with ``agentsession <words>`` against the click ``command`` tree:
    None when every command name is a real command path and every ``--option`` one of
    its own or its groups' options. ``a|b`` or ``a/b`` in a command's place shows
    alternatives, each checked; ``[--out FILE]`` an optional part."""
    options: set[str] = set()
    while hasattr(command, "commands") and words and not words[0].startswith("-"):
        options |= {o for p in command.params for o in p.opts + p.secondary_opts}
        names = re.split(r"[|/]", words[0])
        missing = [n for n in names if n not in command.commands]
        if missing:
            return f"no command {missing[0]!r} in 'agentsession {' '.join(path)}'"
        for other in names[1:]:
            wrong = command_problem(command.commands[other], words[1:], (*path, other))
            if wrong:
                return wrong
        command, path, words = command.commands[names[0]], (*path, names[0]), words[1:]
    options |= {o for p in command.params for o in p.opts + p.secondary_opts}
    for word in words:
        name = word.strip("[]").split("=")[0]
        if name.startswith("-") and name != "-" and name not in options:
            return f"'agentsession {' '.join(path)}' has no option {name}"
    return None


def test_every_command_line_names_a_real_command_and_options() -> None:
    """Every ``agentsession ...`` command line in the README and docs/ (shell blocks and
    inline code) names a real command path (``import google-adk``, not ``import adk``)
    with options that command has; the checker itself refuses a wrong name and option."""
    import typer

    from agentsession.cli.app import build_app

    root = typer.main.get_command(build_app())
    found = {
        (page.name, call): command_problem(root, call.split())
        for page in PAGES
        for call in command_lines(_text(page))
    }
    assert len(found) > 50, len(found)
    assert not {k: v for k, v in found.items() if v}, {k: v for k, v in found.items() if v}
    assert "no command 'adk'" in str(command_problem(root, ["import", "adk", "x"]))
    assert "no option --yes" in str(command_problem(root, ["export", "S", "--yes"]))
    assert "no option --nope" in str(command_problem(root, ["close|delete", "S", "--nope"]))


def test_the_exit_codes_are_documented_in_one_table() -> None:
    """docs/cli.md's exit-code table has one row for each code the CLI exits with (0,
    the usage code and every code of ``EXIT_CODES``), naming each error class there."""
    from agentsession.cli.common import EXIT_CODES, EXIT_USAGE

    text = _text(ROOT / "docs" / "cli.md").split("## Exit codes", 1)[1]
    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", text, flags=re.M))
    assert set(rows) == {str(code) for code in (0, EXIT_USAGE, *(c for _, c in EXIT_CODES))}
    for cls, code in EXIT_CODES:
        assert cls is EXIT_CODES[-1][0] or f"`{cls.__name__}`" in rows[str(code)], cls
