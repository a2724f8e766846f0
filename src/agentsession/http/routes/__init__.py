"""Routes, one module per resource; each route makes one SessionManager call."""

from __future__ import annotations

from fastapi import APIRouter

from . import (
    audit,
    context,
    health,
    memory,
    messages,
    records,
    rewind,
    runs,
    sessions,
    shared,
    tools,
    users,
)

__all__ = ["routers"]


def routers() -> list[APIRouter]:
    """Every router of the service, in OpenAPI order."""
    return [
        health.router,
        sessions.router,
        sessions.keyed,
        messages.router,
        memory.router,
        rewind.router,
        shared.router,
        records.router,
        context.router,
        tools.router,
        runs.router,
        audit.router,
        users.router,
    ]
