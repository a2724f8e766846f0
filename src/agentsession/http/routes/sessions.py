"""Sessions by external key: open (get or create). The key travels query-encoded,
never as a path segment; the resource is not under ``/v1/sessions/``, where
``{session_id}`` routes would also match its path. The other session routes are built
from the table of operations (:mod:`.table`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Request, Response

from ...models import Session
from ..deps import Auth, IdempotencyKey, reply, services, write
from ..problems import ERRORS
from ..routing import StrictRoute
from ..schemas import QUERY, OpenSession

router = APIRouter(
    prefix="/v1/sessions-by-key", tags=["sessions"], responses=ERRORS, route_class=StrictRoute
)


@router.put(
    "",
    response_model=Session,
    responses={201: {"model": Session, "description": "Created by this request."}},
)
async def open_session(
    request: Request,
    principal: Auth,
    agent: Annotated[str, QUERY["agent"]],
    external_key: Annotated[str, QUERY["external_key"]],
    body: OpenSession | None = None,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """Get or create the caller's session of ``agent`` with this external key: 201
    when this request created it (from the body's fields), 200 when it existed (in
    whatever status it is; nothing is restored). A retry with the ``Idempotency-Key``
    of a request that created the session answers that 201 again."""
    fields = body or OpenSession()
    (session, created), replayed = await write(
        services(request).manager.open_session(
            user_id=principal.user_id,
            agent=agent,
            external_key=external_key,
            title=fields.title,
            metadata=fields.metadata,
            ttl_seconds=fields.ttl_seconds,
            working_memory=fields.working_memory,
            idempotency_key=idempotency_key,
        )
    )
    if not created:
        return reply(session, session=session)
    location = f"/v1/sessions/{session.session_id}"
    return reply(session, status=201, session=session, replayed=replayed, location=location)
