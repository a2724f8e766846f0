"""Users: who am I, and erasure of all of a user's data."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.responses import JSONResponse

from ...fieldlimits import NAME_CHARS
from ..deps import Auth, services
from ..problems import ERRORS, problem_responses
from ..routing import StrictRoute
from ..schemas import NAME

router = APIRouter(prefix="/v1", tags=["users"], responses=ERRORS, route_class=StrictRoute)


@router.get("/whoami")
async def whoami(principal: Auth) -> JSONResponse:
    """The user, role, scope (``read`` or ``write``) and agents of the API key in use.

    ``agents`` is the sorted list of agents the key is limited to, or null for every agent.
    """
    agents = None if principal.agents is None else sorted(principal.agents)
    return JSONResponse(
        {
            "user_id": principal.user_id,
            "admin": principal.admin,
            "scope": principal.scope,
            "agents": agents,
        }
    )


@router.delete("/users/{user_id}/data", responses=problem_responses(403))
async def delete_user_data(
    request: Request,
    principal: Auth,
    user_id: Annotated[str, Path(max_length=NAME_CHARS, pattern=NAME)],
) -> JSONResponse:
    """Erase every session of ``user_id`` (yours, or anyone's with an admin key).

    Answer: ``{"deleted_sessions": n}``.
    """
    count = await services(request).manager.delete_user_data(
        user_id=principal.user_id, target_user_id=user_id, admin=principal.admin
    )
    return JSONResponse({"deleted_sessions": count})
