"""AsyncSessionManager: the SessionManager for asyncio code.

Every method has the same name, arguments and result as on :class:`SessionManager`
and runs the synchronous method in a worker thread (``asyncio.to_thread``), so store I/O
never blocks the event loop and the rules exist once, in SessionManager.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from .manager import SessionManager

__all__ = ["AsyncSessionManager"]

#: The SessionManager methods mirrored here; a test checks none is missing.
ASYNC_METHODS = (
    "create_session",
    "get_session",
    "list_sessions",
    "update_session",
    "append_message",
    "append_messages",
    "get_messages",
    "get_working_memory",
    "update_working_memory",
    "modify_working_memory",
    "record_tool_call",
    "get_tool_history",
    "find_tool_call",
    "start_run",
    "add_run_step",
    "finish_run",
    "get_run",
    "list_runs",
    "close_session",
    "expire_session",
    "restore_session",
    "sweep_expired",
    "delete_session",
    "delete_user_data",
    "get_audit_log",
)


class AsyncSessionManager:
    """Async facade over a :class:`SessionManager` (see the module docstring).

    Args:
        manager: the synchronous manager to delegate to.
    """

    def __init__(self, manager: SessionManager) -> None:
        self.manager = manager

    @classmethod
    def from_url(cls, url: str, **options: Any) -> AsyncSessionManager:
        """Open a store by URL, as :meth:`SessionManager.from_url` does."""
        return cls(SessionManager.from_url(url, **options))

    async def close(self) -> None:
        """Close the underlying manager (and its store, if it opened it)."""
        await asyncio.to_thread(self.manager.close)

    async def __aenter__(self) -> AsyncSessionManager:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def _mirror(name: str) -> Callable[..., Any]:
    sync = getattr(SessionManager, name)

    @functools.wraps(sync)
    async def method(self: AsyncSessionManager, **kwargs: Any) -> Any:
        return await asyncio.to_thread(functools.partial(getattr(self.manager, name), **kwargs))

    return method


for _name in ASYNC_METHODS:
    setattr(AsyncSessionManager, _name, _mirror(_name))
del _name
