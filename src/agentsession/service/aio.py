"""AsyncSessionManager: the SessionManager for asyncio code.

Every method has the same name, arguments and result as on :class:`SessionManager`
and runs the synchronous method in a worker thread of the manager's own pool, so store
I/O never blocks the event loop and the rules exist once, in SessionManager. The worker
runs in a copy of the caller's context (as ``asyncio.to_thread`` does), so
:func:`~.context.request_id_context` and :func:`~.context.write_report` reach it.

The pool is the manager's own, not the loop's default executor (``min(32, cores + 4)``
threads: 6 on 2 cores): as many concurrent calls as it has threads are in the store at
once, and on SQLite that many concurrent writes can share one commit (group commit).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

from ..feedwatch import check_poll_interval, follow_async
from ..models import Change
from ..observe import note
from .manager import SessionManager

__all__ = ["AsyncSessionManager"]

P = ParamSpec("P")
R = TypeVar("R")


def _mirror(
    sync: Callable[Concatenate[SessionManager, P], R],
) -> Callable[Concatenate[AsyncSessionManager, P], Coroutine[Any, Any, R]]:
    """An async method that runs ``sync`` on ``self.manager`` in a worker thread, with
    the same signature and docstring."""
    name = sync.__name__

    @functools.wraps(sync)
    async def method(self: AsyncSessionManager, /, *args: P.args, **kwargs: P.kwargs) -> R:
        bound: Callable[P, R] = getattr(self.manager, name)
        started = time.perf_counter()
        try:
            return await self._in_thread(functools.partial(bound, *args, **kwargs))
        finally:
            note("store_call_seconds", time.perf_counter() - started, name)

    return method


class AsyncSessionManager:
    """Async facade over a :class:`SessionManager` (see the module docstring).

    Args:
        manager: the synchronous manager to delegate to.
        max_threads: most calls running at once (threads, started as needed); more
            wait their turn. 64 by default.
    """

    def __init__(self, manager: SessionManager, *, max_threads: int = 64) -> None:
        self.manager = manager
        self._max_threads = max_threads
        self._pool: ThreadPoolExecutor | None = None

    @classmethod
    def from_url(cls, url: str, *, max_threads: int = 64, **options: Any) -> Self:
        """Open a store by URL, as :meth:`SessionManager.from_url` does."""
        return cls(SessionManager.from_url(url, **options), max_threads=max_threads)

    async def _in_thread(self, call: Callable[[], R]) -> R:
        pool = self._pool
        if pool is None:
            pool = self._pool = ThreadPoolExecutor(
                self._max_threads, thread_name_prefix="agentsession-async"
            )
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(pool, context.run, call)

    def stop_threads(self) -> None:
        """Let the worker threads end once idle (calls running now finish); the manager
        stays open, and a later call starts threads again."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)

    async def close(self) -> None:
        """Close the underlying manager (and its store, if it opened it), then stop the
        threads."""
        await self._in_thread(self.manager.close)
        self.stop_threads()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    create_session = _mirror(SessionManager.create_session)
    get_session = _mirror(SessionManager.get_session)
    get_session_by_key = _mirror(SessionManager.get_session_by_key)
    open_session = _mirror(SessionManager.open_session)
    fork_session = _mirror(SessionManager.fork_session)
    list_sessions = _mirror(SessionManager.list_sessions)
    count_sessions = _mirror(SessionManager.count_sessions)
    search = _mirror(SessionManager.search)
    update_session = _mirror(SessionManager.update_session)
    append_message = _mirror(SessionManager.append_message)
    append_messages = _mirror(SessionManager.append_messages)
    get_messages = _mirror(SessionManager.get_messages)
    replace_messages = _mirror(SessionManager.replace_messages)
    truncate_messages = _mirror(SessionManager.truncate_messages)
    pop_message = _mirror(SessionManager.pop_message)
    rewind_session = _mirror(SessionManager.rewind_session)
    list_rewinds = _mirror(SessionManager.list_rewinds)
    get_rewound_messages = _mirror(SessionManager.get_rewound_messages)
    put_records = _mirror(SessionManager.put_records)
    get_record = _mirror(SessionManager.get_record)
    list_records = _mirror(SessionManager.list_records)
    delete_records = _mirror(SessionManager.delete_records)
    add_summary = _mirror(SessionManager.add_summary)
    list_summaries = _mirror(SessionManager.list_summaries)
    build_context = _mirror(SessionManager.build_context)
    get_working_memory = _mirror(SessionManager.get_working_memory)
    list_memory_versions = _mirror(SessionManager.list_memory_versions)
    update_working_memory = _mirror(SessionManager.update_working_memory)
    modify_working_memory = _mirror(SessionManager.modify_working_memory)
    get_shared_memory = _mirror(SessionManager.get_shared_memory)
    update_shared_memory = _mirror(SessionManager.update_shared_memory)
    delete_shared_memory = _mirror(SessionManager.delete_shared_memory)
    shared_memory_audit_id = _mirror(SessionManager.shared_memory_audit_id)
    record_tool_call = _mirror(SessionManager.record_tool_call)
    get_tool_history = _mirror(SessionManager.get_tool_history)
    find_tool_call = _mirror(SessionManager.find_tool_call)
    start_run = _mirror(SessionManager.start_run)
    heartbeat_run = _mirror(SessionManager.heartbeat_run)
    add_run_step = _mirror(SessionManager.add_run_step)
    finish_run = _mirror(SessionManager.finish_run)
    get_run = _mirror(SessionManager.get_run)
    list_runs = _mirror(SessionManager.list_runs)
    list_run_steps = _mirror(SessionManager.list_run_steps)
    get_usage = _mirror(SessionManager.get_usage)
    get_budget = _mirror(SessionManager.get_budget)
    set_budget = _mirror(SessionManager.set_budget)
    clear_budget = _mirror(SessionManager.clear_budget)
    close_session = _mirror(SessionManager.close_session)
    expire_session = _mirror(SessionManager.expire_session)
    restore_session = _mirror(SessionManager.restore_session)
    sweep_expired = _mirror(SessionManager.sweep_expired)
    delete_session = _mirror(SessionManager.delete_session)
    delete_user_data = _mirror(SessionManager.delete_user_data)
    erase_user = _mirror(SessionManager.erase_user)
    get_audit_log = _mirror(SessionManager.get_audit_log)
    changes = _mirror(SessionManager.changes)

    async def watch(
        self,
        *,
        user_id: str,
        after: str | None = None,
        session_id: str | None = None,
        all_users: bool = False,
        admin: bool = False,
        timeout: float | None = None,
        poll_interval: float = 1.0,
        stop: asyncio.Event | None = None,
    ) -> AsyncIterator[Change]:
        """Follow the change feed, as :meth:`SessionManager.watch` does, waiting on the
        event loop (no thread is held between reads); ``stop`` is an
        :class:`asyncio.Event`.

        Raises:
            As :meth:`SessionManager.changes`; ValidationError: ``poll_interval`` not > 0.
        """
        check_poll_interval(poll_interval)
        read = functools.partial(
            self.changes, user_id=user_id, session_id=session_id, all_users=all_users, admin=admin
        )
        await read(limit=0)  # the caller and the session, checked before the first wait
        async for change in follow_async(
            lambda cursor: read(after=cursor),
            after=after,
            timeout=timeout,
            poll_interval=poll_interval,
            stop=stop,
        ):
            yield change
