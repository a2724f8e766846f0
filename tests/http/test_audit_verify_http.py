"""``GET /v1/admin/audit/verify``: admin only, the report of the audit chains; the same
through the client."""

from __future__ import annotations

import pytest
from http_support import Api, assert_problem

pytestmark = pytest.mark.store_independent


def test_admin_gets_the_report_others_are_refused(api: Api) -> None:
    sid = api.create()["session_id"]
    r = api.http.get("/v1/admin/audit/verify", headers=api.admin)
    assert r.status_code == 200, r.text
    assert r.json() == {"sessions": 1, "events": 1, "broken": None}
    one = api.http.get(f"/v1/admin/audit/verify?session_id={sid}", headers=api.admin)
    assert one.json()["sessions"] == 1
    assert_problem(api.http.get("/v1/admin/audit/verify", headers=api.alice), 403, "forbidden")
