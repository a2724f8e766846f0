"""The inspector over plain HTTP: security headers, the cookie's flags, login and
logout, CSRF, the failed-authentication limit, ownership (another user's session is
404), escaping of every stored field, and the timeline's paging and markers."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from ui_seed import CANARY
from ui_support import SESSION_PAGES, Inspector, build, csrf_of, log_in

from agentsession.ui import local_tickets

TEMPLATES = Path(__file__).resolve().parents[2] / "src" / "agentsession" / "ui" / "templates"


def _pages(i: Inspector) -> list[str]:
    sid = i.seeded.alice_session
    fork = i.seeded.fork_session
    pages = [f"/ui/sessions/{sid}{p}" for p in SESSION_PAGES]
    return ["/ui/", f"/ui/?parent={sid}", f"/ui/sessions/{fork}", *pages]


def test_every_answer_carries_the_security_headers(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    for path in [*_pages(inspector), "/ui/static/ui.css", "/ui/sessions/ses_x", "/ui/login"]:
        r = client.get(path, follow_redirects=False)
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, path
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp, path
        assert "style-src 'self'" in csp, path
        assert r.headers["x-content-type-options"] == "nosniff", path


def test_static_files_have_their_types_and_unknown_ones_are_404(client: TestClient) -> None:
    r = client.get("/ui/static/htmx-2.0.11.min.js")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    assert client.get("/ui/static/ui.css").headers["content-type"].startswith("text/css")
    assert client.get("/ui/static/htmx-LICENSE.txt").text.startswith("Zero-Clause BSD")
    assert client.get("/ui/static/..%2Fapp.py").status_code == 404
    assert client.get("/ui/static/app.py").status_code == 404


def test_login_sets_an_httponly_strict_cookie_and_logout_clears_it(
    client: TestClient, inspector: Inspector
) -> None:
    r = log_in(client, inspector.alice)
    assert r.status_code == 303 and r.headers["location"] == "/ui/"
    cookie = next(c for c in r.headers.get_list("set-cookie") if "agentsession_ui_key=" in c)
    flags = {part.strip().lower() for part in cookie.split(";")}
    assert {"httponly", "samesite=strict", "path=/ui"} <= flags
    assert "secure" not in flags  # plain http: a Secure cookie would never come back
    page = client.get("/ui/")
    assert "<h1>Sessions</h1>" in page.text
    out = client.post("/ui/logout", data={"csrf": csrf_of(page.text)}, follow_redirects=False)
    assert out.status_code == 303
    assert "agentsession_ui_key=" in out.headers["set-cookie"]
    assert 'name="api_key"' in client.get("/ui/").text


def test_the_cookie_is_secure_over_https(inspector: Inspector) -> None:
    with TestClient(inspector.app, base_url="https://127.0.0.1") as https:
        r = log_in(https, inspector.alice)
    cookie = next(c for c in r.headers.get_list("set-cookie") if "agentsession_ui_key=" in c)
    assert "secure" in {part.strip().lower() for part in cookie.split(";")}


def test_a_wrong_key_is_refused_and_a_post_without_csrf_too(
    client: TestClient, inspector: Inspector
) -> None:
    r = log_in(client, inspector.alice + "x")
    assert r.status_code == 401 and "not valid" in r.text
    r = client.post("/ui/login", data={"api_key": inspector.alice}, follow_redirects=False)
    assert r.status_code == 403 and "agentsession_ui_key" not in r.headers.get("set-cookie", "")
    log_in(client, inspector.alice)
    r = client.post("/ui/logout", data={"csrf": "0" * 64}, follow_redirects=False)
    assert r.status_code == 403
    assert "<h1>Sessions</h1>" in client.get("/ui/").text  # still signed in


def test_the_login_form_counts_against_the_apis_failed_auth_limit() -> None:
    i = build(auth_failures_per_address=3, auth_failures_per_key=100)
    with TestClient(i.app, base_url="http://127.0.0.1") as c:
        codes = [log_in(c, "key_nothing.wrong").status_code for _ in range(4)]
        assert codes == [401, 401, 401, 429]
        limited = log_in(c, "key_nothing.wrong")
        assert int(limited.headers["retry-after"]) >= 1
        # The API shares the limit: a bad bearer token from here is refused too.
        api = c.get("/v1/sessions", headers={"Authorization": "Bearer key_x.y"})
        assert api.status_code == 429
        # A valid key is never refused.
        assert log_in(c, i.alice).status_code == 303
    i.manager.close()


def test_a_revoked_key_in_the_cookie_signs_the_viewer_out(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    keys = inspector.app.state.services.keys
    assert keys.revoke(inspector.alice.split(".")[0])
    r = client.get(f"/ui/sessions/{inspector.seeded.alice_session}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/"
    assert 'name="api_key"' in client.get("/ui/").text


def test_another_users_session_is_not_found_on_every_page(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    bob = inspector.seeded.bob_session
    assert bob not in client.get("/ui/").text
    for page in SESSION_PAGES:
        r = client.get(f"/ui/sessions/{bob}{page}")
        assert r.status_code == 404 and "bob" not in r.text, page
    missing = client.get("/ui/sessions/ses_00000000000000000000000000")
    assert missing.status_code == 404 and missing.text == client.get(f"/ui/sessions/{bob}").text
    assert client.get("/ui/sessions/not-an-id/memory").status_code == 404
    own = inspector.seeded.alice_session
    assert client.get(f"/ui/sessions/{own}/rewinds/x").status_code == 404


def test_an_admin_sees_every_users_sessions_with_their_owner(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.admin)
    listing = client.get("/ui/").text
    assert inspector.seeded.bob_session in listing and "<th>Owner</th>" in listing
    assert inspector.seeded.alice_session not in client.get("/ui/?owner=bob").text
    assert client.get(f"/ui/sessions/{inspector.seeded.bob_session}").status_code == 200


def test_a_session_lists_its_forks_and_the_list_filters_by_parent(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    sid, fork = inspector.seeded.alice_session, inspector.seeded.fork_session
    assert f'href="/ui/sessions/{fork}"' in client.get(f"/ui/sessions/{sid}").text
    forks = client.get(f"/ui/?parent={sid}").text
    assert fork in forks and f'href="/ui/sessions/{sid}">' in forks
    assert forks.split("<tbody>")[1].count("<tr>") == 1  # the fork alone
    assert client.get("/ui/?parent=nope").status_code == 400


def test_every_stored_field_is_escaped_on_every_page(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    for path in _pages(inspector):
        html = client.get(path).text
        assert CANARY not in html and "<script>window" not in html, path
        assert "<img" not in html and "<svg" not in html, path
    timeline = client.get(f"/ui/sessions/{inspector.seeded.alice_session}").text
    for field in ("title", "chat_text", "anthropic_text", "responses_text", "responses_output"):
        assert f"{field}:&lt;script&gt;window.__xss=1&lt;/script&gt;" in timeline, field
    records = client.get(f"/ui/sessions/{inspector.seeded.alice_session}/records").text
    assert "record_meta:&lt;script&gt;" in records


def test_no_template_marks_anything_safe() -> None:
    for template in TEMPLATES.glob("*.html"):
        text = template.read_text()
        assert "|safe" not in text.replace(" ", "") and "autoescape" not in text, template.name
        assert "<script>" not in text and "style=" not in text and " on" + "click" not in text


def test_the_timeline_pairs_calls_and_marks_interrupted_and_unanswered(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    html = client.get(f"/ui/sessions/{inspector.seeded.alice_session}").text
    assert html.count('class="call"') == 5  # chat, Anthropic, Responses, lost, open
    assert "synthetic: interrupted" in html  # restore's answer to call_lost
    assert html.count(">unanswered<") == 1  # call_open
    assert "shown beside its call" in html
    assert "summary #1" in html and "covers seq 1" in html and "rewind #1" in html
    for fmt in ("chat", "anthropic", "responses"):
        assert f'<span class="fmt">{fmt}</span>' in html


def test_the_timeline_pages_from_the_newest_messages(
    client: TestClient, inspector: Inspector
) -> None:
    sm, sid = inspector.manager, inspector.seeded.alice_session
    sm.append_messages(
        session_id=sid,
        user_id="alice",
        messages=[{"role": "user", "content": f"line {n}"} for n in range(120)],
    )
    log_in(client, inspector.alice)
    newest = client.get(f"/ui/sessions/{sid}").text
    assert "line 119" in newest and "line 10<" not in newest and "?before=" in newest
    older = client.get(f"/ui/sessions/{sid}?before=60").text
    assert "#59<" in older and "#60<" not in older and "?after=" in older


def test_the_list_shows_a_run_holding_a_lease(client: TestClient, inspector: Inspector) -> None:
    s = inspector.manager.create_session(user_id="alice", agent="worker", title="leased")
    log_in(client, inspector.alice)
    assert "run leased" not in client.get("/ui/").text
    inspector.manager.start_run(session_id=s.session_id, user_id="alice", lease_seconds=600)
    assert "run leased 9 min" in client.get("/ui/").text


def test_calls_repeated_with_the_same_arguments_are_marked(
    client: TestClient, inspector: Inspector
) -> None:
    call = {"type": "function", "function": {"name": "ls", "arguments": '{"dir": "/"}'}}
    messages: list[dict[str, object]] = []
    for n in range(3):
        messages += [
            {"role": "assistant", "tool_calls": [{**call, "id": f"call_ls{n}"}]},
            {"role": "tool", "tool_call_id": f"call_ls{n}", "content": "etc home"},
        ]
    sid = inspector.seeded.alice_session
    inspector.manager.append_messages(session_id=sid, user_id="alice", messages=messages)
    log_in(client, inspector.alice)
    assert client.get(f"/ui/sessions/{sid}").text.count("repeated ×3") == 3


def test_the_id_box_opens_a_session_the_viewer_may_see(
    client: TestClient, inspector: Inspector
) -> None:
    log_in(client, inspector.alice)
    own = client.get(f"/ui/?id={inspector.seeded.alice_session}")
    assert own.status_code == 200 and str(own.url).endswith(inspector.seeded.alice_session)
    assert client.get(f"/ui/?id={inspector.seeded.bob_session}").status_code == 404
    assert client.get("/ui/?id=../../v1/sessions").status_code == 404


def test_a_one_time_ticket_signs_in_once(inspector: Inspector) -> None:
    ticket = local_tickets(inspector.app).issue(inspector.admin)
    with TestClient(inspector.app, base_url="http://127.0.0.1") as c:
        r = c.get(f"/ui/login?ticket={ticket}", follow_redirects=False)
        assert r.status_code == 303 and "agentsession_ui_key=" in r.headers["set-cookie"]
        assert "<h1>Sessions</h1>" in c.get("/ui/").text
    with TestClient(inspector.app, base_url="http://127.0.0.1") as other:
        again = other.get(f"/ui/login?ticket={ticket}", follow_redirects=False)
        assert (
            "set-cookie" not in again.headers
            or "agentsession_ui_key=" not in again.headers["set-cookie"]
        )


@pytest.mark.parametrize("path", ["/ui", "/ui/sessions/ses_00000000000000000000000000"])
def test_pages_need_a_login(client: TestClient, path: str) -> None:
    r = client.get(path, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/"
