"""Helpers of the HTTP tests (importable as ``http_support``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient

from agentsession import SessionManager
from agentsession.http.keys import MemoryKeyStore


@dataclass
class Api:
    """A test client plus the bearer headers of alice, bob and an admin."""

    http: TestClient
    app: FastAPI
    manager: SessionManager
    keys: MemoryKeyStore
    alice: dict[str, str]
    bob: dict[str, str]
    admin: dict[str, str]

    def create(self, who: dict[str, str] | None = None, **body: Any) -> dict[str, Any]:
        """Create a session as ``who`` (default alice) and return its JSON."""
        r = self.http.post("/v1/sessions", json=body, headers=who or self.alice)
        assert r.status_code == 201, r.text
        return r.json()  # type: ignore[no-any-return]


def headers_of(token: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **extra}


def assert_problem(
    response: httpx.Response, status: int, code: str | None = None
) -> dict[str, Any]:
    """Assert an RFC 9457 problem answer and return its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["type"].startswith("https://agentsession.dev/problems/")
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str)
    if code is not None:
        assert body["type"] == f"https://agentsession.dev/problems/{code}"
    return body


def call_asgi(
    app: Callable[..., Any],
    incoming: list[dict[str, Any]],
    headers: list[tuple[bytes, bytes]],
    *,
    client: tuple[str, int] = ("127.0.0.1", 40000),
) -> list[Any]:
    """Drive ``app`` with one raw ``POST /v1/sessions`` (what an HTTP client library
    cannot send: malformed headers, a hang-up mid-body): ``incoming`` are the ASGI
    receive messages in order (then ``http.disconnect``), ``headers`` the raw header
    pairs. Returns the ASGI messages the app sent."""
    sent: list[Any] = []

    async def receive() -> Any:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/sessions",
        "raw_path": b"/v1/sessions",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": client,
        "server": ("test", 80),
        "app": app,
    }
    asyncio.run(app(scope, receive, send))
    return sent
