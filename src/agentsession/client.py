"""Python clients of the agentsession HTTP service: :class:`SessionClient` (sync) and
:class:`AsyncSessionClient` (asyncio), built on httpx.

Both have the methods of :class:`~agentsession.service.SessionManager` with the same
keyword arguments, return the same pydantic models and raise the same typed errors
(rebuilt from the problem+json ``type``). The user is the one of the API key, so
``user_id`` is accepted and ignored. ``expected_version`` travels as ``If-Match``.

Retries: connection errors, timeouts and 500/502/503/504 answers are retried with
bounded exponential backoff (``Retry-After`` honoured up to ``max_backoff``). Every
write whose route replays it by ``Idempotency-Key`` (most POST, PUT and PATCH routes,
and a message or record DELETE) carries one (a uuid4 unless you pass
``idempotency_key``; a heartbeat only yours), the same one on each retry, so a retried
write is stored once. A session DELETE retried after a lost answer may report the
session as not found.

Example::

    with SessionClient("http://127.0.0.1:8000", api_key="key_...") as client:
        s = client.create_session(agent="coding")
        client.append_message(session_id=s.session_id, message={"role": "user", "content": "hi"})
        client.modify_working_memory(session_id=s.session_id, fn=lambda m: {**m, "goal": "x"})

With the async client every method is a coroutine (``await client.get_session(...)``).

Listings return one :class:`~agentsession.models.Page` per call, as the manager does;
pass its ``next_cursor`` as ``cursor`` for the next one.

Design (sans-I/O): each method is written once, as a *flow*: a generator that yields
the I/O it needs (one HTTP request, or a sleep) and returns the method's result (the
machinery: :mod:`agentsession.clientcore`). The flows of the plain operations, and
the methods of both clients for every operation, are generated from the table of
operations (:mod:`agentsession.clientgen`); the other flows are written in
:mod:`agentsession.clienthand`, each row's ``client_by_hand`` saying why. The retry
loop and the 412 re-read loop are flows too. The two clients only run flows:
``SessionClient`` with ``httpx.Client`` and ``time.sleep``, ``AsyncSessionClient`` with
``httpx.AsyncClient`` and ``asyncio.sleep``.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

import httpx

from .clientcore import _Flow, _Retry, _Sleep, _Stepper
from .clientgen import AsyncOperations, Requests, SyncOperations
from .feedwatch import check_poll_interval, follow, follow_async
from .models import Change

__all__ = ["AsyncSessionClient", "SessionClient"]

T = TypeVar("T")


def _http_options(base_url: str, api_key: str, timeout: float) -> dict[str, Any]:
    return {
        "base_url": base_url,
        "headers": {"Authorization": f"Bearer {api_key}"},
        "timeout": timeout,
    }


class SessionClient(SyncOperations):
    """Synchronous client (see the module docstring).

    Args:
        base_url: e.g. ``"http://127.0.0.1:8000"``.
        api_key: a token from ``agentsession keys create``.
        timeout: seconds per request attempt.
        max_retries: retries after the first attempt (connection errors, timeouts, 5xx).
        backoff, max_backoff: first and largest delay between attempts, in seconds.
        transport: an httpx transport (tests: ``httpx.ASGITransport`` or a fault injector).

    Raises (from every method): the typed errors of :mod:`agentsession.errors`, plus
    :class:`~agentsession.protocol.Unauthenticated` (401) and
    ``httpx.TransportError`` once retries are used up.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._requests = Requests(_Retry(max_retries, backoff, max_backoff))
        self._http = httpx.Client(**_http_options(base_url, api_key, timeout), transport=transport)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> SessionClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def watch(
        self,
        *,
        user_id: str | None = None,
        after: str | None = None,
        session_id: str | None = None,
        all_users: bool = False,
        admin: bool = False,
        timeout: float | None = None,
        poll_interval: float = 1.0,
        stop: threading.Event | None = None,
    ) -> Iterator[Change]:
        """Follow the change feed as :meth:`SessionManager.watch` does, by polling the
        JSON pages of :meth:`changes` (each read a plain request, retried as any; the
        service's Server-Sent Events are for clients that hold a connection open).
        The first read, and so its errors, come with the first ``next()``.

        Raises:
            As :meth:`changes`; ValidationError: ``poll_interval`` not > 0.
        """
        check_poll_interval(poll_interval)
        read = functools.partial(self.changes, session_id=session_id, all_users=all_users)
        return follow(
            lambda cursor: read(after=cursor),
            after=after,
            timeout=timeout,
            poll_interval=poll_interval,
            stop=stop,
        )

    def _run(self, flow: _Flow[T]) -> T:
        steps = _Stepper(flow)
        for step in steps:
            if isinstance(step, _Sleep):
                time.sleep(step.seconds)
                continue
            try:
                steps.reply = self._http.send(step.request(self._http))
            except httpx.TransportError as exc:
                steps.error = exc
        return steps.result


class AsyncSessionClient(AsyncOperations):
    """Asyncio client: :class:`SessionClient`'s methods, each a coroutine.

    Args: as :class:`SessionClient` (``transport`` is an ``httpx.AsyncBaseTransport``).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._requests = Requests(_Retry(max_retries, backoff, max_backoff))
        self._http = httpx.AsyncClient(
            **_http_options(base_url, api_key, timeout), transport=transport
        )

    async def close(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSessionClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def watch(
        self,
        *,
        user_id: str | None = None,
        after: str | None = None,
        session_id: str | None = None,
        all_users: bool = False,
        admin: bool = False,
        timeout: float | None = None,
        poll_interval: float = 1.0,
        stop: asyncio.Event | None = None,
    ) -> AsyncIterator[Change]:
        """:meth:`SessionClient.watch` on the event loop; ``stop`` is an
        :class:`asyncio.Event`."""
        check_poll_interval(poll_interval)
        read = functools.partial(self.changes, session_id=session_id, all_users=all_users)
        async for change in follow_async(
            lambda cursor: read(after=cursor),
            after=after,
            timeout=timeout,
            poll_interval=poll_interval,
            stop=stop,
        ):
            yield change

    async def _run(self, flow: _Flow[T]) -> T:
        steps = _Stepper(flow)
        for step in steps:
            if isinstance(step, _Sleep):
                await asyncio.sleep(step.seconds)
                continue
            try:
                steps.reply = await self._http.send(step.request(self._http))
            except httpx.TransportError as exc:
                steps.error = exc
        return steps.result
