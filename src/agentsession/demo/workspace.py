"""The demo's work directory: a fresh copy of the broken Flask project and its own venv.

Layout of ``<workdir>``: ``project/`` (copied from ``project_template``), ``venv/``
(kept between runs when it already has flask; ``requests`` is always uninstalled so the
failure is real), and ``sessions.db`` (the SQLite store, recreated each run; kept, with
its schema, by a run against the HTTP service, which does not use it).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rich.console import Console

__all__ = ["DemoError", "Workspace", "prepare_workspace", "use_project"]

_VENV = "venv"
_STORE = "sessions.db"
#: The SQLite store's files: kept when a run does not use the store.
_STORE_FILES = frozenset({_STORE, f"{_STORE}-wal", f"{_STORE}-shm"})


class DemoError(Exception):
    """The demo could not set itself up (venv creation or pip failed...)."""


@dataclass(frozen=True, slots=True)
class Workspace:
    """Where one demo run works.

    Attributes:
        workdir: the work directory. project: the project the agent repairs.
        url: the SQLite store URL. cmd: the project's start command.
    """

    workdir: Path
    project: Path
    url: str
    cmd: str


_MARKER = ".agentsession-demo"


def _clean(workdir: Path, keep: set[str]) -> None:
    """Empty ``workdir`` (except ``keep``), but only if the demo created it."""
    workdir.mkdir(parents=True, exist_ok=True)
    if any(workdir.iterdir()) and not (workdir / _MARKER).exists():
        raise DemoError(
            f"{workdir} is not empty and was not made by the demo; pass another --workdir"
        )
    for child in workdir.iterdir():
        if child.name in keep:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    (workdir / _MARKER).write_text("made by `agentsession demo`; deleted on each run\n")


def _python_of(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _has(python: Path, module: str) -> bool:
    if not python.exists():
        return False
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", probe], capture_output=True, check=False).returncode == 0


def _pip(python: Path, *args: str) -> None:
    proc = subprocess.run(
        [python, "-m", "pip", *args, "-q", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise DemoError(f"pip {' '.join(args)} failed: {' / '.join(tail)}")


def _keep(keep_store: bool) -> set[str]:
    return {_VENV, *(_STORE_FILES if keep_store else ())}


def prepare_workspace(workdir: Path, console: Console, *, keep_store: bool = False) -> Workspace:
    """Recreate ``workdir`` with the bundled project and a venv that has flask, not requests.

    Args:
        workdir: the work directory (emptied, except the venv).
        console: where progress is printed.
        keep_store: keep the SQLite store of an earlier run (this run does not use it).

    Raises:
        DemoError: the venv could not be created or flask not installed.
    """
    workdir = workdir.resolve()
    _clean(workdir, keep=_keep(keep_store))
    project = workdir / "project"
    project.mkdir()
    template = resources.files("agentsession.demo") / "project_template"
    for item in template.iterdir():
        if item.is_file() and not item.name.startswith((".", "__")):
            (project / item.name).write_bytes(item.read_bytes())
    venv = workdir / _VENV
    python = _python_of(venv)
    if _has(python, "flask"):
        console.print(f"project venv: reusing {venv} (flask already installed)")
    else:
        console.print(f"project venv: creating {venv} and installing flask (pip, ~10 s)…")
        shutil.rmtree(venv, ignore_errors=True)
        created = subprocess.run(
            [sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, check=False
        )
        if created.returncode != 0:
            raise DemoError(f"python -m venv failed: {created.stderr.strip()[-300:]}")
        _pip(python, "install", "flask")
    if _has(python, "requests"):
        _pip(python, "uninstall", "-y", "requests")
    if _has(python, "requests") or not _has(python, "flask"):
        raise DemoError(f"{venv} should have flask and not requests; delete it and retry")
    console.print("project venv: flask installed, [bold]requests not installed[/bold]")
    # relative to the project directory, where the agent runs it
    cmd = shlex.join([os.path.relpath(python, project), "app.py", "--check"])
    return Workspace(workdir, project, f"sqlite:///{workdir / _STORE}", cmd)


def use_project(workdir: Path, project: Path, cmd: str, *, keep_store: bool = False) -> Workspace:
    """A workspace for the user's own project (edited in place); only the store is fresh.

    Args:
        workdir: the work directory (emptied, except the venv).
        project: the project the agent repairs.
        cmd: its start command.
        keep_store: keep the SQLite store of an earlier run (this run does not use it).

    Raises:
        DemoError: ``project`` is not a directory.
    """
    if not project.is_dir():
        raise DemoError(f"--project {str(project)!r} is not a directory")
    workdir, project = workdir.resolve(), project.resolve()
    if project == workdir or project.is_relative_to(workdir):
        raise DemoError("--project must not be inside --workdir (the demo empties it)")
    _clean(workdir, keep=_keep(keep_store))
    return Workspace(workdir, project, f"sqlite:///{workdir / _STORE}", cmd)
