"""Tool calls: find an earlier identical call. Recording one and listing the history
are routes built from the table of operations (:mod:`.table`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from ...fieldlimits import CALL_ID_CHARS, TOOL_NAME_CHARS
from ...models import ToolCall
from ...protocol import RequestInvalid
from ..deps import ReadCtx, reply
from ..problems import ERRORS
from ..routing import StrictRoute
from ..schemas import CALL_ID, FIND_RULE, TOOL, FindToolCall
from ..strictjson import read_json

router = APIRouter(
    prefix="/v1/sessions/{session_id}/tool-calls",
    tags=["tool calls"],
    responses=ERRORS,
    route_class=StrictRoute,
)


@router.post("/find", response_model=dict[str, ToolCall | None])
async def find_tool_call(ctx: ReadCtx, body: FindToolCall) -> Response:
    """The newest call of ``tool`` with equal ``arguments`` (default ``{}``), or the
    newest with ``provider_call_id``: ``{"item": call-or-null}``. A read: it writes
    nothing and takes no ``If-Match`` or ``Idempotency-Key``. The arguments travel in
    the body, so they never appear in a URL or an access log."""
    call = await ctx.manager.find_tool_call(
        **ctx.who, tool=body.tool, arguments=body.arguments, provider_call_id=body.provider_call_id
    )
    return reply({"item": call})


@router.get("/find", response_model=dict[str, ToolCall | None], deprecated=True)
async def find_tool_call_by_query(
    ctx: ReadCtx,
    tool: Annotated[
        str | None,
        Query(
            max_length=TOOL_NAME_CHARS, pattern=TOOL, description=f"The tool's name. {FIND_RULE}"
        ),
    ] = None,
    arguments: Annotated[
        str | None,
        Query(
            description="With `tool`: its arguments as a JSON object (default {}), read by "
            "the same strict reader as bodies."
        ),
    ] = None,
    provider_call_id: Annotated[
        str | None,
        Query(
            max_length=CALL_ID_CHARS,
            pattern=CALL_ID,
            description=f"The model provider's call id. {FIND_RULE}",
        ),
    ] = None,
) -> Response:
    """Deprecated: ``POST .../tool-calls/find`` takes the same fields in a body, and
    keeps the arguments out of URLs and logs. Same answer."""
    args = None if arguments is None else _json_object(arguments)
    call = await ctx.manager.find_tool_call(
        **ctx.who, tool=tool, arguments=args, provider_call_id=provider_call_id
    )
    return reply({"item": call})


def _json_object(text: str) -> dict[str, Any]:
    value = read_json(text, where="query.arguments")
    if not isinstance(value, dict):
        raise RequestInvalid(
            "query.arguments: must be a JSON object",
            errors=[{"field": "query.arguments", "message": "must be a JSON object"}],
        )
    return value
