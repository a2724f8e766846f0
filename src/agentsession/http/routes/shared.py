"""Shared memory: read (GET) and change by JSON Patch (PATCH, RFC 6902) the document of
an agent (``/app/{agent}``, admin keys only) or of the caller and an agent
(``/user/{agent}``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Request
from starlette.responses import Response

from ...errors import ValidationError
from ...fieldlimits import NAME_CHARS
from ...models import SharedMemory
from ..deps import Auth, IdempotencyKey, reply, services, write
from ..problems import ERRORS, problem_responses
from ..routing import StrictRoute
from ..schemas import NAME
from .memory import JSON_PATCH, MERGE_PATCH

router = APIRouter(
    prefix="/v1/shared-memory",
    tags=["shared memory"],
    responses={**ERRORS, **problem_responses(403)},
    route_class=StrictRoute,
)

ScopePath = Annotated[
    Literal["app", "user"],
    Path(description="`app`: the agent's document (admin keys); `user`: the caller's."),
]
AgentPath = Annotated[str, Path(max_length=NAME_CHARS, pattern=NAME)]


@router.get("/{scope}/{agent}", response_model=SharedMemory)
async def get_shared_memory(
    request: Request, principal: Auth, scope: ScopePath, agent: AgentPath
) -> Response:
    """The document (``{}`` at version 0 if never written)."""
    doc = await services(request).manager.get_shared_memory(
        scope=scope, agent=agent, user_id=principal.user_id, admin=principal.admin
    )
    return reply(doc)


@router.patch(
    "/{scope}/{agent}",
    response_model=SharedMemory,
    # No If-Match here (a document's version is not a session's ETag): 409 only.
    responses=problem_responses(409),
    openapi_extra={
        "requestBody": {
            "content": {JSON_PATCH: {"schema": {"type": "array", "items": {"type": "object"}}}}
        }
    },
)
async def patch_shared_memory(
    request: Request,
    principal: Auth,
    scope: ScopePath,
    agent: AgentPath,
    idempotency_key: IdempotencyKey = None,
    ops: list[dict[str, Any]] = Body(),
) -> Response:
    """Apply JSON Patch ops (``application/json-patch+json``, or JSON: the body is
    always an op list), all or none; an op that does not apply is 409
    ``patch-conflict``. Concurrent writers lose no update. A merge-patch body
    (``application/merge-patch+json``) is 400: shared memory takes ops only."""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media == MERGE_PATCH:
        raise ValidationError(
            f"shared memory takes a {JSON_PATCH} op list, not a merge patch", field="body"
        )
    doc, replayed = await write(
        services(request).manager.update_shared_memory(
            scope=scope,
            agent=agent,
            user_id=principal.user_id,
            ops=ops,
            idempotency_key=idempotency_key,
            admin=principal.admin,
        )
    )
    return reply(doc, replayed=replayed)
