"""Shared memory: read (GET), change by JSON Patch (PATCH, RFC 6902) and delete (DELETE,
admin keys) the document of an agent (``/app/{agent}``, admin keys only) or of a user
and an agent (``/user/{agent}``: the caller's, or with an admin key ``?user_id=``'s).
Answers carry the document's ETag (``"<version>"``), which a DELETE's ``If-Match``
names."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Path, Query, Request
from starlette.responses import JSONResponse, Response

from ...errors import Forbidden, ValidationError, VersionConflict
from ...fieldlimits import NAME_CHARS
from ...models import SharedMemory
from ...principal import Principal
from ...protocol import PreconditionRequired, format_document_etag, parse_document_if_match
from ..deps import Auth, IdempotencyKey, Services, reply, services, write
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
    Path(description="`app`: the agent's document (admin keys); `user`: a user's."),
]
AgentPath = Annotated[str, Path(max_length=NAME_CHARS, pattern=NAME)]
UserQuery = Annotated[
    str | None,
    Query(
        max_length=NAME_CHARS,
        pattern=NAME,
        description="With scope `user`: whose document (another user's needs an admin "
        "key: 403 otherwise, whether or not it exists); default the caller. With scope "
        "`app`: 400 (the app document belongs to no user).",
    ),
]
#: The 400 every operation here may answer, with the rule no parameter list can state.
BAD_REQUEST = problem_responses(
    400,
    descriptions={
        400: "Invalid argument, or `user_id` with scope `app` (`field`: `target_user_id`)"
    },
)
IfMatch = Annotated[
    str | None,
    Header(
        description='The document\'s ETag (`"<version>"`, `"0"` = never written), a list '
        "of them, or `*`: the delete happens only if the document is still at that "
        "version. Any other value, a session's ETag too, matches nothing (412)."
    ),
]


def _reply(doc: SharedMemory, *, replayed: bool = False) -> Response:
    response = reply(doc, replayed=replayed)
    response.headers["ETag"] = format_document_etag(doc.version)
    return response


@router.get("/{scope}/{agent}", response_model=SharedMemory, responses=BAD_REQUEST)
async def get_shared_memory(
    request: Request, principal: Auth, scope: ScopePath, agent: AgentPath, user_id: UserQuery = None
) -> Response:
    """The document (``{}`` at version 0 if never written)."""
    doc = await services(request).manager.get_shared_memory(
        scope=scope,
        agent=agent,
        user_id=principal.user_id,
        target_user_id=user_id,
        admin=principal.admin,
    )
    return _reply(doc)


@router.patch(
    "/{scope}/{agent}",
    response_model=SharedMemory,
    # No If-Match here: 409 only.
    responses={**BAD_REQUEST, **problem_responses(409)},
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
    user_id: UserQuery = None,
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
            f"shared memory takes an {JSON_PATCH} op list, not a merge patch", field="body"
        )
    doc, replayed = await write(
        services(request).manager.update_shared_memory(
            scope=scope,
            agent=agent,
            user_id=principal.user_id,
            target_user_id=user_id,
            ops=ops,
            idempotency_key=idempotency_key,
            admin=principal.admin,
        )
    )
    return _reply(doc, replayed=replayed)


@router.delete("/{scope}/{agent}", responses={**BAD_REQUEST, **problem_responses(412, 428)})
async def delete_shared_memory(
    request: Request,
    principal: Auth,
    scope: ScopePath,
    agent: AgentPath,
    user_id: UserQuery = None,
    if_match: IfMatch = None,
) -> JSONResponse:
    """Delete the document (admin keys); it then reads as ``{}`` at version 0. One
    content-free audit event records the deletion. Answer: ``{"deleted": bool}``
    (false: there was no document)."""
    if not principal.admin:  # before If-Match: a 428 or 412 would say the route works
        raise Forbidden("deleting a shared-memory document needs an admin key")
    svc = services(request)
    expected = await _expected_version(svc, principal, scope, agent, user_id, if_match)
    deleted = await svc.manager.delete_shared_memory(
        scope=scope,
        agent=agent,
        user_id=principal.user_id,
        target_user_id=user_id,
        expected_version=expected,
        admin=True,
    )
    return JSONResponse({"deleted": deleted})


async def _expected_version(
    svc: Services,
    principal: Principal,
    scope: Literal["app", "user"],
    agent: str,
    user_id: str | None,
    if_match: str | None,
) -> int | None:
    """``If-Match`` as the delete's ``expected_version`` (None: no precondition).

    Raises:
        PreconditionRequired: no header, and the settings require one (428).
        VersionConflict: a list none of whose ETags is the document's (412).
    """
    if if_match is None:
        if svc.settings.require_if_match:
            raise PreconditionRequired("this request needs `If-Match: <ETag of the document>`")
        return None
    star, versions = parse_document_if_match(if_match)
    if star:
        return None
    if len(versions) == 1:
        return next(iter(versions))
    current = await svc.manager.get_shared_memory(
        scope=scope, agent=agent, user_id=principal.user_id, target_user_id=user_id, admin=True
    )
    if current.version in versions:
        return current.version
    raise VersionConflict(
        f"If-Match matches no current ETag of the document "
        f"(now {format_document_etag(current.version)})",
        session_id=f"shared:{scope}:{agent}",
        current_version=current.version,
    )
