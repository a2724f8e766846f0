"""Header fields as RFC 9110 5.3 allows them: a single-value field sent twice is 400
naming it (the first used to win), repeated ``If-Match`` lines are read together, and
an encoded body (``Content-Encoding`` other than identity) is 415."""

from __future__ import annotations

import gzip
import json

import pytest
from http_support import Api, assert_problem

pytestmark = pytest.mark.store_independent

BODY = json.dumps({"agent": "a"}).encode()


def _sessions(api: Api) -> int:
    return len(api.http.get("/v1/sessions", headers=api.alice).json()["items"])


@pytest.mark.parametrize(
    ("name", "first", "second"),
    [
        ("authorization", "alice", "bob"),
        ("content-type", "application/json", "text/plain"),
        ("idempotency-key", "k1", "k2"),
        ("content-length", str(len(BODY)), str(len(BODY))),
    ],
)
def test_repeated_single_value_header_400(api: Api, name: str, first: str, second: str) -> None:
    """Two of a single-value field -> 400 ``repeated-header`` naming it; nothing is
    written."""
    tokens = {"alice": api.alice["Authorization"], "bob": api.bob["Authorization"]}
    headers = [("Authorization", api.alice["Authorization"]), ("Content-Type", "application/json")]
    headers = [(n, v) for n, v in headers if n.lower() != name]
    headers += [(name, tokens.get(first, first)), (name, tokens.get(second, second))]
    r = api.http.post("/v1/sessions", content=BODY, headers=headers)
    body = assert_problem(r, 400, "repeated-header")
    assert body["header"] == name
    assert _sessions(api) == 0


def test_repeated_if_match_lines_are_read_together(api: Api) -> None:
    """``If-Match`` is a list field: a stale ETag and the current one on two lines
    match like ``If-Match: "stale", "current"`` (the first line alone used to decide:
    412)."""
    created = api.http.post("/v1/sessions", json={"agent": "a"}, headers=api.alice)
    sid, etag = created.json()["session_id"], created.headers["etag"]
    headers = [
        ("Authorization", api.alice["Authorization"]),
        ("If-Match", '"stale"'),
        ("If-Match", etag),
    ]
    r = api.http.patch(f"/v1/sessions/{sid}", json={"title": "t"}, headers=headers)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("encoding", ["gzip", "identity, gzip", "br"])
def test_encoded_body_415(api: Api, encoding: str) -> None:
    """A body with ``Content-Encoding`` other than identity -> 415; nothing written."""
    r = api.http.post(
        "/v1/sessions",
        content=gzip.compress(BODY),
        headers={**api.alice, "Content-Type": "application/json", "Content-Encoding": encoding},
    )
    body = assert_problem(r, 415, "unsupported-media-type")
    assert body["header"] == "content-encoding"
    assert _sessions(api) == 0


def test_identity_encoding_is_read(api: Api) -> None:
    """``Content-Encoding: identity`` is no encoding: 201."""
    r = api.http.post(
        "/v1/sessions",
        content=BODY,
        headers={**api.alice, "Content-Type": "application/json", "Content-Encoding": "identity"},
    )
    assert r.status_code == 201, r.text
