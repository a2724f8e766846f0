"""The inspector's Context view: what ``build_context`` would send for a budget, with
the provenance of every item (``build_context(explain=True)``): the message seq, the
summary or the memory version it came from, its tokens, and what the budget kept,
summarised or dropped, and why.
"""

from __future__ import annotations

from typing import Final

from fastapi import APIRouter, Request
from starlette.responses import Response

from ..errors import ContextBudgetTooSmall
from ..models import ContextReason, Message
from ..service.contextbuild import MAX_BUDGET_TOKENS
from .auth import viewer
from .guard import guarded, not_found
from .pages import page_id, render
from .query import Query
from .timeline import show
from .views import malformed, manager_of, who_of

__all__ = ["REASONS", "router"]

#: The budget the view opens with.
DEFAULT_BUDGET: Final = 8000
#: The most characters of a kept message's first part shown in its row.
PREVIEW: Final = 160

#: Each reason code of an explanation, in words.
REASONS: Final[dict[ContextReason, str]] = {
    "memory": "the system text, rendered from the working memory",
    "summary": "the newest summary covering history from its start, below the newest user message",
    "fits": "within the budget",
    "covered_by_summary": "covered by the summary sent",
    "over_budget": "older than the oldest cut that fits the budget",
    "older_exchange": "an older exchange of a newest turn too long for the budget",
    "unpaired": "its tool call, result or reasoning successor is not in the window",
}

router = APIRouter(include_in_schema=False, generate_unique_id_function=page_id)


@router.get("/sessions/{session_id}/context")
@guarded
def context_view(request: Request, session_id: str) -> Response:
    """The Context view for the budget ``budget`` (tokens, by the default tokenizer,
    1 to ``MAX_BUDGET_TOKENS``; 8000 when absent): every item with its provenance,
    tokens, decision and reason; a budget too small for the minimum says how many
    tokens it needs."""
    v = viewer(request)
    if malformed(session_id):
        return not_found()
    given = Query(request, ("budget",)).number("budget", low=1, high=MAX_BUDGET_TOKENS)
    budget = DEFAULT_BUDGET if given is None else given
    sm, who = manager_of(request), {**who_of(v), "session_id": session_id}
    s = sm.get_session(**who)
    context = {"v": v, "s": s, "budget": budget, "ctx": None, "needed": None, "previews": {}}
    try:
        ctx = sm.build_context(**who, budget_tokens=budget, explain=True)
    except ContextBudgetTooSmall as exc:
        context["needed"] = exc.needed_tokens
        return render("context.html", {**context, "reasons": REASONS})
    previews = {m.seq: _preview(m) for m in ctx.messages}
    context.update(ctx=ctx, previews=previews, reasons=REASONS)
    return render("context.html", context)


def _preview(m: Message) -> str:
    """The start of a message's first part, cut at :data:`PREVIEW` characters."""
    parts = show(m).parts
    text = " ".join(f"{parts[0].label} {parts[0].text}".split()) if parts else ""
    return text if len(text) <= PREVIEW else text[:PREVIEW] + "…"
