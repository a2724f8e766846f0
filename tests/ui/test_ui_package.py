"""The inspector's files ship in the wheel and are what it serves: every template and
static file matches the package data of pyproject.toml, and the static folder holds
exactly the files the inspector serves (htmx and its SSE extension with their
licenses among them)."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

from agentsession.ui.pages import HTMX, HTMX_SSE, STATIC

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "agentsession"


def test_every_template_and_static_file_is_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["agentsession"]
    files = [*(PACKAGE / "ui" / "templates").iterdir(), *(PACKAGE / "ui" / "static").iterdir()]
    assert files
    for path in files:
        relative = path.relative_to(PACKAGE).as_posix()
        assert any(fnmatch(relative, glob) for glob in globs), relative


def test_the_static_folder_holds_what_is_served() -> None:
    shipped = {p.name for p in (PACKAGE / "ui" / "static").iterdir()}
    assert shipped == set(STATIC)
    assert HTMX in shipped and "htmx-LICENSE.txt" in shipped
    assert HTMX_SSE in shipped and "htmx-ext-sse-LICENSE.txt" in shipped
