"""The composition root of the HTTP service: :func:`create_app`.

Nothing is built at import time. ``agentsession serve`` runs
``uvicorn agentsession.http.app:create_app --factory``: each worker calls
``create_app()``, which reads :class:`~agentsession.settings.Settings` from the
environment and opens the store in the app's lifespan (closed again at shutdown).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI

from .. import __version__
from ..errors import ValidationError
from ..service import AsyncSessionManager, SessionManager
from ..settings import Settings
from ..ui import install_ui
from .authlimit import AuthFailureLimiter
from .changestream import event_stream_routes
from .deps import Services
from .guards import GuardMiddleware, HeaderLimits
from .keys import KeyStore, keys_in_store, open_key_store
from .middleware import EdgeMiddleware
from .openapi import install_openapi
from .problems import install_handlers
from .routes import routers
from .routing import add_flat, operation_id

if TYPE_CHECKING:
    from .jwtauth import JwtVerifier

__all__ = ["create_app"]


def create_app(
    manager: SessionManager | None = None,
    settings: Settings | None = None,
    *,
    keys: KeyStore | None = None,
) -> FastAPI:
    """Build the FastAPI app.

    Args:
        manager: the SessionManager to serve; the caller keeps ownership (it is not
            closed at shutdown). None: open ``settings.url`` in the lifespan, with
            ``settings.auto_migrate``, and close it at shutdown.
        settings: defaults to ``Settings()`` (the ``AGENTSESSION_*`` environment).
        keys: the API key store; default the one ``settings`` name, the session
            store's key table or a key file (:func:`.keys.open_key_store`). Tests
            pass a ``MemoryKeyStore``.

    Returns:
        The app; with ``manager`` given it is usable without running its lifespan.
    """
    config = settings if settings is not None else Settings()
    key_store = keys if keys is not None or keys_in_store(config) else open_key_store(config)
    verifier = _jwt_verifier(config)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if manager is not None:
            try:
                yield
            finally:  # the caller's manager stays open; our threads end
                app.state.services.manager.stop_threads()
            return
        opened = await asyncio.to_thread(
            functools.partial(SessionManager.from_url, config.url, **config.manager_options())
        )
        calls = _threaded(opened, config)
        chosen = key_store or open_key_store(config, opened.store)
        limiter = AuthFailureLimiter.of(config, opened.store)
        app.state.services = Services(calls, chosen, config, limiter, verifier)
        try:
            yield
        finally:
            app.state.services = None
            await calls.close()

    app = FastAPI(
        title="agentsession",
        version=__version__,
        summary="Durable, multi-user sessions for AI agents.",
        description=(
            "Sessions, messages, working memory, tool history, runs and audit, with "
            "optimistic locking (`ETag`/`If-Match`), idempotent POSTs (`Idempotency-Key`) "
            "and RFC 9457 problem+json errors. Authenticate with `Authorization: Bearer "
            "<api key>` (`agentsession keys create`)."
        ),
        lifespan=lifespan,
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
        # A trailing slash is an unknown path (404 problem+json), never a bare 307
        # redirect sent before authentication.
        redirect_slashes=False,
        # operationIds are the operation names of agentsession.operations.
        generate_unique_id_function=operation_id,
    )
    if manager is not None:
        chosen = key_store or open_key_store(config, manager.store)
        limiter = AuthFailureLimiter.of(config, manager.store)
        app.state.services = Services(_threaded(manager, config), chosen, config, limiter, verifier)
    install_handlers(app)
    _add_routes(app)
    install_ui(app)
    _install_observers(app, config)
    # Added innermost first: the edge (request id, access line, catch-all 500) wraps
    # everything, so even a 500 carries the id, and the access log sees every answer,
    # the refusals of the limits too.
    app.add_middleware(
        GuardMiddleware,
        limits=HeaderLimits.of(config),
        max_body_bytes=config.max_body_bytes,
        body_timeout_seconds=config.body_timeout_seconds,
        max_concurrent_requests=config.max_concurrent_requests,
    )
    app.add_middleware(EdgeMiddleware)
    return app


def _jwt_verifier(config: Settings) -> JwtVerifier | None:
    """The JWT verifier ``config.jwt_jwks`` asks for (:mod:`.jwtauth`), or None.

    Raises:
        ValidationError: a JWT setting is wrong, or PyJWT (the ``jwt`` extra) is missing.
    """
    if config.jwt_jwks is None:
        return None
    try:
        from .jwtauth import JwtVerifier
    except ImportError as exc:
        raise ValidationError(
            "AGENTSESSION_JWT_JWKS needs: pip install 'agentsession[jwt]'", field="jwt_jwks"
        ) from exc
    return JwtVerifier(config)


def _install_observers(app: FastAPI, config: Settings) -> None:
    """``/metrics`` when ``config.metrics_token`` is set, request spans when
    ``config.otel_traces`` is on (each its extra)."""
    if config.metrics_token is not None:
        _install_metrics(app, config)
    if config.otel_traces:
        _install_tracing(app)


def _install_tracing(app: FastAPI) -> None:
    """Request and store-call spans (:mod:`.otel`), whose SDK is the ``otel`` extra.

    Raises:
        ValidationError: ``AGENTSESSION_OTEL_TRACES`` is on and the extra is missing.
    """
    try:
        from .otel import install_tracing
    except ImportError as exc:
        raise ValidationError(
            "AGENTSESSION_OTEL_TRACES needs: pip install 'agentsession[otel]'", field="otel_traces"
        ) from exc
    install_tracing(app)


def _install_metrics(app: FastAPI, config: Settings) -> None:
    """``GET /metrics`` (:mod:`.metrics`), whose prometheus-client is the ``metrics``
    extra.

    Raises:
        ValidationError: ``AGENTSESSION_METRICS_TOKEN`` is set and the extra is missing.
    """
    try:
        from .metrics import install_metrics
    except ImportError as exc:
        raise ValidationError(
            "AGENTSESSION_METRICS_TOKEN needs: pip install 'agentsession[metrics]'",
            field="metrics_token",
        ) from exc
    install_metrics(app, config)


def _add_routes(app: FastAPI) -> None:
    """Add every route of :func:`~agentsession.http.routes.routers` to the app's own
    router (:func:`.routing.add_flat`) and install the OpenAPI document over them
    (:func:`.openapi.install_openapi`), after the Server-Sent Events of
    :mod:`.changestream`."""
    declared = [route for router in routers() for route in router.routes]
    install_openapi(app, declared)
    add_flat(app.router, declared)
    # The change feed's Server-Sent Events, tried first: they match only a request that
    # accepts text/event-stream, others go on to the JSON routes of the same paths.
    app.router.routes[0:0] = event_stream_routes()


def _threaded(manager: SessionManager, config: Settings) -> AsyncSessionManager:
    """The async manager the routes call, with a thread for every request the
    concurrency limit admits: all of them can be in the store at once (and, on SQLite,
    share one commit) rather than wait for one of the loop's default 6 threads."""
    return AsyncSessionManager(manager, max_threads=config.max_concurrent_requests)
