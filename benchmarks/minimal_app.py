"""The HTTP baseline of workload (f): a minimal FastAPI + sqlite3 session app.

It answers the few requests the load sends, the shapes ``http_load.py`` checks, and
nothing else: ``POST /v1/sessions``, ``POST /v1/sessions/{id}/messages`` (one INSERT
per message, one transaction per request), ``GET /v1/sessions/{id}/messages?limit=n``,
``GET /v1/sessions/{id}``, ``GET /readyz``; a request without the Bearer token of
``MINIMAL_TOKEN`` answers 401. No ownership check, idempotency, audit or version: what
a hand-written app pays for one durable INSERT over HTTP, the lower bound ``agentsession
serve`` is compared with.

SQLite: the file ``MINIMAL_DB`` in WAL with ``synchronous`` = ``MINIMAL_SYNCHRONOUS``
(FULL or NORMAL), one connection per worker thread (FastAPI runs ``def`` endpoints in
its thread pool), 30 s busy timeout. Served by uvicorn with ``agentsession serve``'s
options (1 worker, ``proxy_headers=False``, ``ws="none"``, no access log) and its
protocol's base, httptools (``serve`` uses a subclass that answers protocol errors as
problem+json).

Run: ``MINIMAL_DB=… MINIMAL_SYNCHRONOUS=FULL MINIMAL_TOKEN=… MINIMAL_PORT=…
python benchmarks/minimal_app.py``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid
from typing import Any

from fastapi import Body, FastAPI, Header, HTTPException

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (session_id TEXT PRIMARY KEY, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, payload TEXT NOT NULL,
    created_at TEXT NOT NULL, PRIMARY KEY (session_id, seq));
"""
#: One INSERT per appended message; seq is the session's next number, in the statement.
INSERT = (
    "INSERT INTO messages (session_id, seq, payload, created_at) VALUES (?, "
    "(SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?), ?, "
    "strftime('%Y-%m-%dT%H:%M:%f', 'now')) RETURNING seq, created_at"
)

app = FastAPI()
_local = threading.local()


def _db() -> sqlite3.Connection:
    """This thread's connection (opened on first use, WAL, the configured synchronous)."""
    conn: sqlite3.Connection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(os.environ["MINIMAL_DB"], isolation_level=None, timeout=30.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={os.environ.get('MINIMAL_SYNCHRONOUS', 'FULL')}")
        _local.conn = conn
    return conn


def _auth(authorization: str | None) -> None:
    if authorization != f"Bearer {os.environ['MINIMAL_TOKEN']}":
        raise HTTPException(401, "unauthorized")


@app.on_event("startup")
def _schema() -> None:
    _db().executescript(SCHEMA)


@app.get("/readyz")
def readyz() -> dict[str, str]:
    """200 once the app serves."""
    return {"status": "ok"}


@app.post("/v1/sessions", status_code=201)
def create(authorization: str | None = Header(None)) -> dict[str, str]:
    """Insert a session row; answer its id."""
    _auth(authorization)
    sid = uuid.uuid4().hex
    _db().execute("INSERT INTO sessions VALUES (?, strftime('%Y-%m-%dT%H:%M:%f', 'now'))", (sid,))
    return {"session_id": sid}


@app.post("/v1/sessions/{sid}/messages", status_code=201)
def append(
    sid: str, body: dict[str, Any] = Body(...), authorization: str | None = Header(None)
) -> Any:
    """Append ``{"message": m}`` (answer: the message) or ``{"messages": [...]}``."""
    _auth(authorization)
    batch = body["messages"] if "messages" in body else [body["message"]]
    return _insert(sid, batch)


def _insert(sid: str, batch: list[dict[str, Any]]) -> Any:
    db = _db()
    db.execute("BEGIN IMMEDIATE")
    try:
        out = []
        for m in batch:
            payload = json.dumps(m, ensure_ascii=False)
            seq, at = db.execute(INSERT, (sid, sid, payload)).fetchone()
            out.append({**m, "seq": seq, "created_at": at})
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return out[0] if len(out) == 1 else {"items": out}


@app.get("/v1/sessions/{sid}/messages")
def last(sid: str, limit: int = 20, authorization: str | None = Header(None)) -> Any:
    """The newest ``limit`` messages, oldest first."""
    _auth(authorization)
    rows = (
        _db()
        .execute(
            "SELECT seq, payload, created_at FROM messages WHERE session_id = ? "
            "ORDER BY seq DESC LIMIT ?",
            (sid, limit),
        )
        .fetchall()
    )
    items = [{**json.loads(p), "seq": s, "created_at": at} for s, p, at in reversed(rows)]
    return {"items": items}


@app.get("/v1/sessions/{sid}")
def session(sid: str, authorization: str | None = Header(None)) -> Any:
    """The session's id and message count."""
    _auth(authorization)
    (count,) = (
        _db().execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (sid,)).fetchone()
    )
    return {"session_id": sid, "message_count": count}


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(os.environ["MINIMAL_PORT"]),
        workers=1,
        proxy_headers=False,
        http="httptools",
        ws="none",
        access_log=False,
        log_level="warning",
    )
