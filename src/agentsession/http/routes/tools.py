"""Tool calls: record one that ran, list the history, find an earlier identical call."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.exceptions import RequestValidationError

from ...models import Page, ToolCall
from ..deps import ReadCtx, WriteCtx, reply, version_etag, write
from ..problems import ERRORS, WRITE_ERRORS
from ..schemas import CursorQuery, LimitQuery, RecordToolCall

router = APIRouter(
    prefix="/v1/sessions/{session_id}/tool-calls", tags=["tool calls"], responses=ERRORS
)


@router.post("", status_code=201, response_model=ToolCall, responses=WRITE_ERRORS)
async def record_tool_call(ctx: WriteCtx, body: RecordToolCall) -> Response:
    """Record a tool call that really ran; the ETag is the session's new version."""
    call, replayed = await write(
        ctx.manager.record_tool_call(
            **ctx.who,
            tool=body.tool,
            arguments=body.arguments,
            result=body.result,
            status=body.status,
            error=body.error,
            started_at=body.started_at,
            ended_at=body.ended_at,
            run_id=body.run_id,
            call_id=body.call_id,
            provider_call_id=body.provider_call_id,
            expected_version=await ctx.expected_version(),
            idempotency_key=ctx.idempotency_key,
        )
    )
    etag = version_etag(ctx.session_id, call.session_version)
    return reply(call, status=201, etag=etag, replayed=replayed)


@router.get("", response_model=Page[ToolCall])
async def get_tool_history(
    ctx: ReadCtx,
    tool: str | None = None,
    after: Annotated[int | None, Query(ge=0)] = None,
    limit: LimitQuery = None,
    cursor: CursorQuery = None,
) -> Response:
    """A page of tool calls, oldest first (a restore's cursor pages back to older ones)."""
    page = await ctx.manager.get_tool_history(
        **ctx.who, tool=tool, after=after, limit=limit, cursor=cursor
    )
    return reply(page)


@router.get("/find", response_model=dict[str, ToolCall | None])
async def find_tool_call(
    ctx: ReadCtx,
    tool: str | None = None,
    arguments: Annotated[
        str | None, Query(description="The arguments as a JSON object (default {}).")
    ] = None,
    provider_call_id: Annotated[
        str | None, Query(description="The model provider's call id, instead of tool.")
    ] = None,
) -> Response:
    """The newest call of ``tool`` with equal arguments, or the newest with
    ``provider_call_id``: ``{"item": call-or-null}``."""
    args = None if arguments is None else _json_object(arguments)
    call = await ctx.manager.find_tool_call(
        **ctx.who, tool=tool, arguments=args, provider_call_id=provider_call_id
    )
    return reply({"item": call})


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise RequestValidationError(
            [{"loc": ("query", "arguments"), "msg": "must be a JSON object", "type": "json"}]
        )
    return value
