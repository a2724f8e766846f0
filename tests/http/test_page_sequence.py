"""A listing's :class:`~agentsession.models.Page` is a sequence of its items: iterating,
``len``, indexing, slicing, truth and ``in`` act on ``items``, the same on every
listing of the manager, the async manager and both clients; the JSON shape is
unchanged."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from agentsession import AsyncSessionManager, SessionManager
from agentsession.client import AsyncSessionClient, SessionClient
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.models import Message, Page
from agentsession.settings import Settings
from inprocess import InProcess

pytestmark = pytest.mark.store_independent

USER = "alice"


def _listing_methods() -> set[str]:
    """The manager's public methods that answer a Page."""
    return {
        name
        for name, fn in inspect.getmembers(SessionManager, inspect.isfunction)
        if not name.startswith("_") and "Page[" in str(inspect.signature(fn).return_annotation)
    }


def _fill(m: SessionManager) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Sessions holding at least three of everything a listing lists, and some holding
    none; returns each listing's arguments (besides the user and the limit) for a full
    listing and for an empty one."""
    kw: dict[str, Any] = {"user_id": USER}
    sid = m.create_session(**kw).session_id
    empty = m.create_session(**kw).session_id
    removed = m.create_session(**kw).session_id
    kw["session_id"] = sid
    m.append_messages(**kw, messages=[{"role": "user", "content": f"m{i}"} for i in range(5)])
    m.rewind_session(**kw, to_seq=2)  # rewind 1 hides three messages
    for _ in range(2):
        m.append_message(**kw, message={"role": "user", "content": "again"})
        m.rewind_session(**kw, to_seq=2)
    m.append_messages(**kw, messages=[{"role": "user", "content": "x"}] * 2)
    for i in range(3):  # three memory versions, one per seq
        m.append_message(
            **kw, message={"role": "user", "content": "y"}, working_memory_patch={"goal": f"g{i}"}
        )
    for _ in range(3):
        run = m.start_run(**kw)
        m.record_tool_call(**kw, tool="grep", run_id=run.run_id)
        m.finish_run(**kw, run_id=run.run_id, status="SUCCEEDED")
    run = m.start_run(**kw)
    for kind in ("model", "tool", "model"):
        m.add_run_step(**kw, run_id=run.run_id, kind=kind)
    # A rewind whose messages were removed, and a run without steps: empty listings.
    kw["session_id"] = removed
    m.append_message(**kw, message={"role": "user", "content": "gone"})
    m.rewind_session(**kw, to_seq=0, remove=True)
    idle = m.start_run(**kw)
    full, none = {"session_id": sid}, {"session_id": empty}
    return {
        "list_sessions": {},
        "get_messages": full,
        "get_tool_history": full,
        "list_runs": full,
        "list_run_steps": {**full, "run_id": run.run_id},
        "list_rewinds": full,
        "get_rewound_messages": {**full, "number": 1},
        "get_audit_log": full,
        "list_memory_versions": full,
        "search": {"query": "grep"},  # the three tool calls
    }, {
        "list_sessions": {"parent_session_id": sid},
        "get_messages": none,
        "get_tool_history": none,
        "list_runs": none,
        "list_run_steps": {"session_id": removed, "run_id": idle.run_id},
        "list_rewinds": none,
        "get_rewound_messages": {"session_id": removed, "number": 1},
        "get_audit_log": {**none, "after": 10**9},
        "list_memory_versions": {**none, "before": 0},
        "search": {"query": "grep", "session_id": empty},
    }


def _check(page: Any, name: str) -> None:
    """``page`` (a first page of two items, more to come) acts as its items."""
    items = page.items
    assert isinstance(page, Page) and isinstance(page, Sequence), name
    assert len(items) == 2 and page.next_cursor is not None and page.has_more, name
    assert list(page) == items and [x for x in page] == items, name
    assert len(page) == 2 and bool(page), name
    assert page[0] == items[0] and page[1] == items[1] and page[-1] == items[-1], name
    assert page[:1] == items[:1] and page[::-1] == items[::-1] and page[5:] == [], name
    with pytest.raises(IndexError):
        page[2]
    assert items[1] in page and "not an item" not in page, name
    assert list(reversed(page)) == items[::-1] and page.index(items[1]) == 1, name
    assert page.count(items[0]) == 1, name
    dumped = page.model_dump(mode="json")
    assert set(dumped) == {"items", "next_cursor", "has_more"} and len(dumped["items"]) == 2
    assert Page[type(items[0])].model_validate(dumped) == page, name


def _check_empty(page: Any, name: str) -> None:
    assert not page and len(page) == 0 and list(page) == [] and page.items == [], name
    with pytest.raises(IndexError):
        page[0]


def test_every_listing_is_covered(manager: SessionManager) -> None:
    """The test below walks every listing: a new one must be added to it."""
    full, empty = _fill(manager)
    assert _listing_methods() == set(full) == set(empty)


def test_a_page_is_a_sequence_of_its_items_on_every_surface(manager: SessionManager) -> None:
    """Manager, async manager, SessionClient and AsyncSessionClient: the first page of
    two of every listing iterates, indexes, slices and counts its items; a page of
    none is false; the four answer the same page."""
    calls, empty = _fill(manager)
    aio = AsyncSessionManager(manager)
    keys = MemoryKeyStore()
    token = keys.create(user_id=USER)[1]
    app = create_app(manager, Settings(url="memory://"), keys=keys)
    pages: dict[str, list[Any]] = {name: [] for name in calls}
    blank: dict[str, list[Any]] = {name: [] for name in calls}

    def read(surface: Any, name: str, args: dict[str, Any], **limit: int) -> Any:
        return getattr(surface, name)(user_id=USER, **args, **limit)

    for name in calls:
        pages[name].append(read(manager, name, calls[name], limit=2))
        blank[name].append(read(manager, name, empty[name]))

    async def in_async() -> None:
        transport = httpx.ASGITransport(app=app)
        async with AsyncSessionClient("http://t", token, transport=transport) as client:
            for surface in (aio, client):
                for name in calls:
                    pages[name].append(await read(surface, name, calls[name], limit=2))
                    blank[name].append(await read(surface, name, empty[name]))
        aio.stop_threads()

    asyncio.run(in_async())
    with (
        TestClient(app) as http,
        SessionClient("http://testserver", token, transport=InProcess(http)) as client,
    ):
        for name in calls:
            pages[name].append(read(client, name, calls[name], limit=2))
            blank[name].append(read(client, name, empty[name]))
    for name, answers in pages.items():
        assert len(answers) == 4
        for page in answers:
            _check(page, name)
        assert all(page == answers[0] for page in answers), name
        for page in blank[name]:
            _check_empty(page, name)


def test_an_empty_listing_is_false_and_a_page_is_still_json() -> None:
    """``bool`` follows the items, not the cursor; ``dict(page)`` (pydantic's pairs) is
    gone, ``model_dump`` is the way to the JSON shape."""
    empty = Page[Message](items=[])
    assert not empty and not empty.has_more
    held_back = Page[Message](items=[], next_cursor="c")
    assert not held_back and held_back.has_more
    assert empty.model_dump() == {"items": [], "next_cursor": None, "has_more": False}
