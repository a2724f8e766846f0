"""Rendering the inspector's pages: the Jinja2 environment, the security headers, the
static files.

Templates live in ``templates/`` and static files in ``static/`` beside this module,
both shipped in the wheel. Autoescape is on for every template, and no template marks
stored content ``|safe``: a title, a message or a memory document is text, never
markup. Every answer carries a Content-Security-Policy that allows scripts and styles
from the inspector's own origin only (no inline script or style, no ``eval``), frames
nowhere, and sends no referrer (a local inspector's URL holds its one-time ticket).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any, Final

import jinja2
from fastapi.routing import APIRoute
from starlette.responses import HTMLResponse, Response

__all__ = [
    "HTMX",
    "HTMX_SSE",
    "SECURITY_HEADERS",
    "STATIC",
    "page_id",
    "pretty",
    "render",
    "static_file",
]

#: The vendored htmx (its license is ``static/htmx-LICENSE.txt``).
HTMX: Final = "htmx-2.0.11.min.js"
#: The vendored SSE extension of htmx, npm ``htmx-ext-sse`` (its license is
#: ``static/htmx-ext-sse-LICENSE.txt``): the live tail of the Session view.
HTMX_SSE: Final = "htmx-ext-sse-2.2.4.min.js"

#: The static files served under ``/ui/static/``, with their media types.
STATIC: Final[dict[str, str]] = {
    HTMX: "text/javascript; charset=utf-8",
    HTMX_SSE: "text/javascript; charset=utf-8",
    "htmx-ext-sse-LICENSE.txt": "text/plain; charset=utf-8",
    "ui.css": "text/css; charset=utf-8",
    "htmx-LICENSE.txt": "text/plain; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}

#: Headers on every answer of the inspector.
SECURITY_HEADERS: Final[dict[str, str]] = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}

#: The most characters of one JSON or text value a page shows (the rest is cut, said so).
MAX_SHOWN: Final = 20_000


def page_id(route: APIRoute) -> str:
    """The id of an inspector route (``ui_`` + its handler's name): the pages are no
    operation of the API and stay out of its OpenAPI document."""
    return f"ui_{route.name}"


def pretty(value: Any) -> str:
    """``value`` as indented JSON text (a string as itself), cut at :data:`MAX_SHOWN`
    characters with a note saying how much was left out."""
    text = value if isinstance(value, str) else _json(value)
    if len(text) <= MAX_SHOWN:
        return text
    return f"{text[:MAX_SHOWN]}\n… ({len(text) - MAX_SHOWN} more characters not shown)"


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _when(value: datetime | None) -> str:
    """A time as ``YYYY-MM-DD HH:MM:SS`` UTC (empty for None)."""
    return "" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _ago(value: datetime | None) -> str:
    """How long ago ``value`` was, coarsely (``42 s``, ``5 min``, ``3 h``, ``2 d``)."""
    if value is None:
        return ""
    return _span((datetime.now(UTC) - value).total_seconds())


def _left(value: datetime | None) -> str:
    """How long until ``value`` (``expired`` once past; empty for None)."""
    if value is None:
        return ""
    seconds = (value - datetime.now(UTC)).total_seconds()
    return "expired" if seconds <= 0 else _span(seconds)


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{max(0, int(seconds))} s"


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("agentsession.ui", "templates"),
        autoescape=True,
        # The templates ship in the package: no file checks on every page.
        auto_reload=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(pretty=pretty, when=_when, ago=_ago, left=_left)
    env.globals["htmx"] = HTMX
    env.globals["htmx_sse"] = HTMX_SSE
    return env


def render(
    template: str,
    context: dict[str, Any],
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    """Render ``template`` with ``context`` into an HTML answer with the security
    headers, never cached (a page shows one viewer's data)."""
    body = _environment().get_template(template).render(**context)
    extra = {**SECURITY_HEADERS, "Cache-Control": "no-store", **(headers or {})}
    return HTMLResponse(body, status_code=status, headers=extra)


def static_file(name: str) -> Response | None:
    """The static file ``name`` (one of :data:`STATIC`), or None for any other name."""
    media = STATIC.get(name)
    if media is None:
        return None
    data = resources.files("agentsession.ui").joinpath("static", name).read_bytes()
    headers = {**SECURITY_HEADERS, "Cache-Control": "public, max-age=3600"}
    return Response(data, media_type=media, headers=headers)
