"""The inspector's Search and Usage views: text found across the viewer's sessions
(``search``), each hit linking to the session's timeline at its seq; and the usage
ledger's totals per agent, model, session or day (``get_usage``).

Both read as the viewer's principal: a user's own sessions, every user's for an admin
key, exactly what the API shows that key. Search on a store without a search index
(Redis) says so on the page.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from fastapi import APIRouter, Request
from starlette.responses import Response

from ..errors import SearchNotSupported, ValidationError
from ..models import SearchHit
from .auth import viewer
from .guard import guarded
from .pages import page_id, render
from .query import Query
from .views import manager_of

__all__ = ["GROUPS", "router", "timeline_link"]

#: Hits per page of the Search view.
HITS_PAGE: Final = 25
#: What the Usage view groups by, in the order of its menu.
GROUPS: Final = ("agent", "model", "session", "day")

router = APIRouter(include_in_schema=False, generate_unique_id_function=page_id)


def timeline_link(hit: SearchHit) -> str:
    """Where a hit opens: the session's timeline from the hit's message (at its seq,
    scrolled to it); the session itself for a title or a tool call."""
    base = f"/ui/sessions/{hit.session_id}"
    if hit.kind != "message":
        return base
    return f"{base}?after={hit.seq - 1}#seq-{hit.seq}"


@router.get("/search")
@guarded
def search_view(request: Request) -> Response:
    """The Search view: the hits of ``q`` in the viewer's sessions (every user's for
    an admin), newest first, a page at a time (``cursor``); each snippet shows its
    match marked."""
    v = viewer(request)
    q = Query(request, ("q", "cursor"))
    text = q.text("q")
    context: dict[str, Any] = {"v": v, "q": text or "", "page": None, "unsupported": None}
    if text is not None:
        try:
            context["page"] = manager_of(request).search(
                user_id=v.principal.user_id,
                admin=v.principal.admin,
                all_users=v.principal.admin,
                query=text,
                cursor=q.text("cursor"),
                limit=HITS_PAGE,
            )
        except SearchNotSupported as exc:
            context["unsupported"] = exc.message
    return render("search.html", {**context, "link": timeline_link}, status=200)


def _day(q: Query, name: str) -> datetime | None:
    """The UTC midnight of a ``YYYY-MM-DD`` parameter, or None."""
    raw = q.text(name)
    if raw is None:
        return None
    try:
        return datetime.strptime(raw, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise ValidationError(f"query parameter {name!r}: a date YYYY-MM-DD", field=name) from None


@router.get("/usage")
@guarded
def usage_view(request: Request) -> Response:
    """The Usage view: the viewer's usage (every user's for an admin) per agent (by
    default), model, session or UTC day, from ``since`` to before ``until`` (dates), with
    the viewer's own budget."""
    v = viewer(request)
    q = Query(request, ("by", "since", "until"))
    by = q.text("by") or "agent"
    if by not in GROUPS:
        raise ValidationError(f"query parameter 'by': one of {', '.join(GROUPS)}", field="by")
    sm, admin = manager_of(request), v.principal.admin
    totals = sm.get_usage(
        user_id=v.principal.user_id,
        admin=admin,
        all_users=admin,
        group_by=by,
        since=_day(q, "since"),
        until=_day(q, "until"),
    )
    context = {
        "v": v,
        "by": by,
        "groups": GROUPS,
        "since": q.text("since") or "",
        "until": q.text("until") or "",
        "totals": totals,
        "budget": sm.get_budget(user_id=v.principal.user_id, admin=admin),
    }
    return render("usage.html", context)
