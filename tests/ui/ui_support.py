"""Helpers of the inspector's tests: a seeded app, logging in through the form."""

from __future__ import annotations

import re
from dataclasses import dataclass

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient
from ui_seed import Seeded, seed

from agentsession import SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings

_CSRF = re.compile(r'name="csrf" value="([^"]*)"')


def csrf_of(html: str) -> str:
    """The CSRF token of the first form of a page."""
    found = _CSRF.search(html)
    assert found is not None, "no CSRF field on the page"
    return found.group(1)


def log_in(client: TestClient, key: str) -> httpx.Response:
    """Open the login form and post ``key`` with its CSRF value; the answer (a 303 to
    ``/ui/`` on success) is returned unfollowed."""
    form = client.get("/ui/")
    return client.post(
        "/ui/login", data={"api_key": key, "csrf": csrf_of(form.text)}, follow_redirects=False
    )


#: The pages of one session, relative to ``/ui/sessions/<id>``.
SESSION_PAGES = (
    "",
    "/memory",
    "/memory?at=2&base=0",
    "/runs",
    "/records",
    "/records?namespace=ns",
    "/audit",
    "/rewinds/1",
    "/context",
    "/context?budget=120",
    "/context?budget=1",
    "/forks",
)


@dataclass
class Inspector:
    """The app, its manager, the seeded ids and the tokens of alice, bob and root."""

    app: FastAPI
    manager: SessionManager
    seeded: Seeded
    alice: str
    bob: str
    admin: str


def build(**settings: object) -> Inspector:
    """A fresh seeded app (settings override the service's)."""
    manager = SessionManager.from_url("memory://")
    keys = MemoryKeyStore()
    tokens = [
        keys.create(user_id="alice")[1],
        keys.create(user_id="bob")[1],
        keys.create(user_id="root", admin=True)[1],
    ]
    app = create_app(manager, Settings(url="memory://", **settings), keys=keys)  # type: ignore[arg-type]
    return Inspector(app, manager, seed(manager), *tokens)


@dataclass
class Live:
    """A seeded app served over real HTTP at ``url``."""

    url: str
    inspector: Inspector
