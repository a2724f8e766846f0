"""The query parameters of every inspector page are checked alike: an unknown one, one
given twice, or a value out of shape or range is a 400 page naming the parameter (never
a page that silently ignored part of its link); a non-admin naming an owner too."""

from __future__ import annotations

import html

import httpx
import pytest
from fastapi.testclient import TestClient
from ui_support import Inspector, log_in

#: Every page (relative to ``/ui``, ``{sid}`` alice's session) and the whole-number
#: parameters it reads.
PAGES: dict[str, tuple[str, ...]] = {
    "/": (),
    "/sessions/{sid}": ("before", "after"),
    "/sessions/{sid}/memory": ("at", "base"),
    "/sessions/{sid}/runs": (),
    "/sessions/{sid}/records": (),
    "/sessions/{sid}/audit": (),
    "/sessions/{sid}/rewinds/1": (),
    "/sessions/{sid}/context": ("budget",),
    "/sessions/{sid}/forks": (),
    "/sessions/{sid}/do/fork": ("v", "seq"),
}
BAD_NUMBERS = ("abc", "-1", "9" * 30, "1.5", "\u00b2", "0x10")


def _url(inspector: Inspector, page: str, query: str) -> str:
    return "/ui" + page.format(sid=inspector.seeded.alice_session) + "?" + query


def _refused(r: httpx.Response, name: str) -> None:
    assert r.status_code == 400, (r.request.url, r.status_code)
    text = html.unescape(r.text)
    assert "<h1>Bad request</h1>" in text and f"'{name}'" in text, (r.request.url, text)


@pytest.mark.parametrize("page", PAGES)
def test_an_unknown_or_repeated_parameter_is_a_400_naming_it(
    client: TestClient, inspector: Inspector, page: str
) -> None:
    log_in(client, inspector.alice)
    _refused(client.get(_url(inspector, page, "at_seq=abc")), "at_seq")
    _refused(client.get(_url(inspector, page, "x%3Cb%3E=1")), "x<b>")
    for name in PAGES[page]:
        _refused(client.get(_url(inspector, page, f"{name}=1&{name}=2")), name)


@pytest.mark.parametrize(
    ("page", "name"), [(page, name) for page, names in PAGES.items() for name in names]
)
def test_a_bad_number_is_a_400_naming_its_parameter(
    client: TestClient, inspector: Inspector, page: str, name: str
) -> None:
    log_in(client, inspector.alice)
    for bad in BAD_NUMBERS:
        _refused(client.get(_url(inspector, page, str(httpx.QueryParams({name: bad})))), name)


def test_ranges_the_page_knows_are_checked_too(client: TestClient, inspector: Inspector) -> None:
    log_in(client, inspector.alice)
    s = inspector.manager.get_session(user_id="alice", session_id=inspector.seeded.alice_session)
    memory = "/sessions/{sid}/memory"
    _refused(client.get(_url(inspector, memory, f"at={s.message_count + 1}")), "at")
    _refused(client.get(_url(inspector, memory, f"base={s.message_count + 1}")), "base")
    assert client.get(_url(inspector, memory, f"at={s.message_count}")).status_code == 200
    _refused(client.get(_url(inspector, "/sessions/{sid}/context", "budget=0")), "budget")
    _refused(client.get(_url(inspector, "/", "status=SLEEPING")), "status")
    _refused(client.get(_url(inspector, "/sessions/{sid}/records", "after=k")), "after")
    assert client.get(_url(inspector, "/", "status=ACTIVE&agent=&owner=")).status_code == 200


def test_a_non_admin_naming_another_owner_is_refused(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    _refused(client.get("/ui/?owner=bob"), "owner")
    _refused(client.get("/ui/?owner=bob&cursor=x"), "owner")
    own = client.get("/ui/?owner=alice")
    assert own.status_code == 200 and "<h1>Sessions</h1>" in own.text
    client.cookies.clear()
    log_in(client, inspector.admin)
    bobs = client.get("/ui/?owner=bob")
    assert bobs.status_code == 200 and inspector.seeded.alice_session not in bobs.text


def test_a_bad_parameter_before_login_is_the_login_form(client: TestClient) -> None:
    r = client.get("/ui/?owner=bob&at_seq=abc")
    assert r.status_code == 200 and 'name="api_key"' in r.text
