"""Who is looking at the inspector: the session cookie, CSRF tokens, one-time tickets.

The inspector's login is the API's: an API key typed into the form field ``api_key``
is checked against the service's key store (:class:`~agentsession.http.keys.KeyStore`)
exactly as a bearer token is, and the same failed-authentication limit
(:class:`~agentsession.http.authlimit.AuthFailureLimiter`) counts a wrong key typed
into the form or a forged session cookie.

The cookie (HttpOnly, SameSite=Strict, Secure over https, path ``/ui``) never holds
the API key: it holds an inspector session token ``v1.<key id>.<issued>.<expires>.
<nonce>.<mac>`` (times in Unix seconds), the MAC an HMAC-SHA256 whose secret is
derived from the SHA-256 the key store keeps of that key (:func:`issue_cookie`). So
the token is no bearer token (the API refuses it), it cannot be made without the key
store (a copy of the session database holds no key hash), every worker checks it
alike with no state of its own, it ends :data:`SESSION_LIFETIME` after sign-in
(absolute, never extended), and revoking the key ends it at the next page. Logout
deletes the browser's cookie; a copy of it taken before stays valid until it expires
or the key is revoked (no worker keeps a list of signed-out tokens).

Every POST carries a CSRF token: after login an HMAC of the session token (readable
by no other origin, so a forged form cannot carry it); on the login form, which has
no key yet, a random value sent both in a cookie and in the form (double submit).

``agentsession ui`` opens a local inspector with a one-time ticket in its URL
(:class:`Tickets`): the first visit trades it for the session cookie of a key that
lives only as long as the process.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qs

from fastapi import Request
from starlette.responses import Response

from ..errors import StoreError
from ..http.authlimit import key_id_of
from ..http.deps import services
from ..http.keys import ApiKey, hash_token
from ..observe import note
from ..principal import Principal, limit_agents

__all__ = [
    "KEY_COOKIE",
    "LOGIN_COOKIE",
    "PATH",
    "SESSION_LIFETIME",
    "LoginRequired",
    "Tickets",
    "Viewer",
    "check_csrf",
    "check_key",
    "clear_key",
    "issue_cookie",
    "login_nonce",
    "read_form",
    "remember_nonce",
    "set_key",
    "viewer",
]

logger = logging.getLogger(__name__)

#: Where the inspector lives; its cookies are sent nowhere else.
PATH = "/ui"
#: The cookie holding the signed-in viewer's inspector session token (never the key).
KEY_COOKIE = "agentsession_ui_key"
#: The cookie holding the login form's CSRF value (before any key).
LOGIN_COOKIE = "agentsession_ui_login"
#: Seconds an inspector session lasts from sign-in (8 h, absolute).
SESSION_LIFETIME: Final = 8 * 3600

_SESSION_LABEL = b"agentsession-ui-session-v1"
_CSRF_LABEL = b"agentsession-ui-csrf"
#: The longest form body read (an API key, a CSRF token and a few fields fit many times).
_MAX_FORM = 4096


class LoginRequired(Exception):
    """No valid session in the request: the viewer is sent to the login form."""


@dataclass(frozen=True, slots=True)
class Viewer:
    """The signed-in viewer of one request.

    Attributes:
        principal: the key's user and admin flag; every read is made as it.
        csrf: the CSRF token every form of the page carries (field ``csrf``).
    """

    principal: Principal
    csrf: str


def _address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def _failed(request: Request, key_id: str | None) -> None:
    """Count a failed authentication as the API does.

    Raises:
        TooManyRequests: the address, or the key id named, is over the limit.
    """
    blocked = services(request).auth_limiter.refuse(_address(request), key_id)
    note("auth_failure", label="unauthenticated" if blocked is None else "refused")
    if blocked is not None:
        raise blocked


def check_key(request: Request, key: str) -> Principal:
    """The principal of ``key``, checked and counted as the API's bearer tokens are.

    Raises:
        TooManyRequests: a failure from an address, or naming a key id, over the limit.
        LoginRequired: an unknown or revoked key (counted as a failure).
    """
    principal = services(request).keys.authenticate(key) if key else None
    if principal is not None:
        return principal
    _failed(request, key_id_of(key))
    raise LoginRequired


def _secret(key: ApiKey) -> bytes:
    """The MAC secret of ``key``'s sessions: derived from the hash the key store keeps."""
    return hmac.new(bytes.fromhex(key.token_sha256), _SESSION_LABEL, hashlib.sha256).digest()


def _mac(secret: bytes, text: str) -> str:
    digest = hmac.new(secret, text.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def issue_cookie(key: ApiKey, now: float) -> str:
    """A new inspector session token of ``key`` issued at ``now`` (Unix seconds),
    valid :data:`SESSION_LIFETIME` seconds (the format: the module docstring)."""
    issued = int(now)
    payload = f"v1.{key.key_id}.{issued}.{issued + SESSION_LIFETIME}.{secrets.token_urlsafe(16)}"
    return f"{payload}.{_mac(_secret(key), payload)}"


def _stored(request: Request, key_id: str, token_sha256: str | None = None) -> ApiKey | None:
    """The usable stored key ``key_id`` (whose token hash is ``token_sha256``, when
    given); None if there is none, or the key store cannot be read (logged: fail
    closed)."""
    try:
        key = services(request).keys.find(key_id)
    except StoreError as exc:
        logger.error("inspector sessions refused: %s", exc.message)
        return None
    if key is None or (token_sha256 is not None and key.token_sha256 != token_sha256):
        return None
    return key


def _session(request: Request, token: str) -> tuple[ApiKey, str]:
    """The key of the session token ``token`` and its payload.

    Raises:
        LoginRequired: malformed, forged (a wrong MAC: counted as a failed
            authentication), expired, or its key is unknown or revoked.
        TooManyRequests: as :func:`check_key`.
    """
    parts = token.split(".")
    if (
        not token.isascii()  # compare_digest takes ASCII text only
        or len(parts) != 6
        or parts[0] != "v1"
        or not (parts[2] + parts[3]).isdigit()
    ):
        raise LoginRequired  # not a session token (say, one of an older version)
    key = _stored(request, parts[1])
    if key is None:
        raise LoginRequired
    payload = token.rsplit(".", 1)[0]
    if not hmac.compare_digest(parts[5], _mac(_secret(key), payload)):
        _failed(request, key.key_id)
        raise LoginRequired
    issued, expires = int(parts[2]), int(parts[3])
    if not issued <= time.time() < expires or expires - issued > SESSION_LIFETIME:
        raise LoginRequired
    return key, payload


def viewer(request: Request) -> Viewer:
    """The viewer of a request, from its session cookie (:func:`_session`).

    Raises:
        LoginRequired: no cookie, or it is not a valid, unexpired session of an
            unrevoked key.
        TooManyRequests: as :func:`check_key`.
    """
    token = request.cookies.get(KEY_COOKIE)
    if not token:
        raise LoginRequired
    key, payload = _session(request, token)
    csrf = hmac.new(_secret(key), _CSRF_LABEL + payload.encode(), hashlib.sha256).hexdigest()
    principal = key.principal()
    limit_agents(principal.agents)  # the view's manager calls: only the key's agents
    return Viewer(principal, csrf)


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


def _cookie(
    response: Response, request: Request, name: str, value: str, max_age: int | None = None
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
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
    """Sign the viewer in with the valid API key ``key``: a new session token of it in
    the session cookie; drop the login cookie.

    Raises:
        LoginRequired: ``key`` is no longer in the key store (revoked meanwhile).
    """
    key_id = key_id_of(key)
    stored = None if key_id is None else _stored(request, key_id, hash_token(key))
    if stored is None:
        raise LoginRequired
    _cookie(response, request, KEY_COOKIE, issue_cookie(stored, time.time()), SESSION_LIFETIME)
    response.delete_cookie(LOGIN_COOKIE, path=PATH)


def clear_key(response: Response) -> None:
    """Sign the viewer out: delete the session cookie (a copy of it stays valid until
    it expires: the module docstring)."""
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
