"""Every command's ``--help``: plain text without typer's ``<bool>`` on flags, without
the Sphinx markup of docstrings, with the default of every option that has one."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from agentsession.cli.app import build_app

runner = CliRunner()

#: Options whose value falls back on a setting or a library default when not given:
#: their help names that default too.
FALLBACKS = {
    "--url",
    "--limit",
    "--host",
    "--port",
    "--workers",
    "--keys-file",
    "--model",
    "--out",
    "--at-seq",
}
SPHINX = re.compile(r":(class|func|meth|mod|attr|data|exc|obj|ref):`|``")


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(build_app())))
VISIBLE = [(path, command) for path, command in COMMANDS if not command.hidden]


def _id(value: object) -> str:
    """A test id: the command's path (``root`` for the app), nothing for the command."""
    return (" ".join(value) or "root") if isinstance(value, tuple) else ""


def test_the_walk_reaches_every_command() -> None:
    """The walk sees the sub-apps' commands, the hidden one too."""
    paths = {" ".join(path) for path, _ in COMMANDS}
    assert {
        "",
        "sessions list",
        "sessions steps",
        "db upgrade",
        "keys create",
        "serve",
        "import jsonl",
        "demo-continue",
        "delete",
        "erase",
    } <= paths


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=_id)
def test_help_is_clean(path: tuple[str, ...], command: Any, width: int) -> None:
    """No ``<bool>``, no Sphinx roles or double backticks, no line past the width, no
    command summary cut short with "..."."""
    result = runner.invoke(build_app(), [*path, "--help"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    assert "Usage: " in result.output and "Traceback" not in result.output
    assert "<bool>" not in result.output
    assert not SPHINX.search(result.output), SPHINX.search(result.output)
    assert max(len(line) for line in result.output.splitlines()) <= width
    cut = [line for line in result.output.splitlines()[1:] if line.endswith("...")]
    assert cut == [], "a summary cut short"


@pytest.mark.parametrize(("path", "command"), VISIBLE, ids=_id)
def test_help_shows_every_default(path: tuple[str, ...], command: Any) -> None:
    """An option with a default, or one that falls back on a setting, shows
    ``[default: ...]`` in its help line; plain flags show none."""
    ctx = typer.Context(command, info_name=" ".join(path))
    for param in command.params:
        if param.param_type_name != "option" or getattr(param, "is_flag", False):
            continue
        record = param.get_help_record(ctx)
        assert record is not None
        if param.default is not None or set(param.opts) & FALLBACKS:
            assert "[default: " in record[1], (path, param.opts, record)


@pytest.mark.parametrize(("path", "command"), VISIBLE, ids=_id)
def test_help_names_arguments_as_click_does(path: tuple[str, ...], command: Any) -> None:
    """Each argument is its name in capitals in the usage line and in the Arguments
    section, without typer's ``{session_id}`` braces or a ``<str>`` type beside it."""
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    result = runner.invoke(build_app(), [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    usage = result.output.splitlines()[0]
    assert "{" not in usage, usage
    if not arguments:
        return
    section = result.output.split("Arguments:\n", 1)[1].split("\n\n", 1)[0]
    for param in arguments:
        name = param.name.upper()
        assert re.search(rf" \[?{name}\]?( |$)", usage), (usage, name)
        row = next(line for line in section.splitlines() if line.strip().startswith(name))
        assert not re.search(r"<\w+>", row), row
