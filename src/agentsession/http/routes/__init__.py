"""Routes, one module per resource; each route makes one SessionManager call."""

from __future__ import annotations

from fastapi import APIRouter

from . import audit, health, memory, messages, records, runs, sessions, tools, users

__all__ = ["routers"]


def routers() -> list[APIRouter]:
    """Every router of the service, in OpenAPI order."""
    return [
        health.router,
        sessions.router,
        sessions.keyed,
        messages.router,
        memory.router,
        records.router,
        tools.router,
        runs.router,
        audit.router,
        users.router,
    ]
