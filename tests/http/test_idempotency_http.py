"""C04 over HTTP: a retried POST with the same Idempotency-Key is stored once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from http_support import Api, assert_problem

# The HTTP layer maps requests onto the manager; the stores' contract is tested in
# tests/contract, so these run on memory and SQLite only.
pytestmark = pytest.mark.store_independent


def _post(api: Api, sid: str, body: Any, key: str, who: dict[str, str] | None = None) -> Any:
    return api.http.post(
        f"/v1/sessions/{sid}/messages",
        json=body,
        headers={**(who or api.alice), "Idempotency-Key": key},
    )


def test_c04_retried_post_http(api: Api) -> None:
    """C04: same key 1, 5, 50 times and from 8 threads at once -> one stored copy with the
    same ids; a different body -> 422; another user's same key is independent."""
    sid = api.create()["session_id"]
    body = {"message": {"role": "user", "content": "once"}}
    first = _post(api, sid, body, "K")
    assert first.status_code == 201
    assert "idempotent-replayed" not in first.headers
    for times in (1, 5, 50):
        for _ in range(times):
            again = _post(api, sid, body, "K")
            assert again.status_code == 201
            assert again.json() == first.json()
            assert again.headers["idempotent-replayed"] == "true"

    fresh_body = {"message": {"role": "user", "content": "concurrent"}}
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: _post(api, sid, fresh_body, "K8"), range(8)))
    assert {a.status_code for a in answers} == {201}
    assert len({(a.json()["message_id"], a.json()["seq"]) for a in answers}) == 1

    messages = api.http.get(f"/v1/sessions/{sid}/messages", headers=api.alice).json()["items"]
    assert [m["content"] for m in messages] == ["once", "concurrent"]

    other = _post(api, sid, {"message": {"role": "user", "content": "different"}}, "K")
    body422 = assert_problem(other, 422, "idempotency-key-reused")
    assert body422["idempotency_key"] == "K"

    bob_sid = api.create(api.bob)["session_id"]
    bobs = _post(api, bob_sid, body, "K", who=api.bob)
    assert bobs.status_code == 201 and bobs.json()["session_id"] == bob_sid
    assert_problem(_post(api, sid, body, "K", who=api.bob), 404, "not-found")
    final = api.http.get(f"/v1/sessions/{sid}", headers=api.alice).json()
    assert final["message_count"] == 2


def test_idempotent_create_and_run_start(api: Api) -> None:
    """POST /v1/sessions and POST runs replay too; a bad key is a 400 naming the field."""
    a = api.http.post(
        "/v1/sessions", json={"agent": "x"}, headers={**api.alice, "Idempotency-Key": "c"}
    )
    b = api.http.post(
        "/v1/sessions", json={"agent": "x"}, headers={**api.alice, "Idempotency-Key": "c"}
    )
    assert a.json() == b.json() and b.headers["idempotent-replayed"] == "true"
    sid = a.json()["session_id"]
    r1 = api.http.post(
        f"/v1/sessions/{sid}/runs", json={"input": 1}, headers={**api.alice, "Idempotency-Key": "r"}
    )
    r2 = api.http.post(
        f"/v1/sessions/{sid}/runs", json={"input": 1}, headers={**api.alice, "Idempotency-Key": "r"}
    )
    assert r1.status_code == r2.status_code == 201 and r1.json() == r2.json()
    bad = api.http.post(
        "/v1/sessions", json={}, headers={**api.alice, "Idempotency-Key": "x" * 300}
    )
    assert assert_problem(bad, 400, "validation-error")["field"] == "idempotency_key"


def _write(api: Api, method: str, path: str, body: Any, key: str) -> Any:
    return api.http.request(method, path, json=body, headers={**api.alice, "Idempotency-Key": key})


def test_put_and_patch_replays_are_reported(api: Api) -> None:
    """PUT /memory, PATCH /memory and PATCH /sessions/{id} with a used key answer the first
    result with ``Idempotent-Replayed: true``; the first write of a key never has it."""
    sid = api.create()["session_id"]
    writes = [
        ("PUT", f"/v1/sessions/{sid}/memory", {"goal": "ship"}, "put"),
        ("PATCH", f"/v1/sessions/{sid}/memory", {"facts": {"a": 1}}, "patch"),
        ("PATCH", f"/v1/sessions/{sid}", {"title": "renamed"}, "rename"),
    ]
    for method, path, body, key in writes:
        first = _write(api, method, path, body, key)
        assert first.status_code == 200, first.text
        assert "idempotent-replayed" not in first.headers
        again = _write(api, method, path, body, key)
        assert again.status_code == 200
        assert again.json() == first.json() and again.headers["etag"] == first.headers["etag"]
        assert again.headers["idempotent-replayed"] == "true"
    final = api.http.get(f"/v1/sessions/{sid}", headers=api.alice).json()
    assert final["version"] == 4  # created, then three writes, none of them twice


def test_racing_first_writes_one_is_not_a_replay(api: Api) -> None:
    """Two requests with the same key at once: one writes (no header), the other waits
    for it and is answered as its replay."""
    sid = api.create()["session_id"]
    path = f"/v1/sessions/{sid}/memory"
    for round_ in range(5):
        body, key = {"n": round_}, f"race{round_}"
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(_write, api, "PUT", path, body, key) for _ in range(2)]
            answers = [f.result() for f in futures]
        assert [a.status_code for a in answers] == [200, 200]
        flags = [a.headers.get("idempotent-replayed") for a in answers]
        assert sorted(flags, key=str) == [None, "true"], flags
