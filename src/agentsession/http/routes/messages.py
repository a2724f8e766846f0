"""Messages: append one or a batch, read a window of history, remove or replace the
newest."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Response

from ...models import Message, Page, TruncateResult
from ..deps import ReadCtx, WriteCtx, reply, version_etag, write, write_reported
from ..problems import ERRORS, WRITE_ERRORS, problem_responses
from ..routing import StrictRoute
from ..schemas import (
    AppendMessages,
    BoundedCursorQuery,
    Items,
    LimitQuery,
    PopResult,
    ReplaceMessages,
    SharedMemoryOps,
    seq_query,
)

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


@router.get("", response_model=Page[Message])
async def get_messages(
    ctx: ReadCtx,
    limit: LimitQuery = None,
    before: Annotated[
        int | None, seq_query("Start below this seq. Not together with `after`: 400.")
    ] = None,
    after: Annotated[
        int | None, seq_query("Start above this seq. Not together with `before`: 400.")
    ] = None,
    cursor: BoundedCursorQuery = None,
    align_tool_calls: bool = True,
) -> Response:
    """A page of history, oldest first, in seq order: the newest messages unless a
    bound or cursor says otherwise; ``next_cursor`` goes on in the same direction."""
    page = await ctx.manager.get_messages(
        **ctx.who,
        limit=limit,
        before=before,
        after=after,
        cursor=cursor,
        align_tool_calls=align_tool_calls,
    )
    return reply(page)


@router.put("", response_model=Items[Message], responses=WRITE_ERRORS)
async def replace_messages(
    ctx: WriteCtx,
    body: ReplaceMessages,
    after_seq: Annotated[
        int,
        seq_query(
            "Replace every message above this seq (0 = all; at or above the session's "
            "`message_count`: remove nothing, append)."
        ),
    ],
) -> Response:
    """Remove every message with ``seq > after_seq`` and store ``messages`` in their
    place, in one transaction and one version step (``{"items"}``, each with
    ``session_version``, also the ETag): a crash or an outage leaves the history before
    or after, never the removal alone. An ``after_seq`` at or past the session's
    ``message_count`` removes nothing and only appends (as ``DELETE`` with it removes
    0). ``If-Match`` is required when the service requires it for destructive
    requests; an ``Idempotency-Key`` makes a retry answer the first result."""
    stored, replayed = await write(
        ctx.manager.replace_messages(
            **ctx.who,
            after_seq=after_seq,
            messages=body.messages,
            expected_version=await ctx.expected_version(required=True),
            idempotency_key=ctx.idempotency_key,
        )
    )
    etag = version_etag(ctx.session_id, stored[0].session_version)
    return reply({"items": stored}, etag=etag, replayed=replayed)


@router.delete("", response_model=TruncateResult, responses=WRITE_ERRORS)
async def truncate_messages(
    ctx: WriteCtx,
    after_seq: Annotated[int, seq_query("Remove every message above this seq (0 = all).")],
) -> Response:
    """Remove every message with ``seq > after_seq`` in one version step:
    ``{"removed", "session_version"}``, the ETag the session's version after it (the
    current one when nothing was removed: an ``after_seq`` at or past the session's
    ``message_count`` removes 0). Tool calls, runs and working memory stay.
    ``If-Match`` is required when the service requires it for destructive requests;
    an ``Idempotency-Key`` makes a retry answer the first result."""
    result, replayed = await write(
        ctx.manager.truncate_messages(
            **ctx.who,
            after_seq=after_seq,
            expected_version=await ctx.expected_version(required=True),
            idempotency_key=ctx.idempotency_key,
        )
    )
    etag = (ctx.session_id, result.session_version)
    return reply(result, etag=etag, replayed=replayed)


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
