"""The HTTP erase route runs the same disk step as the manager and the CLI: after
``DELETE /v1/users/{user_id}/data`` no canary is left in the SQLite files."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from http_support import headers_of

from agentsession import SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings
from agentsession.stores.sql import SQLStore
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
