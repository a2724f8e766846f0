"""The audit log of a session."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from ...models import AuditEvent
from ..deps import ReadCtx, items

router = APIRouter(prefix="/v1/sessions/{session_id}/audit", tags=["audit"])


@router.get("", response_model=dict[str, list[AuditEvent]])
async def get_audit_log(
    ctx: ReadCtx,
    after: Annotated[int | None, Query(ge=0)] = None,
    limit: Annotated[int | None, Query(ge=0, le=1000)] = None,
) -> Response:
    """Audit events oldest first (``{"items": [...]}``); no message content."""
    events = await ctx.manager.get_audit_log(**ctx.who, after=after, limit=limit)
    return items(events)
