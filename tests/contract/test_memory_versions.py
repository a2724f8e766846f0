"""``list_memory_versions``: the working memory's history, newest first, each version
with the first seq it was in effect at; its pages agree with
``get_working_memory(at_seq=...)`` at every seq, whatever writes made the history."""

from __future__ import annotations

import random
from typing import Any

import pytest
from contract_support import OTHER, USER, user_msg

from agentsession import MemoryVersion, SessionManager, SessionNotFound, ValidationError


def _all(m: SessionManager, sid: str, size: int) -> list[MemoryVersion]:
    """Every version, read in pages of ``size`` through the cursors."""
    found: list[MemoryVersion] = []
    cursor = None
    while True:
        page = m.list_memory_versions(session_id=sid, user_id=USER, limit=size, cursor=cursor)
        assert len(page) <= size
        found += page.items
        if page.next_cursor is None:
            return found
        assert page.items  # a cursor never leads to an empty page
        cursor = page.next_cursor


def _as_of(m: SessionManager, sid: str, seq: int) -> dict[str, Any]:
    return m.get_working_memory(session_id=sid, user_id=USER, at_seq=seq).data


def test_the_listing_agrees_with_memory_as_of_over_random_writes(manager: SessionManager) -> None:
    """After random appends (with and without a patch), replaces, truncates and rewinds,
    the versions (read in pages of 3) have strictly falling seqs and versions, and the
    memory as of every seq is the listed version in effect there."""
    rng = random.Random(27)
    sid = manager.create_session(user_id=USER, working_memory={"v": 0}).session_id
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    for step in range(1, 31):
        n = manager.get_session(**kw).message_count
        op = rng.choice(["append", "patch", "patch", "update", "truncate", "rewind"])
        if op in ("append", "patch"):
            patch = {"working_memory_patch": {"v": step}} if op == "patch" else {}
            manager.append_messages(**kw, messages=[user_msg("m")] * rng.randint(1, 3), **patch)
        elif op == "update":
            manager.update_working_memory(**kw, data={"v": step})
        elif op == "truncate":
            manager.truncate_messages(**kw, after_seq=rng.randint(0, n))
        else:
            manager.rewind_session(**kw, to_seq=rng.randint(0, n))
        versions = _all(manager, sid, 3)
        seqs = [v.seq for v in versions]
        assert seqs == sorted(set(seqs), reverse=True) and seqs[-1] == 0, (step, op)
        assert [v.version for v in versions] == sorted({v.version for v in versions})[::-1]
        count = manager.get_session(**kw).message_count
        in_effect = {k: next(v for v in versions if v.seq <= k) for k in range(count + 1)}
        for k, v in in_effect.items():
            read = manager.get_working_memory(**kw, at_seq=k)
            assert (read.version, read.data) == (v.version, v.data), (step, op, k)


def test_before_cursor_and_limit(manager: SessionManager) -> None:
    """``before`` starts below a seq; a cursor goes on from a page; ``limit=0`` is an
    empty last page; a cursor with ``before`` or of another session is refused."""
    sid = manager.create_session(user_id=USER, working_memory={"v": 0}).session_id
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    for i in range(1, 5):  # versions in effect at seqs 0, 1, 2, 3, 4
        manager.append_messages(**kw, messages=[user_msg("m")], working_memory_patch={"v": i})
    assert [v.seq for v in manager.list_memory_versions(**kw).items] == [4, 3, 2, 1, 0]
    below = manager.list_memory_versions(**kw, before=3, limit=2)
    assert [(v.seq, v.data["v"]) for v in below] == [(2, 2), (1, 1)]
    assert [v.seq for v in manager.list_memory_versions(**kw, cursor=below.next_cursor)] == [0]
    empty = manager.list_memory_versions(**kw, limit=0)
    assert (empty.items, empty.next_cursor) == ([], None)
    assert not manager.list_memory_versions(**kw, before=0).items
    with pytest.raises(ValidationError):
        manager.list_memory_versions(**kw, before=2, cursor=below.next_cursor)
    other = manager.create_session(user_id=USER).session_id
    with pytest.raises(ValidationError):
        manager.list_memory_versions(session_id=other, user_id=USER, cursor=below.next_cursor)


def test_another_users_history_is_not_found(manager: SessionManager) -> None:
    sid = manager.create_session(user_id=USER, working_memory={"secret": 1}).session_id
    with pytest.raises(SessionNotFound):
        manager.list_memory_versions(session_id=sid, user_id=OTHER)
    assert manager.list_memory_versions(session_id=sid, user_id="root", admin=True).items


def test_a_fork_lists_the_versions_it_copied(manager: SessionManager) -> None:
    """A fork at seq N lists the parent's versions in effect up to N, then its own
    memory at N (the fork's first version)."""
    sid = manager.create_session(user_id=USER, working_memory={"v": 0}).session_id
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    for i in range(1, 4):
        manager.append_messages(**kw, messages=[user_msg("m")], working_memory_patch={"v": i})
    fork = manager.fork_session(**kw, at_seq=2)
    listed = manager.list_memory_versions(session_id=fork.session_id, user_id=USER).items
    assert [(v.seq, v.data) for v in listed] == [(2, {"v": 2}), (1, {"v": 1}), (0, {"v": 0})]
    assert listed[0].version == fork.version
    assert _as_of(manager, fork.session_id, 1) == {"v": 1}
