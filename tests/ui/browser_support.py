"""Helpers of the inspector's browser tests: Debian's chromium (skipped without it), a
page watched for console errors, canaries and dialogs, and signing in through the form.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import playwright.sync_api as playwright
import pytest
from ui_support import Live

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists() and shutil.which("chromium") is None:
    pytest.skip(
        "no chromium: install it with apt-get install chromium (make test-servers)",
        allow_module_level=True,
    )


class Watched:
    """A page with its console errors, uncaught errors and dialogs collected."""

    def __init__(self, page: playwright.Page) -> None:
        self.page = page
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("dialog", self._dialog)

    def _dialog(self, dialog: playwright.Dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, url: str) -> None:
        """Go to ``url`` (htmx makes no request on load), check nothing ran or failed."""
        self.page.goto(url)
        self.page.wait_for_load_state("load")
        self.clean(url)

    def clean(self, where: str) -> None:
        assert self.page.evaluate("typeof window.__xss") == "undefined", where
        assert self.dialogs == [], where
        assert self.errors == [], (where, self.errors)


def launch() -> Iterator[playwright.Browser]:
    """Chromium (Debian's, never one Playwright downloads), closed when done."""
    executable = str(CHROMIUM) if CHROMIUM.exists() else shutil.which("chromium")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable)
        yield b
        b.close()


def signed_in(browser: playwright.Browser, live: Live, key: str, width: int = 1440) -> Watched:
    """A new browser context ``width`` px wide, signed in with ``key`` by the form."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    w = Watched(context.new_page())
    w.open(f"{live.url}/ui/")
    w.page.fill("input[name=api_key]", key)
    w.page.press("input[name=api_key]", "Enter")
    w.page.wait_for_selector("h1:text('Sessions')")
    w.clean("after login")
    return w
