"""Liveness and readiness probes (no authentication)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response

from ..deps import services
from ..logs import log_failure
from ..problems import plain_problem, problem_responses
from ..routing import StrictRoute

router = APIRouter(tags=["health"], route_class=StrictRoute)
log = logging.getLogger("agentsession.http")


@router.get("/healthz")
async def healthz() -> JSONResponse:
    """The process is up."""
    return JSONResponse({"status": "ok"})


@router.get("/readyz", responses=problem_responses(503))
async def readyz(request: Request) -> Response:
    """The store answers a read (an empty session listing); else 503."""
    try:
        await services(request).manager.list_sessions(user_id="readyz", limit=0)
    except Exception as exc:  # any failure means "not ready"; the cause goes to the log
        log_failure(log, "readiness check failed", exc, level=logging.WARNING)
        return plain_problem(503, "not-ready", "Service Unavailable", "the store is unreachable")
    return JSONResponse({"status": "ready"})
