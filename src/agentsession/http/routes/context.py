"""Context assembly and compaction: build a context, add a summary (listing them is a
route built from the table of operations, :mod:`.table`).

``GET .../context?budget_tokens=N[&explain=true]`` uses the default tokenizer
(``bytes/4``, :mod:`agentsession.tokens`); a budget too small for the minimum is a 422
``context-budget-too-small`` problem naming ``needed_tokens``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from ...models import Context, Summary
from ...service.contextbuild import MAX_BUDGET_TOKENS
from ..deps import ReadCtx, WriteCtx, reply, version_etag, write
from ..problems import ERRORS, WRITE_ERRORS
from ..routing import StrictRoute
from ..schemas import AddSummary

router = APIRouter(
    prefix="/v1/sessions/{session_id}", tags=["context"], responses=ERRORS, route_class=StrictRoute
)


@router.get("/context", response_model=Context)
async def build_context(
    ctx: ReadCtx,
    budget_tokens: Annotated[
        int, Query(ge=1, le=MAX_BUDGET_TOKENS, description="The most tokens the context takes.")
    ],
    explain: Annotated[
        bool, Query(description="Also answer `explanation`: the provenance of every part.")
    ] = False,
) -> Response:
    """What to send to a model: the system text from working memory, the newest summary
    covering older history, and the newest messages that fit ``budget_tokens``, never
    splitting a tool call from its result and always holding the newest user message;
    each part's token count and the total. ``explain=true`` adds ``explanation``: where
    each part came from (message seq, summary, memory version), its tokens, and what the
    budget kept, summarised or dropped and why."""
    context = await ctx.manager.build_context(
        **ctx.who, budget_tokens=budget_tokens, explain=explain
    )
    return reply(context)


@router.post("/summaries", status_code=201, response_model=Summary, responses=WRITE_ERRORS)
async def add_summary(ctx: WriteCtx, body: AddSummary) -> Response:
    """Store a summary of ``from_seq..to_seq`` (messages are kept): the summary with
    its ``number`` and ``session_version``, also the ETag."""
    summary, replayed = await write(
        ctx.manager.add_summary(
            **ctx.who,
            **body.model_dump(),
            expected_version=await ctx.expected_version(),
            idempotency_key=ctx.idempotency_key,
        )
    )
    etag = version_etag(ctx.session_id, summary.session_version)
    return reply(summary, status=201, etag=etag, replayed=replayed)
