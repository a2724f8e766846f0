"""Liveness and readiness probes (no authentication)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from ...errors import AgentSessionError
from ..deps import services
from ..problems import plain_problem

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> JSONResponse:
    """The process is up."""
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> Response:
    """The store answers a read (an empty session listing); else 503."""
    try:
        await services(request).manager.list_sessions(user_id="readyz", limit=0)
    except AgentSessionError:
        return plain_problem(503, "not-ready", "Service Unavailable", "the store is unreachable")
    return JSONResponse({"status": "ready"})
