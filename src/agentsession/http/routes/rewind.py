"""Rewind: move a session back to an earlier message, and read what rewinds kept
(docs/semantics.md, "Rewind")."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from ...models import Message, Page, Rewind, RewindResult
from ..deps import ReadCtx, WriteCtx, reply, version_etag, write
from ..problems import ERRORS, WRITE_ERRORS
from ..routing import StrictRoute
from ..schemas import CursorQuery, LimitQuery, RewindBody

router = APIRouter(
    prefix="/v1/sessions/{session_id}", tags=["rewind"], responses=ERRORS, route_class=StrictRoute
)

#: A rewind's number in a path.
Number = Annotated[int, Path(ge=1, le=2**53 - 1, description="The rewind's number.")]


@router.post("/rewind", response_model=RewindResult, responses=WRITE_ERRORS)
async def rewind_session(ctx: WriteCtx, body: RewindBody) -> Response:
    """Move the session back to ``to_seq``: the messages above it leave the history
    (kept hidden, or deleted with ``remove``), the summaries past it go, and the
    working memory becomes the memory as of ``to_seq``; tool calls and runs stay.
    ``{"number", "to_seq", "count", "mode", "memory_version", "session_version"}``
    (``number`` null: nothing changed); the ETag is the session's version after it.
    ``If-Match`` is required when the service requires it for destructive requests; an
    ``Idempotency-Key`` makes a retry answer the first result."""
    result, replayed = await write(
        ctx.manager.rewind_session(
            **ctx.who,
            to_seq=body.to_seq,
            remove=body.remove,
            expected_version=await ctx.expected_version(required=True),
            idempotency_key=ctx.idempotency_key,
        )
    )
    etag = version_etag(ctx.session_id, result.session_version)
    return reply(result, etag=etag, replayed=replayed)


@router.get("/rewinds", response_model=Page[Rewind])
async def list_rewinds(
    ctx: ReadCtx, limit: LimitQuery = None, cursor: CursorQuery = None
) -> Response:
    """A page of the session's rewinds, oldest first."""
    return reply(await ctx.manager.list_rewinds(**ctx.who, limit=limit, cursor=cursor))


@router.get("/rewinds/{number}/messages", response_model=Page[Message])
async def get_rewound_messages(
    ctx: ReadCtx, number: Number, limit: LimitQuery = None, cursor: CursorQuery = None
) -> Response:
    """A page of the messages rewind ``number`` hid, oldest first (empty for a
    removing rewind); 404 for an unknown number."""
    page = await ctx.manager.get_rewound_messages(
        **ctx.who, number=number, limit=limit, cursor=cursor
    )
    return reply(page)
