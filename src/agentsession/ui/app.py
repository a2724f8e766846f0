"""The inspector mounted in the service: :func:`install_ui`, the login and logout
forms, the one-time tickets of ``agentsession ui``, the static files.

``/ui/`` is the login form until a valid API key is typed into it, then the Sessions
view. Forms are posted URL-encoded (parsed here, so no multipart parser is needed);
each carries its CSRF token (:mod:`.auth`).
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from ..ids import is_id
from ..protocol import TooManyRequests
from .auth import (
    KEY_COOKIE,
    PATH,
    LoginRequired,
    Tickets,
    check_csrf,
    check_key,
    clear_key,
    login_nonce,
    read_form,
    remember_nonce,
    set_key,
    viewer,
)
from .contextview import router as context_router
from .finds import router as finds_router
from .guard import guarded, not_found
from .lineage import router as lineage_router
from .live import router as live_router
from .pages import SECURITY_HEADERS, page_id, render, static_file
from .views import router as views_router
from .views import sessions_page
from .writes import router as writes_router

__all__ = ["install_ui", "local_tickets"]

_router = APIRouter(include_in_schema=False, generate_unique_id_function=page_id)


def install_ui(app: FastAPI) -> None:
    """Serve the inspector at ``/ui/`` in ``app`` (the service's app); it accepts no
    one-time ticket unless :func:`local_tickets` is called."""
    app.state.ui_tickets = None
    app.include_router(_router, prefix=PATH)
    app.include_router(views_router, prefix=PATH)
    app.include_router(context_router, prefix=PATH)
    app.include_router(finds_router, prefix=PATH)
    app.include_router(lineage_router, prefix=PATH)
    app.include_router(writes_router, prefix=PATH)
    app.include_router(live_router, prefix=PATH)


def local_tickets(app: FastAPI) -> Tickets:
    """Let the inspector of ``app`` accept one-time tickets (``agentsession ui``): the
    returned :class:`Tickets` issues them."""
    tickets = Tickets()
    app.state.ui_tickets = tickets
    return tickets


def _see(path: str) -> Response:
    """A 303 to ``path`` under the inspector."""
    return RedirectResponse(f"{PATH}{path}", status_code=303, headers=SECURITY_HEADERS)


def _login_form(request: Request, *, status: int = 200, error: str | None = None) -> Response:
    nonce, fresh = login_nonce(request)
    response = render("login.html", {"error": error, "csrf": nonce}, status=status)
    if fresh:
        remember_nonce(request, response, nonce)
    return response


@_router.get("")
def ui_root() -> Response:
    """``/ui`` -> ``/ui/``."""
    return _see("/")


@_router.get("/")
@guarded
def home(request: Request) -> Response:
    """The login form, or once signed in the Sessions view."""
    try:
        current = viewer(request)
    except LoginRequired:
        response = _login_form(request)
        if request.cookies.get(KEY_COOKIE):
            clear_key(response)
        return response
    return sessions_page(request, current)


@_router.post("/login")
async def login(request: Request) -> Response:
    """Sign in with the form's ``api_key``, checked and rate-limited as the API checks a
    bearer token; a wrong key answers the form again (401), too many 429."""
    form = await read_form(request)
    if not check_csrf(request, form.get("csrf"), None):
        return _login_form(request, status=403, error="The form expired: try again.")
    key = form.get("api_key", "").strip()
    response = _see("/")
    try:
        # In a thread: the key store and the failure counts may be in the session store.
        await run_in_threadpool(check_key, request, key)
        await run_in_threadpool(set_key, request, response, key)
    except LoginRequired:
        return _login_form(request, status=401, error="That API key is not valid.")
    except TooManyRequests as exc:
        response = _login_form(request, status=429, error=exc.message)
        response.headers["Retry-After"] = str(exc.retry_after)
        return response
    return response


@_router.get("/login")
def ticket_login(request: Request) -> Response:
    """Trade the one-time ``ticket`` of ``agentsession ui`` for a session cookie, then
    open the Sessions view, or the session ``session`` names (``--session``)."""
    tickets: Tickets | None = getattr(request.app.state, "ui_tickets", None)
    ticket = request.query_params.get("ticket", "")
    key = tickets.take(ticket) if tickets is not None and ticket else None
    if key is None:
        return _see("/")
    wanted = request.query_params.get("session", "")
    response = _see(f"/sessions/{wanted}" if is_id(wanted, "ses") else "/")
    try:
        set_key(request, response, key)
    except LoginRequired:  # its key was revoked since the ticket was issued
        return _see("/")
    return response


@_router.post("/logout")
async def logout(request: Request) -> Response:
    """Sign out (the form's CSRF token must be the signed-in viewer's; else 403)."""
    form = await read_form(request)
    try:
        current = viewer(request)
    except (LoginRequired, TooManyRequests):
        current = None
    if current is None or not check_csrf(request, form.get("csrf"), current):
        context = {"title": "Forbidden", "text": "The form is not valid: reload the page."}
        return render("error.html", context, status=403)
    response = _see("/")
    clear_key(response)
    return response


@_router.get("/static/{name}")
def static(name: str) -> Response:
    """A vendored or hand-written static file (htmx, its license, the stylesheet)."""
    return static_file(name) or not_found()
