"""The public surface: ``agentsession.__all__`` is complete and exact, and the async
facade mirrors every public method of SessionManager and works under asyncio."""

from __future__ import annotations

import asyncio
import inspect
import threading
import types

import pytest
from contract_support import OTHER, USER, user_msg

import agentsession
from agentsession import (
    AsyncSessionManager,
    SessionManager,
    SessionNotFound,
    VersionConflict,
    errors,
    models,
)
from agentsession.service import aio, manager, policy

USER_FACING_MODULES = [errors, models, policy, manager, aio]


def test_all_names_exist_and_are_unique() -> None:
    """Every name in __all__ exists on the package; no duplicates."""
    assert len(agentsession.__all__) == len(set(agentsession.__all__))
    missing = [n for n in agentsession.__all__ if not hasattr(agentsession, n)]
    assert missing == []


def test_all_is_complete() -> None:
    """Every public non-module attribute of the package, and every name the user-facing
    modules export, is in __all__."""
    public = {
        name
        for name, value in vars(agentsession).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public - set(agentsession.__all__) == set()
    for module in USER_FACING_MODULES:
        assert set(module.__all__) - set(agentsession.__all__) == set(), module.__name__


def test_methods_take_keyword_arguments_only() -> None:
    """Every public method of both managers takes keyword arguments only (DESIGN.md)."""
    for cls in (SessionManager, AsyncSessionManager):
        for name, value in inspect.getmembers(cls):
            if not name.startswith("_") and inspect.isfunction(value):
                for ann in inspect.signature(value).parameters.values():
                    assert (
                        ann.kind == ann.KEYWORD_ONLY or ann.name == "self" or name in ("from_url",)
                    ), (cls.__name__, name, ann.name)


def test_async_manager_mirrors_every_public_method() -> None:
    """AsyncSessionManager has every public method of SessionManager, as coroutines with the
    same parameters (``watch``, an iterator, as an async iterator)."""
    sync = {
        n
        for n in dir(SessionManager)
        if not n.startswith("_") and callable(getattr(SessionManager, n))
    }
    has = {n for n in dir(AsyncSessionManager) if not n.startswith("_")}
    assert sync - has == set()
    for name in sync - {"from_url"}:
        fn = getattr(AsyncSessionManager, name)
        if name == "watch":
            assert inspect.isasyncgenfunction(fn), name
        else:
            assert inspect.iscoroutinefunction(fn), name
        if name != "close":
            sig_async = inspect.signature(fn).parameters
            sig_sync = inspect.signature(getattr(SessionManager, name)).parameters
            assert list(sig_async) == list(sig_sync), name


def test_async_manager_works_under_asyncio(manager: SessionManager) -> None:
    """The async facade creates, appends concurrently, reads and raises the same errors."""
    am = AsyncSessionManager(manager)

    async def main() -> None:
        s = await am.create_session(user_id=USER, agent="coding")
        kw = {"session_id": s.session_id, "user_id": USER}
        await asyncio.gather(
            *[am.append_message(**kw, message=user_msg(f"m{i}")) for i in range(10)]
        )
        msgs = (await am.get_messages(**kw)).items
        assert sorted(m.content for m in msgs) == sorted(f"m{i}" for i in range(10))
        assert [m.seq for m in msgs] == list(range(1, 11))
        wm = await am.modify_working_memory(**kw, fn=lambda d: {**d, "n": 1})
        assert wm.data == {"n": 1}
        with pytest.raises(SessionNotFound):
            await am.get_session(session_id=s.session_id, user_id=OTHER)
        with pytest.raises(VersionConflict):
            await am.append_message(**kw, message=user_msg("x"), expected_version=1)
        restored = await am.restore_session(**kw)
        assert restored.session.message_count == 10
        await am.delete_session(**kw)
        with pytest.raises(SessionNotFound):
            await am.get_session(**kw)
        await am.close()

    asyncio.run(main())


@pytest.mark.store_independent
def test_async_manager_runs_max_threads_calls_at_once(manager: SessionManager) -> None:
    """The async facade's own pool: 40 calls are in the manager at once (asyncio's
    default executor stops at min(32, cores + 4), so they would never all meet)."""
    parties = 40
    barrier = threading.Barrier(parties, timeout=30)
    am = AsyncSessionManager(manager, max_threads=parties)
    manager.get_session = lambda **kw: barrier.wait()  # type: ignore[method-assign,assignment]

    async def main() -> list[int]:
        return await asyncio.gather(
            *(am.get_session(session_id="x", user_id=USER) for _ in range(parties))
        )

    assert sorted(asyncio.run(main())) == list(range(parties))
