"""The backend layer the framework adapters share: :class:`KeyedSession`, and
:class:`RecordBatch` for writing many session records in requests a server takes.

A framework names its sessions by its own string id; an adapter files each as the
session with that external key under ``(user_id, agent)``. :class:`KeyedSession` binds
that key to a backend (a manager or the HTTP client, sync or async, seen through one
async interface, :class:`AsyncBackend`) and finds, creates and re-finds the session
behind it, so an adapter only maps its framework's objects onto messages.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from ..client import AsyncSessionClient, SessionClient
from ..errors import SessionNotFound
from ..models import Message, Page, RecordWrite, Session
from ..service import AsyncSessionManager, Limits, SessionManager

__all__ = [
    "AsyncBackend",
    "Backend",
    "KeyedSession",
    "RecordBatch",
    "SyncBackend",
    "ThreadedClient",
    "sync_backend",
]

T = TypeVar("T")

#: What an adapter accepts as its ``backend``.
Backend = SessionManager | AsyncSessionManager | SessionClient | AsyncSessionClient
#: The synchronous API a sync-first adapter (the LangGraph saver) calls.
SyncBackend = SessionManager | SessionClient


def sync_backend(backend: Backend) -> SyncBackend:
    """The synchronous API behind ``backend``: a SessionManager or SessionClient as it
    is, an AsyncSessionManager's own SessionManager (the same store and rules).

    Raises:
        TypeError: an AsyncSessionClient (its connections belong to the caller's event
            loop, which a blocking call cannot drive; use a SessionClient), or anything
            else.
    """
    if isinstance(backend, SessionManager | SessionClient):
        return backend
    if isinstance(backend, AsyncSessionManager):
        return backend.manager
    if isinstance(backend, AsyncSessionClient):
        raise TypeError(
            "this adapter makes blocking calls: give it a SessionClient, not an AsyncSessionClient"
        )
    raise TypeError(
        "backend must be a SessionManager, AsyncSessionManager or SessionClient, not "
        f"{type(backend).__name__}"
    )


class AsyncBackend(Protocol):
    """The calls the adapters make: the async API of a manager or of the HTTP client."""

    async def open_session(
        self,
        *,
        user_id: str,
        agent: str,
        external_key: str,
        title: str | None = None,
        ttl_seconds: float | None = None,
    ) -> tuple[Session, bool]: ...

    async def get_session_by_key(
        self, *, user_id: str, agent: str, external_key: str
    ) -> Session: ...

    async def append_messages(
        self, *, session_id: str, user_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> list[Message]: ...

    async def get_messages(
        self,
        *,
        session_id: str,
        user_id: str,
        limit: int | None = None,
        cursor: str | None = None,
        align_tool_calls: bool = True,
    ) -> Page[Message]: ...

    async def pop_message(self, *, session_id: str, user_id: str) -> Message | None: ...

    async def replace_messages(
        self,
        *,
        session_id: str,
        user_id: str,
        after_seq: int,
        messages: Sequence[Mapping[str, Any]],
    ) -> list[Message]: ...

    async def truncate_messages(
        self, *, session_id: str, user_id: str, after_seq: int
    ) -> object: ...

    async def record_tool_call(
        self,
        *,
        session_id: str,
        user_id: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        result: Any = None,
        started_at: datetime | None = None,
        ended_at: datetime | None = None,
        provider_call_id: str | None = None,
    ) -> object: ...


class ThreadedClient:
    """A :class:`SessionClient` as an :class:`AsyncBackend`: each blocking HTTP call
    runs in a worker thread (``asyncio.to_thread``), never on the event loop."""

    def __init__(self, client: SessionClient) -> None:
        self._client = client

    async def _run(self, call: Callable[..., T], kwargs: dict[str, Any]) -> T:
        return await asyncio.to_thread(functools.partial(call, **kwargs))

    async def open_session(self, **kwargs: Any) -> tuple[Session, bool]:
        return await self._run(self._client.open_session, kwargs)

    async def get_session_by_key(self, **kwargs: Any) -> Session:
        return await self._run(self._client.get_session_by_key, kwargs)

    async def append_messages(self, **kwargs: Any) -> list[Message]:
        return await self._run(self._client.append_messages, kwargs)

    async def get_messages(self, **kwargs: Any) -> Page[Message]:
        return await self._run(self._client.get_messages, kwargs)

    async def pop_message(self, **kwargs: Any) -> Message | None:
        return await self._run(self._client.pop_message, kwargs)

    async def replace_messages(self, **kwargs: Any) -> list[Message]:
        return await self._run(self._client.replace_messages, kwargs)

    async def truncate_messages(self, **kwargs: Any) -> object:
        return await self._run(self._client.truncate_messages, kwargs)

    async def record_tool_call(self, **kwargs: Any) -> object:
        return await self._run(self._client.record_tool_call, kwargs)


class KeyedSession:
    """The session keyed ``external_key`` under ``(user_id, agent)`` on a backend.

    Nothing is created until a call with ``create=True``; until then the session may
    not exist, and reads answer like an empty session.

    Args:
        backend: an AsyncSessionManager (share one per process), a SessionManager
            (wrapped into an AsyncSessionManager of this object's own, with its own
            worker threads; :meth:`close` lets them go), a SessionClient (its calls run
            in worker threads) or an AsyncSessionClient. The caller owns it.
        user_id: the owner of the session (with a client: the API key's user).
        agent: the agent name the session is filed under.
        external_key: the framework's session id (any string; the store checks it).
        title, ttl_seconds: given to the session when a ``create=True`` call creates it.
        limits: the backend's :class:`~agentsession.Limits`. A manager's own by
            default; the server defaults for a client.

    Raises:
        TypeError: ``backend`` is none of the four.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        user_id: str,
        agent: str,
        external_key: str,
        title: str | None = None,
        ttl_seconds: float | None = None,
        limits: Limits | None = None,
    ) -> None:
        if not isinstance(backend, Backend):
            raise TypeError(
                "backend must be a SessionManager, AsyncSessionManager, SessionClient or "
                f"AsyncSessionClient, not {type(backend).__name__}"
            )
        self.user_id, self.agent, self.external_key = user_id, agent, external_key
        self._title, self._ttl_seconds = title, ttl_seconds
        self._owned: AsyncSessionManager | None = None
        if isinstance(backend, SessionManager):
            backend = self._owned = AsyncSessionManager(backend)
        #: The backend's async calls, for the adapter's own ``op`` functions.
        self.backend: AsyncBackend = (
            ThreadedClient(backend) if isinstance(backend, SessionClient) else backend
        )
        if limits is None:
            limits = (
                backend.manager.limits if isinstance(backend, AsyncSessionManager) else Limits()
            )
        self.limits = limits
        self._sid: str | None = None  # our session id once known

    async def with_session(
        self, op: Callable[[str], Awaitable[T]], *, create: bool = False
    ) -> T | None:
        """``op(session id)``, or None when the session does not exist and ``create`` is
        False. The id is remembered; if its session is gone (deleted, maybe created
        again under the same key elsewhere), the key is looked up once more.

        Raises:
            Whatever ``op`` raises; ValidationError for an external key the store
            refuses (on creation); SessionNotFound when ``create`` is True and the
            session just opened is gone again.
        """
        while True:
            known = self._sid
            sid = known if known is not None else await self._lookup(create=create)
            if sid is None:
                return None
            try:
                return await op(sid)
            except SessionNotFound:
                self._sid = None
                if known is None:
                    if create:
                        raise
                    return None

    async def newest(self, count: int | None) -> list[Message]:
        """The newest ``count`` messages (all if None), oldest first; ``[]`` when the
        session does not exist. Pages of at most ``limits.max_page_size`` are walked
        backwards, never widened to tool-call groups."""
        found = await self.with_session(functools.partial(self._newest, count=count))
        return found or []

    def close(self) -> None:
        """Let go of the worker threads started around a sync manager. The backend
        stays open: its caller owns it. This object stays usable."""
        if self._owned is not None:
            self._owned.stop_threads()

    async def _lookup(self, *, create: bool) -> str | None:
        """Our id of the keyed session, opened if ``create``; None if there is none and
        ``create`` is False."""
        key = {"user_id": self.user_id, "agent": self.agent, "external_key": self.external_key}
        if create:
            session, _ = await self.backend.open_session(
                **key, title=self._title, ttl_seconds=self._ttl_seconds
            )
        else:
            try:
                session = await self.backend.get_session_by_key(**key)
            except SessionNotFound:
                return None
        self._sid = session.session_id
        return self._sid

    async def _newest(self, sid: str, *, count: int | None) -> list[Message]:
        newest_first: list[list[Message]] = []
        cursor: str | None = None
        left = count
        while left is None or left > 0:
            size = (
                self.limits.max_page_size if left is None else min(left, self.limits.max_page_size)
            )
            page = await self.backend.get_messages(
                session_id=sid,
                user_id=self.user_id,
                limit=size,
                cursor=cursor,
                align_tool_calls=False,
            )
            newest_first.append(page.items)
            if left is not None:
                left -= len(page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
        return [m for page_items in reversed(newest_first) for m in page_items]


class RecordBatch:
    """Records waiting to be written together: at most ``limits.max_batch_messages`` of
    them and, unless one record alone, at most ``limits.max_record_bytes`` of data, so
    every ``put_records`` call fits the store's batch limit and, over HTTP, the server's
    body limit (one record's data in base64 plus room for the rest).

    Args:
        write: writes one batch (a ``put_records`` call) and answers how many records
            it wrote.
        limits: the backend's limits.
    """

    def __init__(self, write: Callable[[list[RecordWrite]], int], limits: Limits) -> None:
        self._write, self._limits = write, limits
        self._records: list[RecordWrite] = []
        self._bytes = 0
        #: Records written so far, as ``write`` counted them.
        self.written = 0

    def add(self, record: RecordWrite) -> None:
        """Queue ``record``, writing the queue first when ``record`` would overfill it.

        Raises:
            AgentSessionError: as ``write`` raises.
        """
        if len(self._records) >= self._limits.max_batch_messages or (
            self._records and self._bytes + len(record.data) > self._limits.max_record_bytes
        ):
            self.flush()
        self._records.append(record)
        self._bytes += len(record.data)

    def flush(self) -> None:
        """Write the queue, if anything is queued.

        Raises:
            AgentSessionError: as ``write`` raises.
        """
        if self._records:
            self.written += self._write(self._records)
            self._records, self._bytes = [], 0
