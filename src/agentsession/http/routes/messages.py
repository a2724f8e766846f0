"""Messages: append one or a batch, read a window of history."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from ...models import Message
from ..deps import ReadCtx, WriteCtx, items, reply, write
from ..problems import ERRORS, WRITE_ERRORS
from ..schemas import PAGE_MAX, AppendMessages, Items

router = APIRouter(prefix="/v1/sessions/{session_id}/messages", tags=["messages"], responses=ERRORS)


@router.post("", status_code=201, response_model=Message | Items[Message], responses=WRITE_ERRORS)
async def append_messages(ctx: WriteCtx, body: AppendMessages) -> Response:
    """Append ``message`` (answer: the message) or ``messages`` (answer: ``{"items"}``).

    All messages of a batch get consecutive seqs in one version step, or none is stored.
    """
    batch = body.messages if body.messages is not None else [body.message or {}]
    stored, replayed = await write(
        ctx.manager.append_messages(
            **ctx.who,
            messages=batch,
            working_memory_patch=body.working_memory_patch,
            expected_version=await ctx.expected_version(),
            idempotency_key=ctx.idempotency_key,
        )
    )
    if body.messages is None:
        return reply(stored[0], status=201, replayed=replayed)
    return reply({"items": stored}, status=201, replayed=replayed)


@router.get("", response_model=Items[Message])
async def get_messages(
    ctx: ReadCtx,
    limit: Annotated[int, Query(ge=0, le=PAGE_MAX, description="Newest N (default 100).")] = 100,
    before: Annotated[int | None, Query(ge=0, description="Only seqs below this.")] = None,
    after: Annotated[int | None, Query(ge=0, description="Only seqs above this.")] = None,
    align_tool_calls: bool = True,
) -> Response:
    """A window of history, oldest first, in seq order (``{"items": [...]}``)."""
    messages = await ctx.manager.get_messages(
        **ctx.who, limit=limit, before=before, after=after, align_tool_calls=align_tool_calls
    )
    return items(messages)
