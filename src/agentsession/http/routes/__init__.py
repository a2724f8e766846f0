"""The routes of the service: those of the rows of the table of operations with no
``route_by_hand`` are built from their rows when the app is created (:mod:`.table`);
the others are written here by hand, one module per resource, each row's
``route_by_hand`` saying why. Each route makes one SessionManager call."""

from __future__ import annotations

from functools import cache

from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from ...operations import OPERATIONS
from . import context, health, memory, messages, records, sessions, shared, tools, users
from .table import served_routes

__all__ = ["routers"]

#: The routers of the routes written by hand.
BY_HAND = (
    health.router,
    sessions.router,
    messages.router,
    memory.router,
    shared.router,
    records.router,
    context.router,
    tools.router,
    users.router,
)


@cache
def routers() -> list[APIRouter]:
    """Every route of the service, in one router: the table's order (that of the
    OpenAPI document), a fixed path segment tried before a parameter at its place.

    Raises:
        LookupError: the table and the routes written by hand disagree (see
            :func:`.table.served_routes`).
    """
    by_hand = [
        route for router in BY_HAND for route in router.routes if isinstance(route, APIRoute)
    ]
    routes: list[BaseRoute] = [*served_routes(OPERATIONS, by_hand)]
    return [APIRouter(routes=routes)]
