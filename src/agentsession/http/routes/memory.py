"""Working memory: replace (PUT), merge-patch (PATCH, RFC 7396) or JSON Patch (PATCH,
RFC 6902), or any of the three with shared-memory ops (POST). Reading it is a route
built from the table of operations (:mod:`.table`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Response

from ...errors import ValidationError
from ...models import WorkingMemory
from ..deps import WriteCtx, reply, write
from ..problems import ERRORS, WRITE_ERRORS, problem_responses
from ..routing import StrictRoute
from ..schemas import SharedMemoryOps, UpdateWorkingMemory

#: The media type of an RFC 6902 op list (RFC 6902, section 6).
JSON_PATCH = "application/json-patch+json"
#: The media type of an RFC 7396 merge patch (RFC 7396, section 4).
MERGE_PATCH = "application/merge-patch+json"

router = APIRouter(
    prefix="/v1/sessions/{session_id}/memory",
    tags=["working memory"],
    responses=ERRORS,
    route_class=StrictRoute,
)


@router.put("", response_model=WorkingMemory, responses=WRITE_ERRORS)
async def replace_working_memory(ctx: WriteCtx, data: dict[str, Any] = Body()) -> Response:
    """Replace the whole document; the answer's ETag is the session's new version."""
    memory, replayed = await write(
        ctx.manager.update_working_memory(
            **ctx.who,
            data=data,
            expected_version=await ctx.expected_version(required=True),
            idempotency_key=ctx.idempotency_key,
        )
    )
    # A write's version is the session's new one (also in replays recorded before
    # session_version existed).
    return reply(memory, etag=(ctx.session_id, memory.version), replayed=replayed)


@router.patch(
    "",
    response_model=WorkingMemory,
    responses=WRITE_ERRORS,
    openapi_extra={
        "requestBody": {
            "content": {
                # Plain JSON is a merge patch too: an op list needs JSON_PATCH.
                "application/json": {"schema": {"type": "object"}},
                MERGE_PATCH: {"schema": {"type": "object"}},
                JSON_PATCH: {"schema": {"type": "array", "items": {"type": "object"}}},
            }
        }
    },
)
async def patch_working_memory(ctx: WriteCtx, patch: Any = Body()) -> Response:
    """Apply JSON Patch ops (RFC 6902) when the body is ``application/json-patch+json``,
    else an RFC 7396 merge patch (``application/merge-patch+json`` or JSON). An op that
    does not apply to the stored document is 409 ``patch-conflict``."""
    media = ctx.request.headers.get("content-type", "").partition(";")[0].strip().lower()
    ops = media == JSON_PATCH
    # Any body, checked here: the schema per media type is in openapi_extra above.
    if not isinstance(patch, list if ops else dict):
        raise ValidationError(
            f"an {JSON_PATCH} body is a list of ops; any other PATCH body is a merge-patch object",
            field="body",
        )
    memory, replayed = await write(
        ctx.manager.update_working_memory(
            **ctx.who,
            patch=patch if isinstance(patch, dict) else None,
            ops=patch if isinstance(patch, list) else None,
            expected_version=await ctx.expected_version(required=True),
            idempotency_key=ctx.idempotency_key,
        )
    )
    return reply(memory, etag=(ctx.session_id, memory.version), replayed=replayed)


@router.post("", response_model=WorkingMemory, responses={**WRITE_ERRORS, **problem_responses(403)})
async def update_working_memory(ctx: WriteCtx, body: UpdateWorkingMemory) -> Response:
    """Replace the document (``data``), merge-patch it (``patch``) or apply JSON Patch
    ``ops``, and apply ``shared_memory_ops`` in the same transaction (all or nothing);
    the answer's ETag is the session's new version."""
    memory, replayed = await write(
        ctx.manager.update_working_memory(
            **ctx.who,
            data=body.data,
            patch=body.patch,
            ops=body.ops,
            shared_memory_ops=SharedMemoryOps.by_scope_of(body.shared_memory_ops),
            expected_version=await ctx.expected_version(required=True),
            idempotency_key=ctx.idempotency_key,
        )
    )
    return reply(memory, etag=(ctx.session_id, memory.version), replayed=replayed)
