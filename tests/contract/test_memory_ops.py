"""Working memory changed by JSON Patch ops (RFC 6902): the third write mode beside
replace and merge patch, on ``update_working_memory`` and ``append_messages``.

The rules live in the manager (the store sees a whole document), so most tests run on
memory and SQLite only; the all-or-nothing append runs on every store.
"""

from __future__ import annotations

from typing import Any

import pytest
from contract_support import USER, audit_of, snapshot, user_msg

from agentsession import (
    IdempotencyKeyReused,
    PatchConflict,
    PayloadTooLarge,
    SessionManager,
    UnsupportedValue,
    ValidationError,
    VersionConflict,
)

independent = pytest.mark.store_independent


def _kw(sid: str) -> dict[str, Any]:
    return {"session_id": sid, "user_id": USER}


def _state(manager: SessionManager, sid: str, state: dict[str, Any]) -> None:
    manager.update_working_memory(**_kw(sid), data={"adk": {"state": state}})


@independent
def test_none_valued_state_delta_is_stored_not_dropped(manager: SessionManager, sid: str) -> None:
    """``add`` with a null value stores null (a merge patch would delete the key)."""
    _state(manager, sid, {"flag": True, "keep": 1})
    got = manager.update_working_memory(
        **_kw(sid), ops=[{"op": "add", "path": "/adk/state/flag", "value": None}]
    )
    assert got.data == {"adk": {"state": {"flag": None, "keep": 1}}}
    assert manager.get_working_memory(**_kw(sid)).data == got.data


@independent
def test_dict_valued_state_delta_replaces_stored_value(manager: SessionManager, sid: str) -> None:
    """``add`` of an object at an existing key replaces the whole stored object (a merge
    patch would deep-merge it and keep ``age``)."""
    _state(manager, sid, {"profile": {"name": "ann", "age": 40}, "other": [1]})
    manager.update_working_memory(
        **_kw(sid), ops=[{"op": "add", "path": "/adk/state/profile", "value": {"name": "bob"}}]
    )
    stored = manager.get_working_memory(**_kw(sid)).data
    assert stored == {"adk": {"state": {"profile": {"name": "bob"}, "other": [1]}}}


@independent
def test_the_six_ops_apply_in_order(manager: SessionManager, sid: str) -> None:
    """add, remove, replace, move, copy and test, with RFC 6901 escapes and ``-``."""
    manager.update_working_memory(**_kw(sid), data={"a": {"x/y": 1, "t~": 2}, "l": [1, 2]})
    ops = [
        {"op": "test", "path": "/a/x~1y", "value": 1},
        {"op": "add", "path": "/l/-", "value": 3},
        {"op": "add", "path": "/l/0", "value": 0},
        {"op": "remove", "path": "/a/t~0"},
        {"op": "replace", "path": "/a/x~1y", "value": [None]},
        {"op": "copy", "from": "/l", "path": "/c"},
        {"op": "move", "from": "/a", "path": "/b"},
        {"op": "test", "path": "/c/3", "value": 3, "ignored": "member"},
    ]
    got = manager.update_working_memory(**_kw(sid), ops=ops)
    assert got.data == {"b": {"x/y": [None]}, "l": [0, 1, 2, 3], "c": [0, 1, 2, 3]}


@independent
@pytest.mark.parametrize(
    ("ops", "field"),
    [
        ({"op": "add", "path": "/a", "value": 1}, "ops"),
        ("add", "ops"),
        ([{"op": "add", "path": "/a", "value": 1}, 7], "ops[1]"),
        ([{"op": "upsert", "path": "/a", "value": 1}], "ops[0].op"),
        ([{"path": "/a", "value": 1}], "ops[0].op"),
        ([{"op": "add", "path": "a", "value": 1}], "ops[0].path"),
        ([{"op": "add", "path": "/a~2", "value": 1}], "ops[0].path"),
        ([{"op": "remove"}], "ops[0].path"),
        ([{"op": "test", "path": "/a"}, {"op": "add", "path": "/a"}], "ops[0].value"),
        ([{"op": "remove", "path": "/a"}, {"op": "copy", "path": "/b"}], "ops[1].from"),
        ([{"op": "move", "from": "/a", "path": "/a/b"}], "ops[0].path"),
    ],
)
def test_malformed_ops_are_refused_naming_the_op(
    manager: SessionManager, sid: str, ops: Any, field: str
) -> None:
    """A malformed op list is a ValidationError naming the op; nothing is written."""
    before = snapshot(manager, sid)
    with pytest.raises(ValidationError) as caught:
        manager.update_working_memory(**_kw(sid), ops=ops)
    assert caught.value.field == field
    with pytest.raises(ValidationError) as caught:
        manager.append_message(**_kw(sid), message=user_msg("x"), working_memory_ops=ops)
    assert caught.value.field == field.replace("ops", "working_memory_ops", 1)
    assert snapshot(manager, sid) == before


@independent
@pytest.mark.parametrize(
    "op",
    [
        {"op": "remove", "path": "/missing"},
        {"op": "replace", "path": "/missing", "value": 1},
        {"op": "add", "path": "/missing/child", "value": 1},
        {"op": "add", "path": "/l/5", "value": 1},
        {"op": "move", "from": "/missing", "path": "/b"},
        {"op": "copy", "from": "/l/9", "path": "/b"},
        {"op": "test", "path": "/n", "value": True},
        {"op": "test", "path": "/missing", "value": None},
    ],
)
def test_an_op_that_does_not_apply_is_a_patch_conflict(
    manager: SessionManager, sid: str, op: dict[str, Any]
) -> None:
    """Conflicting state (RFC 5789 section 2.2): PatchConflict naming the op's index,
    and the ops before it are not kept either. ``true`` is not ``1`` in a test."""
    manager.update_working_memory(**_kw(sid), data={"n": 1, "l": [1]})
    before = snapshot(manager, sid)
    first = {"op": "add", "path": "/added", "value": 1}
    with pytest.raises(PatchConflict) as caught:
        manager.update_working_memory(**_kw(sid), ops=[first, op])
    assert (caught.value.field, caught.value.op, caught.value.path) == (
        "ops[1]",
        op["op"],
        op["path"],
    )
    assert caught.value.http_status == 409 and caught.value.code == "patch-conflict"
    assert snapshot(manager, sid) == before


@independent
def test_exactly_one_mode(manager: SessionManager, sid: str) -> None:
    """data, patch and ops exclude each other; so do the append's patch and ops."""
    op = [{"op": "add", "path": "/a", "value": 1}]
    for kwargs in ({"patch": {"a": 1}, "ops": op}, {"data": {}, "ops": op}, {}):
        with pytest.raises(ValidationError):
            manager.update_working_memory(**_kw(sid), **kwargs)
    with pytest.raises(ValidationError) as caught:
        manager.append_message(
            **_kw(sid), message=user_msg("x"), working_memory_patch={"a": 1}, working_memory_ops=op
        )
    assert caught.value.field == "working_memory_ops"
    assert manager.get_session(**_kw(sid)).version == 1


@independent
def test_the_result_passes_the_memory_checks(manager: SessionManager, sid: str) -> None:
    """Typed standard keys, an object at the root and the size limit hold after ops."""
    for op in (
        {"op": "add", "path": "/goal", "value": 5},
        {"op": "replace", "path": "", "value": [1]},
    ):
        with pytest.raises(ValidationError):
            manager.update_working_memory(**_kw(sid), ops=[op])
    big = "x" * (manager.limits.max_working_memory_bytes // 2)
    with pytest.raises(PayloadTooLarge):
        manager.update_working_memory(
            **_kw(sid),
            ops=[
                {"op": "add", "path": "/a", "value": big},
                {"op": "copy", "from": "/a", "path": "/b"},
            ],
        )
    assert manager.get_working_memory(**_kw(sid)).data == {}


@independent
def test_ops_are_bounded_after_every_op(manager: SessionManager, sid: str) -> None:
    """``copy`` of the whole document doubles it per op: the op that passes the size
    limit is refused (not the end result, built first), so is one that nests too deep,
    and so is a list of more ops than ``Limits.max_patch_ops``; nothing is written."""
    manager.update_working_memory(**_kw(sid), data={"k": "x" * 1000})
    doubling = [{"op": "copy", "from": "", "path": f"/c{i}"} for i in range(12)]
    with pytest.raises(PayloadTooLarge) as too_large:
        manager.update_working_memory(**_kw(sid), ops=doubling)
    assert too_large.value.field == "ops[10]"  # 2**11 KB > 1 MiB
    nested: Any = {}
    for _ in range(59):
        nested = {"a": nested}
    manager.update_working_memory(**_kw(sid), data={"a": nested})
    path, deep = "/a" * 60, []
    for _ in range(8):
        deep.append({"op": "copy", "from": "", "path": path + "/x"})
        path = path + "/x" + path
    with pytest.raises(UnsupportedValue):
        manager.update_working_memory(**_kw(sid), ops=deep)
    many = [{"op": "add", "path": "/n", "value": 0}] * (manager.limits.max_patch_ops + 1)
    with pytest.raises(ValidationError, match="at most 1000 per call"):
        manager.update_working_memory(**_kw(sid), ops=many)
    assert manager.get_working_memory(**_kw(sid)).data == {"a": nested}
    assert manager.get_session(**_kw(sid)).version == 3


@independent
def test_ops_versions_audit_and_idempotency(manager: SessionManager, sid: str) -> None:
    """One version step; audit mode ``ops`` without values; a retried key replays the
    first answer, a different request under it is refused; a stale version conflicts."""
    op = [{"op": "add", "path": "/secret", "value": "s3cr3t"}]
    first = manager.update_working_memory(
        **_kw(sid), ops=op, expected_version=1, idempotency_key="k1"
    )
    assert first.version == first.session_version == 2
    replay = manager.update_working_memory(**_kw(sid), ops=op, idempotency_key="k1")
    assert replay == first
    with pytest.raises(IdempotencyKeyReused):
        manager.update_working_memory(
            **_kw(sid), ops=[{"op": "add", "path": "/secret", "value": 2}], idempotency_key="k1"
        )
    with pytest.raises(IdempotencyKeyReused):  # the same keys, in another mode
        manager.update_working_memory(**_kw(sid), patch={"secret": "s3cr3t"}, idempotency_key="k1")
    with pytest.raises(VersionConflict):
        manager.update_working_memory(**_kw(sid), ops=op, expected_version=1)
    event = audit_of(manager, sid)[-1]
    assert (event.action, event.details) == ("memory.updated", {"mode": "ops"})
    assert "s3cr3t" not in repr(audit_of(manager, sid))
    assert manager.get_session(**_kw(sid)).version == 2


@independent
def test_append_with_ops_is_one_version_step(manager: SessionManager, sid: str) -> None:
    """Messages and their state change: one transaction, one version, one audit event."""
    _state(manager, sid, {"profile": {"a": 1}})
    stored = manager.append_messages(
        **_kw(sid),
        messages=[user_msg("a"), user_msg("b")],
        working_memory_ops=[{"op": "add", "path": "/adk/state/profile", "value": None}],
        idempotency_key="turn-1",
    )
    memory = manager.get_working_memory(**_kw(sid))
    assert memory.data == {"adk": {"state": {"profile": None}}}
    assert memory.version == stored[0].session_version == 3
    event = audit_of(manager, sid)[-1]
    assert event.action == "message.appended" and event.details["memory"] == "ops"
    again = manager.append_messages(
        **_kw(sid),
        messages=[user_msg("a"), user_msg("b")],
        working_memory_ops=[{"op": "add", "path": "/adk/state/profile", "value": None}],
        idempotency_key="turn-1",
    )
    assert again == stored and manager.get_session(**_kw(sid)).version == 3


def test_append_whose_ops_conflict_stores_nothing(manager: SessionManager, sid: str) -> None:
    """On every store: a failed ``test`` op rolls back the messages of its append."""
    manager.update_working_memory(**_kw(sid), data={"turn": 1})
    before = snapshot(manager, sid)
    with pytest.raises(PatchConflict):
        manager.append_messages(
            **_kw(sid),
            messages=[user_msg("a")],
            working_memory_ops=[
                {"op": "replace", "path": "/turn", "value": 2},
                {"op": "test", "path": "/turn", "value": 1},
            ],
        )
    assert snapshot(manager, sid) == before
    manager.append_messages(
        **_kw(sid),
        messages=[user_msg("a")],
        working_memory_ops=[
            {"op": "test", "path": "/turn", "value": 1},
            {"op": "replace", "path": "/turn", "value": 2},
        ],
    )
    assert manager.get_working_memory(**_kw(sid)).data == {"turn": 2}
    assert [m.content for m in manager.get_messages(**_kw(sid)).items] == ["a"]
