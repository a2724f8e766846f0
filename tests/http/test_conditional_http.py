"""Conditional requests: ETag / If-Match -> expected_version, 428 / 412, and precedence
401 -> 404 -> 412 -> 422."""

from __future__ import annotations

from typing import Any

import pytest
from http_support import Api, assert_problem

# The HTTP layer maps requests onto the manager; the stores' contract is tested in
# tests/contract, so these run on memory and SQLite only.
pytestmark = pytest.mark.store_independent

#: (method, path under the session, body) of every request require_if_match applies to.
GUARDED: list[tuple[str, str, Any]] = [
    ("PATCH", "", {"title": "t"}),
    ("DELETE", "", None),
    ("PUT", "/memory", {"goal": "g"}),
    ("PATCH", "/memory", {"goal": "g"}),
    ("POST", "/close", {}),
    ("POST", "/expire", {}),
    ("POST", "/restore", {}),
    ("DELETE", "/messages?after_seq=0", None),
    ("POST", "/messages/pop", {}),
    ("POST", "/rewind", {"to_seq": 0}),
]


def _req(api: Api, method: str, sid: str, sub: str, body: Any, **headers: str) -> Any:
    kwargs: dict[str, Any] = {"headers": {**api.alice, **headers}}
    if body is not None:
        kwargs["json"] = body
    return api.http.request(method, f"/v1/sessions/{sid}{sub}", **kwargs)


@pytest.mark.parametrize(("method", "sub", "body"), GUARDED)
def test_conditional_request_matrix(make_api: Any, method: str, sub: str, body: Any) -> None:
    """With require_if_match: none -> 428, current -> 2xx, stale / weak / another
    session's ETag -> 412 carrying current_version; nothing changes on a refusal."""
    api = make_api(require_if_match=True)

    def fresh() -> tuple[str, str]:
        s = api.create()
        sid = s["session_id"]
        bumped = api.http.patch(
            f"/v1/sessions/{sid}", json={"title": "v2"}, headers={**api.alice, "If-Match": "*"}
        )
        return sid, bumped.headers["etag"]

    sid, etag = fresh()
    _other_sid, other_etag = fresh()
    assert etag.endswith('@2"') and other_etag.endswith('@2"')
    cases = {
        "none": ({}, 428, "precondition-required"),
        "stale": ({"If-Match": f'"{sid}@1"'}, 412, "version-conflict"),
        "weak": ({"If-Match": f'W/"{sid}@2"'}, 412, "version-conflict"),
        "other session": ({"If-Match": other_etag}, 412, "version-conflict"),
        "garbage": ({"If-Match": "2"}, 412, "version-conflict"),
    }
    for name, (headers, status, code) in cases.items():
        problem = assert_problem(_req(api, method, sid, sub, body, **headers), status, code)
        if status == 412:
            assert problem["current_version"] == 2, name
    unchanged = api.http.get(f"/v1/sessions/{sid}", headers=api.alice)
    assert unchanged.headers["etag"] == etag
    ok = _req(api, method, sid, sub, body, **{"If-Match": etag})
    assert 200 <= ok.status_code < 300, ok.text
    if method != "DELETE":
        assert ok.headers["etag"].startswith(f'"{sid}@')
    listed = _req(api, method, sid, sub, body, **{"If-Match": f'"{sid}@1", {etag}'})
    assert listed.status_code in (200, 204, 404, 412)


def test_precedence_401_404_412_422(make_api: Any) -> None:
    """No key beats everything; a missing session beats If-Match; a failed If-Match beats a
    bad body."""
    api = make_api(require_if_match=True)
    sid = api.create()["session_id"]
    stale = f'"{sid}@9"'
    r = api.http.patch(f"/v1/sessions/{sid}", json={"title": 5}, headers={"If-Match": stale})
    assert_problem(r, 401, "unauthenticated")
    r = api.http.patch(
        f"/v1/sessions/{sid}", json={"title": 5}, headers={**api.bob, "If-Match": stale}
    )
    assert_problem(r, 404, "not-found")
    r = api.http.patch(f"/v1/sessions/{sid}", json={"title": 5}, headers=api.bob)
    assert_problem(r, 404, "not-found")
    r = api.http.patch(
        f"/v1/sessions/{sid}", json={"title": 5}, headers={**api.alice, "If-Match": stale}
    )
    assert_problem(r, 412, "version-conflict")
    r = api.http.patch(
        f"/v1/sessions/{sid}", json={"title": "x" * 5000}, headers={**api.alice, "If-Match": stale}
    )
    assert_problem(r, 412, "version-conflict")
    r = api.http.patch(
        f"/v1/sessions/{sid}", json={"title": 5}, headers={**api.alice, "If-Match": f'"{sid}@1"'}
    )
    assert_problem(r, 422, "request-validation")


def test_if_match_on_appends_is_optimistic_locking(api: Api) -> None:
    """C01 over HTTP: two writers with the same ETag: one 201, one 412, one message stored."""
    s = api.http.post("/v1/sessions", json={}, headers=api.alice)
    etag = s.headers["etag"]
    sid = s.json()["session_id"]
    url = f"/v1/sessions/{sid}/messages"
    a = api.http.post(
        url,
        json={"message": {"role": "user", "content": "A"}},
        headers={**api.alice, "If-Match": etag},
    )
    b = api.http.post(
        url,
        json={"message": {"role": "user", "content": "B"}},
        headers={**api.alice, "If-Match": etag},
    )
    assert a.status_code == 201
    assert assert_problem(b, 412, "version-conflict")["current_version"] == 2
    assert api.http.get(f"/v1/sessions/{sid}", headers=api.alice).json()["message_count"] == 1


def test_memory_get_etag_drives_a_read_modify_write(make_api: Any) -> None:
    """GET /memory answers the session's current ETag (also after a write that left the
    memory alone): PUT with it as If-Match succeeds once; the same ETag again is 412."""
    api = make_api()
    sid = api.create()["session_id"]
    base = f"/v1/sessions/{sid}"
    api.http.put(f"{base}/memory", json={"n": 1}, headers={**api.alice, "If-Match": "*"})
    api.http.post(
        f"{base}/messages", json={"message": {"role": "user", "content": "x"}}, headers=api.alice
    )
    session_etag = api.http.get(base, headers=api.alice).headers["etag"]
    read = api.http.get(f"{base}/memory", headers=api.alice)
    assert read.headers["etag"] == session_etag == f'"{sid}@3"'
    assert read.json()["session_version"] == 3 and read.json()["version"] == 2
    n = read.json()["data"]["n"]
    put = _req(api, "PUT", sid, "/memory", {"n": n + 1}, **{"If-Match": read.headers["etag"]})
    assert put.status_code == 200 and put.headers["etag"] == f'"{sid}@4"'
    again = _req(api, "PUT", sid, "/memory", {"n": n + 1}, **{"If-Match": read.headers["etag"]})
    assert_problem(again, 412, "version-conflict")
    assert api.http.get(f"{base}/memory", headers=api.alice).json()["data"] == {"n": 2}
