"""API key scopes: the one check that a ``read`` key calls no write.

Every request that authenticates (:func:`.deps.authenticate`) passes here: a ``read``
principal may call an operation of :data:`~agentsession.operations.OPERATIONS` only
if it changes nothing (:attr:`~agentsession.operations.Operation.writes`, from the
table, so a new row is covered without code here); any other route (not in the table)
is taken to write unless its method is GET or HEAD. A refused request is answered 403
``insufficient-scope`` before anything runs (docs/security.md, "Scopes").
"""

from __future__ import annotations

from fastapi import Request

from ..operations import OPERATIONS
from ..principal import Principal
from ..protocol import InsufficientScope

__all__ = ["check_scope", "route_writes"]

#: (method, path template) -> whether the operation of that route writes.
_WRITES: dict[tuple[str, str], bool] = {
    (route.method, route.path): op.writes for op in OPERATIONS for route in op.routes
}


def route_writes(method: str, path: str) -> bool:
    """Whether the route ``method path`` (a path template, as the table writes it) may
    write: its operation's :attr:`~agentsession.operations.Operation.writes`, else any
    method but GET and HEAD."""
    return _WRITES.get((method, path), method not in ("GET", "HEAD"))


def check_scope(request: Request, principal: Principal) -> None:
    """Refuse a request ``principal``'s scope does not allow.

    Raises:
        InsufficientScope: a ``read`` principal on a route that may write.
    """
    if principal.scope == "write":
        return
    route = request.scope.get("route")
    path = getattr(route, "path", request.url.path)
    if route_writes(request.method, path):
        raise InsufficientScope(
            f"this API key may only read ({principal.scope} scope): {request.method} {path} writes"
        )
