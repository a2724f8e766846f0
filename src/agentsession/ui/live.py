"""The live tail of the Session view, over the change feed.

The newest page of a session's timeline connects (htmx's SSE extension) to
``GET /ui/sessions/<id>/live?after=<cursor>``: the session's change feed as
Server-Sent Events, from the feed's cursor taken before the page read its messages,
served by the worker's one :class:`~agentsession.http.changestream.ChangeHub` as the
API's streams are, as the signed-in viewer (the same ownership). Each event makes the
page's tail element fetch ``GET /ui/sessions/<id>/tail?after=<seq>``: the messages
after the last one shown, and a new tail element that goes on from there. A history
cut back below it (a rewind, a truncate) is said, with a link to reload.

No script of the page's own: the extension's attributes do it all, so the
Content-Security-Policy (``script-src 'self'``) stays.
"""

from __future__ import annotations

from typing import Final

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ..errors import AgentSessionError
from ..http.changestream import open_stream
from ..protocol import TooManyRequests
from .auth import LoginRequired, Viewer, viewer
from .guard import guarded, not_found
from .pages import SECURITY_HEADERS, page_id, render
from .query import Query
from .timeline import timeline
from .views import MESSAGES_PAGE, malformed, manager_of, may_write, who_of

__all__ = ["router"]

#: Messages one tail fetch adds at most (the next event fetches the rest).
TAIL_PAGE: Final = MESSAGES_PAGE

router = APIRouter(include_in_schema=False, generate_unique_id_function=page_id)


@router.get("/sessions/{session_id}/live")
async def live(request: Request, session_id: str) -> Response:
    """The session's change feed as Server-Sent Events, after the cursor ``after``
    (``Last-Event-ID`` wins: the browser's reconnect resumes). Anything else than a
    stream (not signed in, not the viewer's session, a bad cursor) is a 204, which
    tells the browser not to reconnect."""
    try:
        v: Viewer = await run_in_threadpool(viewer, request)
        if malformed(session_id):
            raise LookupError(session_id)
        cursor = request.headers.get("last-event-id") or request.query_params.get("after")
        return await open_stream(request, v.principal, session_id=session_id, cursor=cursor)
    except (AgentSessionError, LoginRequired, TooManyRequests, LookupError):
        return Response(status_code=204, headers=SECURITY_HEADERS)


@router.get("/sessions/{session_id}/tail")
@guarded
def tail(request: Request, session_id: str) -> Response:
    """The messages after seq ``after`` (at most :data:`TAIL_PAGE`) as timeline
    entries, and the tail element that fetches the next ones (an HTML fragment)."""
    v = viewer(request)
    if malformed(session_id):
        return not_found()
    sm, who = manager_of(request), {**who_of(v), "session_id": session_id}
    s = sm.get_session(**who)
    after = Query(request, ("after",)).number("after") or 0
    cut = after > s.message_count
    messages = [] if cut else list(sm.get_messages(**who, after=after, limit=TAIL_PAGE))
    context = {
        "s": s,
        "entries": timeline(messages, runs={}, summaries=[], rewinds=[]),
        "last": messages[-1].seq if messages else after,
        "cut": cut,
        "writable": may_write(v, s),
    }
    return render("_tail.html", context)
