"""C30 over HTTP: another user's session answers exactly like a missing one, on every
endpoint and method; malformed ids are rejected before any lookup."""

from __future__ import annotations

from typing import Any

import pytest
from http_support import Api, assert_problem

# The HTTP layer maps requests onto the manager; the stores' contract is tested in
# tests/contract, so these run on memory and SQLite only.
pytestmark = pytest.mark.store_independent

MISSING = "ses_aaaaaaaaaaaaaaaaaaaaaaaaaa"
RUN = "run_aaaaaaaaaaaaaaaaaaaaaaaaaa"

#: (method, path under /v1/sessions/{s}, valid body, invalid body)
ENDPOINTS: list[tuple[str, str, Any, Any]] = [
    ("GET", "", None, None),
    ("PATCH", "", {"title": "x"}, {"title": 5}),
    ("DELETE", "", None, None),
    ("POST", "/close", {"reason": "r"}, {"reason": 5}),
    ("POST", "/expire", {}, {"reason": []}),
    ("POST", "/restore", {}, {"message_limit": -1}),
    ("POST", "/messages", {"message": {"role": "user", "content": "x"}}, {"message": 1}),
    ("POST", "/messages", {"message": {"role": "wizard"}}, {}),
    ("GET", "/messages", None, None),
    ("GET", "/memory", None, None),
    ("PUT", "/memory", {"goal": "x"}, [1]),
    ("PATCH", "/memory", {"goal": "x"}, "nope"),
    ("POST", "/tool-calls", {"tool": "t"}, {"tool": 1}),
    ("GET", "/tool-calls", None, None),
    ("GET", "/tool-calls/find?tool=t", None, None),
    ("POST", "/runs", {}, {"metadata": 1}),
    ("GET", "/runs", None, None),
    ("GET", "/runs/{r}", None, None),
    ("POST", "/runs/{r}/steps", {"kind": "model"}, {"kind": 1}),
    ("POST", "/runs/{r}/finish", {"status": "SUCCEEDED"}, {"status": "NOPE"}),
    ("GET", "/audit", None, None),
]


def _call(api: Api, method: str, sid: str, sub: str, body: Any, **headers: str) -> Any:
    url = f"/v1/sessions/{sid}" + sub.replace("{r}", RUN)
    kwargs: dict[str, Any] = {"headers": {**api.bob, **headers}}
    if body is not None:
        kwargs["json"] = body
    return api.http.request(method, url, **kwargs)


def test_c30_ownership_matrix_http(api: Api) -> None:
    """C30: bob on alice's session == bob on a missing id, for every endpoint x method,
    with valid and invalid bodies, with alice's ETag and her idempotency key; nothing
    of alice's changes."""
    alice = api.create(title="secret")
    sid = alice["session_id"]
    first = api.http.post(
        f"/v1/sessions/{sid}/messages",
        json={"message": {"role": "user", "content": "private"}},
        headers={**api.alice, "Idempotency-Key": "K"},
    )
    etag = (
        first.headers.get("etag")
        or api.http.get(f"/v1/sessions/{sid}", headers=api.alice).headers["etag"]
    )
    before = api.http.get(f"/v1/sessions/{sid}", headers=api.alice).json()
    audit_before = api.http.get(f"/v1/sessions/{sid}/audit", headers=api.alice).json()
    for method, sub, good, bad in ENDPOINTS:
        for body in (good, bad):
            for extra in ({}, {"If-Match": etag, "Idempotency-Key": "K"}, {"If-Match": "W/x"}):
                theirs = _call(api, method, sid, sub, body, **extra)
                missing = _call(api, method, MISSING, sub, body, **extra)
                where = f"{method} {sub} body={body!r} headers={extra}"
                assert theirs.status_code == 404, where + " " + theirs.text
                assert theirs.content == missing.content, where
                assert theirs.headers["content-type"] == missing.headers["content-type"]
                assert {k for k in theirs.headers if k != "x-request-id"} == {
                    k for k in missing.headers if k != "x-request-id"
                }, where
                assert "private" not in theirs.text and sid not in theirs.text
    assert api.http.get(f"/v1/sessions/{sid}", headers=api.alice).json() == before
    assert api.http.get(f"/v1/sessions/{sid}/audit", headers=api.alice).json() == audit_before


@pytest.mark.parametrize(
    "bad_id",
    [
        "../x",
        "..%2Fx",
        "ses_aaaaaaaaaaaaaaaaaaaaaaaaaa%2F..",
        "ses_" + "a" * 10_000,
        "SES_AAAAAAAAAAAAAAAAAAAAAAAAAA",
        "ses_aaaaaaaaaaaaaaaaaaaaaaaaa1",
        "run_aaaaaaaaaaaaaaaaaaaaaaaaaa",
        "ses_aaaaaaaaaaaaaaaaaaaaaaaaaa%00",
        "%20ses_aaaaaaaaaaaaaaaaaaaaaaaaaa",
    ],
)
def test_c30_malformed_ids_are_404_before_lookup(api: Api, bad_id: str) -> None:
    """Malformed ids: 404 not-found problems; never 500, never the id echoed back."""
    api.create()
    for method, sub, good, _ in ENDPOINTS:
        url = f"/v1/sessions/{bad_id}" + sub.replace("{r}", RUN)
        kwargs: dict[str, Any] = {"headers": api.alice}
        if good is not None:
            kwargs["json"] = good
        r = api.http.request(method, url, **kwargs)
        body = assert_problem(r, 404, "not-found")
        assert bad_id[:30] not in str(body)
    in_route = api.http.get("/v1/sessions/" + "ses_" + "b" * 10_000, headers=api.alice)
    assert in_route.content == api.http.get(f"/v1/sessions/{MISSING}", headers=api.alice).content


def test_c30_admin_sees_and_other_user_keys_are_scoped(api: Api) -> None:
    """An admin reaches alice's session; bob's own idempotency key K does not touch hers."""
    sid = api.create()["session_id"]
    assert api.http.get(f"/v1/sessions/{sid}", headers=api.admin).status_code == 200
    a = api.http.post("/v1/sessions", json={}, headers={**api.alice, "Idempotency-Key": "K"})
    b = api.http.post("/v1/sessions", json={}, headers={**api.bob, "Idempotency-Key": "K"})
    assert a.json()["session_id"] != b.json()["session_id"]
    assert b.json()["user_id"] == "bob"
