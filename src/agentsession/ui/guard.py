"""What an inspector page answers when its call fails: HTML, never problem+json.

:func:`guarded` wraps a page handler: no valid key sends the viewer to the login form
(303), the failed-authentication limit is a 429 page with ``Retry-After``, a session
that is missing or not the viewer's is the same 404 page either way (the API's rule),
and a bad query value (a stale cursor, a seq out of range) is a 400 page.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec

from starlette.responses import RedirectResponse, Response

from ..errors import NotFound, ValidationError
from ..protocol import TooManyRequests
from .auth import PATH, LoginRequired
from .pages import SECURITY_HEADERS, render

__all__ = ["guarded", "not_found"]

P = ParamSpec("P")


def not_found() -> Response:
    """The 404 page: nothing here, or nothing the viewer may see."""
    return render("error.html", {"title": "Not found", "text": "No such page."}, status=404)


def guarded(handler: Callable[P, Response]) -> Callable[P, Response]:
    """``handler`` with its errors answered as pages (see the module docstring)."""

    @functools.wraps(handler)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> Response:
        try:
            return handler(*args, **kwargs)
        except LoginRequired:
            return RedirectResponse(f"{PATH}/", status_code=303, headers=SECURITY_HEADERS)
        except TooManyRequests as exc:
            context = {"title": "Too many attempts", "text": exc.message}
            headers = {"Retry-After": str(exc.retry_after)}
            return render("error.html", context, status=429, headers=headers)
        except NotFound:
            return not_found()
        except ValidationError as exc:
            context = {"title": "Bad request", "text": exc.message}
            return render("error.html", context, status=400)

    return wrapper
