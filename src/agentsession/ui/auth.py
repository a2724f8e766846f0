"""Who is looking at the inspector: the login cookie, CSRF tokens, one-time tickets.

The inspector's login is the API's: an API key typed into the form field ``api_key``
is checked against the service's key store (:class:`~agentsession.http.keys.KeyStore`)
exactly as a bearer token is, and the same failed-authentication limit
(:class:`~agentsession.http.authlimit.AuthFailureLimiter`) counts a wrong key typed
into the form or replayed in a cookie. The key is then kept in a cookie (HttpOnly,
SameSite=Strict, Secure over https, path ``/ui``) and checked again on every request,
so a revoked key is out at its next page.

Every POST carries a CSRF token: after login an HMAC of the cookie's key (readable by
no other origin, so a forged form cannot carry it); on the login form, which has no
key yet, a random value sent both in a cookie and in the form (double submit).

``agentsession ui`` opens a local inspector with a one-time ticket in its URL
(:class:`Tickets`): the first visit trades it for the cookie of a key that lives only
as long as the process.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from dataclasses import dataclass
from urllib.parse import parse_qs

from fastapi import Request
from starlette.responses import Response

from ..http.authlimit import key_id_of
from ..http.deps import services
from ..principal import Principal

__all__ = [
    "KEY_COOKIE",
    "LOGIN_COOKIE",
    "PATH",
    "LoginRequired",
    "Tickets",
    "Viewer",
    "check_csrf",
    "check_key",
    "clear_key",
    "login_nonce",
    "read_form",
    "remember_nonce",
    "set_key",
    "viewer",
]

#: Where the inspector lives; its cookies are sent nowhere else.
PATH = "/ui"
#: The cookie holding the API key of the signed-in viewer.
KEY_COOKIE = "agentsession_ui_key"
#: The cookie holding the login form's CSRF value (before any key).
LOGIN_COOKIE = "agentsession_ui_login"

_CSRF_LABEL = b"agentsession-ui-csrf"
#: The longest form body read (an API key, a CSRF token and a few fields fit many times).
_MAX_FORM = 4096


class LoginRequired(Exception):
    """No valid key in the request: the viewer is sent to the login form."""


@dataclass(frozen=True, slots=True)
class Viewer:
    """The signed-in viewer of one request.

    Attributes:
        principal: the key's user and admin flag; every read is made as it.
        csrf: the CSRF token every form of the page carries (field ``csrf``).
    """

    principal: Principal
    csrf: str


def csrf_token(key: str) -> str:
    """The CSRF token bound to the API key ``key``: an HMAC-SHA256 keyed by it (hex)."""
    return hmac.new(key.encode(), _CSRF_LABEL, hashlib.sha256).hexdigest()


def _address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def check_key(request: Request, key: str) -> Principal:
    """The principal of ``key``, checked and counted as the API's bearer tokens are.

    Raises:
        TooManyRequests: a failure from an address, or naming a key id, over the limit.
        LoginRequired: an unknown or revoked key (counted as a failure).
    """
    svc = services(request)
    principal = svc.keys.authenticate(key) if key else None
    if principal is not None:
        return principal
    limiter = svc.auth_limiter
    address, key_id = _address(request), key_id_of(key)
    blocked = limiter.address_blocked(address) or (
        limiter.key_blocked(key_id) if key_id is not None else None
    )
    limiter.failed(address, key_id)
    if blocked is not None:
        raise blocked
    raise LoginRequired


def viewer(request: Request) -> Viewer:
    """The viewer of a request, from its key cookie.

    Raises:
        LoginRequired: no cookie, or its key is unknown or revoked.
        TooManyRequests: as :func:`check_key`.
    """
    key = request.cookies.get(KEY_COOKIE)
    if not key:
        raise LoginRequired
    return Viewer(check_key(request, key), csrf_token(key))


def check_csrf(request: Request, sent: str | None, current: Viewer | None) -> bool:
    """Whether a POST's CSRF field ``sent`` is right: the signed-in viewer's token, or
    (``current`` None: the login form) the value of the login cookie."""
    expected = current.csrf if current is not None else request.cookies.get(LOGIN_COOKIE)
    return bool(sent and expected) and hmac.compare_digest(str(sent), str(expected))


async def read_form(request: Request) -> dict[str, str]:
    """A URL-encoded form's fields (the first value of each; the body cut at 4 KiB, so
    no multipart parser is needed)."""
    body = (await request.body())[:_MAX_FORM].decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def _cookie(response: Response, request: Request, name: str, value: str) -> None:
    response.set_cookie(
        name,
        value,
        path=PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def login_nonce(request: Request) -> tuple[str, bool]:
    """The login form's CSRF value: the login cookie's, else a new one (then True:
    :func:`remember_nonce` is to set it on the answer)."""
    nonce = request.cookies.get(LOGIN_COOKIE)
    if nonce and len(nonce) == 43:
        return nonce, False
    return secrets.token_urlsafe(32), True


def remember_nonce(request: Request, response: Response, nonce: str) -> None:
    """Set the login cookie to ``nonce`` on ``response``."""
    _cookie(response, request, LOGIN_COOKIE, nonce)


def set_key(request: Request, response: Response, key: str) -> None:
    """Sign the viewer in: keep ``key`` in the key cookie, drop the login cookie."""
    _cookie(response, request, KEY_COOKIE, key)
    response.delete_cookie(LOGIN_COOKIE, path=PATH)


def clear_key(response: Response) -> None:
    """Sign the viewer out: delete the key cookie."""
    response.delete_cookie(KEY_COOKIE, path=PATH, httponly=True, samesite="strict")


class Tickets:
    """One-time tickets of a local inspector, each standing for an API key.

    ``agentsession ui`` issues one and prints it in the URL it opens; the first request
    that presents it takes it (:meth:`take`), and it is gone.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: dict[str, str] = {}

    def issue(self, key: str) -> str:
        """A new ticket (43 URL-safe characters) for the API key ``key``."""
        ticket = secrets.token_urlsafe(32)
        with self._lock:
            self._keys[ticket] = key
        return ticket

    def take(self, ticket: str) -> str | None:
        """The key of ``ticket``, which is used up; None if it is unknown or used."""
        with self._lock:
            return self._keys.pop(ticket, None)
