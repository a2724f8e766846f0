"""Heartbeat: keeps one run's lease alive from a background thread while the engine
works, so a long model or tool call does not let the lease lapse.

The thread beats every ``interval`` seconds until :meth:`Heartbeat.stop`; the engine
stops it when the run ends (finished, failed or aborted), and ``stop`` joins it, so it
never outlives its run. It is a daemon thread as well: an engine killed without
stopping it does not keep the process alive. A beat the store refuses for good (the run
is no longer RUNNING: its lease lapsed or a restore took it over) ends the thread and
is kept in :attr:`Heartbeat.error`; the engine's next write tagged with the run gets the
same refusal. A failure that may pass (the store busy, the network) is logged, and the
next beat tries again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..errors import AgentSessionError, RunNotFound, RunNotRunning, SessionNotActive

__all__ = ["Heartbeat"]

logger = logging.getLogger(__name__)

#: Refusals no later beat can change: the thread stops at the first.
_FINAL = (RunNotRunning, RunNotFound, SessionNotActive)


class Heartbeat:
    """Calls ``beat()`` every ``interval`` seconds in a daemon thread, from
    :meth:`start` until :meth:`stop`.

    Args:
        beat: one heartbeat (e.g. ``manager.heartbeat_run(...)``); its answer is ignored.
        interval: seconds between beats (> 0), a fraction of the lease so that a beat
            or two may fail before it lapses.
        name: the thread's name.

    Raises:
        ValueError: ``interval`` is not positive.
    """

    def __init__(self, beat: Callable[[], object], interval: float, *, name: str) -> None:
        if not interval > 0:
            raise ValueError("interval must be positive")
        self._beat = beat
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        #: The refusal that ended the thread early (None: none).
        self.error: AgentSessionError | None = None

    def start(self) -> Heartbeat:
        """Start the thread; return self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop beating and wait for the thread to end (a beat in flight finishes
        first). Idempotent; safe before :meth:`start`."""
        self._stopped.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    @property
    def alive(self) -> bool:
        """Whether the thread is running."""
        return self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self._beat()
            except _FINAL as exc:
                self.error = exc
                return
            except Exception:  # transient (busy store, network): the next beat retries
                logger.warning("heartbeat failed; retrying", exc_info=True)
