"""The inspector's writes: close, expire, restore, delete, fork here, rewind here.

Each goes through the :class:`~agentsession.service.SessionManager` as the signed-in
viewer, as the API's writes do (the same ownership, the same audit events with the
request's id), in two steps:

1. a link on a page opens the confirm page (``GET .../do/<action>?v=<version>``,
   ``seq`` for fork and rewind), which says what will happen and carries the version
   the viewer's page showed, a fresh idempotency key and the CSRF token;
2. its form posts them back (``POST .../do/<action>``, ``confirmed=yes``). A post
   without ``confirmed`` answers the confirm page and writes nothing.

The version is the write's ``expected_version`` (If-Match): a page loaded before
another write answers 409 "changed since you loaded it", and nothing is written (a
fork compares it with the parent's in its own transaction). The idempotency key makes
a double submit write once: the manager replays it for every action (across workers
too), a delete's included, and the second submit is sent where the first went.

Who may write: only the session's owner. An admin key sees another user's session
read-only here (it may still write through the API or the CLI, where acting for
another user is explicit), and the post checks the same rule.
"""

from __future__ import annotations

import secrets
from typing import Any, Final, Literal, get_args

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from ..errors import Conflict, SessionNotFound, ValidationError, VersionConflict
from ..models import Session
from ..service import SessionManager
from .auth import PATH, Viewer, check_csrf, read_form, viewer
from .guard import guarded, not_found
from .pages import SECURITY_HEADERS, page_id, render
from .query import Query
from .views import malformed, manager_of, may_write, who_of

__all__ = ["ACTIONS", "Action", "router"]

Action = Literal["close", "expire", "restore", "delete", "fork", "rewind"]
ACTIONS: Final[tuple[Action, ...]] = get_args(Action)
#: What each action does, said on its confirm page.
_SAYS: Final[dict[Action, str]] = {
    "close": "Close the session: it takes no more writes until it is restored; a run "
    "still running is cancelled.",
    "expire": "Expire the session now: a run still running becomes INTERRUPTED.",
    "restore": "Restore the session: it becomes ACTIVE again.",
    "delete": "Delete the session for good: its messages, memory, runs, tool calls and "
    "audit events go; only a content-free tombstone stays. This cannot be undone.",
    "fork": "Fork the session here: a new session holding copies of messages 1 to {seq}.",
    "rewind": "Rewind the session to message {seq}: later messages leave the history "
    "(kept, hidden, readable by the rewind's number) and the memory goes back to what "
    "it was then.",
}
router = APIRouter(include_in_schema=False, generate_unique_id_function=page_id)


def _number(raw: str | None) -> int | None:
    raw = (raw or "").strip()
    return int(raw) if raw.isdigit() else None


def _page(v: Viewer, s: Session, action: Action, version: int | None, seq: int | None) -> Response:
    """The confirm page of ``action``."""
    if version is None or (action in ("fork", "rewind") and seq is None):
        raise ValidationError("the link is incomplete: reload the session and try again")
    context = {
        "v": v,
        "s": s,
        "action": action,
        "says": _SAYS[action].format(seq=seq),
        "version": version,
        "seq": seq,
        "key": "ui-" + secrets.token_urlsafe(24),
    }
    return render("confirm.html", context)


def _refused(title: str, text: str, status: int, s: Session | None = None) -> Response:
    reload = f"{PATH}/sessions/{s.session_id}" if s is not None else None
    context = {"title": title, "text": text, "reload": reload}
    return render("error.html", context, status=status)


@router.get("/sessions/{session_id}/do/{action}")
@guarded
def confirm_view(request: Request, session_id: str, action: str) -> Response:
    """The confirm page of a write (``v`` the version the viewer's page showed, ``seq``
    the message of a fork or rewind)."""
    v = viewer(request)
    if malformed(session_id) or action not in ACTIONS:
        return not_found()
    s = manager_of(request).get_session(**who_of(v), session_id=session_id)
    if not may_write(v, s):
        return _refused("Read-only", "Only the session's owner writes from here.", 403, s)
    q = Query(request, ("v", "seq"))
    return _page(v, s, action, q.number("v"), q.number("seq"))


@router.post("/sessions/{session_id}/do/{action}")
async def do_write(request: Request, session_id: str, action: str) -> Response:
    """Make a confirmed write (see the module docstring); its answer is a 303 to the
    session (the session list after a delete, the fork after a fork) or a page saying
    why nothing was written."""
    form = await read_form(request)
    return await run_in_threadpool(_do, request, session_id, action, form)


@guarded
def _do(request: Request, session_id: str, action: str, form: dict[str, str]) -> Response:
    v = viewer(request)
    if malformed(session_id) or action not in ACTIONS:
        return not_found()
    if not check_csrf(request, form.get("csrf"), v):
        return _refused("Forbidden", "The form is not valid: reload the page.", 403)
    key = form.get("idempotency_key") or None
    confirmed = form.get("confirmed") == "yes" and key is not None
    sm = manager_of(request)
    version, seq = _number(form.get("expected_version")), _number(form.get("seq"))
    try:
        s = sm.get_session(**who_of(v), session_id=session_id)
    except SessionNotFound:
        if not (confirmed and action == "delete"):
            raise
        # A double submit of a delete: the manager replays its key, else it is not found.
        who = {**who_of(v), "session_id": session_id}
        sm.delete_session(**who, expected_version=version, idempotency_key=key)
        return _see("/")
    if not may_write(v, s):
        return _refused("Read-only", "Only the session's owner writes from here.", 403, s)
    if not confirmed or key is None:
        return _page(v, s, action, version, seq)
    if version is None:
        raise ValidationError("the form has no version: reload the session and try again")
    try:
        location = _write(sm, v, s, action, version, seq, key)
    except VersionConflict as exc:
        text = (
            f"The session changed since you loaded it (version {version}, now "
            f"{exc.current_version}): reload it and try again. Nothing was written."
        )
        return _refused("Changed since you loaded it", text, 409, s)
    except Conflict as exc:
        return _refused("Not possible now", f"{exc.message} Nothing was written.", 409, s)
    return _see(location)


def _write(
    sm: SessionManager,
    v: Viewer,
    s: Session,
    action: Action,
    version: int,
    seq: int | None,
    key: str,
) -> str:
    """Make the write; the location its answer sends the viewer to."""
    who: dict[str, Any] = {**who_of(v), "session_id": s.session_id}
    here = f"/sessions/{s.session_id}"
    if action == "close":
        sm.close_session(**who, expected_version=version, idempotency_key=key)
    elif action == "expire":
        sm.expire_session(**who, expected_version=version, idempotency_key=key)
    elif action == "restore":
        sm.restore_session(**who, expected_version=version, message_limit=0, idempotency_key=key)
    elif action == "rewind":
        if seq is None:
            raise ValidationError("a rewind needs the message to go back to (seq)")
        sm.rewind_session(**who, to_seq=seq, expected_version=version, idempotency_key=key)
    elif action == "delete":
        sm.delete_session(**who, expected_version=version, idempotency_key=key)
        return "/"
    else:
        fork = sm.fork_session(**who, at_seq=seq, expected_version=version, idempotency_key=key)
        return f"/sessions/{fork.session_id}"
    return here


def _see(path: str) -> Response:
    return RedirectResponse(f"{PATH}{path}", status_code=303, headers=SECURITY_HEADERS)
