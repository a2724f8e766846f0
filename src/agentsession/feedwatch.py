"""Following the change feed: the wait loop that ``watch`` of the managers and of both
clients share (no store, no HTTP: each passes the read of one page).

It reads pages while there are any; once caught up it waits :data:`FIRST_PAUSE`
seconds, doubling each empty read up to ``poll_interval``, and starts again from the
first pause when something came. It ends at ``timeout`` or when ``stop`` is set (which
also cuts a wait short). The caller resumes later from the ``cursor`` of the last change
it got.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

from .errors import ValidationError
from .models import Change, ChangePage

__all__ = ["FIRST_PAUSE", "check_poll_interval", "follow", "follow_async"]

#: The first wait once caught up, in seconds.
FIRST_PAUSE = 0.02


def check_poll_interval(poll_interval: float) -> None:
    """Raises ValidationError unless ``poll_interval`` (seconds) is > 0."""
    if not poll_interval > 0:
        raise ValidationError("poll_interval must be > 0 seconds", field="poll_interval")


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def _next_wait(ends: float | None, pause: float) -> float | None:
    """How long to wait now; None when the deadline has passed."""
    if ends is None:
        return pause
    left = ends - time.monotonic()
    return None if left <= 0 else min(pause, left)


def follow(
    read: Callable[[str | None], ChangePage],
    *,
    after: str | None,
    timeout: float | None,
    poll_interval: float,
    stop: threading.Event | None,
) -> Iterator[Change]:
    """Yield each change after ``after``, reading pages with ``read(cursor)`` (see the
    module docstring)."""
    ends, wake = _deadline(timeout), stop if stop is not None else threading.Event()
    cursor, pause = after, FIRST_PAUSE
    while not wake.is_set():
        page = read(cursor)
        yield from page.items
        cursor = page.next_cursor
        if page.items or page.has_more:
            pause = FIRST_PAUSE
            continue
        wait = _next_wait(ends, pause)
        if wait is None:
            return
        wake.wait(wait)
        pause = min(2 * pause, poll_interval)


async def follow_async(
    read: Callable[[str | None], Awaitable[ChangePage]],
    *,
    after: str | None,
    timeout: float | None,
    poll_interval: float,
    stop: asyncio.Event | None,
) -> AsyncIterator[Change]:
    """:func:`follow` on the event loop: ``read`` is a coroutine function, ``stop`` an
    :class:`asyncio.Event`."""
    ends, wake = _deadline(timeout), stop if stop is not None else asyncio.Event()
    cursor, pause = after, FIRST_PAUSE
    while not wake.is_set():
        page = await read(cursor)
        for change in page.items:
            yield change
        cursor = page.next_cursor
        if page.items or page.has_more:
            pause = FIRST_PAUSE
            continue
        wait = _next_wait(ends, pause)
        if wait is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), wait)
        pause = min(2 * pause, poll_interval)
