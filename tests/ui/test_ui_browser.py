"""The inspector in a real browser: Debian's chromium driven by Playwright (never a
browser Playwright downloads; ``scripts/install-test-servers.sh`` installs chromium).

One browser for the module, on the seeded store served over HTTP (``live``): every
view opens without a console error or a script of the seeded canaries running,
another user's session never shows, login, logout and the CSRF refusal work, the
keyboard reaches the main links, and no page overflows sideways at 390 or 1440 px.
"""

from __future__ import annotations

import pytest
from ui_support import SESSION_PAGES, Live

playwright = pytest.importorskip("playwright.sync_api")

from browser_support import signed_in as _signed_in  # noqa: E402 (after the skip)


def test_every_view_opens_clean_and_no_canary_runs(browser: playwright.Browser, live: Live) -> None:
    w = _signed_in(browser, live, live.inspector.alice)
    sid = live.inspector.seeded.alice_session
    for page in SESSION_PAGES:
        w.open(f"{live.url}/ui/sessions/{sid}{page}")
    w.open(f"{live.url}/ui/sessions/{sid}")
    rewind = w.page.locator("details.rewind")
    rewind.locator("summary").click()
    # htmx loads the hidden messages into the opened rewind.
    rewind.locator("article.msg").first.wait_for()
    assert "to_be_hidden_0" in rewind.inner_text()
    w.clean("rewind expanded")
    w.page.goto(f"{live.url}/ui/sessions/{sid}/memory")
    w.page.locator("input[name=base]").fill("0")
    w.page.locator("input[name=base]").dispatch_event("change")
    w.page.locator("pre.diff").wait_for()
    w.clean("memory diff by htmx")
    w.page.context.close()


def test_another_users_session_never_shows(browser: playwright.Browser, live: Live) -> None:
    w = _signed_in(browser, live, live.inspector.alice)
    bob = live.inspector.seeded.bob_session
    assert bob not in w.page.content()
    response = w.page.goto(f"{live.url}/ui/sessions/{bob}")
    assert response is not None and response.status == 404
    assert "bob" not in w.page.inner_text("main")
    w.page.context.close()


def test_logout_and_csrf_refusal(browser: playwright.Browser, live: Live) -> None:
    w = _signed_in(browser, live, live.inspector.alice)
    forged = w.page.request.post(f"{live.url}/ui/logout", form={"csrf": "forged"})
    assert forged.status == 403
    w.open(f"{live.url}/ui/")
    assert w.page.locator("h1").inner_text() == "Sessions"  # still signed in
    w.page.click("text=Log out")
    w.page.wait_for_selector("input[name=api_key]")
    w.page.goto(f"{live.url}/ui/sessions/{live.inspector.seeded.alice_session}")
    assert w.page.locator("input[name=api_key]").count() == 1  # sent back to the form
    w.clean("after logout")
    w.page.context.close()


def test_the_keyboard_reaches_the_main_links(browser: playwright.Browser, live: Live) -> None:
    w = _signed_in(browser, live, live.inspector.alice)
    sid = live.inspector.seeded.alice_session
    reached: list[str] = []
    for _ in range(16):  # the header: skip link, brand, Sessions, Usage, search box, log out
        w.page.keyboard.press("Tab")
        reached.append(w.page.evaluate("document.activeElement.getAttribute('href') || ''"))
        if reached[-1].endswith(sid):
            break
    assert "#main" in reached and "/ui/" in reached and reached[-1].endswith(sid), reached
    w.page.keyboard.press("Enter")
    w.page.wait_for_url(f"**/ui/sessions/{sid}")
    tabs: list[str] = []
    for _ in range(16):  # the header: skip link, brand, Sessions, Usage, search box, log out
        w.page.keyboard.press("Tab")
        tabs.append(w.page.evaluate("document.activeElement.textContent.trim()"))
    assert {"Memory", "Runs", "Audit"} <= set(tabs), tabs
    w.page.context.close()


@pytest.mark.parametrize("width", [390, 1440])
def test_no_page_overflows_sideways(browser: playwright.Browser, live: Live, width: int) -> None:
    w = _signed_in(browser, live, live.inspector.alice, width)
    sid = live.inspector.seeded.alice_session
    for page in ["/ui/", *(f"/ui/sessions/{sid}{p}" for p in SESSION_PAGES)]:
        w.open(f"{live.url}{page}")
        overflow = w.page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, (page, width, overflow)
    w.page.context.close()
