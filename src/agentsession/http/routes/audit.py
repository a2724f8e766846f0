"""The audit log of a session."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Response

from ...models import AuditEvent, Page
from ..deps import ReadCtx, reply
from ..problems import ERRORS
from ..routing import StrictRoute
from ..schemas import BoundedCursorQuery, LimitQuery, seq_query

router = APIRouter(
    prefix="/v1/sessions/{session_id}/audit",
    tags=["audit"],
    responses=ERRORS,
    route_class=StrictRoute,
)


@router.get("", response_model=Page[AuditEvent])
async def get_audit_log(
    ctx: ReadCtx,
    after: Annotated[int | None, seq_query()] = None,
    limit: LimitQuery = None,
    cursor: BoundedCursorQuery = None,
) -> Response:
    """A page of audit events, oldest first; no message content."""
    page = await ctx.manager.get_audit_log(**ctx.who, after=after, limit=limit, cursor=cursor)
    return reply(page)
