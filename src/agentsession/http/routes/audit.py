"""The audit log of a session."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from ...models import AuditEvent
from ..deps import ReadCtx, items
from ..problems import ERRORS
from ..schemas import PAGE_MAX, Items

router = APIRouter(prefix="/v1/sessions/{session_id}/audit", tags=["audit"], responses=ERRORS)


@router.get("", response_model=Items[AuditEvent])
async def get_audit_log(
    ctx: ReadCtx,
    after: Annotated[int | None, Query(ge=0)] = None,
    limit: Annotated[int | None, Query(ge=0, le=PAGE_MAX)] = None,
) -> Response:
    """Audit events oldest first (``{"items": [...]}``); no message content."""
    events = await ctx.manager.get_audit_log(**ctx.who, after=after, limit=limit)
    return items(events)
