"""The HTTP erase route runs the same disk step as the manager and the CLI: after
``DELETE /v1/users/{user_id}/data`` no canary is left in the SQLite files, and an
admin's keyed write for the user, sent again, replays nothing of what was erased."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from http_support import Api, assert_problem, headers_of

from agentsession import SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.sql.store import SQLStore
from canaries import write_canaries


def test_erase_route_gets_the_data_off_the_sqlite_files(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    files = [db, tmp_path / "h.db-wal", tmp_path / "h.db-shm"]
    store = SQLStore(f"sqlite:///{db}", auto_migrate=True)
    manager = SessionManager(store)
    c = write_canaries(manager)
    keys = MemoryKeyStore()
    token = keys.create(user_id=c.user)[1]
    app = create_app(manager, Settings(url="memory://"), keys=keys)
    with TestClient(app) as http:
        r = http.delete(f"/v1/users/{c.user}/data", headers=headers_of(token))
    assert r.status_code == 200 and r.json() == {"deleted_sessions": len(c.session_ids)}
    on_disk = b"".join(p.read_bytes() for p in files if p.exists())
    assert c.found_in(on_disk) == []
    store.close()


def _patch(api: Api, path: str, ops: Any, who: dict[str, str]) -> httpx.Response:
    headers = {**who, "Content-Type": "application/json-patch+json"}
    return api.http.patch(f"/v1/shared-memory/{path}", content=json.dumps(ops), headers=headers)


@pytest.mark.store_independent
def test_admin_keyed_writes_replayed_after_erasure_return_no_erased_content(api: Api) -> None:
    """An admin's keyed PATCH of alice's shared memory and keyed append to her session,
    sent again after ``DELETE /v1/users/alice/data``: the PATCH runs again (a new
    document at version 1, nothing of the erased one, no ``Idempotent-Replayed``), the
    append finds no session (404)."""
    secret = f"CANARY-{secrets.token_hex(6)}"
    own = [{"op": "add", "path": "/own", "value": secret}]
    assert _patch(api, "user/coding", own, api.alice).status_code == 200
    sid = api.create()["session_id"]
    admin_ops = [{"op": "add", "path": "/by_admin", "value": "hello"}]
    keyed = {**api.admin, "Idempotency-Key": "admin-k1"}

    def patch() -> httpx.Response:
        return _patch(api, "user/coding?user_id=alice", admin_ops, keyed)

    def append() -> httpx.Response:
        body = {"messages": [{"role": "user", "content": secret}]}
        return api.http.post(f"/v1/sessions/{sid}/messages", json=body, headers=keyed)

    first, added = patch(), append()
    assert first.json()["version"] == 2 and added.status_code == 201, added.text
    assert patch().headers.get("Idempotent-Replayed") == "true"  # a retry replays
    erased = api.http.delete("/v1/users/alice/data", headers=api.admin)
    assert erased.status_code == 200, erased.text
    again = patch()
    assert again.status_code == 200 and again.headers.get("Idempotent-Replayed") != "true"
    assert again.json()["version"] == 1 and again.json()["data"] == {"by_admin": "hello"}
    assert secret not in again.text
    assert_problem(append(), 404)
