"""The inspector's search box and usage panel in a real browser (Debian's chromium):
a search from the header box lists the viewer's hits with the match marked and links
to the timeline at the hit's seq; the Usage view and a session's usage panel show the
ledger's totals; no canary in a snippet or a model name runs, and another user's
content, sessions and models never show."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ui_seed import CANARY
from ui_support import Live

from agentsession import SessionManager

playwright = pytest.importorskip("playwright.sync_api")

from browser_support import signed_in  # noqa: E402 (after the skip)

#: A model name that runs script if printed as markup (a model name has no spaces).
MODEL_CANARY = "<img/src=x/onerror=window.__xss=1;alert(1)>"


@pytest.fixture(scope="module", autouse=True)
def findable(live: Live) -> Iterator[dict[str, str]]:
    """Alice's session with the word ``needle`` beside canaries and a run of the
    canary model; bob's with his own needle and model."""
    sm: SessionManager = live.inspector.manager
    found: dict[str, str] = {}
    for user, text, model in (
        ("alice", f"find the needle here {CANARY}", MODEL_CANARY),
        ("bob", "bob-secret needle of bob", "bob-secret-model"),
    ):
        sid = sm.create_session(user_id=user, agent="finder").session_id
        sm.append_messages(
            session_id=sid,
            user_id=user,
            messages=[{"role": "user", "content": f"seq one {i}"} for i in range(3)]
            + [{"role": "user", "content": text}],
        )
        run = sm.start_run(session_id=sid, user_id=user)
        sm.finish_run(
            session_id=sid,
            user_id=user,
            run_id=run.run_id,
            status="SUCCEEDED",
            usage={"input_tokens": 1234, "output_tokens": 56},
            model=model,
        )
        found[user] = sid
    yield found


def test_search_box_lists_own_hits_marked_and_links_to_the_seq(
    browser: playwright.Browser, live: Live, findable: dict[str, str]
) -> None:
    w = signed_in(browser, live, live.inspector.alice)
    w.page.fill("header input[name=q]", "needle")
    w.page.press("header input[name=q]", "Enter")
    w.page.wait_for_selector("h1:text('Search')")
    w.clean("search results")
    main = w.page.inner_text("main")
    assert findable["alice"] in main and "<script>window.__xss=1</script>" in main
    assert findable["bob"] not in w.page.content() and "bob-secret" not in main
    assert w.page.locator("ol.hits mark").first.inner_text() == "needle"
    w.page.locator(f"ol.hits a[href*='{findable['alice']}']").first.click()
    w.page.wait_for_selector("#seq-4")
    assert w.page.url.endswith("?after=3#seq-4")
    assert "find the needle here" in w.page.inner_text("#seq-4")
    w.clean("timeline at the hit")
    w.page.context.close()


def test_usage_view_and_panel_show_totals_never_running_a_model_name(
    browser: playwright.Browser, live: Live, findable: dict[str, str]
) -> None:
    w = signed_in(browser, live, live.inspector.alice)
    w.page.click("nav >> text=Usage")
    w.page.wait_for_selector("h1:text('Usage')")
    w.clean("usage by agent")
    assert "finder" in w.page.inner_text("table.usage")
    w.open(f"{live.url}/ui/usage?by=model")
    table = w.page.inner_text("table.usage")
    assert MODEL_CANARY in table and "1290" in table
    assert "bob-secret-model" not in w.page.content()
    w.open(f"{live.url}/ui/usage?by=session")
    assert findable["alice"] in w.page.inner_text("table.usage")
    assert findable["bob"] not in w.page.content()
    w.open(f"{live.url}/ui/sessions/{findable['alice']}")
    panel = w.page.inner_text("section.usage-panel")
    assert MODEL_CANARY in panel and "1234" in panel
    w.page.context.close()


def test_admin_sees_every_users_usage_and_hits(
    browser: playwright.Browser, live: Live, findable: dict[str, str]
) -> None:
    w = signed_in(browser, live, live.inspector.admin)
    w.open(f"{live.url}/ui/usage?by=model")
    assert "bob-secret-model" in w.page.inner_text("table.usage")
    w.open(f"{live.url}/ui/search?q=needle")
    assert findable["bob"] in w.page.inner_text("main")
    w.page.context.close()


@pytest.mark.parametrize("width", [390, 1440])
def test_search_and_usage_pages_do_not_overflow_sideways(
    browser: playwright.Browser, live: Live, findable: dict[str, str], width: int
) -> None:
    w = signed_in(browser, live, live.inspector.alice, width)
    for page in ("/ui/search?q=needle", "/ui/usage?by=session", "/ui/usage?by=model"):
        w.open(f"{live.url}{page}")
        overflow = w.page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, (page, width, overflow)
    w.page.context.close()
