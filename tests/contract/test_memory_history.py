"""Working-memory history: the memory as of a message seq, across appends with memory
patches, replaces, creation, removals (the clamp) and deletion (docs/semantics.md,
"Working-memory history")."""

from __future__ import annotations

import random

import pytest
from contract_support import USER, history_rows, user_msg

from agentsession import SessionManager, ValidationError
from agentsession.errors import SessionNotFound
from agentsession.stores.base import SessionStore


def _as_of(m: SessionManager, sid: str, seq: int) -> dict[str, object]:
    return m.get_working_memory(session_id=sid, user_id=USER, at_seq=seq).data


def _append(m: SessionManager, sid: str, n: int, **kwargs: object) -> None:
    msgs = [user_msg(f"m{i}") for i in range(n)]
    m.append_messages(session_id=sid, user_id=USER, messages=msgs, **kwargs)  # type: ignore[arg-type]


def test_as_of_follows_appends_with_memory_patches(manager: SessionManager) -> None:
    """Each append that patches memory is in effect from its last seq on; the version
    read back is the one the write produced."""
    sid = manager.create_session(user_id=USER, working_memory={"step": 0}).session_id
    _append(manager, sid, 2, working_memory_patch={"step": 1})  # seqs 1-2
    _append(manager, sid, 1)  # seq 3, memory unchanged
    _append(manager, sid, 2, working_memory_patch={"step": 2})  # seqs 4-5
    assert [_as_of(manager, sid, n)["step"] for n in range(6)] == [0, 0, 1, 1, 1, 2]
    at1 = manager.get_working_memory(session_id=sid, user_id=USER, at_seq=2)
    assert at1.version == 3  # create = 1, its memory = 2, the first append = 3
    current = manager.get_working_memory(session_id=sid, user_id=USER)
    assert manager.get_working_memory(session_id=sid, user_id=USER, at_seq=5) == current


def test_update_working_memory_is_in_effect_at_the_current_count(
    manager: SessionManager, sid: str
) -> None:
    """A replace between appends belongs to the seq the history ended at; two writes
    at one seq: the newer wins."""
    assert _as_of(manager, sid, 0) == {}  # never written: an empty document
    assert manager.get_working_memory(session_id=sid, user_id=USER, at_seq=0).version == 0
    _append(manager, sid, 2)
    manager.update_working_memory(session_id=sid, user_id=USER, data={"a": 1})
    manager.update_working_memory(session_id=sid, user_id=USER, patch={"b": 2})
    _append(manager, sid, 1)
    both = {"a": 1, "b": 2}
    assert [_as_of(manager, sid, n) for n in range(4)] == [{}, {}, both, both]


def test_as_of_zero_is_the_memory_before_the_first_message(manager: SessionManager) -> None:
    """The memory as of seq 0 is the one in effect before the first message: the memory
    given to create_session, or an update made before any message, whatever follows."""
    sid = manager.create_session(user_id=USER, working_memory={"goal": "g"}).session_id
    manager.update_working_memory(session_id=sid, user_id=USER, data={"goal": "later"})
    _append(manager, sid, 3, working_memory_patch={"x": 1})
    assert _as_of(manager, sid, 0) == {"goal": "later"}  # written at count 0 too
    other = manager.create_session(user_id=USER, working_memory={"goal": "g"}).session_id
    _append(manager, other, 2, working_memory_patch={"goal": "moved"})
    assert _as_of(manager, other, 0) == {"goal": "g"}
    assert manager.get_working_memory(session_id=other, user_id=USER, at_seq=0).version == 2


def test_truncate_clamps_the_history_so_regrowth_reads_right(
    manager: SessionManager, sid: str
) -> None:
    """Memory last written at seq 10, truncate to 3, append to 6: as of 5 is the memory
    written at 10 (it was in effect when seqs 4-6 were appended again)."""
    _append(manager, sid, 2, working_memory_patch={"w": 2})
    _append(manager, sid, 8, working_memory_patch={"w": 10})
    manager.truncate_messages(session_id=sid, user_id=USER, after_seq=3)
    assert _as_of(manager, sid, 3) == {"w": 10}
    assert _as_of(manager, sid, 2) == {"w": 2}
    _append(manager, sid, 3)
    assert [_as_of(manager, sid, n)["w"] for n in (2, 3, 4, 5, 6)] == [2, 10, 10, 10, 10]


def test_pop_clamps_the_history(manager: SessionManager, sid: str) -> None:
    """A pop is a removal too: the memory written with the popped message stays in
    effect at the new end, and for the message appended in its place."""
    _append(manager, sid, 1, working_memory_patch={"n": 1})
    _append(manager, sid, 1, working_memory_patch={"n": 2})
    manager.pop_message(session_id=sid, user_id=USER)
    _append(manager, sid, 1)
    assert [_as_of(manager, sid, n) for n in (0, 1, 2)] == [{}, {"n": 2}, {"n": 2}]


def test_at_seq_out_of_range_is_refused(manager: SessionManager, sid: str) -> None:
    """at_seq from 0 to message_count; anything else is a ValidationError on at_seq."""
    _append(manager, sid, 2)
    for bad in (-1, 3, "1", 1.0, True):
        with pytest.raises(ValidationError) as err:
            manager.get_working_memory(session_id=sid, user_id=USER, at_seq=bad)  # type: ignore[arg-type]
        assert err.value.field == "at_seq"


def test_delete_removes_the_history(manager: SessionManager) -> None:
    """Deleting the session deletes its history: a new session of the same store reads
    only its own, and the deleted one is gone."""
    sid = manager.create_session(user_id=USER, working_memory={"secret": 1}).session_id
    _append(manager, sid, 2, working_memory_patch={"secret": 2})
    manager.delete_session(session_id=sid, user_id=USER)
    with pytest.raises(SessionNotFound):
        manager.get_working_memory(session_id=sid, user_id=USER, at_seq=0)
    with manager.store.transaction(write=False) as tx:
        assert tx.get_working_memory_at(sid, 0) is None
        assert tx.get_working_memory_at(sid, 10) is None


def test_the_history_keeps_one_row_per_seq(store: SessionStore, manager: SessionManager) -> None:
    """The review's case: 50 appends each patching memory, a rewind to 0, a truncate to
    0 and a fork leave one history row in the session and one in the fork (the rows
    nothing can read again are gone, and the fork does not copy them)."""
    sid = manager.create_session(user_id=USER, working_memory={"m": 0}).session_id
    for i in range(50):
        _append(manager, sid, 1, working_memory_patch={"p": i % 10})
    manager.rewind_session(session_id=sid, user_id=USER, to_seq=0)
    manager.truncate_messages(session_id=sid, user_id=USER, after_seq=0)
    fork = manager.fork_session(session_id=sid, user_id=USER)
    assert history_rows(store, sid) == 1 and history_rows(store, fork.session_id) == 1
    assert _as_of(manager, sid, 0) == _as_of(manager, fork.session_id, 0) == {"m": 0}


def test_memory_as_of_matches_a_model_over_random_writes(
    store: SessionStore, manager: SessionManager
) -> None:
    """Random appends (with and without a patch), replaces, truncates and rewinds: after
    each, the memory as of every seq is the model's, and the history holds at most
    ``message_count + 1`` rows."""
    rng = random.Random(13)
    sid = manager.create_session(user_id=USER, working_memory={"v": 0}).session_id
    model: list[dict[str, object]] = [{"v": 0}]  # model[k]: the memory as of seq k
    kw = {"session_id": sid, "user_id": USER}
    for step in range(1, 41):
        op = rng.choice(["append", "append", "patch", "update", "truncate", "rewind"])
        n = len(model) - 1
        if op == "append":
            _append(manager, sid, k := rng.randint(1, 3))
            model += [model[-1]] * k
        elif op == "patch":
            _append(manager, sid, k := rng.randint(1, 3), working_memory_patch={"v": step})
            model += [model[-1]] * (k - 1) + [{**model[-1], "v": step}]
        elif op == "update":
            manager.update_working_memory(**kw, data={"v": step})  # type: ignore[arg-type]
            model[-1] = {"v": step}
        elif op == "truncate":
            manager.truncate_messages(**kw, after_seq=(to := rng.randint(0, n)))  # type: ignore[arg-type]
            model[to:] = [model[-1]]
        else:
            manager.rewind_session(**kw, to_seq=(to := rng.randint(0, n)))  # type: ignore[arg-type]
            del model[to + 1 :]
        assert [_as_of(manager, sid, k) for k in range(len(model))] == model, (step, op)
        assert history_rows(store, sid) <= len(model)
