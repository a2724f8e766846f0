"""Redis-specific behaviour of the Redis store (the contract suite covers the rest).

Uses the throwaway ``redis_server`` of ``tests/servers.py`` (appendonly yes, appendfsync
always) and, for the persistence check and a vanished server, a second throwaway
redis-server started here with AOF off and ``CONFIG`` disabled.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agentsession import Policy, SessionManager
from agentsession.errors import SessionNotFound, StoreError, StoreUnavailable, ValidationError
from agentsession.models import SessionStatus
from agentsession.stores.base import StoreConflict
from agentsession.stores.redis.index import key_index
from agentsession.stores.registry import open_store
from frozen_clock import FrozenClock
from servers import Server, redis_command

redis = pytest.importorskip("redis", reason="redis-py not installed: pip install -e '.[dev]'")
from agentsession.stores.redis.locks import LOCK_TTL_MS, LOCK_WAIT_S  # noqa: E402
from agentsession.stores.redis.store import RedisStore, _masked  # noqa: E402

USER = "alice"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_plain_redis() -> tuple[subprocess.Popen[bytes], int, Path]:
    """A redis-server without AOF and with CONFIG renamed away (like managed Redis)."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    tmp = Path(tempfile.mkdtemp(prefix="as-redis-plain-"))
    port = _free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--rename-command",
            "CONFIG",
            "",
            "--dir",
            str(tmp),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if redis_command(port, "PING") == "PONG":
                return proc, port, tmp
        except (OSError, RuntimeError):
            time.sleep(0.02)
    proc.kill()
    raise RuntimeError("plain redis-server did not start")


@pytest.fixture
def plain_redis(redis_server: Server) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A second throwaway Redis (AOF off, CONFIG disabled), stopped after the test."""
    proc, port, tmp = _start_plain_redis()
    try:
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def redis_store(redis_url: str) -> Iterator[RedisStore]:
    """A Redis store on the flushed throwaway server."""
    s = RedisStore(redis_url)
    try:
        yield s
    finally:
        s.close()


def _session_keys(store: RedisStore, session_id: str) -> list[str]:
    return sorted(store.client.scan_iter(match=f"*{session_id}*", count=1000))


def test_delete_leaves_no_key_of_the_session(redis_store: RedisStore) -> None:
    """Purge removes every key, index entry and idempotency record of the session;
    only the content-free tombstone event stays."""
    m = SessionManager(redis_store)
    sid = m.create_session(user_id=USER, ttl_seconds=3600, idempotency_key="c1").session_id
    kw = {"session_id": sid, "user_id": USER}
    m.append_messages(
        **kw,
        messages=[{"role": "user", "content": "hi"}],
        working_memory_patch={"goal": "g"},
        idempotency_key="a1",
    )
    m.record_tool_call(
        **kw, tool="t", arguments={"a": 1}, provider_call_id="call_0", idempotency_key="t1"
    )
    run = m.start_run(**kw, input="x")
    m.add_run_step(**kw, run_id=run.run_id, kind="model")
    keep = m.create_session(user_id=USER).session_id
    assert len(_session_keys(redis_store, sid)) >= 8
    m.delete_session(**kw)
    assert _session_keys(redis_store, sid) == []
    r = redis_store.client
    indexes = [
        "as:sessions",
        *r.scan_iter(match="as:status:*"),
        *r.scan_iter(match="as:agent:*"),
        *r.scan_iter(match="as:user:{alice}:*"),
    ]
    assert len(indexes) >= 6
    members = [x for key in indexes for x in r.zrange(key, 0, -1)]
    assert [x for x in members if sid in x] == []
    assert r.zscore("as:due", sid) is None
    assert r.zrange("as:idem:by_time", 0, -1) == []  # all three records were this session's
    assert r.zrange("as:idem:user:{alice}", 0, -1) == []
    assert list(r.scan_iter(match="as:idem:{*")) == []
    tomb = m.get_audit_log(session_id=sid, user_id="root", admin=True).items
    assert [e.action for e in tomb] == ["session.deleted"]
    assert m.get_session(session_id=keep, user_id=USER).status == SessionStatus.ACTIVE


def test_run_writes_read_no_steps_and_never_rewrite_the_run_per_step(
    redis_store: RedisStore,
) -> None:
    """A step is one RPUSH (the list's length is the step count): the run's hash field is
    not rewritten, and no write tagged with the run reads its steps (no LRANGE)."""
    m = SessionManager(redis_store)
    sid = m.create_session(user_id=USER).session_id
    kw = {"session_id": sid, "user_id": USER}
    run_id = m.start_run(**kw).run_id
    for _ in range(30):
        m.add_run_step(**kw, run_id=run_id, kind="model")
    r = redis_store.client
    runs_key, steps_key = f"as:{{{sid}}}:runs", f"as:{{{sid}}}:steps:{run_id}"
    row = r.hget(runs_key, run_id)
    assert '"steps"' not in row and '"step_count"' not in row
    r.config_resetstat()
    m.add_run_step(**kw, run_id=run_id, kind="model")
    assert r.hget(runs_key, run_id) == row and r.llen(steps_key) == 31
    m.record_tool_call(**kw, tool="t", run_id=run_id)
    m.append_message(**kw, message={"role": "assistant", "content": "x", "run_id": run_id})
    m.finish_run(**kw, run_id=run_id, status="SUCCEEDED")
    assert "cmdstat_lrange" not in r.info("commandstats")
    assert m.get_run(**kw, run_id=run_id).step_count == 31


def test_writers_of_one_session_take_turns_without_re_runs(redis_store: RedisStore) -> None:
    """16 threads x 25 appends to one session with no re-run allowed
    (``max_retries=1``): the session's write lock makes them wait their turn, so none loses a race
    (without it, most would fail with StoreConflict at once); seq gapless; the lock key
    is gone afterwards."""
    m = SessionManager(redis_store, policy=Policy(max_retries=1))
    sid = m.create_session(user_id=USER).session_id
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        for j in range(25):
            try:
                m.append_message(
                    session_id=sid, user_id=USER, message={"role": "user", "content": f"{i}:{j}"}
                )
            except BaseException as exc:  # collected for the assertion
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    seqs = [msg.seq for msg in m.get_messages(session_id=sid, user_id=USER, limit=1000).items]
    assert seqs == list(range(1, 16 * 25 + 1))
    assert redis_store.client.exists(f"as:{{{sid}}}:lock") == 0


def test_a_dead_writers_lock_expires(redis_store: RedisStore) -> None:
    """A lock left by a writer that died (never released) delays the next writer by
    at most its expiry; it does not block the session."""
    m = SessionManager(redis_store)
    sid = m.create_session(user_id=USER).session_id
    redis_store.client.set(f"as:{{{sid}}}:lock", "dead-writer", px=LOCK_TTL_MS)
    started = time.monotonic()
    m.append_message(session_id=sid, user_id=USER, message={"role": "user", "content": "x"})
    assert LOCK_TTL_MS / 1000 * 0.8 <= time.monotonic() - started < LOCK_WAIT_S
    assert m.get_session(session_id=sid, user_id=USER).message_count == 1


def test_expired_session_stays_readable_and_keys_never_expire(redis_store: RedisStore) -> None:
    """An idle session becomes EXPIRED, not gone: its keys carry no Redis expiry."""
    clock = FrozenClock()
    m = SessionManager(redis_store, clock=clock)
    sid = m.create_session(user_id=USER, ttl_seconds=60).session_id
    kw = {"session_id": sid, "user_id": USER}
    m.append_message(**kw, message={"role": "user", "content": "still here"})
    clock.advance(61)
    assert m.sweep_expired().expired_session_ids == [sid]
    s = m.get_session(**kw)
    assert s.status == SessionStatus.EXPIRED and s.status_reason == "ttl"
    assert [x.content for x in m.get_messages(**kw).items] == ["still here"]
    assert all(redis_store.client.ttl(k) == -1 for k in _session_keys(redis_store, sid))
    assert redis_store.client.zscore("as:due", sid) is None
    assert m.restore_session(**kw).session.status == SessionStatus.ACTIVE


def test_idempotency_records_carry_a_redis_expiry(redis_url: str) -> None:
    """Records expire in Redis too (the policy's retention), on top of the manager's check."""
    with RedisStore(redis_url) as store:
        m = SessionManager(store, policy=Policy(idempotency_retention_seconds=90_000))
        m.create_session(user_id=USER, idempotency_key="k")
        (key,) = store.client.scan_iter(match="as:idem:{alice}:*")
        assert 89_000 < store.client.ttl(key) <= 90_000


def test_admin_records_for_a_user_leave_no_index_entry_once_gone(redis_store: RedisStore) -> None:
    """An admin's keyed writes for alice are indexed under alice too; whichever way a
    record goes (with its session, purged by the sweep, or expired by Redis and then
    swept), alice's index entry and its owner entry go with it."""
    m = SessionManager(redis_store)
    r = redis_store.client
    admin: dict[str, Any] = {"user_id": "root", "admin": True}
    sid = m.create_session(user_id=USER).session_id
    m.update_session(session_id=sid, title="t", idempotency_key="u1", **admin)
    for key in ("s1", "s2"):
        m.update_shared_memory(
            scope="user",
            agent=key,
            target_user_id=USER,
            data={"a": 1},
            idempotency_key=key,
            **admin,
        )
    assert len(r.zrange("as:idem:user:{alice}", 0, -1)) == 3 == r.hlen("as:idem:owners")
    m.delete_session(session_id=sid, user_id=USER)
    assert len(r.zrange("as:idem:user:{alice}", 0, -1)) == 2 == r.hlen("as:idem:owners")
    r.delete("as:idem:{root}:update_shared_memory:s1")  # as if Redis expired it
    with redis_store.transaction(write=True) as tx:
        assert tx.purge_idempotency(created_before=datetime.now(UTC) + timedelta(days=1)) == 1
    assert r.zrange("as:idem:user:{alice}", 0, -1) == [] and r.hlen("as:idem:owners") == 0
    assert r.zrange("as:idem:user:{root}", 0, -1) == []


def test_timestamps_round_trip_exactly(redis_store: RedisStore) -> None:
    """Aware UTC with microseconds in, the same instant out."""
    from datetime import UTC, datetime

    clock = FrozenClock(datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC))
    m = SessionManager(redis_store, clock=clock)
    s = m.create_session(user_id=USER)
    got = m.get_session(session_id=s.session_id, user_id=USER)
    assert got.created_at == clock.now and got.created_at.utcoffset().total_seconds() == 0
    assert got.created_at.microsecond == 891011


def test_not_durable_server_is_refused_or_warned(
    redis_server: Server, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """appendfsync other than always: StoreError by default, a loud warning if allowed."""
    redis_command(redis_server.port, "CONFIG", "SET", "appendfsync", "everysec")
    try:
        with pytest.raises(StoreError, match="appendfsync everysec") as info:
            RedisStore(redis_url)
        assert info.value.context["appendfsync"] == "everysec"
        with caplog.at_level(logging.WARNING, logger="agentsession.stores.redis.store"):
            RedisStore(redis_url, require_durable=False).close()
        assert "appendfsync everysec" in caplog.text
    finally:
        redis_command(redis_server.port, "CONFIG", "SET", "appendfsync", "always")
    RedisStore(redis_url).close()


def test_config_disabled_warns(
    plain_redis: tuple[subprocess.Popen[bytes], int], caplog: pytest.LogCaptureFixture
) -> None:
    """A server that refuses CONFIG (managed Redis) is used, with a warning."""
    _, port = plain_redis
    with caplog.at_level(logging.WARNING, logger="agentsession.stores.redis.store"):
        store = RedisStore(f"redis://127.0.0.1:{port}/0")
    store.close()
    assert "cannot read the persistence settings" in caplog.text


def test_server_gone_is_a_store_error(plain_redis: tuple[subprocess.Popen[bytes], int]) -> None:
    """No redis.* exception escapes: a vanished server is StoreUnavailable (a
    StoreError), at open and later."""
    proc, port = plain_redis
    url = f"redis://127.0.0.1:{port}/0"
    store = RedisStore(url, require_durable=False, socket_timeout_seconds=2)
    m = SessionManager(store)
    sid = m.create_session(user_id=USER).session_id
    proc.terminate()
    proc.wait(timeout=20)
    for call in (
        lambda: m.get_session(session_id=sid, user_id=USER),
        lambda: m.append_message(session_id=sid, user_id=USER, message={"role": "user"}),
        lambda: m.list_sessions(user_id=USER),
    ):
        with pytest.raises(StoreUnavailable) as info:
            call()
        assert not isinstance(info.value, redis.RedisError)
        assert isinstance(info.value.__cause__, redis.RedisError)
    store.close()
    with pytest.raises(StoreUnavailable, match="unreachable"):
        RedisStore(url, socket_timeout_seconds=2)


def test_open_store_by_url_and_close(redis_server: Server, redis_url: str) -> None:
    """redis:// opens a RedisStore (auto_migrate ignored); bad options are clear;
    close() leaves a caller's client open and makes the store unusable."""
    store = open_store(redis_url, auto_migrate=True, require_durable=True)
    assert isinstance(store, RedisStore) and store.url == redis_url
    store.close()
    with pytest.raises(StoreError, match="closed"), store.transaction(write=False):
        pass
    with pytest.raises(ValidationError, match="no option colour"):
        open_store(redis_url, colour="blue")
    with pytest.raises(StoreError) as info:  # the test server has no password
        RedisStore(f"redis://:s3cret@127.0.0.1:{redis_server.port}/0")
    assert "s3cret" not in str(info.value)
    assert _masked("redis://u:s3cret@h:1/0") == "redis://u:***@h:1/0"
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    RedisStore(client=client).close()
    assert client.ping()
    client.close()
    with pytest.raises(StoreError, match="decode_responses"):
        RedisStore(client=redis.Redis.from_url(redis_url))


class _CountingRedis(redis.Redis):
    """Counts the keys read by MGET (the session documents a listing reads)."""

    mget_keys = 0

    def mget(self, keys: Any, *args: Any) -> Any:
        type(self).mget_keys += len(keys) + len(args)
        return super().mget(keys, *args)


def test_listing_by_status_or_agent_reads_its_index(redis_url: str) -> None:
    """A listing by status or agent reads the sessions of its own index set, not every
    session of the user (200 ACTIVE sessions here, 3 CLOSED, 2 past their TTL)."""
    client = _CountingRedis.from_url(redis_url, decode_responses=True)
    clock = FrozenClock()
    m = SessionManager(RedisStore(client=client), clock=clock)
    for _ in range(200):
        m.create_session(user_id=USER, agent="busy")
    closed = {m.create_session(user_id=USER, agent="rare").session_id for _ in range(3)}
    for sid in closed:
        m.close_session(session_id=sid, user_id=USER)
    due = {m.create_session(user_id=USER, agent="busy", ttl_seconds=5).session_id for _ in range(2)}
    clock.advance(10)
    for kwargs, wanted in (
        ({"status": "CLOSED"}, closed),
        ({"agent": "rare"}, closed),
        ({"status": "EXPIRED"}, due),
        ({"status": "EXPIRED", "agent": "busy"}, due),
    ):
        _CountingRedis.mget_keys = 0
        page = m.list_sessions(user_id=USER, **kwargs)
        assert {s.session_id for s in page.items} == wanted
        assert _CountingRedis.mget_keys == len(wanted), kwargs
    _CountingRedis.mget_keys = 0
    assert len(m.list_sessions(user_id=USER, status="ACTIVE", limit=10).items) == 10
    assert _CountingRedis.mget_keys <= 32
    client.close()


def test_indexes_are_built_for_data_of_an_older_version(redis_store: RedisStore) -> None:
    """A store written before the status, agent, per-user due, per-tool and metadata
    sets existed gets them when opened: listings by status, agent and metadata and one
    tool's history see every earlier session and call."""
    clock = FrozenClock()
    m = SessionManager(redis_store, clock=clock)
    closed = m.create_session(user_id=USER, agent="a", metadata={"team": "x"}).session_id
    m.close_session(session_id=closed, user_id=USER)
    due = m.create_session(user_id=USER, agent="b", ttl_seconds=5).session_id
    for tool in ("grep", "ls", "grep"):
        m.record_tool_call(session_id=due, user_id=USER, tool=tool)
    clock.advance(10)
    r = redis_store.client
    added = [
        *r.scan_iter(match="as:status:*"),
        *r.scan_iter(match="as:agent:*"),
        *r.scan_iter(match="as:user:{alice}:status:*"),
        *r.scan_iter(match="as:user:{alice}:agent:*"),
        "as:user:{alice}:due",
        *r.scan_iter(match="as:{*}:calls:tool*"),
        *r.scan_iter(match="as:meta:*"),
        *r.scan_iter(match="as:user:{alice}:meta:*"),
        "as:index_version",
    ]
    assert r.delete(*added) == len(added)

    reopened = SessionManager(RedisStore(client=r), clock=clock)
    assert r.get("as:index_version") == "3"
    listed = reopened.list_sessions(user_id=USER, metadata={"team": "x"}).items
    assert [s.session_id for s in listed] == [closed]
    assert reopened.count_sessions(user_id=USER, metadata={"team": "x"}) == 1
    kw: dict[str, Any] = {"user_id": USER}
    assert [s.session_id for s in reopened.list_sessions(**kw, status="CLOSED").items] == [closed]
    assert [s.session_id for s in reopened.list_sessions(**kw, status="EXPIRED").items] == [due]
    assert [s.session_id for s in reopened.list_sessions(**kw, agent="a").items] == [closed]
    grep = reopened.get_tool_history(session_id=due, user_id=USER, tool="grep").items
    assert [c.seq for c in grep] == [1, 3]


def test_a_removal_of_nothing_keeps_the_seq_checks_of_later_appends(
    redis_store: RedisStore,
) -> None:
    """delete_messages that removed nothing leaves no cut behind: a later append in the
    same transaction still checks that its seq is free, so a row that appeared there
    meanwhile is a conflict, not a second message at that seq."""
    m = SessionManager(redis_store)
    sid = m.create_session(user_id=USER).session_id
    first = m.append_message(session_id=sid, user_id=USER, message={"role": "user", "content": "a"})
    key = f"as:{{{sid}}}:msgs"
    intruder = first.model_copy(update={"message_id": "msg_intruder", "seq": 2})
    with pytest.raises(StoreConflict), redis_store.transaction(write=True) as tx:
        assert tx.delete_messages(sid, after_seq=1) == 0
        redis_store.client.zadd(key, {'{"id":"msg_intruder","seq":2}': 2})
        tx.insert_messages([intruder.model_copy(update={"message_id": "msg_mine"})])
    assert redis_store.client.zcount(key, 2, 2) == 1


@pytest.mark.parametrize("stale", ["missing", "other_key"])
def test_a_stale_key_entry_does_not_block_its_key(redis_store: RedisStore, stale: str) -> None:
    """A key entry naming a missing session, or a session with another key, counts as
    absent: the key reads as unused, opens and creates a session, and the entry is
    overwritten with the new session's id in the same commit."""
    m = SessionManager(redis_store)
    ghost = "ses_ghost"
    if stale == "other_key":
        ghost = m.create_session(user_id=USER, agent="a", external_key="other").session_id
    entry = key_index(USER, "a", "k")
    redis_store.client.set(entry, ghost)
    with pytest.raises(SessionNotFound):
        m.get_session_by_key(user_id=USER, agent="a", external_key="k")
    session, created = m.open_session(user_id=USER, agent="a", external_key="k")
    assert created and redis_store.client.get(entry) == session.session_id
    assert m.get_session_by_key(user_id=USER, agent="a", external_key="k") == session
    m.delete_session(session_id=session.session_id, user_id=USER)
    redis_store.client.set(entry, ghost)
    again = m.create_session(user_id=USER, agent="a", external_key="k")
    assert redis_store.client.get(entry) == again.session_id


class _CommandCounter(redis.Redis):
    """Counts the commands sent (a pipeline's count once each too)."""

    commands = 0

    def execute_command(self, *args: Any, **options: Any) -> Any:
        type(self).commands += 1
        return super().execute_command(*args, **options)


def test_a_fork_copies_server_side_in_one_commit(redis_url: str) -> None:
    """A fork sends as many commands for a parent of 1,000 messages as for one of 10:
    the copy runs in the commit script. The members it rewrites start with the id or
    session id its fixed-width prefix rewrite expects; the copies go with the fork."""
    client = _CommandCounter.from_url(redis_url, decode_responses=True)
    store = RedisStore(client=client)
    m = SessionManager(store)
    sent = []
    for size in (10, 1000):
        sid = m.create_session(user_id=USER, working_memory={"goal": "g"}).session_id
        kw = {"session_id": sid, "user_id": USER}
        for start in range(0, size, 500):
            stop = min(size, start + 500)
            batch = [{"role": "user", "content": f"m{i}"} for i in range(start, stop)]
            m.append_messages(**kw, messages=batch)
        m.add_summary(**kw, text="gist", from_seq=1, to_seq=2)
        _CommandCounter.commands = 0
        fork = m.fork_session(**kw)
        sent.append(_CommandCounter.commands)
        assert fork.message_count == size
    assert sent[0] == sent[1]
    p = f"as:{{{fork.session_id}}}:"
    assert client.zcard(p + "msgs") == 1000
    assert all(x.startswith('{"id":"msg_') for x in client.zrange(p + "msgs", 0, 2))
    rewritten = [*client.zrange(p + "summaries", 0, -1), *client.hvals(p + "memhist")]
    assert len(rewritten) == 3
    assert all(x.startswith(f'{{"session_id":"{fork.session_id}"') for x in rewritten)
    assert m.get_working_memory(session_id=fork.session_id, user_id=USER, at_seq=0).data == {
        "goal": "g"
    }
    m.delete_session(session_id=fork.session_id, user_id=USER)
    assert _session_keys(store, fork.session_id) == []
    assert client.zcard(f"as:forks:{{{sid}}}") == 0
    store.close()
    client.close()
