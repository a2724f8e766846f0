"""The inspector's session cookie: not the API key, refused by the API, bound to its
key by a MAC, bounded in time, ended by revoking the key, and the same on every worker
(two app instances sharing one key file)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from ui_support import Inspector, csrf_of, log_in

from agentsession import SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import FileKeyStore
from agentsession.settings import Settings
from agentsession.ui.auth import KEY_COOKIE, SESSION_LIFETIME, issue_cookie


def _signed_in(client: TestClient, key: str) -> str:
    """Log ``client`` in with ``key``; the session cookie's value."""
    assert log_in(client, key).status_code == 303
    token = client.cookies.get(KEY_COOKIE)
    assert token
    return token


def _opens(app: object, token: str) -> bool:
    """Whether a fresh browser holding only the cookie ``token`` sees the Sessions view
    (else it gets the login form; never an error)."""
    with TestClient(app, base_url="http://127.0.0.1") as other:  # type: ignore[arg-type]
        other.cookies.set(KEY_COOKIE, token, path="/ui")
        r = other.get("/ui/")
    assert r.status_code == 200, r.text
    assert ("<h1>Sessions</h1>" in r.text) != ('name="api_key"' in r.text)
    return "<h1>Sessions</h1>" in r.text


def test_the_cookie_is_not_the_key_and_the_api_refuses_it(
    client: TestClient, inspector: Inspector
) -> None:
    token = _signed_in(client, inspector.alice)
    assert inspector.alice not in token and inspector.alice.split(".")[1] not in token
    for value in (token, token.split(".", 1)[1]):
        api = client.get("/v1/sessions", headers={"Authorization": f"Bearer {value}"})
        assert api.status_code == 401, value
    assert _opens(inspector.app, token)


def test_the_cookie_lasts_eight_hours_at_most(client: TestClient, inspector: Inspector) -> None:
    r = log_in(client, inspector.alice)
    cookie = next(c for c in r.headers.get_list("set-cookie") if f"{KEY_COOKIE}=" in c)
    assert SESSION_LIFETIME == 8 * 3600
    assert f"max-age={SESSION_LIFETIME}" in cookie.lower()
    _, _, issued, expires, _, _ = client.cookies[KEY_COOKIE].split(".")
    assert int(expires) - int(issued) == SESSION_LIFETIME
    assert abs(int(issued) - time.time()) < 60


def _variants(token: str, other_key_id: str) -> list[str]:
    """``token`` tampered with every way: each field changed, cut, or another key's id."""
    parts = token.split(".")
    flip = {"0": "1", "1": "2"}
    changed = [
        ".".join([*parts[:i], p[:-1] + flip.get(p[-1], "0"), *parts[i + 1 :]])
        for i, p in enumerate(parts)
    ]
    longer = ".".join([*parts[:3], str(int(parts[3]) + 3600), *parts[4:]])
    swapped = ".".join([parts[0], other_key_id, *parts[2:]])
    return [*changed, longer, swapped, token[:-1], ".".join(parts[:5]), "garbage", token + "."]


def test_a_tampered_cookie_is_the_login_page(client: TestClient, inspector: Inspector) -> None:
    token = _signed_in(client, inspector.alice)
    for forged in _variants(token, inspector.bob.split(".")[0]):
        assert not _opens(inspector.app, forged), forged
    assert _opens(inspector.app, token)
    # Not ASCII (a cookie header is read as Latin-1): the login page, never a 500.
    for raw in (token[:-1] + "\u00e9", token.replace(".", ".\u00b2", 3)):
        with TestClient(inspector.app, base_url="http://127.0.0.1") as other:
            header = f"{KEY_COOKIE}={raw}".encode("latin-1")
            r = other.get("/ui/", headers={"cookie": header})  # type: ignore[dict-item]
        assert r.status_code == 200 and 'name="api_key"' in r.text


@pytest.mark.parametrize("age", [SESSION_LIFETIME, SESSION_LIFETIME + 3600, -3600])
def test_an_expired_or_future_cookie_is_the_login_page(inspector: Inspector, age: int) -> None:
    keys = inspector.app.state.services.keys
    key = next(k for k in keys.list() if k.user_id == "alice")
    assert not _opens(inspector.app, issue_cookie(key, time.time() - age))
    assert _opens(inspector.app, issue_cookie(key, time.time() - SESSION_LIFETIME + 60))


def test_a_revoked_keys_copied_cookie_is_refused(client: TestClient, inspector: Inspector) -> None:
    token = _signed_in(client, inspector.alice)
    assert _opens(inspector.app, token)
    assert inspector.app.state.services.keys.revoke(inspector.alice.split(".")[0])
    assert not _opens(inspector.app, token)
    sid = inspector.seeded.alice_session
    with TestClient(inspector.app, base_url="http://127.0.0.1") as other:
        other.cookies.set(KEY_COOKIE, token, path="/ui")
        r = other.get(f"/ui/sessions/{sid}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui/"


def test_logout_clears_the_cookie(client: TestClient, inspector: Inspector) -> None:
    _signed_in(client, inspector.alice)
    page = client.get("/ui/")
    out = client.post("/ui/logout", data={"csrf": csrf_of(page.text)}, follow_redirects=False)
    assert out.status_code == 303 and KEY_COOKIE not in client.cookies
    assert 'name="api_key"' in client.get("/ui/").text


def test_the_cookie_works_on_every_worker_sharing_the_key_file(tmp_path: Path) -> None:
    """Two app instances, each with its own FileKeyStore on one key file (as the
    workers of ``serve --workers 2``): a cookie of one opens the other, and a key revoked
    through one ends its sessions on both."""
    path = tmp_path / "keys.json"
    manager = SessionManager.from_url("memory://")
    token = FileKeyStore(path).create(user_id="alice")[1]
    stores = [FileKeyStore(path, reload_interval=0), FileKeyStore(path, reload_interval=0)]
    apps = [create_app(manager, Settings(url="memory://"), keys=s) for s in stores]
    try:
        with TestClient(apps[0], base_url="http://127.0.0.1") as first:
            cookie = _signed_in(first, token)
        assert _opens(apps[1], cookie) and _opens(apps[0], cookie)
        assert stores[1].revoke(token.split(".")[0])
        assert not _opens(apps[0], cookie) and not _opens(apps[1], cookie)
    finally:
        manager.close()
