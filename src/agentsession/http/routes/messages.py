"""Messages: append one or a batch, pop the newest. Reading, replacing and removing
them are routes built from the table of operations (:mod:`.table`)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from ...models import Message
from ..deps import WriteCtx, reply, version_etag, write, write_reported
from ..problems import ERRORS, WRITE_ERRORS, problem_responses
from ..routing import StrictRoute
from ..schemas import AppendMessages, Items, PopResult, SharedMemoryOps

router = APIRouter(
    prefix="/v1/sessions/{session_id}/messages",
    tags=["messages"],
    responses=ERRORS,
    route_class=StrictRoute,
)


@router.post(
    "",
    status_code=201,
    response_model=Message | Items[Message],
    responses={**WRITE_ERRORS, **problem_responses(403)},
)
async def append_messages(ctx: WriteCtx, body: AppendMessages) -> Response:
    """Append ``message`` (answer: the message) or ``messages`` (answer: ``{"items"}``).

    All messages of a batch get consecutive seqs in one version step, or none is stored.
    Each carries ``session_version``, the session's new version, also the ETag.
    """
    batch = body.messages if body.messages is not None else [body.message or {}]
    stored, replayed = await write(
        ctx.manager.append_messages(
            **ctx.who,
            messages=batch,
            working_memory_patch=body.working_memory_patch,
            working_memory_ops=body.working_memory_ops,
            shared_memory_ops=SharedMemoryOps.by_scope_of(body.shared_memory_ops),
            expected_version=await ctx.expected_version(),
            idempotency_key=ctx.idempotency_key,
        )
    )
    etag = version_etag(ctx.session_id, stored[0].session_version)
    answer = stored[0] if body.messages is None else {"items": stored}
    return reply(answer, status=201, etag=etag, replayed=replayed)


@router.post("/pop", response_model=PopResult, responses=WRITE_ERRORS)
async def pop_message(ctx: WriteCtx) -> Response:
    """Remove and return the newest message: ``{"message": message-or-null}`` (null:
    the history is empty and nothing changed). The ETag is the session's version
    after the call (the current one when nothing was removed). ``If-Match`` is
    required when the service requires it for destructive requests."""
    message, report = await write_reported(
        ctx.manager.pop_message(
            **ctx.who,
            expected_version=await ctx.expected_version(required=True),
            idempotency_key=ctx.idempotency_key,
        )
    )
    version = report.session_version if message is None else message.session_version
    etag = version_etag(ctx.session_id, version)
    # A dict, not PopResult: dump() keeps the message's absent fields absent.
    return reply({"message": message}, etag=etag, replayed=report.replayed)
