"""The Session view's live tail in a real browser (Debian's chromium): a message
another client appends through the API shows on the open page within 2 s, in order,
and again after a second append (the tail element goes on from the last one); an
older page does not tail; the keyboard reaches every tab of a session and the
controls of a write's confirm page."""

from __future__ import annotations

import time

import httpx
import pytest
from ui_support import Live

playwright = pytest.importorskip("playwright.sync_api")

from browser_support import signed_in  # noqa: E402 (after the skip)


def _append(live: Live, sid: str, text: str) -> float:
    """Append a user message as alice through the HTTP API (another client than the
    browser); return when it was answered (``time.monotonic``)."""
    headers = {"Authorization": f"Bearer {live.inspector.alice}"}
    body = {"messages": [{"role": "user", "content": text}]}
    r = httpx.post(f"{live.url}/v1/sessions/{sid}/messages", json=body, headers=headers)
    assert r.status_code == 201, r.text
    return time.monotonic()


def test_a_message_appended_by_another_client_shows_within_2_s(
    browser: playwright.Browser, live: Live
) -> None:
    w = signed_in(browser, live, live.inspector.alice)
    sm = live.inspector.manager
    sid = sm.create_session(user_id="alice", title="live").session_id
    sm.append_message(session_id=sid, user_id="alice", message={"role": "user", "content": "q0"})
    w.open(f"{live.url}/ui/sessions/{sid}")
    # The stream is open before the append (else the cursor would still catch it up).
    w.page.wait_for_function("document.querySelector('[sse-connect]') !== null")
    for n, text in ((2, "live-one <b>x</b>"), (3, "live-two")):
        sent = _append(live, sid, text)
        w.page.locator(f"#seq-{n}").wait_for(timeout=2000)
        assert time.monotonic() - sent < 2.0
        assert text in w.page.locator(f"#seq-{n}").inner_text()
    seqs = w.page.eval_on_selector_all("article.msg", "els => els.map(e => e.id)")
    assert seqs == ["seq-1", "seq-2", "seq-3"]
    assert w.page.locator("#tail").count() == 1
    w.clean("after the live tail")
    w.page.context.close()


def test_an_older_page_does_not_tail(browser: playwright.Browser, live: Live) -> None:
    w = signed_in(browser, live, live.inspector.alice)
    sid = live.inspector.seeded.alice_session
    w.open(f"{live.url}/ui/sessions/{sid}?before=3")
    assert w.page.locator("[sse-connect]").count() == 0
    assert w.page.locator("#tail").count() == 0
    w.page.context.close()


def _focus_walk(w: object, presses: int) -> list[str]:
    page = w.page  # type: ignore[attr-defined]
    seen: list[str] = []
    for _ in range(presses):
        page.keyboard.press("Tab")
        seen.append(page.evaluate("document.activeElement.textContent.trim()"))
    return seen


def test_the_keyboard_reaches_every_tab_and_a_confirm_pages_controls(
    browser: playwright.Browser, live: Live
) -> None:
    w = signed_in(browser, live, live.inspector.alice)
    sid = live.inspector.seeded.alice_session
    tabs = ["Timeline", "Memory", "Context", "Forks", "Runs", "Records", "Audit"]
    w.open(f"{live.url}/ui/sessions/{sid}/memory")
    reached = _focus_walk(w, 14)
    assert set(tabs) <= set(reached), reached
    # Each tab opens from the keyboard alone and says it is the current one.
    for label in tabs[1:]:
        w.page.locator("nav.tabs a", has_text=label).focus()
        w.page.keyboard.press("Enter")
        w.page.wait_for_load_state("load")
        current = w.page.locator("nav.tabs a[aria-current=page]").inner_text()
        assert current == label
    w.open(f"{live.url}/ui/sessions/{sid}")
    w.page.locator("nav.actions a", has_text="Close").focus()
    w.page.keyboard.press("Enter")
    w.page.wait_for_url("**/do/close?**")
    controls = _focus_walk(w, 12)
    assert any(c.startswith("Yes, close") for c in controls), controls
    w.clean("keyboard")
    w.page.context.close()
