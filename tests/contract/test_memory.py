"""Working memory: replace, RFC 7396 merge patch, standard field types, versions, and
concurrent read-modify-write without lost updates."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from contract_support import USER, audit_of, run_threads, snapshot, user_msg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsession import SessionManager, ValidationError, VersionConflict


def _reference_merge(target: Any, patch: Any) -> Any:
    """RFC 7396 section 2 pseudocode, written independently of the library."""
    if isinstance(patch, dict):
        result = copy.deepcopy(target) if isinstance(target, dict) else {}
        for name, value in patch.items():
            if value is None:
                result.pop(name, None)
            else:
                result[name] = _reference_merge(result.get(name), value)
        return result
    return copy.deepcopy(patch)


def test_replace_and_read(manager: SessionManager, sid: str) -> None:
    """A full replace stores exactly the document; version equals the session's new version."""
    empty = manager.get_working_memory(session_id=sid, user_id=USER)
    assert (empty.version, empty.data) == (0, {})
    doc = {
        "goal": "fix the start-up error",
        "completed": ["read logs"],
        "errors": [],
        "next_action": "pip install requests",
        "facts": {"missing_module": "requests"},
        "free": {"nested": [1, 2]},
    }
    wm = manager.update_working_memory(session_id=sid, user_id=USER, data=doc)
    s = manager.get_session(session_id=sid, user_id=USER)
    assert wm.version == s.version == 2
    got = manager.get_working_memory(session_id=sid, user_id=USER)
    assert got.data == doc and got.version == 2
    assert (got.goal, got.completed, got.next_action, got.facts) == (
        doc["goal"],
        doc["completed"],
        doc["next_action"],
        doc["facts"],
    )
    wm2 = manager.update_working_memory(session_id=sid, user_id=USER, data={"goal": "other"})
    assert wm2.data == {"goal": "other"}
    assert wm2.version == manager.get_session(session_id=sid, user_id=USER).version == 3


def test_memory_version_tracks_session_version(manager: SessionManager, sid: str) -> None:
    """After every memory update (also via append + patch) memory.version == session.version."""
    manager.append_message(session_id=sid, user_id=USER, message=user_msg("x"))
    manager.update_working_memory(session_id=sid, user_id=USER, patch={"a": 1})
    assert (
        manager.get_working_memory(session_id=sid, user_id=USER).version
        == manager.get_session(session_id=sid, user_id=USER).version
    )
    manager.append_message(
        session_id=sid, user_id=USER, message=user_msg("y"), working_memory_patch={"a": 2}
    )
    wm = manager.get_working_memory(session_id=sid, user_id=USER)
    assert wm.data == {"a": 2}
    assert wm.version == manager.get_session(session_id=sid, user_id=USER).version
    s = manager.create_session(user_id=USER, working_memory={"goal": "g"})
    assert s.version == 2
    assert manager.get_working_memory(session_id=s.session_id, user_id=USER).version == 2


def test_memory_read_carries_the_session_version(manager: SessionManager, sid: str) -> None:
    """``session_version`` of a read is the session's version at that read (also after
    writes that leave the memory alone), of a write the new version: one read is enough
    for a read-modify-write, and a stale one fails its compare-and-set."""
    kw: dict[str, Any] = {"session_id": sid, "user_id": USER}
    assert manager.get_working_memory(**kw).session_version == 1  # never written
    written = manager.update_working_memory(**kw, data={"n": 1}, expected_version=1)
    assert written.session_version == written.version == 2
    manager.append_message(**kw, message=user_msg("moves the session, not the memory"))
    read = manager.get_working_memory(**kw)
    assert (read.version, read.session_version) == (2, 3)
    assert read.session_version == manager.get_session(**kw).version
    manager.update_working_memory(**kw, patch={"n": 2}, expected_version=read.session_version)
    with pytest.raises(VersionConflict):
        manager.update_working_memory(**kw, data={"n": 99}, expected_version=read.session_version)
    assert manager.get_working_memory(**kw).data == {"n": 2}


# RFC 7396, Appendix A (the cases whose target and patch are objects).
RFC_CASES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), RFC_CASES)
def test_merge_patch_rfc7396_examples(
    manager: SessionManager, target: Any, patch: Any, expected: Any
) -> None:
    """Merge patches follow RFC 7396 Appendix A: null deletes, objects merge, arrays replace."""
    sid = manager.create_session(user_id=USER, working_memory=target).session_id
    got = manager.update_working_memory(session_id=sid, user_id=USER, patch=patch)
    assert got.data == expected
    assert manager.get_working_memory(session_id=sid, user_id=USER).data == expected


_keys = st.sampled_from(["a", "b", "c", "d", "x y", "ü"])
_leaf = st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=5)
_doc = st.recursive(
    _leaf, lambda k: st.lists(k, max_size=3) | st.dictionaries(_keys, k, max_size=4), max_leaves=10
)
_objects = st.dictionaries(_keys, _doc, max_size=4)


@pytest.mark.servers_slow  # 60 examples: seconds per server store
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(target=_objects, patches=st.lists(_objects, min_size=1, max_size=3))
def test_merge_patch_matches_reference(
    manager: SessionManager, target: dict[str, Any], patches: list[dict[str, Any]]
) -> None:
    """A chain of random merge patches gives what an independent RFC 7396 reference gives."""
    sid = manager.create_session(user_id=USER, working_memory=target).session_id
    expected: Any = copy.deepcopy(target)
    for p in patches:
        expected = _reference_merge(expected, p)
        got = manager.update_working_memory(session_id=sid, user_id=USER, patch=p)
        assert got.data == expected
    assert manager.get_working_memory(session_id=sid, user_id=USER).data == expected


@pytest.mark.store_independent
@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("goal", 5),
        ("goal", ["x"]),
        ("next_action", {"a": 1}),
        ("completed", "done"),
        ("completed", {"a": 1}),
        ("errors", "oops"),
        ("facts", ["a"]),
        ("facts", "text"),
    ],
)
def test_standard_fields_are_type_checked(
    manager: SessionManager, sid: str, field: str, bad: Any
) -> None:
    """goal/next_action str, completed/errors lists, facts an object: else ValidationError."""
    manager.update_working_memory(session_id=sid, user_id=USER, data={"goal": "g"})
    before = snapshot(manager, sid)
    for call in (
        lambda: manager.update_working_memory(session_id=sid, user_id=USER, data={field: bad}),
        lambda: manager.update_working_memory(session_id=sid, user_id=USER, patch={field: bad}),
        lambda: manager.append_message(
            session_id=sid, user_id=USER, message=user_msg("x"), working_memory_patch={field: bad}
        ),
    ):
        with pytest.raises(ValidationError) as err:
            call()
        assert field in (err.value.field or "")
    with pytest.raises(ValidationError):
        manager.create_session(user_id=USER, working_memory={field: bad})
    assert snapshot(manager, sid) == before


@pytest.mark.store_independent
def test_data_and_patch_are_exclusive(manager: SessionManager, sid: str) -> None:
    """Exactly one of data and patch; a non-object is rejected."""
    for kwargs in ({}, {"data": {"a": 1}, "patch": {"a": 2}}, {"patch": "x"}, {"patch": [1]}):
        with pytest.raises(ValidationError):
            manager.update_working_memory(session_id=sid, user_id=USER, **kwargs)
    assert manager.get_session(session_id=sid, user_id=USER).version == 1


def test_modify_working_memory_concurrent_increments_lose_nothing(
    manager: SessionManager, sid: str
) -> None:
    """8 threads x 25 read-modify-write increments give exactly 200; versions stay contiguous."""
    manager.update_working_memory(session_id=sid, user_id=USER, data={"n": 0})
    start = manager.get_session(session_id=sid, user_id=USER).version

    def work(i: int) -> None:
        for _ in range(25):
            manager.modify_working_memory(
                session_id=sid, user_id=USER, max_attempts=500, fn=lambda d: {**d, "n": d["n"] + 1}
            )

    out = run_threads(8, work)
    assert [r for r in out if r is not None] == []
    wm = manager.get_working_memory(session_id=sid, user_id=USER)
    s = manager.get_session(session_id=sid, user_id=USER)
    assert wm.data == {"n": 200}
    assert s.version == wm.version == start + 200
    updates = [e for e in audit_of(manager, sid) if e.action == "memory.updated"][1:]
    assert len(updates) == 200
    assert [(e.version_before, e.version_after) for e in updates] == [
        (v, v + 1) for v in range(start, start + 200)
    ]


@pytest.mark.store_independent
def test_memory_size_limit_applies_to_the_result(store: Any) -> None:
    """The byte limit applies to the merged document, checked before writing."""
    from agentsession import Limits, PayloadTooLarge

    m = SessionManager(store, limits=Limits(max_working_memory_bytes=200))
    sid = m.create_session(user_id=USER, working_memory={"a": "x" * 100}).session_id
    before = snapshot(m, sid)
    with pytest.raises(PayloadTooLarge) as err:
        m.update_working_memory(session_id=sid, user_id=USER, patch={"b": "y" * 100})
    assert err.value.limit_bytes == 200
    assert snapshot(m, sid) == before
