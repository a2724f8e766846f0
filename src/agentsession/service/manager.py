"""SessionManager: every use case of the store, over one storage adapter.

Callers (the agent engine, the CLI, the HTTP service) never touch a store. Each use-case
module contributes one area (sessions, messages, working memory, tool calls, runs,
shared memory, lifecycle, erasure and audit); every mutation goes through the write pipeline
(:mod:`.pipeline`), every read through the read path (:mod:`.reads`).
"""

from __future__ import annotations

from .contextbuild import ContextUseCases
from .erasure import ErasureUseCases
from .feed import ChangeFeedUseCases
from .forks import ForkUseCases
from .lifecycle import LifecycleUseCases
from .memory import MemoryUseCases
from .messages import MessageUseCases
from .records import RecordUseCases
from .removal import RemovalUseCases
from .rewind import RewindUseCases
from .runs import RunUseCases
from .search import SearchUseCases
from .sessions import SessionUseCases
from .shared import SharedMemoryUseCases
from .summaries import SummaryUseCases
from .tools import ToolCallUseCases
from .usage import UsageUseCases

__all__ = ["SessionManager"]


class SessionManager(
    SessionUseCases,
    SearchUseCases,
    ForkUseCases,
    MessageUseCases,
    RemovalUseCases,
    RewindUseCases,
    RecordUseCases,
    SummaryUseCases,
    ContextUseCases,
    MemoryUseCases,
    SharedMemoryUseCases,
    ToolCallUseCases,
    RunUseCases,
    UsageUseCases,
    LifecycleUseCases,
    ErasureUseCases,
    ChangeFeedUseCases,
):
    """Creates, continues, closes, restores, expires and deletes agent sessions.

    Args:
        store: the storage adapter (``MemoryStore``, ``SQLStore``...). The manager
            closes it in :meth:`close` only if it opened it (see :meth:`from_url`).
        clock: returns the current time as an aware UTC datetime; tests pass a frozen one.
        limits: payload size limits (bytes).
        policy: lifecycle and retry policy.

    Every method takes keyword arguments only. ``user_id`` names the caller, the
    *principal* (audit ``actor``); the owner of a session is ``session.user_id``. A
    caller sees only its own sessions; ``admin=True`` lets a trusted caller act on any
    user's sessions (docs/semantics.md, "Ownership").

    Thread-safe: any number of threads may share one manager.
    """
