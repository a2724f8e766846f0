"""Request plumbing shared by the routes: services, authentication, the session in the
path, ``If-Match`` -> ``expected_version``, ``Idempotency-Key``, and JSON replies.

Routes stay thin: parse, one :class:`~agentsession.service.AsyncSessionManager` call,
reply. Errors are raised, and rendered by :mod:`.problems`. A write route runs its call
inside :meth:`Ctx.write`, which tells from the write pipeline's report whether the
answer is a replay of an idempotency key's first result (``Idempotent-Replayed``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import orjson
from fastapi import Depends, Header, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from starlette.responses import JSONResponse

from ..errors import AgentSessionError, NotFound, RunNotFound, SessionNotFound, VersionConflict
from ..fieldlimits import IDEMPOTENCY_KEY_CHARS
from ..ids import is_id
from ..models import Message, Page, RestoredSession, Session
from ..observe import note
from ..principal import Principal, limit_agents
from ..protocol import PreconditionRequired, Unauthenticated, format_etag, parse_if_match
from ..service import AsyncSessionManager, WriteReport, write_report
from ..service.validation import check_key
from ..settings import Settings
from .authlimit import AuthFailureLimiter, key_id_of
from .keys import KeyStore, StoreKeyStore

if TYPE_CHECKING:
    from .jwtauth import JwtVerifier
from .schemas import IDEMPOTENCY_KEY, id_pattern
from .scopes import check_scope

__all__ = [
    "DOCUMENTED_BY",
    "Auth",
    "Ctx",
    "FastJSONResponse",
    "IdempotencyKey",
    "ReadCtx",
    "RewindNumber",
    "RunId",
    "Services",
    "WriteCtx",
    "dump",
    "gate",
    "reply",
    "services",
    "version_etag",
    "write",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Services:
    """What :func:`~agentsession.http.app.create_app` wires into ``app.state``."""

    manager: AsyncSessionManager
    keys: KeyStore
    settings: Settings
    auth_limiter: AuthFailureLimiter
    jwt: JwtVerifier | None = None


def services(request: Request) -> Services:
    """The app's services (set by ``create_app`` or its lifespan)."""
    found = getattr(request.app.state, "services", None)
    if found is None:
        raise RuntimeError("the app is not started: run it with its lifespan")
    return found  # type: ignore[no-any-return]


_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key from `agentsession keys create`, as `Authorization: Bearer <key>`.",
)


#: The bearer credentials of ``Authorization`` (None: none sent).
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


async def authenticate(request: Request, credentials: Credentials) -> Principal:
    """The caller's principal; 401 without a valid key, 429 after too many failures.

    Runs on the event loop: a key file's I/O is a stat of a small file at most once
    a second (a read when it changed), and the store's key table is read in a thread
    only when its cache has no answer, cheaper than the thread hop FastAPI gives a sync
    dependency on every request.

    Raises:
        TooManyRequests: a failed authentication from a client address, or naming a
            key id, that has failed too often lately (see :mod:`.authlimit`); a valid
            key is never refused.
        Unauthenticated: no key, or an unknown or revoked one.
        InsufficientScope: the key's scope does not allow the route (:mod:`.scopes`).
    """
    svc = services(request)
    token = credentials.credentials if credentials is not None else None
    principal = await _principal(svc, token) if token else None
    if principal is None:
        address = request.client.host if request.client is not None else "unknown"
        key_id = key_id_of(token)
        limiter = svc.auth_limiter
        if limiter.shared:  # counted in the store: off the event loop
            blocked = await asyncio.to_thread(limiter.refuse, address, key_id)
        else:
            blocked = limiter.refuse(address, key_id)
        note("auth_failure", label="unauthenticated" if blocked is None else "refused")
        raise blocked or Unauthenticated(
            "a valid API key is required: send `Authorization: Bearer <key>`"
        )
    check_scope(request, principal)
    # Every manager call of this request (its task, and the threads handed a copy of
    # its context) acts within the key's agents: checked once, in the service layer.
    limit_agents(principal.agents)
    request.state.principal = principal
    return principal


Auth = Annotated[Principal, Depends(authenticate)]


async def _principal(svc: Services, token: str) -> Principal | None:
    """The principal of ``token``: a JWT when JWTs are on and it is no API key (verified
    in a thread: a JWKS URL may be fetched); else an API key, a key file read on the
    event loop (a stat at most once a second), the store's key table in a thread unless
    its cache answers."""
    if svc.jwt is not None and key_id_of(token) is None:
        return await asyncio.to_thread(svc.jwt.principal, token)
    keys = svc.keys
    if not isinstance(keys, StoreKeyStore) or not keys.blocking:
        return keys.authenticate(token)
    hit, principal = keys.cached(token)
    if hit:
        return principal
    return await asyncio.to_thread(keys.authenticate, token)


#: The ``{session_id}`` path parameter.
SessionIdPath = Annotated[
    str,
    Path(
        description="A session id, `ses_` + 26 base32 chars (any other value: 404).",
        json_schema_extra={"pattern": id_pattern("ses")},
    ),
]


def session_in_path(request: Request, session_id: str) -> str:
    """The session id of the path, checked against the strict id pattern.

    A malformed id is answered 404 with the same body as a missing session, before
    any lookup, so the answer tells nothing about which ids exist.

    Raises:
        SessionNotFound: ``session_id`` is not a session id.
    """
    if not is_id(session_id, "ses"):
        raise SessionNotFound(session_id=session_id[:40])
    request.state.session_id = session_id
    return session_id


async def run_in_path(
    request: Request,
    run_id: Annotated[
        str,
        Path(
            description="A run id, `run_` + 26 base32 chars (any other value: 404).",
            json_schema_extra={"pattern": id_pattern("run")},
        ),
    ],
) -> str:
    """The run id of the path; a malformed one is answered exactly like a missing run.

    A missing run is a 404 naming the run only once the session is found visible (and
    ``If-Match`` holds), so a malformed id gets the same checks first (:func:`gate`),
    and its echo is cut to an id's length.

    Raises:
        SessionNotFound, VersionConflict: what a missing run would get first.
        RunNotFound: the id is malformed.
    """
    if not is_id(run_id, "run"):
        blocked = await gate(request)
        raise blocked or RunNotFound(run_id=run_id[:40], session_id=request.state.session_id)
    return run_id


#: A ``{run_id}`` path parameter (after the session's: declare it after the context).
RunId = Annotated[str, Depends(run_in_path)]

#: A rewind's ``{number}`` path parameter.
RewindNumber = Annotated[int, Path(ge=1, le=2**53 - 1, description="The rewind's number.")]

#: An ``Idempotency-Key`` header.
IdempotencyKey = Annotated[
    str | None,
    Header(
        description=f"1-{IDEMPOTENCY_KEY_CHARS} printable ASCII characters, no space at "
        "either end (else 400); a retried "
        "POST with the same key and body returns the first result and writes nothing "
        "(another key: 400).",
        json_schema_extra={"pattern": IDEMPOTENCY_KEY},
    ),
]


@dataclass(slots=True)
class Ctx:
    """One session-scoped request: who asks, which session, and the conditional headers."""

    request: Request
    manager: AsyncSessionManager
    settings: Settings
    principal: Principal
    session_id: str
    if_match: str | None = None
    idempotency_key: str | None = None

    @property
    def who(self) -> dict[str, Any]:
        """``session_id``, ``user_id`` and ``admin`` for a manager call."""
        return {
            "session_id": self.session_id,
            "user_id": self.principal.user_id,
            "admin": self.principal.admin,
        }

    async def expected_version(self, *, required: bool = False) -> int | None:
        """``If-Match`` as ``expected_version`` (None: no precondition).

        Args:
            required: the request is one ``require_if_match`` applies to (PUT, PATCH,
                DELETE, a message pop, lifecycle actions).

        Raises:
            PreconditionRequired: no header, and the settings require one (428).
            VersionConflict: the header can match nothing current (412), e.g. a weak
                ETag or one of another session.
            SessionNotFound: checked first where a lookup is needed (404 before 412).
        """
        if self.if_match is None:
            if required and self.settings.require_if_match:
                blocked = await gate(self.request)
                raise blocked or PreconditionRequired(
                    "this request needs `If-Match: <ETag of the session>`"
                )
            return None
        star, versions = parse_if_match(self.if_match, self.session_id)
        if star:
            return None
        if len(versions) == 1:
            return next(iter(versions))
        current = await self.manager.get_session(**self.who)
        if current.version in versions:
            return current.version
        raise unmatched(self.session_id, current.version)


async def write(call: Awaitable[T]) -> tuple[T, bool]:
    """Await a manager write; return its result and whether the write pipeline
    answered it as a replay of its idempotency key's first result."""
    result, report = await write_reported(call)
    return result, report.replayed


async def write_reported(call: Awaitable[T]) -> tuple[T, WriteReport]:
    """Await a manager write; return its result and the write pipeline's report of it
    (whether it replayed, the session's version when it finished)."""
    with write_report() as report:
        result = await call
    return result, report


def unmatched(session_id: str, current_version: int) -> VersionConflict:
    """The 412 error for an ``If-Match`` that matches no current ETag of the session."""
    return VersionConflict(
        f"If-Match matches no current ETag of session {session_id!r} "
        f"(now {format_etag(session_id, current_version)})",
        session_id=session_id,
        current_version=current_version,
    )


# The contexts read the request themselves (the bearer credentials, the session id of
# the path, the two conditional headers) and call authenticate and session_in_path
# directly, with the same checks in the same order (401/429, then 404): one dependency
# FastAPI solves per request, with no parameter of its own, where declared parameters
# (a bearer scheme, a path parameter, two headers, at two levels) cost about a sixth of
# an append's CPU. The OpenAPI document still states them: :data:`DOCUMENTED_BY` names,
# for each context, a function that declares what it reads, and
# :func:`~agentsession.http.openapi.install_openapi` adds those declarations to every
# operation that takes the context. Tests that override dependencies override the
# contexts themselves: an override of _bearer or authenticate does not reach them.
async def _read_ctx(request: Request) -> Ctx:
    principal = await authenticate(request, await _bearer(request))
    svc = services(request)
    session_id = session_in_path(request, request.path_params["session_id"])
    return Ctx(request, svc.manager, svc.settings, principal, session_id)


async def _write_ctx(request: Request) -> Ctx:
    principal = await authenticate(request, await _bearer(request))
    session_id = session_in_path(request, request.path_params["session_id"])
    svc = services(request)
    headers = request.headers
    idempotency_key = headers.get("idempotency-key")
    # Checked here, not only by the writes that use a key: a lifecycle action that
    # takes none still refuses a malformed one rather than ignoring it.
    check_key(idempotency_key)
    return Ctx(
        request,
        svc.manager,
        svc.settings,
        principal,
        session_id,
        headers.get("if-match"),
        idempotency_key,
    )


def _read_ctx_parameters(credentials: Credentials, session_id: SessionIdPath) -> None:
    """What :func:`_read_ctx` reads from a request, declared for OpenAPI only."""


def _write_ctx_parameters(
    credentials: Credentials,
    session_id: SessionIdPath,
    if_match: Annotated[
        str | None,
        Header(
            description='The session\'s ETag (`"<session_id>@<version>"`), a list of '
            "them, or `*`: the write happens only if the session is still at that "
            "version. Any other value, a weak or malformed ETag too, matches nothing "
            "(412, RFC 9110 section 13.1.1), so no pattern is stated."
        ),
    ] = None,
    idempotency_key: IdempotencyKey = None,
) -> None:
    """What :func:`_write_ctx` reads from a request, declared for OpenAPI only."""


#: For each dependency that reads its parameters from the request itself, the function
#: that declares them (bearer credentials, path parameters, headers) to OpenAPI.
DOCUMENTED_BY: dict[Callable[..., Any], Callable[..., None]] = {
    _read_ctx: _read_ctx_parameters,
    _write_ctx: _write_ctx_parameters,
}

ReadCtx = Annotated[Ctx, Depends(_read_ctx)]
WriteCtx = Annotated[Ctx, Depends(_write_ctx)]


async def gate(request: Request) -> AgentSessionError | None:
    """The error that outranks a 400/422/428 on a session-scoped request, if any.

    404 if the session is not visible to the caller, then 412 if ``If-Match`` fails;
    None when neither applies (or the request is not session-scoped).
    """
    principal = getattr(request.state, "principal", None)
    session_id = getattr(request.state, "session_id", None)
    if principal is None or session_id is None:
        return None
    manager = services(request).manager
    try:
        current = await manager.get_session(
            session_id=session_id, user_id=principal.user_id, admin=principal.admin
        )
    except NotFound as exc:
        return exc
    except AgentSessionError:
        return None
    header = request.headers.get("if-match")
    if header is not None:
        star, versions = parse_if_match(header, session_id)
        if not star and current.version not in versions:
            return unmatched(session_id, current.version)
    return None


def dump(value: Any) -> Any:
    """JSON form of a result: messages keep absent fields absent (what the client
    appended comes back exactly), also inside a page or a restore."""
    if isinstance(value, Message):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, RestoredSession):
        data = value.model_dump(mode="json", exclude={"messages"})
        data["messages"] = [dump(m) for m in value.messages]
        return data
    if isinstance(value, Page):
        data = value.model_dump(mode="json", exclude={"items"})
        data["items"] = [dump(item) for item in value.items]
        return data
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [dump(v) for v in value]
    if isinstance(value, dict):
        return {k: dump(v) for k, v in value.items()}
    return value


class FastJSONResponse(JSONResponse):
    """A ``JSONResponse`` encoded by orjson: the same compact UTF-8 JSON, several times
    faster. A value orjson refuses (an int beyond 64 bits) is encoded by the standard
    library instead. Floats keep their value; their text may differ (``0.00001`` for
    ``1e-05``)."""

    def render(self, content: Any) -> bytes:
        """``content`` as compact UTF-8 JSON bytes."""
        try:
            return orjson.dumps(content)
        except orjson.JSONEncodeError:
            return super().render(content)


def reply(
    value: Any,
    *,
    status: int = 200,
    session: Session | None = None,
    etag: tuple[str, int] | None = None,
    replayed: bool = False,
    location: str | None = None,
) -> FastJSONResponse:
    """A JSON response; ``session`` (or ``etag``) adds the strong ETag of its version."""
    headers: dict[str, str] = {}
    if session is not None:
        etag = (session.session_id, session.version)
    if etag is not None:
        headers["ETag"] = format_etag(*etag)
    if replayed:
        headers["Idempotent-Replayed"] = "true"
    if location is not None:
        headers["Location"] = location
    return FastJSONResponse(dump(value), status_code=status, headers=headers)


def version_etag(session_id: str, session_version: int | None) -> tuple[str, int] | None:
    """The ``etag`` argument of :func:`reply` for a write answer that carries the
    session's new version (None: a replay recorded before answers carried it)."""
    return None if session_version is None else (session_id, session_version)
