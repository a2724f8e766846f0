"""Server-Sent Events of the change feed: ``GET /v1/changes`` and ``GET
/v1/sessions/{session_id}/changes`` with ``Accept: text/event-stream``
(docs/http.md, "Change feed").

One :class:`ChangeHub` per app (so per worker process) reads every user's changes,
one store read per poll however many subscribers there are, into a ring of the newest
ones; each subscriber takes from the ring what its query selects. A subscriber first
catches up from its cursor (``Last-Event-ID``, else ``after``) with reads of its own,
then follows the ring; one that falls so far behind that the ring dropped what it had
not sent yet (a slow or stuck client) catches up with reads of its own again. Memory
is the ring and one cursor per subscriber, whatever the clients do, and writers never
wait for a reader: the hub only reads.

The worker's requests keep their turn beside many subscribers: a read that brought
changes wakes the waiting subscribers :attr:`ChangeHub.wake_batch` at a time, the
event loop free between two batches, so a request never waits for every subscriber's
write in one stretch. Subscribers catching up with the same query from the same cursor
(a herd of clients resuming from one ``Last-Event-ID`` after a restart) share one read
of each page and its text (:meth:`ChangeHub.page`).

Each event: ``id`` its cursor, ``event: change``, ``data`` the change as JSON. A
comment line (``: keep-alive``) goes out after :attr:`ChangeHub.heartbeat_seconds`
without an event, so proxies keep the connection open.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NamedTuple

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Match, Route
from starlette.types import Scope

from ..errors import AgentSessionError
from ..models import AuditEvent, Change
from ..observe import note
from ..principal import Principal
from ..service import AsyncSessionManager
from ..service.feed import FeedQuery, feed_query
from .deps import _bearer, authenticate, dump, services
from .guards import is_event_stream
from .problems import Overloaded

__all__ = ["ChangeHub", "EventStreamRoute", "event_stream_routes", "open_stream"]

#: A catch-up page's key: the query's users and session, and the cursor it reads after.
PageKey = tuple[tuple[str, ...] | None, str | None, str | None]

logger = logging.getLogger(__name__)

#: Events per store read, the hub's and a subscriber's own.
PAGE = 500
#: Catch-up pages the hub keeps for other subscribers asking for the same one.
PAGES_KEPT = 16


class Held(NamedTuple):
    """A change in the hub's ring: its cursor (and :func:`cursor_key`), its event and
    its event-stream text, each made once for every subscriber."""

    cursor: str
    key: tuple[int, ...]
    event: AuditEvent
    text: str


class CatchUp(NamedTuple):
    """A page of a catch-up read: each change's cursor, :func:`cursor_key` and text,
    and where to read on."""

    held: list[tuple[str, tuple[int, ...], str]]
    next_cursor: str | None
    has_more: bool


def cursor_key(cursor: str) -> tuple[int, ...]:
    """The order of a store's cursors: a seq (``"42"``), or a Redis stream id
    (``"1700000000000-3"``), as integers."""
    return tuple(int(part) for part in cursor.split("-"))


class ChangeHub:
    """The poll loop of one worker, shared by its subscribers (see the module
    docstring). It runs while anyone subscribes.

    Args:
        manager: the app's manager.
        ring: how many of the newest changes it keeps for subscribers.
        poll_seconds: the pause between two reads that found nothing.
        heartbeat_seconds: the longest silence on a stream before a keep-alive comment.
        max_streams: the most streams at once (a stream does not count among the
            worker's requests in flight); one more is refused with 503.
        wake_batch: how many waiting subscribers run in one turn of the event loop
            after a read that brought changes.
    """

    def __init__(
        self,
        manager: AsyncSessionManager,
        *,
        ring: int = 4096,
        poll_seconds: float = 0.1,
        heartbeat_seconds: float = 15.0,
        max_streams: int = 1000,
        wake_batch: int = 10,
    ) -> None:
        self.manager = manager
        self.max_streams = max_streams
        self.poll_seconds = poll_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.wake_batch = wake_batch
        self.polls = 0  # store reads made, for tests and metrics
        self._ring: deque[Held] = deque(maxlen=ring)
        self._count = 0  # changes ever put in the ring: a subscriber's mark
        self._cursor: str | None = None
        self._subscribers = 0
        self._task: asyncio.Task[None] | None = None
        self._started: asyncio.Event | None = None
        self._waiters: list[asyncio.Future[bool]] = []
        # (query, after) -> (the ring's mark when the read began, the read)
        self._pages: dict[PageKey, tuple[int, asyncio.Future[CatchUp]]] = {}

    async def join(self) -> int:
        """Count a subscriber in, start the loop if need be, and return the mark of
        the ring's end: the changes after it reach the subscriber from the ring."""
        self._subscribers += 1
        note("feed_subscribers", 1)
        if self._task is None:
            self._started = asyncio.Event()
            self._task = asyncio.create_task(self._run(self._started))
        assert self._started is not None
        await self._started.wait()
        return self.mark()

    def full(self) -> bool:
        """Whether it already serves ``max_streams`` streams."""
        return self._subscribers >= self.max_streams

    def leave(self) -> None:
        """Count a subscriber out; the loop ends after its next read if none is left."""
        self._subscribers -= 1
        note("feed_subscribers", -1)

    def mark(self) -> int:
        """The ring's end: how many changes it was ever given."""
        return self._count

    def since(self, mark: int) -> tuple[list[Held], int] | None:
        """The ring's changes after ``mark`` and the new mark; None when the ring no
        longer holds all of them (the subscriber must catch up by itself). Costs the
        changes returned, not the ring's length: every subscriber asks after each read."""
        behind = self._count - mark
        if behind > len(self._ring):
            return None
        newest = list(itertools.islice(reversed(self._ring), behind))
        newest.reverse()
        return newest, self._count

    async def wait(self, seconds: float) -> bool:
        """Wait for the next change in the ring, at most ``seconds``; True if one came.
        (A timer and a future, not ``asyncio.wait_for``: no task per wait.)"""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(seconds, _settle, waiter, False)
        try:
            return await waiter
        finally:
            timer.cancel()
            # Timed out or cancelled (rare): still listed, unless a wake took the list.
            if waiter.cancelled() or not waiter.result():
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)

    async def page(
        self, query: FeedQuery, after: str | None, mark: int, read: Callable[[], Awaitable[Any]]
    ) -> CatchUp:
        """The catch-up page of ``query`` after ``after`` for a subscriber following
        the ring from ``mark``: a read another subscriber began at or after ``mark``
        (it holds every change the ring had by then, so nothing falls between the page
        and the ring), else a new one, ``read()`` (a ``ChangePage``). The newest
        :data:`PAGES_KEPT` reads are kept; a failed one is not.

        Raises:
            What ``read`` raises.
        """
        users = None if query.user_ids is None else tuple(query.user_ids)
        key = (users, query.session_id, after)
        found = self._pages.get(key)
        if found is None or found[0] < mark:
            task = asyncio.ensure_future(_render_page(read))
            found = self._pages[key] = (self._count, task)
            task.add_done_callback(functools.partial(self._forget_failed, key, task))
            while len(self._pages) > PAGES_KEPT:
                del self._pages[next(iter(self._pages))]  # the oldest
        # Shielded: one subscriber leaving does not cancel the others' read.
        return await asyncio.shield(found[1])

    def _forget_failed(self, key: PageKey, task: asyncio.Future[CatchUp], _: object) -> None:
        failed = task.cancelled() or task.exception() is not None
        if failed and self._pages.get(key, (0, None))[1] is task:
            del self._pages[key]

    async def _wake(self) -> None:
        """Wake every waiting subscriber, :attr:`wake_batch` per turn of the loop.
        Those woken wait again on a new list, so none is woken twice or missed."""
        waiters, self._waiters = self._waiters, []
        for start in range(0, len(waiters), self.wake_batch):
            if start:
                await asyncio.sleep(0)  # the loop's other work runs between batches
            for waiter in waiters[start : start + self.wake_batch]:
                _settle(waiter, True)

    async def _run(self, started: asyncio.Event) -> None:
        """Find the feed's tail, then read on from it while anyone subscribes; a store
        failure is logged and the read tried again a second later."""
        store = self.manager.manager.store
        while self._subscribers > 0:
            try:
                if not started.is_set():
                    self._cursor = await asyncio.to_thread(store.change_tail)
                    started.set()
                read = await asyncio.to_thread(
                    store.read_changes,
                    after=self._cursor,
                    user_ids=None,
                    session_id=None,
                    limit=PAGE,
                )
            except AgentSessionError as exc:
                logger.warning("the change feed's poll failed, retrying: %s", exc)
                await asyncio.sleep(1.0)
                continue
            self.polls += 1
            self._cursor = read.resume or self._cursor
            if read.changes:
                # Each event's text is made once here, not once per subscriber.
                self._ring.extend(Held(c, cursor_key(c), e, _event(c, e)) for c, e in read.changes)
                self._count += len(read.changes)
                await self._wake()
            if not read.more:
                await asyncio.sleep(self.poll_seconds)
        # No await between the check above and here: a subscriber that joins now
        # finds no task and starts one.
        self._task = None
        started.set()


def _settle(waiter: asyncio.Future[bool], came: bool) -> None:
    if not waiter.done():
        waiter.set_result(came)


async def _render_page(read: Callable[[], Awaitable[Any]]) -> CatchUp:
    page = await read()
    held = [(c.cursor, cursor_key(c.cursor), _event(c.cursor, c)) for c in page.items]
    return CatchUp(held, page.next_cursor, page.has_more)


def hub_of(request: Request) -> ChangeHub:
    """The app's hub, made on first use."""
    hub: ChangeHub | None = getattr(request.app.state, "change_hub", None)
    if hub is None:
        hub = request.app.state.change_hub = ChangeHub(services(request).manager)
    return hub


def _event(cursor: str, event: AuditEvent) -> str:
    """The Server-Sent Event of one change: ``id`` its cursor, ``data`` the change."""
    change = event if isinstance(event, Change) else Change(**dict(event), cursor=cursor)
    data = json.dumps(dump(change), separators=(",", ":"), ensure_ascii=False)
    return f"id: {cursor}\nevent: change\ndata: {data}\n\n"


class _Subscriber:
    """One stream: its caller, query and cursor."""

    def __init__(
        self,
        hub: ChangeHub,
        principal: Principal,
        query: FeedQuery,
        arguments: dict[str, Any],
        cursor: str | None,
    ) -> None:
        self.hub, self.principal, self.query = hub, principal, query
        self.arguments, self.cursor = arguments, cursor
        self.sent: tuple[int, ...] | None = None if cursor is None else cursor_key(cursor)

    async def events(self) -> AsyncIterator[str]:
        """The stream's text: catch up, then follow the hub."""
        mark = await self.hub.join()
        try:
            yield "retry: 2000\n\n"
            while True:
                async for text in self._catch_up(mark):
                    yield text
                while (found := self.hub.since(mark)) is not None:
                    changes, mark = found
                    # One write for all a read brought: a send costs the worker's loop
                    # far more than the text, and every subscriber makes one per read.
                    texts = [
                        self._send(held.cursor, held.key, held.text)
                        for held in changes
                        if self.query.selects(held.event) and self._new(held.key)
                    ]
                    if texts:
                        yield "".join(texts)
                    if not changes and not await self.hub.wait(self.hub.heartbeat_seconds):
                        yield ": keep-alive\n\n"
                mark = self.hub.mark()  # fell behind the ring: catch up by itself
        finally:
            self.hub.leave()

    async def _catch_up(self, mark: int) -> AsyncIterator[str]:
        """Read from the cursor to the feed's end, for a subscriber that then follows
        the ring from ``mark``."""
        manager = self.hub.manager
        while True:
            after = self.cursor
            page = await self.hub.page(
                self.query,
                after,
                mark,
                functools.partial(manager.changes, after=after, limit=PAGE, **self.arguments),
            )
            texts = [self._send(c, key, text) for c, key, text in page.held if self._new(key)]
            if texts:
                yield "".join(texts)
            self.cursor = page.next_cursor
            if not page.has_more:
                return

    def _new(self, key: tuple[int, ...]) -> bool:
        return self.sent is None or key > self.sent

    def _send(self, cursor: str, key: tuple[int, ...], text: str) -> str:
        self.sent, self.cursor = key, cursor
        return text


async def stream_changes(request: Request) -> Response:
    """``GET /v1/changes`` or ``GET /v1/sessions/{session_id}/changes`` as Server-Sent
    Events (see the module docstring). Query: ``after`` (a cursor; ``Last-Event-ID``
    wins), ``all_users`` (an admin's). Problems before the stream starts are the JSON
    route's: 401, 403 (``all_users``), 404 (another user's session), 422 (a bad cursor).
    """
    principal = await authenticate(request, await _bearer(request))
    all_users = request.query_params.get("all_users", "false").lower() in ("true", "1")
    return await open_stream(
        request,
        principal,
        session_id=request.path_params.get("session_id"),
        all_users=all_users,
        cursor=request.headers.get("last-event-id") or request.query_params.get("after"),
    )


async def open_stream(
    request: Request,
    principal: Principal,
    *,
    session_id: str | None,
    all_users: bool = False,
    cursor: str | None,
) -> StreamingResponse:
    """The event stream of ``principal``'s changes after ``cursor`` (None: from the
    oldest kept), of one session or all it may read, served from the app's hub: the
    API's streams and the inspector's live tail alike.

    Raises:
        Overloaded: the hub serves ``max_streams`` already (503).
        ValidationError, Forbidden, SessionNotFound: as ``changes`` (checked before the
            stream starts).
    """
    arguments: dict[str, Any] = {
        "user_id": principal.user_id,
        "admin": principal.admin,
        "session_id": session_id,
        "all_users": all_users,
    }
    hub = hub_of(request)
    if hub.full():
        raise Overloaded(hub.max_streams)
    manager = hub.manager
    # Checks the caller, the session and the cursor before the stream starts.
    await manager.changes(after=cursor, limit=1, **arguments)
    query = await asyncio.to_thread(feed_query, manager.manager, **arguments)
    subscriber = _Subscriber(hub, principal, query, arguments, cursor)
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(subscriber.events(), media_type="text/event-stream", headers=headers)


class EventStreamRoute(Route):
    """A GET route that matches only a request that accepts ``text/event-stream``;
    others fall through to the JSON route of the same path (built from the table)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is Match.NONE or is_event_stream(scope):
            return match, child
        return Match.NONE, {}


def event_stream_routes() -> list[Route]:
    """The two streams, to be tried before every other route."""
    return [
        EventStreamRoute(path, stream_changes, methods=["GET"])
        for path in ("/v1/changes", "/v1/sessions/{session_id}/changes")
    ]
