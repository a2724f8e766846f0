"""Sessions: create, read (by id or external key), open by key, list, update,
lifecycle actions, delete."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from ...fieldlimits import EXTERNAL_KEY_CHARS, NAME_CHARS
from ...models import Page, RestoredSession, Session, SessionStatus
from ..deps import Auth, IdempotencyKey, ReadCtx, WriteCtx, reply, services, write
from ..problems import ERRORS, WRITE_ERRORS, problem_responses
from ..routing import StrictRoute
from ..schemas import (
    EXTERNAL_KEY,
    NAME,
    CreateSession,
    CursorQuery,
    ForkSession,
    LimitQuery,
    OpenSession,
    Reason,
    RestoreSession,
    SharedMemoryOps,
    UpdateSession,
    id_pattern,
)

router = APIRouter(
    prefix="/v1/sessions", tags=["sessions"], responses=ERRORS, route_class=StrictRoute
)

_ONE = "/{session_id}"

#: Sessions by external key. The key travels query-encoded, never as a path segment;
#: the resource is not under ``/v1/sessions/``, where ``{session_id}`` routes would
#: also match its path.
keyed = APIRouter(
    prefix="/v1/sessions-by-key", tags=["sessions"], responses=ERRORS, route_class=StrictRoute
)

AgentQuery = Annotated[
    str, Query(max_length=NAME_CHARS, pattern=NAME, description="The session's agent.")
]
KeyQuery = Annotated[
    str,
    Query(
        max_length=EXTERNAL_KEY_CHARS,
        pattern=EXTERNAL_KEY,
        description="The session's external key, exactly (query-encoded).",
    ),
]


_SESSION_EXISTS = (
    "A session of the caller and `agent` has this `external_key` (`session-exists`; "
    "the problem's `session_id` names it)"
)


@router.post(
    "",
    status_code=201,
    response_model=Session,
    responses=problem_responses(403, 409, descriptions={409: _SESSION_EXISTS}),
)
async def create_session(
    request: Request, principal: Auth, body: CreateSession, idempotency_key: IdempotencyKey = None
) -> Response:
    """Create an ACTIVE session owned by the caller."""
    session, replayed = await write(
        services(request).manager.create_session(
            user_id=principal.user_id,
            agent=body.agent,
            title=body.title,
            metadata=body.metadata,
            ttl_seconds=body.ttl_seconds,
            working_memory=body.working_memory,
            external_key=body.external_key,
            idempotency_key=idempotency_key,
            shared_memory_ops=SharedMemoryOps.by_scope_of(body.shared_memory_ops),
            admin=principal.admin,
        )
    )
    return reply(
        session,
        status=201,
        session=session,
        replayed=replayed,
        location=f"/v1/sessions/{session.session_id}",
    )


@router.get("", response_model=Page[Session], responses=problem_responses(403))
async def list_sessions(
    request: Request,
    principal: Auth,
    status: SessionStatus | None = None,
    agent: Annotated[str | None, Query(max_length=NAME_CHARS, pattern=NAME)] = None,
    limit: LimitQuery = None,
    cursor: CursorQuery = None,
    all_users: Annotated[bool, Query(description="Every user's sessions (admin keys).")] = False,
    parent_session_id: Annotated[
        str | None,
        Query(pattern=id_pattern("ses"), description="Only the forks made from this session."),
    ] = None,
) -> Response:
    """The caller's sessions, most recently updated first; ``next_cursor`` pages on."""
    page = await services(request).manager.list_sessions(
        user_id=principal.user_id,
        status=status,
        agent=agent,
        limit=limit,
        cursor=cursor,
        all_users=all_users,
        admin=principal.admin,
        parent_session_id=parent_session_id,
    )
    return reply(page)


@keyed.get("", response_model=Session)
async def get_session_by_key(
    request: Request, principal: Auth, agent: AgentQuery, external_key: KeyQuery
) -> Response:
    """The caller's session of ``agent`` with this external key; 404 if none."""
    session = await services(request).manager.get_session_by_key(
        user_id=principal.user_id, agent=agent, external_key=external_key
    )
    return reply(session, session=session)


@keyed.put(
    "",
    response_model=Session,
    responses={201: {"model": Session, "description": "Created by this request."}},
)
async def open_session(
    request: Request,
    principal: Auth,
    agent: AgentQuery,
    external_key: KeyQuery,
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


@router.get(_ONE, response_model=Session)
async def get_session(ctx: ReadCtx) -> Response:
    """One session; its ``ETag`` is the token for ``If-Match``."""
    session = await ctx.manager.get_session(**ctx.who)
    return reply(session, session=session)


@router.post(
    _ONE + "/fork",
    status_code=201,
    response_model=Session,
    responses=problem_responses(409, descriptions={409: _SESSION_EXISTS}),
)
async def fork_session(
    ctx: ReadCtx, body: ForkSession | None = None, idempotency_key: IdempotencyKey = None
) -> Response:
    """Make a new ACTIVE session of the same owner and agent from this one as it stood
    at ``at_seq``: copies of its messages ``1..at_seq``, the summaries within them and
    its working memory as of ``at_seq`` (runs and tool calls are not copied). The
    parent, in any status, is not changed (it takes no ``If-Match``: nothing of it is
    written). The fork's ETag and ``Location``; a retry with the same
    ``Idempotency-Key`` answers the same fork."""
    fields = body or ForkSession()
    options: dict[str, Any] = {}
    if "ttl_seconds" in fields.model_fields_set:  # absent: the parent's
        options["ttl_seconds"] = fields.ttl_seconds
    fork, replayed = await write(
        ctx.manager.fork_session(
            **ctx.who,
            at_seq=fields.at_seq,
            title=fields.title,
            metadata=fields.metadata,
            external_key=fields.external_key,
            idempotency_key=idempotency_key,
            **options,
        )
    )
    location = f"/v1/sessions/{fork.session_id}"
    return reply(fork, status=201, session=fork, replayed=replayed, location=location)


@router.patch(_ONE, response_model=Session, responses=WRITE_ERRORS)
async def update_session(ctx: WriteCtx, body: UpdateSession) -> Response:
    """Set the title, metadata (replaced whole) or TTL; fields left out stay."""
    fields: dict[str, Any] = {name: getattr(body, name) for name in body.model_fields_set}
    session, replayed = await write(
        ctx.manager.update_session(
            **ctx.who,
            **fields,
            expected_version=await ctx.expected_version(required=True),
            idempotency_key=ctx.idempotency_key,
        )
    )
    return reply(session, session=session, replayed=replayed)


@router.delete(_ONE, status_code=204, responses=WRITE_ERRORS)
async def delete_session(ctx: WriteCtx) -> Response:
    """Delete the session and everything in it; afterwards it is not found."""
    await ctx.manager.delete_session(
        **ctx.who, expected_version=await ctx.expected_version(required=True)
    )
    return Response(status_code=204)


@router.post(_ONE + "/close", response_model=Session, responses=WRITE_ERRORS)
async def close_session(ctx: WriteCtx, body: Reason | None = None) -> Response:
    """Close the session (history stays readable; restore re-opens it)."""
    session, replayed = await write(
        ctx.manager.close_session(
            **ctx.who,
            reason=body.reason if body is not None else None,
            expected_version=await ctx.expected_version(required=True),
            idempotency_key=ctx.idempotency_key,
        )
    )
    return reply(session, session=session, replayed=replayed)


@router.post(_ONE + "/expire", response_model=Session, responses=WRITE_ERRORS)
async def expire_session(ctx: WriteCtx, body: Reason | None = None) -> Response:
    """Expire the session now (idempotent by nature: expiring EXPIRED changes nothing)."""
    session = await ctx.manager.expire_session(
        **ctx.who,
        reason=body.reason if body is not None else None,
        expected_version=await ctx.expected_version(required=True),
    )
    return reply(session, session=session)


@router.post(_ONE + "/restore", response_model=RestoredSession, responses=WRITE_ERRORS)
async def restore_session(ctx: WriteCtx, body: RestoreSession | None = None) -> Response:
    """Re-open a CLOSED (or recently EXPIRED) session and return all an engine needs."""
    restored = await ctx.manager.restore_session(
        **ctx.who,
        message_limit=body.message_limit if body is not None else None,
        expected_version=await ctx.expected_version(required=True),
    )
    return reply(restored, session=restored.session)
