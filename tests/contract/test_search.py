"""search finds what the caller's sessions hold, on every store's own index: CJK text
without spaces, English words and identifiers, in every message format, titles and
tool calls; never another user's content, nor removed, hidden, deleted or erased
content; its pages are complete and without duplicates. Redis, and a store with a
keyring (search off: an index holds plaintext), answer the typed error."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from contract_support import ADMIN, OTHER, USER
from message_formats import FORMATS, answer, user

from agentsession import (
    AsyncSessionManager,
    Forbidden,
    SearchHit,
    SearchNotSupported,
    SessionManager,
    ValidationError,
)
from agentsession.stores.base import SessionStore

CJK = "帮我修复启动失败"


@pytest.fixture
def searchable(store: SessionStore, manager: SessionManager) -> Iterator[SessionManager]:
    """The manager, on a store that searches; on Redis, checks the typed error and skips."""
    if type(store).__name__ == "RedisStore":
        with pytest.raises(SearchNotSupported) as caught:
            manager.search(user_id=USER, query="anything")
        assert caught.value.http_status == 501
        assert "not supported" in caught.value.message
        pytest.skip("Redis keeps no search index: SearchNotSupported checked")
    if type(store).__name__ == "SealedStore":
        with pytest.raises(SearchNotSupported) as caught:
            manager.search(user_id=USER, query="anything")
        assert "keyring" in caught.value.message
        pytest.skip("search is off with a keyring: SearchNotSupported checked")
    yield manager


def _calls(fmt: str) -> dict[str, Any]:
    """An assistant message in ``fmt`` calling a tool with ``{"path": "setup.cfg"}``."""
    if fmt == "chat":
        call = {"name": "read", "arguments": '{"path": "setup.cfg"}'}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": call}],
        }
    if fmt == "anthropic":
        block = {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "setup.cfg"}}
        return {"role": "assistant", "content": [block]}
    return {
        "type": "function_call",
        "call_id": "c1",
        "name": "read",
        "arguments": '{"path": "setup.cfg"}',
    }


def _results(fmt: str) -> dict[str, Any]:
    """The tool's answer in ``fmt``: ``[metadata] name = demo-app``."""
    out = "[metadata] name = demo-app"
    if fmt == "chat":
        return {"role": "tool", "tool_call_id": "c1", "content": out}
    if fmt == "anthropic":
        block = {
            "type": "tool_result",
            "tool_use_id": "c1",
            "content": [{"type": "text", "text": out}],
        }
        return {"role": "user", "content": [block]}
    return {"type": "function_call_output", "call_id": "c1", "output": out}


def _session(m: SessionManager, fmt: str, owner: str = USER, **kw: Any) -> str:
    sid = m.create_session(user_id=owner, agent="coding", **kw).session_id
    payloads = [
        user(fmt, CJK),
        answer(fmt, "Pin the versions in requirements.txt, then restart."),
        _calls(fmt),
        _results(fmt),
    ]
    m.append_messages(session_id=sid, user_id=owner, messages=payloads)
    return sid


def _found(m: SessionManager, query: str, **kw: Any) -> set[tuple[str, str, int]]:
    kw.setdefault("user_id", USER)
    return {(h.session_id, h.kind, h.seq) for h in _all(m, query, **kw)}


def _all(m: SessionManager, query: str, limit: int = 3, **kw: Any) -> list[SearchHit]:
    """Every hit over all pages of ``limit``, checking each page's cursor rule."""
    hits: list[SearchHit] = []
    cursor = None
    while True:
        page = m.search(query=query, limit=limit, cursor=cursor, **kw)
        hits += page.items
        assert len(page.items) <= limit
        if (cursor := page.next_cursor) is None:
            return hits
        assert page.items  # a cursor never leads past an empty page


@pytest.mark.parametrize("fmt", FORMATS)
def test_finds_cjk_words_identifiers_and_tool_arguments_in_every_format(
    searchable: SessionManager, fmt: str
) -> None:
    m = searchable
    sid = _session(m, fmt)
    assert _found(m, "修复启动") == {(sid, "message", 1)}
    assert _found(m, "修复") == {(sid, "message", 1)}  # under 3 characters: the scan
    assert _found(m, "requirements.txt") == {(sid, "message", 2)}
    assert _found(m, "REQUIREMENTS") == {(sid, "message", 2)}  # case ignored
    assert _found(m, "setup.cfg") == {(sid, "message", 3)}  # tool-call arguments
    assert _found(m, "demo-app") == {(sid, "message", 4)}  # tool output
    assert _found(m, "absent words") == set()
    assert _found(m, "100%") == set()  # LIKE's wildcards are text
    other = m.create_session(user_id=USER, agent="coding", title="xabcx ybcdy").session_id
    assert _found(m, "abcd") == set()  # every trigram of it is there, not it
    assert _found(m, "bcdy") == {(other, "title", 0)}
    (hit,) = m.search(user_id=USER, query="修复启动").items
    assert hit.snippet == CJK and hit.snippet[hit.match_start : hit.match_end] == "修复启动"
    assert hit.role == "user" and hit.score == 1


def test_titles_and_recorded_tool_calls_are_found(searchable: SessionManager) -> None:
    m = searchable
    sid = m.create_session(user_id=USER, agent="coding", title="Deploy the 启动脚本").session_id
    m.record_tool_call(
        session_id=sid,
        user_id=USER,
        tool="read_file",
        arguments={"path": "docs/pyproject.toml"},
        result={"text": "build-backend = hatchling"},
    )
    assert _found(m, "启动脚本") == {(sid, "title", 0)}
    assert _found(m, "pyproject.toml") == {(sid, "tool_call", 1)}
    assert _found(m, "hatchling") == {(sid, "tool_call", 1)}
    assert _found(m, "read_file") == {(sid, "tool_call", 1)}
    version = m.get_session(session_id=sid, user_id=USER).version
    m.update_session(session_id=sid, user_id=USER, title="Renamed", expected_version=version)
    assert _found(m, "启动脚本") == set()
    assert _found(m, "renamed") == {(sid, "title", 0)}


def test_never_another_users_content_and_admin_searches_all(searchable: SessionManager) -> None:
    m = searchable
    mine = _session(m, "chat")
    theirs = _session(m, "anthropic", owner=OTHER)
    assert {s for s, _, _ in _found(m, "requirements.txt")} == {mine}
    assert {s for s, _, _ in _found(m, "requirements.txt", user_id=OTHER)} == {theirs}
    assert _found(m, "requirements.txt", user_id=USER, session_id=theirs) == set()
    everyone = _found(m, "requirements.txt", user_id=ADMIN, admin=True, all_users=True)
    assert {s for s, _, _ in everyone} == {mine, theirs}
    with pytest.raises(Forbidden):
        m.search(user_id=USER, query="requirements.txt", all_users=True)
    other_agent = m.create_session(user_id=USER, agent="other", title="requirements.txt")
    assert _found(m, "requirements.txt", agent="other") == {(other_agent.session_id, "title", 0)}
    assert _found(m, "requirements.txt", session_id=mine) == {(mine, "message", 2)}


def test_removed_truncated_hidden_deleted_and_erased_content_is_never_found(
    searchable: SessionManager,
) -> None:
    m = searchable
    sid = _session(m, "chat")
    m.pop_message(session_id=sid, user_id=USER)  # the tool output
    assert _found(m, "demo-app") == set()
    m.rewind_session(session_id=sid, user_id=USER, to_seq=2)  # hides the call
    assert _found(m, "setup.cfg") == set()
    m.rewind_session(session_id=sid, user_id=USER, to_seq=1, remove=True)
    assert _found(m, "requirements.txt") == set()
    m.truncate_messages(session_id=sid, user_id=USER, after_seq=0)
    assert _found(m, "修复启动") == set()
    again = _session(m, "responses")
    fork = m.fork_session(session_id=again, user_id=USER, at_seq=2).session_id
    assert _found(m, "requirements.txt") == {(again, "message", 2), (fork, "message", 2)}
    assert _found(m, "setup.cfg") == {(again, "message", 3)}  # not copied past at_seq
    m.delete_session(session_id=again, user_id=USER)
    assert _found(m, "requirements.txt") == {(fork, "message", 2)}
    _session(m, "chat", owner=OTHER)
    m.erase_user(user_id=USER)
    assert _found(m, "requirements.txt") == set()
    everyone = _found(m, "requirements.txt", user_id=ADMIN, admin=True, all_users=True)
    assert {kind for _, kind, _ in everyone} == {"message"} and len(everyone) == 1


def test_pages_are_complete_without_duplicates_and_cursors_are_bound(
    searchable: SessionManager,
) -> None:
    m = searchable
    sids = [m.create_session(user_id=USER, agent="coding").session_id for _ in range(3)]
    for n, sid in enumerate(sids):
        texts = [{"role": "user", "content": f"needle {n}-{i} 修复启动"} for i in range(7)]
        m.append_messages(session_id=sid, user_id=USER, messages=texts)
    for limit in (1, 4, 21, 100):
        hits = _all(m, "needle", limit=limit, user_id=USER)
        keys = [(h.session_id, h.seq) for h in hits]
        assert len(keys) == len(set(keys)) == 21
    page = m.search(user_id=USER, query="修复启动", limit=5)
    assert page.next_cursor is not None
    with pytest.raises(ValidationError):
        m.search(user_id=USER, query="needle", cursor=page.next_cursor)
    with pytest.raises(ValidationError):
        m.search(user_id=OTHER, query="修复启动", cursor=page.next_cursor)
    assert len(m.search(user_id=USER, query="修复启动", limit=0).items) == 0


@pytest.mark.store_independent
@pytest.mark.parametrize("query", ["", "   ", " \t\r\n", "x" * 201, "a\x00b", None, 3])
def test_bad_queries_are_refused(manager: SessionManager, query: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        manager.search(user_id=USER, query=query)
    assert caught.value.context["field"] == "query"


@pytest.mark.store_independent
def test_async_manager_searches(manager: SessionManager) -> None:
    sid = _session(manager, "chat")
    aio = AsyncSessionManager(manager)
    page = asyncio.run(aio.search(user_id=USER, query="requirements.txt"))
    assert [(h.session_id, h.seq) for h in page] == [(sid, 2)]
