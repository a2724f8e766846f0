"""The inspector's Context and Forks views and its writes in a real browser (its own
seeded store: these tests write). A write needs its confirm page; a double submit
writes once; a page loaded before another write is refused and writes nothing; the
Context view rebuilds for a budget typed in; another user's session never appears;
every page stays clean (no console error, no canary run) and fits 390 and 1440 px."""

from __future__ import annotations

import re

import pytest
from ui_support import Live

playwright = pytest.importorskip("playwright.sync_api")

from browser_support import signed_in  # noqa: E402 (after the skip)

from agentsession import SessionStatus  # noqa: E402


def test_the_context_view_rebuilds_for_a_budget(browser: playwright.Browser, live: Live) -> None:
    w = signed_in(browser, live, live.inspector.alice)
    sid = live.inspector.seeded.alice_session
    w.open(f"{live.url}/ui/sessions/{sid}/context")
    assert w.page.locator("tr.decision-kept").count() > 1
    w.page.fill("input[name=budget]", "130")
    w.page.press("input[name=budget]", "Enter")
    w.page.wait_for_url("**/context?budget=130")
    w.clean("context at 130")
    dropped = w.page.locator("tr.decision-dropped")
    assert dropped.count() >= 1
    assert "older than the oldest cut" in w.page.inner_text("table")
    w.page.context.close()


def test_close_needs_its_confirm_page_and_a_double_submit_writes_once(
    browser: playwright.Browser, live: Live
) -> None:
    sm, sid = live.inspector.manager, live.inspector.seeded.alice_session
    a = {"session_id": sid, "user_id": "alice"}
    before = sm.get_session(**a)
    w = signed_in(browser, live, live.inspector.alice)
    w.open(f"{live.url}/ui/sessions/{sid}")
    w.page.click("nav.actions >> text=Close")
    w.page.wait_for_selector("h1:text('Close?')")
    w.clean("the confirm page")
    assert sm.get_session(**a).version == before.version  # a link writes nothing
    fields = {
        f.get_attribute("name") or "": f.get_attribute("value") or ""
        for f in w.page.locator("form[action$='/do/close'] input[type=hidden]").all()
    }
    w.page.dblclick("text=Yes, close")
    w.page.wait_for_url(f"**/ui/sessions/{sid}")
    w.clean("after close")
    again = w.page.request.post(
        f"{live.url}/ui/sessions/{sid}/do/close", form=fields, max_redirects=0
    )
    assert again.status == 303
    after = sm.get_session(**a)
    assert after.status == SessionStatus.CLOSED and after.version == before.version + 1
    w.page.click("nav.actions >> text=Restore")
    w.page.click("text=Yes, restore")
    w.page.wait_for_url(f"**/ui/sessions/{sid}")
    assert sm.get_session(**a).status == SessionStatus.ACTIVE
    w.page.context.close()


def test_a_stale_page_is_refused_and_fork_here_opens_the_fork(
    browser: playwright.Browser, live: Live
) -> None:
    sm, sid = live.inspector.manager, live.inspector.seeded.alice_session
    a = {"session_id": sid, "user_id": "alice"}
    w = signed_in(browser, live, live.inspector.alice)
    w.open(f"{live.url}/ui/sessions/{sid}")
    w.page.locator("#seq-2 >> text=Rewind here").click()
    w.page.wait_for_selector("h1:text('Rewind at message 2?')")
    sm.append_message(**a, message={"role": "user", "content": "written meanwhile"})
    now = sm.get_session(**a)
    w.page.click("text=Yes, rewind")
    w.page.wait_for_selector("h1:text('Changed since you loaded it')")
    # The browser logs the 409 itself; nothing else may have gone wrong.
    assert [e for e in w.errors if "status of 409" not in e] == []
    w.errors.clear()
    w.clean("the stale answer")
    assert "Nothing was written" in w.page.inner_text("main")
    assert sm.get_session(**a) == now
    w.page.click("text=Reload the session")
    w.page.locator("#seq-3 >> text=Fork here").click()
    w.page.click("text=Yes, fork")
    w.page.wait_for_url(re.compile(r".*/ui/sessions/ses_\w+$"))
    fork_id = w.page.url.rsplit("/", 1)[1]
    assert fork_id != sid
    assert sm.get_session(session_id=fork_id, user_id="alice").fork_seq == 3
    w.clean("the fork")
    w.page.context.close()


def test_another_user_never_sees_the_session_nor_its_writes(
    browser: playwright.Browser, live: Live
) -> None:
    sid = live.inspector.seeded.alice_session
    w = signed_in(browser, live, live.inspector.bob)
    assert sid not in w.page.content()
    for path in ("/context", "/forks", "/do/close?v=1", "/do/fork?v=1&seq=1"):
        response = w.page.goto(f"{live.url}/ui/sessions/{sid}{path}")
        assert response is not None and response.status == 404, path
        assert sid not in w.page.inner_text("main")
    forks = w.page.goto(f"{live.url}/ui/sessions/{live.inspector.seeded.bob_session}/forks")
    assert forks is not None and forks.status == 200 and sid not in w.page.content()
    w.page.context.close()


@pytest.mark.parametrize("width", [390, 1440])
def test_the_new_pages_fit_the_width(browser: playwright.Browser, live: Live, width: int) -> None:
    w = signed_in(browser, live, live.inspector.alice, width)
    sid = live.inspector.seeded.alice_session
    v = live.inspector.manager.get_session(session_id=sid, user_id="alice").version
    for page in ("/context?budget=130", "/forks", f"/do/delete?v={v}", f"/do/fork?v={v}&seq=2"):
        w.open(f"{live.url}/ui/sessions/{sid}{page}")
        overflow = w.page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, (page, width, overflow)
    w.page.context.close()
