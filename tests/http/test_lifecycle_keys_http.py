"""``Idempotency-Key`` on the lifecycle routes (expire, restore, delete): a retry
answers the first result with ``Idempotent-Replayed``, writes nothing, and the key on
another session is a 422 (idempotency-key-reused)."""

from __future__ import annotations

import pytest
from http_support import Api, assert_problem

pytestmark = pytest.mark.store_independent


def _etag(api: Api, sid: str) -> str:
    return api.http.get(f"/v1/sessions/{sid}", headers=api.alice).headers["etag"]


@pytest.mark.parametrize("action", ["expire", "restore"])
def test_a_retried_lifecycle_write_replays(api: Api, action: str) -> None:
    sid = api.create()["session_id"]
    if action == "restore":
        api.http.post(
            f"/v1/sessions/{sid}/close", headers={**api.alice, "If-Match": _etag(api, sid)}
        )
    headers = {**api.alice, "If-Match": _etag(api, sid), "Idempotency-Key": f"k-{action}"}
    first = api.http.post(f"/v1/sessions/{sid}/{action}", headers=headers)
    assert first.status_code == 200, first.text
    again = api.http.post(f"/v1/sessions/{sid}/{action}", headers=headers)
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert (
        again.json()["session" if action == "restore" else "version"]
        == (first.json()["session" if action == "restore" else "version"])
    )
    other = api.create()["session_id"]
    reused = api.http.post(
        f"/v1/sessions/{other}/{action}", headers={**headers, "If-Match": _etag(api, other)}
    )
    assert_problem(reused, 422)


def test_a_retried_delete_answers_204_again(api: Api) -> None:
    sid = api.create()["session_id"]
    headers = {**api.alice, "If-Match": _etag(api, sid), "Idempotency-Key": "k-del"}
    assert api.http.delete(f"/v1/sessions/{sid}", headers=headers).status_code == 204
    again = api.http.delete(f"/v1/sessions/{sid}", headers=headers)
    assert again.status_code == 204 and again.headers["idempotent-replayed"] == "true"
    unkeyed = {k: v for k, v in headers.items() if k != "Idempotency-Key"}
    assert_problem(api.http.delete(f"/v1/sessions/{sid}", headers=unkeyed), 404)
