"""Opaque per-session records: ``put_records``, ``get_record``, ``list_records`` and
``delete_records`` on every store (bytes kept exactly, code-point order, bounds,
insert-if-absent, one version step and audit event of counts, idempotent replays, gone
with the session). Stale ``expected_version``, ownership and closed sessions are also
covered by the operation tables of contract_support."""

from __future__ import annotations

import asyncio

import pytest
from contract_support import OTHER, USER, audit_of, new_session, snapshot

from agentsession import (
    AsyncSessionManager,
    DeleteRecordsResult,
    IdempotencyKeyReused,
    PayloadTooLarge,
    PutRecordsResult,
    RecordWrite,
    SessionManager,
    SessionNotActive,
    SessionNotFound,
    ValidationError,
    VersionConflict,
)
from agentsession.service import Limits
from agentsession.stores.base import SessionStore
from agentsession.stores.sql.store import SQLStore

#: Keys whose code-point order differs from a case-folding, locale or UTF-16 order, and
#: two that only a trailing space tells apart (MariaDB PAD SPACE collations would
#: merge them).
KEYS = ["A", "B", "a", "a ", "b", "z", "\u00e9", "\u4e2d", "\uffee", "\U0001f600"]
ALL_BYTES = bytes(range(256))


@pytest.fixture
def sid(manager: SessionManager) -> str:
    return new_session(manager).session_id


def _put(m: SessionManager, sid: str, *writes: RecordWrite, **kw: object) -> PutRecordsResult:
    return m.put_records(session_id=sid, user_id=USER, records=list(writes), **kw)


def _keys(m: SessionManager, sid: str, **kw: object) -> list[tuple[str, str]]:
    return [(r.namespace, r.key) for r in m.list_records(session_id=sid, user_id=USER, **kw)]


def test_records_round_trip_bytes_and_meta_exactly(manager: SessionManager, sid: str) -> None:
    """Every byte value, an empty value and a NUL-laden meta come back as written; the
    record carries the session version of its write."""
    v = manager.get_session(session_id=sid, user_id=USER).version
    meta = {"type": "msgpack", "nested": {"nul": "a\x00b", "emoji": "\U0001f600"}}
    result = _put(manager, sid, RecordWrite("cp", "all", ALL_BYTES, meta), RecordWrite("", "empty"))
    assert result == PutRecordsResult(written=2, session_version=v + 1)
    got = manager.get_record(session_id=sid, user_id=USER, namespace="cp", key="all")
    assert got is not None
    assert (got.data, got.meta, got.version, got.session_id) == (ALL_BYTES, meta, v + 1, sid)
    empty = manager.get_record(session_id=sid, user_id=USER, namespace="", key="empty")
    assert empty is not None and (empty.data, empty.meta) == (b"", {})
    assert manager.get_record(session_id=sid, user_id=USER, namespace="cp", key="none") is None
    assert manager.get_record(session_id=sid, user_id=USER, namespace="x", key="all") is None


def test_big_record_round_trips(manager: SessionManager, sid: str) -> None:
    data = bytes(range(256)) * 8192  # 2 MiB
    _put(manager, sid, RecordWrite("big", "k", data))
    got = manager.get_record(session_id=sid, user_id=USER, namespace="big", key="k")
    assert got is not None and got.data == data


def _worst_case(size: int, text: bool) -> bytes:
    """``size`` bytes that a client escaping into SQL text doubles: quotes, backslashes
    and NULs; with ``text``, multi-byte UTF-8 text among them."""
    unit = b"'\\\x00\"" + ("\u00e9\u4e2d\U0001f600".encode() if text else b"")
    return (unit * (size // len(unit) + 1))[:size]


@pytest.mark.parametrize("text", [False, True], ids=["escapes", "escapes-and-text"])
def test_c25_6_a_worst_case_record_at_the_maximum_round_trips(
    store: SessionStore, manager: SessionManager, sid: str, text: bool
) -> None:
    """A record of exactly ``Limits.max_record_bytes`` (8 MiB) of quotes, backslashes
    and NULs (and multi-byte text), with a worst-case meta near 64 KiB, is kept exactly
    on every store: MariaDB at its default ``max_allowed_packet`` (16 MiB, checked) too,
    which the escaped text of such a record (16 MiB and more) would exceed."""
    if isinstance(store, SQLStore) and store.engine.dialect.name in ("mysql", "mariadb"):
        with store.engine.connect() as conn:
            packet = conn.exec_driver_sql("SELECT @@max_allowed_packet").scalar()
        assert packet == 16 * 1024 * 1024  # the servers' default: the test is honest
    data = _worst_case(Limits().max_record_bytes, text)
    meta = {"q": "'\"\\\u00e9" * 8000}
    _put(manager, sid, RecordWrite("big", "k", data, meta))
    got = manager.get_record(session_id=sid, user_id=USER, namespace="big", key="k")
    assert got is not None and got.data == data and got.meta == meta


def test_c25_6_two_worst_case_records_in_one_put(manager: SessionManager, sid: str) -> None:
    """Two records of 8 MiB of quotes, backslashes and NULs in one ``put_records`` are
    both kept: no store sends them to its server as one statement too big for it."""
    first, second = (
        _worst_case(Limits().max_record_bytes, False),
        _worst_case(Limits().max_record_bytes, True),
    )
    _put(manager, sid, RecordWrite("big", "a", first), RecordWrite("big", "b", second))
    got = [r.data for r in manager.list_records(session_id=sid, user_id=USER, namespace="big")]
    assert got == [first, second]


def test_listing_is_in_code_point_order_on_every_store(manager: SessionManager, sid: str) -> None:
    writes = [RecordWrite(ns, k, k.encode()) for ns in ("n", "n2", "") for k in reversed(KEYS)]
    _put(manager, sid, *writes)
    expected = [(ns, k) for ns in ("", "n", "n2") for k in sorted(KEYS)]
    assert _keys(manager, sid) == expected
    assert _keys(manager, sid, descending=True) == expected[::-1]
    assert _keys(manager, sid, namespace="n") == [("n", k) for k in sorted(KEYS)]
    assert _keys(manager, sid, namespace="n", descending=True, limit=3) == [
        ("n", k) for k in sorted(KEYS)[::-1][:3]
    ]
    # "a" and "a " are two records.
    a = manager.get_record(session_id=sid, user_id=USER, namespace="n", key="a")
    a_space = manager.get_record(session_id=sid, user_id=USER, namespace="n", key="a ")
    assert a is not None and a_space is not None and (a.data, a_space.data) == (b"a", b"a ")


def test_prefix_and_exclusive_bounds(manager: SessionManager, sid: str) -> None:
    keys = ["a", "ab", "ab%", "ab_", "abc", "abd", "ac", "b"]
    _put(manager, sid, *(RecordWrite("ns", k) for k in keys), RecordWrite("other", "abc"))
    assert [k for _, k in _keys(manager, sid, namespace="ns", prefix="ab")] == [
        "ab",
        "ab%",
        "ab_",
        "abc",
        "abd",
    ]
    assert _keys(manager, sid, prefix="abc") == [("ns", "abc"), ("other", "abc")]
    got = _keys(manager, sid, namespace="ns", prefix="ab", after="ab", before="abd")
    assert [k for _, k in got] == ["ab%", "ab_", "abc"]
    got = _keys(manager, sid, namespace="ns", after="ab_", descending=True, limit=2)
    assert [k for _, k in got] == ["b", "ac"]
    assert _keys(manager, sid, namespace="ns", after="b") == []
    assert _keys(manager, sid, namespace="ns", after="b", before="a") == []
    assert _keys(manager, sid, namespace="ns", prefix="zz") == []
    assert _keys(manager, sid, namespace="ns", limit=0) == []
    assert _keys(manager, sid, namespace="missing") == []


def test_prefix_ending_in_the_last_code_points(manager: SessionManager, sid: str) -> None:
    """A prefix's range ends right after its keys even when its last character has no
    next code point (U+10FFFF) or is followed by the surrogates (U+D7FF)."""
    top, low = "\U0010ffff", "\ud7ff"
    keys = ["a", f"a{top}", f"a{top}b", "b", low, f"{low}x", "\ue000", top, f"{top}{top}"]
    _put(manager, sid, *(RecordWrite("ns", k) for k in keys))
    assert [k for _, k in _keys(manager, sid, prefix=f"a{top}")] == [f"a{top}", f"a{top}b"]
    assert [k for _, k in _keys(manager, sid, prefix=low)] == [low, f"{low}x"]
    assert [k for _, k in _keys(manager, sid, prefix=top)] == [top, f"{top}{top}"]
    got = _keys(manager, sid, prefix=f"a{top}", descending=True, limit=1)
    assert got == [("ns", f"a{top}b")]


def test_paging_with_after_visits_every_record_once(manager: SessionManager, sid: str) -> None:
    keys = [f"k{i:03d}" for i in range(25)]
    _put(manager, sid, *(RecordWrite("ns", k) for k in keys))
    seen: list[str] = []
    after = None
    while page := manager.list_records(
        session_id=sid, user_id=USER, namespace="ns", after=after, limit=7
    ):
        seen += [r.key for r in page]
        after = page[-1].key
    assert seen == keys


def test_put_replaces_and_if_absent_keeps(manager: SessionManager, sid: str) -> None:
    first = _put(manager, sid, RecordWrite("ns", "k", b"one", {"n": 1}))
    result = _put(
        manager,
        sid,
        RecordWrite("ns", "k", b"two", if_absent=True),
        RecordWrite("ns", "new", b"new", if_absent=True),
    )
    assert result == PutRecordsResult(written=1, session_version=first.session_version + 1)
    kept = manager.get_record(session_id=sid, user_id=USER, namespace="ns", key="k")
    assert kept is not None and (kept.data, kept.meta) == (b"one", {"n": 1})
    assert kept.version == first.session_version
    replaced = _put(manager, sid, RecordWrite("ns", "k", b"three"))
    got = manager.get_record(session_id=sid, user_id=USER, namespace="ns", key="k")
    assert got is not None and (got.data, got.meta) == (b"three", {})
    assert got.version == replaced.session_version


def test_writing_nothing_changes_nothing(manager: SessionManager, sid: str) -> None:
    _put(manager, sid, RecordWrite("ns", "k", b"v"))
    before = snapshot(manager, sid)
    version = before["session"]["version"]
    assert _put(manager, sid) == PutRecordsResult(written=0, session_version=version)
    assert _put(manager, sid, RecordWrite("ns", "k", b"x", if_absent=True)).written == 0
    for namespace, prefix in (("other", None), ("ns", "zz"), (None, "q")):
        result = manager.delete_records(
            session_id=sid, user_id=USER, namespace=namespace, prefix=prefix
        )
        assert result == DeleteRecordsResult(removed=0, session_version=version)
    assert snapshot(manager, sid) == before


def test_delete_by_namespace_and_prefix(manager: SessionManager, sid: str) -> None:
    _put(manager, sid, *(RecordWrite(ns, k) for ns in ("a", "b") for k in ("x1", "x2", "y1")))
    v = manager.get_session(session_id=sid, user_id=USER).version
    result = manager.delete_records(session_id=sid, user_id=USER, namespace="a", prefix="x")
    assert result == DeleteRecordsResult(removed=2, session_version=v + 1)
    assert _keys(manager, sid) == [("a", "y1"), ("b", "x1"), ("b", "x2"), ("b", "y1")]
    assert manager.delete_records(session_id=sid, user_id=USER, prefix="y").removed == 2
    assert manager.delete_records(session_id=sid, user_id=USER).removed == 2
    assert _keys(manager, sid) == []
    assert manager.get_session(session_id=sid, user_id=USER).version == v + 3


def test_audit_has_counts_and_namespaces_never_data(manager: SessionManager, sid: str) -> None:
    secret = "s3cr3t-record-value"
    _put(
        manager,
        sid,
        RecordWrite("cp", "key-one", secret.encode(), {"m": secret}),
        RecordWrite("w", "key-two", secret.encode()),
    )
    manager.delete_records(session_id=sid, user_id=USER, namespace="w")
    put, deleted = audit_of(manager, sid)[-2:]
    assert (put.action, put.actor) == ("records.put", USER)
    assert put.details == {"count": 2, "kept": 0, "namespace_count": 2}
    assert put.version_after == put.version_before + 1
    assert deleted.action == "records.deleted"
    assert deleted.details == {"count": 1, "namespace_given": True, "prefix_given": False}
    text = repr([put.details, deleted.details])
    assert secret not in text and "key-one" not in text


def test_idempotent_replay_writes_once(manager: SessionManager, sid: str) -> None:
    w = RecordWrite("ns", "k", b"v")
    first = _put(manager, sid, w, idempotency_key="put-1")
    _put(manager, sid, RecordWrite("ns", "k", b"changed"))
    again = _put(manager, sid, w, idempotency_key="put-1")
    assert again == first
    got = manager.get_record(session_id=sid, user_id=USER, namespace="ns", key="k")
    assert got is not None and got.data == b"changed"
    with pytest.raises(IdempotencyKeyReused):
        _put(manager, sid, RecordWrite("ns", "k", b"other bytes"), idempotency_key="put-1")
    deleted = manager.delete_records(session_id=sid, user_id=USER, idempotency_key="del-1")
    _put(manager, sid, w)
    replay = manager.delete_records(session_id=sid, user_id=USER, idempotency_key="del-1")
    assert replay == deleted and deleted.removed == 1
    assert _keys(manager, sid) == [("ns", "k")]


def test_optimistic_locking(manager: SessionManager, sid: str) -> None:
    v = manager.get_session(session_id=sid, user_id=USER).version
    with pytest.raises(VersionConflict):
        _put(manager, sid, RecordWrite("ns", "k"), expected_version=v + 1)
    ok = _put(manager, sid, RecordWrite("ns", "k"), expected_version=v)
    with pytest.raises(VersionConflict):
        manager.delete_records(session_id=sid, user_id=USER, expected_version=v)
    done = manager.delete_records(session_id=sid, user_id=USER, expected_version=ok.session_version)
    assert done.removed == 1


def test_another_user_sees_no_session(manager: SessionManager, sid: str) -> None:
    _put(manager, sid, RecordWrite("ns", "k", b"v"))
    kw = {"session_id": sid, "user_id": OTHER}
    with pytest.raises(SessionNotFound):
        manager.get_record(**kw, namespace="ns", key="k")
    with pytest.raises(SessionNotFound):
        manager.list_records(**kw)
    with pytest.raises(SessionNotFound):
        manager.put_records(**kw, records=[RecordWrite("ns", "k", b"theirs")])
    with pytest.raises(SessionNotFound):
        manager.delete_records(**kw)
    got = manager.get_record(session_id=sid, user_id=OTHER, admin=True, namespace="ns", key="k")
    assert got is not None and got.data == b"v"


def test_closed_session_refuses_writes_but_reads(manager: SessionManager, sid: str) -> None:
    _put(manager, sid, RecordWrite("ns", "k", b"v"))
    manager.close_session(session_id=sid, user_id=USER)
    with pytest.raises(SessionNotActive):
        _put(manager, sid, RecordWrite("ns", "k2"))
    with pytest.raises(SessionNotActive):
        manager.delete_records(session_id=sid, user_id=USER)
    assert _keys(manager, sid) == [("ns", "k")]


def test_records_go_with_the_session(manager: SessionManager) -> None:
    s = manager.create_session(user_id=USER, agent="lg", external_key="thread-1")
    _put(manager, s.session_id, RecordWrite("ns", "k", b"v"))
    manager.delete_session(session_id=s.session_id, user_id=USER)
    with pytest.raises(SessionNotFound):
        manager.list_records(session_id=s.session_id, user_id=USER)
    again = manager.create_session(user_id=USER, agent="lg", external_key="thread-1")
    assert _keys(manager, again.session_id) == []


def test_async_manager_mirrors_records(manager: SessionManager, sid: str) -> None:
    async def run() -> None:
        am = AsyncSessionManager(manager)
        try:
            put = await am.put_records(
                session_id=sid, user_id=USER, records=[RecordWrite("ns", "k", b"\xff")]
            )
            assert put.written == 1
            got = await am.get_record(session_id=sid, user_id=USER, namespace="ns", key="k")
            assert got is not None and got.data == b"\xff"
            assert len(await am.list_records(session_id=sid, user_id=USER)) == 1
            gone = await am.delete_records(session_id=sid, user_id=USER)
            assert gone.removed == 1
        finally:
            await am.close()

    asyncio.run(run())


@pytest.mark.store_independent
@pytest.mark.parametrize(
    ("write", "field"),
    [
        (RecordWrite("n" * 129, "k"), "records[0].namespace"),
        (RecordWrite("ns", ""), "records[0].key"),
        (RecordWrite("ns", "k" * 513), "records[0].key"),
        (RecordWrite("ns", "a\nb"), "records[0].key"),
        (RecordWrite("a\x00", "k"), "records[0].namespace"),
        (RecordWrite("ns", "\ud800"), "records[0].key"),
        (RecordWrite("ns", "k", "text"), "records[0].data"),  # type: ignore[arg-type]
        (RecordWrite("ns", "k", meta=["x"]), "records[0].meta"),  # type: ignore[arg-type]
        (RecordWrite("ns", "k", if_absent=1), "records[0].if_absent"),  # type: ignore[arg-type]
    ],
)
def test_bad_records_are_refused_and_nothing_is_written(
    manager: SessionManager, sid: str, write: RecordWrite, field: str
) -> None:
    before = snapshot(manager, sid)
    with pytest.raises(ValidationError) as exc_info:
        _put(manager, sid, RecordWrite("ns", "fine"), write)
    assert exc_info.value.field == field.replace("[0]", "[1]")
    assert snapshot(manager, sid) == before


@pytest.mark.store_independent
def test_batch_rules(manager: SessionManager, sid: str) -> None:
    twice = _put(manager, sid, RecordWrite("ns", "k", b"1"), RecordWrite("ns", "k", b"2"))
    assert twice.written == 1
    got = manager.get_record(session_id=sid, user_id=USER, namespace="ns", key="k")
    assert got is not None and got.data == b"2"  # the later write of a key counts
    manager.delete_records(session_id=sid, user_id=USER)
    too_many = [RecordWrite("ns", f"k{i}") for i in range(manager.limits.max_batch_messages + 1)]
    with pytest.raises(ValidationError, match="at most"):
        _put(manager, sid, *too_many)
    with pytest.raises(ValidationError):
        manager.put_records(session_id=sid, user_id=USER, records=RecordWrite("ns", "k"))  # type: ignore[arg-type]
    for bad in ({"namespace": "\x01"}, {"prefix": "k" * 513}, {"after": 5}, {"limit": 1001}):
        with pytest.raises(ValidationError):
            manager.list_records(session_id=sid, user_id=USER, **bad)  # type: ignore[arg-type]
    assert _keys(manager, sid) == []


@pytest.mark.store_independent
def test_size_limits(store: object) -> None:
    m = SessionManager(store, limits=Limits(max_record_bytes=10))  # type: ignore[arg-type]
    sid = new_session(m).session_id
    _put(m, sid, RecordWrite("ns", "fits", b"x" * 10))
    with pytest.raises(PayloadTooLarge) as exc_info:
        _put(m, sid, RecordWrite("ns", "big", b"x" * 11))
    assert (exc_info.value.limit_bytes, exc_info.value.size_bytes) == (10, 11)
    with pytest.raises(PayloadTooLarge):
        _put(m, sid, RecordWrite("ns", "meta", meta={"m": "x" * 64 * 1024}))
    assert _keys(m, sid) == [("ns", "fits")]
