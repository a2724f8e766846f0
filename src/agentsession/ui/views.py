"""The inspector's read-only pages: Sessions, Session (the timeline), Memory, Runs,
Records, the messages a rewind hid, and the audit log.

Every page reads through the :class:`~agentsession.service.SessionManager` as the
signed-in viewer's principal (its user, and admin if its key is an admin's), so it
sees exactly what the API would show that key: another user's session is "not found".
Pages are bounded: the timeline reads one page of messages (the newest first, then
older or newer by seq), never a whole history.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from ..errors import RunNotFound, ValidationError
from ..http.deps import services
from ..ids import is_id
from ..models import Page, Run, Session, SessionStatus, SharedMemory
from ..service import SessionManager
from .auth import Viewer, viewer
from .guard import guarded, not_found
from .memorydiff import diff
from .pages import page_id, render
from .query import Query
from .timeline import show, timeline

__all__ = ["malformed", "manager_of", "may_write", "router", "sessions_page", "who_of"]

#: Sessions per page of the list; messages per page of the timeline.
SESSIONS_PAGE: Final = 50
MESSAGES_PAGE: Final = 50
#: The most runs a timeline page reads with their steps.
RUNS_PER_PAGE: Final = 20
#: Audit events per page.
AUDIT_PAGE: Final = 100
#: Records per page of the Records view.
RECORDS_PAGE: Final = 100
#: Working-memory versions per page of the Memory view.
VERSIONS_PAGE: Final = 10
#: Forks listed beside a session (the Sessions view lists them all).
FORKS_SHOWN: Final = 10

router = APIRouter(include_in_schema=False, generate_unique_id_function=page_id)


def manager_of(request: Request) -> SessionManager:
    """The service's (sync) manager, every page's way to the store."""
    return services(request).manager.manager


def who_of(v: Viewer) -> dict[str, Any]:
    """The ``user_id`` and ``admin`` of a manager call made as the viewer."""
    return {"user_id": v.principal.user_id, "admin": v.principal.admin}


def may_write(v: Viewer, s: Session) -> bool:
    """Whether the inspector offers (and accepts) writes of ``v`` on ``s``: only the
    session's owner's, with a ``write`` key; an admin sees another user's session
    read-only, and a ``read`` key every session (:mod:`.writes`)."""
    return v.principal.scope == "write" and v.principal.user_id == s.user_id


def sessions_page(request: Request, v: Viewer) -> Response:
    """The Sessions view: a page of the viewer's sessions (every user's for an admin,
    or one owner's), filtered by status, agent and the session they were forked from,
    with how many sessions those filters match in all (``count_sessions``);
    ``id`` a session id goes to that session (404 unless the viewer may see it)."""
    q = Query(request, ("id", "status", "agent", "owner", "parent", "cursor"))
    wanted = q.text("id")
    if wanted is not None:
        return RedirectResponse(f"/ui/sessions/{quote(wanted, safe='')}", status_code=303)
    filters = {name: q.text(name) or "" for name in ("status", "agent", "owner", "parent")}
    admin, owner = v.principal.admin, filters["owner"]
    if owner and not admin and owner != v.principal.user_id:
        raise ValidationError(
            "query parameter 'owner': only an admin lists another user's sessions", field="owner"
        )
    statuses = [s.value for s in SessionStatus]
    if filters["status"] and filters["status"] not in statuses:
        raise ValidationError(
            f"query parameter 'status': one of {', '.join(statuses)}", field="status"
        )
    sm = manager_of(request)
    chosen: dict[str, Any] = {
        "user_id": owner if admin and owner else v.principal.user_id,
        "admin": admin,
        "all_users": admin and not owner,
        "status": filters["status"] or None,
        "agent": filters["agent"] or None,
        "parent_session_id": filters["parent"] or None,
    }
    page = sm.list_sessions(**chosen, cursor=q.text("cursor"), limit=SESSIONS_PAGE)
    context = {
        "v": v,
        "page": page,
        "total": sm.count_sessions(**chosen),
        "statuses": statuses,
        "filters": filters,
    }
    return render("sessions.html", context)


def _forks(sm: SessionManager, v: Viewer, session_id: str) -> Page[Session]:
    """The first forks of a session the viewer may see (every user's for an admin)."""
    admin = v.principal.admin
    return sm.list_sessions(
        user_id=v.principal.user_id,
        admin=admin,
        all_users=admin,
        parent_session_id=session_id,
        limit=FORKS_SHOWN,
    )


def _runs(sm: SessionManager, who: dict[str, Any], run_ids: list[str]) -> dict[str, Run]:
    """The runs of ``run_ids`` by id, without those the session does not hold: a fork's
    copied messages name its parent's runs, which stay the parent's."""
    found: dict[str, Run] = {}
    for run_id in run_ids:
        try:
            found[run_id] = sm.get_run(**who, run_id=run_id)
        except RunNotFound:
            continue
    return found


def malformed(session_id: str) -> bool:
    """Whether ``session_id`` is no session id (answered 404, as a missing session)."""
    return not is_id(session_id, "ses")


@router.get("/sessions/{session_id}")
@guarded
def session_view(request: Request, session_id: str) -> Response:
    """The Session view: one page of the timeline (newest first; ``before``/``after``
    a seq to page), the session's fields, its first forks and first audit events; the
    newest page tails live (:mod:`.live`)."""
    v = viewer(request)
    if malformed(session_id):
        return not_found()
    q = Query(request, ("before", "after"))
    sm, who = manager_of(request), {**who_of(v), "session_id": session_id}
    s = sm.get_session(**who)
    before, after = q.number("before"), q.number("after")
    # The live tail's start, taken before the messages are read: nothing falls between.
    live = sm.store.change_tail()
    messages = list(sm.get_messages(**who, limit=MESSAGES_PAGE, before=before, after=after))
    run_ids = list(dict.fromkeys(m.run_id for m in messages if m.run_id))[:RUNS_PER_PAGE]
    runs = _runs(sm, who, run_ids)
    max_page = sm.limits.max_page_size
    entries = timeline(
        messages,
        runs=runs,
        summaries=sm.list_summaries(**who, limit=max_page),
        rewinds=sm.list_rewinds(**who, limit=max_page),
    )
    low = messages[0].seq if messages else 0
    high = messages[-1].seq if messages else 0
    context = {
        "v": v,
        "s": s,
        "entries": entries,
        "older": low if low > 1 else None,
        "newer": high if high < s.message_count else None,
        "audit": sm.get_audit_log(**who, limit=20),
        "forks": _forks(sm, v, session_id),
        "writable": may_write(v, s),
        "live": live,
        "last": max(high, s.message_count),
        "usage": _usage(sm, v, session_id),
    }
    return render("session.html", context)


def _usage(sm: SessionManager, v: Viewer, session_id: str) -> dict[str, Any]:
    """The session's usage per model and its budget (the usage panel)."""
    admin = v.principal.admin
    return {
        "totals": sm.get_usage(
            user_id=v.principal.user_id,
            admin=admin,
            all_users=admin,
            session_id=session_id,
            group_by="model",
        ),
        "budget": sm.get_budget(**who_of(v), session_id=session_id),
    }


@router.get("/sessions/{session_id}/rewinds/{number}")
@guarded
def rewound_view(request: Request, session_id: str, number: str) -> Response:
    """The messages rewind ``number`` hid (a fragment for htmx, a page otherwise)."""
    v = viewer(request)
    if malformed(session_id) or not number.isdigit():
        return not_found()
    cursor = Query(request, ("cursor",)).text("cursor")
    who = {**who_of(v), "session_id": session_id}
    page = manager_of(request).get_rewound_messages(
        **who, number=int(number), limit=MESSAGES_PAGE, cursor=cursor
    )
    context = {
        "v": v,
        "session_id": session_id,
        "number": number,
        "shown": [show(m) for m in page],
        "next_cursor": page.next_cursor,
    }
    fragment = request.headers.get("hx-request") == "true"
    return render("rewound_fragment.html" if fragment else "rewound.html", context)


@router.get("/sessions/{session_id}/memory")
@guarded
def memory_view(request: Request, session_id: str) -> Response:
    """The Memory view: the working memory as of a seq (a slider over the history,
    the current memory by default), its diff against the memory as of another seq, the
    list of its versions (``list_memory_versions``: newest first, ``cursor`` pages to
    older ones) and the shared documents the viewer may read."""
    v = viewer(request)
    if malformed(session_id):
        return not_found()
    q = Query(request, ("at", "base", "cursor"))
    sm, who = manager_of(request), {**who_of(v), "session_id": session_id}
    s = sm.get_session(**who)
    at = q.number("at", high=s.message_count)
    base = q.number("base", high=s.message_count)
    shown = sm.get_working_memory(**who, at_seq=at)
    older = sm.get_working_memory(**who, at_seq=base) if base is not None else None
    versions = sm.list_memory_versions(**who, limit=VERSIONS_PAGE, cursor=q.text("cursor"))
    context = {
        "v": v,
        "s": s,
        "at": s.message_count if at is None else at,
        "base": base,
        "memory": shown,
        "older": older,
        "diff": diff(older.data, shown.data) if older is not None else [],
        "versions": versions,
        "shared": _shared(sm, v, s),
    }
    return render("memory.html", context)


def _shared(sm: SessionManager, v: Viewer, s: Session) -> list[SharedMemory]:
    """The shared documents the session's agent reads that the viewer may read: its
    owner's user document, and for an admin the agent's app document."""
    admin = v.principal.admin
    docs = [
        sm.get_shared_memory(
            scope="user",
            agent=s.agent,
            user_id=v.principal.user_id,
            target_user_id=s.user_id if s.user_id != v.principal.user_id else None,
            admin=admin,
        )
    ]
    if admin:
        docs.append(
            sm.get_shared_memory(
                scope="app", agent=s.agent, user_id=v.principal.user_id, admin=True
            )
        )
    return docs


def _durations(run: Run) -> list[float | None]:
    """Each step's duration in milliseconds (None while it runs)."""
    return [
        None if step.ended_at is None else (step.ended_at - step.started_at).total_seconds() * 1e3
        for step in run.steps
    ]


@router.get("/sessions/{session_id}/runs")
@guarded
def runs_view(request: Request, session_id: str) -> Response:
    """The Runs view: a page of runs (oldest first) with their first steps, each step's
    duration, status and error, and the run's lease."""
    v = viewer(request)
    if malformed(session_id):
        return not_found()
    cursor = Query(request, ("cursor",)).text("cursor")
    sm, who = manager_of(request), {**who_of(v), "session_id": session_id}
    s = sm.get_session(**who)
    page = sm.list_runs(**who, cursor=cursor, limit=RUNS_PER_PAGE)
    runs = [sm.get_run(**who, run_id=r.run_id) for r in page]
    context = {
        "v": v,
        "s": s,
        "runs": [(run, _durations(run)) for run in runs],
        "next_cursor": page.next_cursor,
    }
    return render("runs.html", context)


@router.get("/sessions/{session_id}/audit")
@guarded
def audit_view(request: Request, session_id: str) -> Response:
    """The audit log of a session, oldest first (content-free events)."""
    v = viewer(request)
    if malformed(session_id):
        return not_found()
    cursor = Query(request, ("cursor",)).text("cursor")
    sm, who = manager_of(request), {**who_of(v), "session_id": session_id}
    s = sm.get_session(**who)
    page = sm.get_audit_log(**who, cursor=cursor, limit=AUDIT_PAGE)
    return render("audit.html", {"v": v, "s": s, "page": page})


@router.get("/sessions/{session_id}/records")
@guarded
def records_view(request: Request, session_id: str) -> Response:
    """The Records view: a session's records (namespace, key, size, version, meta; not
    their data), in key order, of one namespace or all; ``after`` a key pages within a
    namespace."""
    v = viewer(request)
    if malformed(session_id):
        return not_found()
    q = Query(request, ("namespace", "after"))
    sm, who = manager_of(request), {**who_of(v), "session_id": session_id}
    s = sm.get_session(**who)
    namespace = q.text("namespace")
    if q.text("after") is not None and namespace is None:
        raise ValidationError("query parameter 'after' pages within one namespace", field="after")
    records = sm.list_records(**who, namespace=namespace, after=q.text("after"), limit=RECORDS_PAGE)
    more = len(records) == RECORDS_PAGE
    context = {"v": v, "s": s, "records": records, "namespace": namespace or "", "more": more}
    return render("records.html", context)
