"""The Redis store: the storage port on redis-py, one Lua script per committed write.

URL: ``redis://[:password@]host[:port][/db]`` or ``rediss://...`` (TLS). Standalone Redis
(or the primary of a Sentinel setup); Redis Cluster is not supported, because one
transaction also writes store-wide keys (indexes, the audit counter) in other slots.

Key layout (``{sid}`` is a Redis hash tag, so one session's keys share a cluster slot)::

    as:{sid}:session        string  the Session as JSON
    as:{sid}:msgs           zset    score = seq, member = {"id","seq","at","p": payload} JSON;
                                    removing messages cuts the top (ZREMRANGEBYSCORE)
    as:{sid}:memory, as:{sid}:memhist, as:{sid}:memhist:at  the working memory and its
                                    history (:mod:`.memory`)
    as:{sid}:records, as:{sid}:records:idx  the session's records (:mod:`.records`)
    as:{sid}:summaries      zset    the session's summaries (:mod:`.summaries`)
    as:{sid}:rewinds, as:{sid}:rewound:<n>  rewinds and hidden messages (:mod:`.rewinds`)
    as:{sid}:calls          hash    call_id -> ToolCall JSON
    as:{sid}:calls:seq      zset    score = seq, member = call_id
    as:{sid}:calls:find     hash    "<tool>\\x1f<arguments_hash>" -> call_id of the newest
    as:{sid}:calls:provider hash    provider_call_id -> call_id of the newest
    as:{sid}:calls:tool:<tool>  zset  one tool's calls: score = seq, member = call_id
    as:{sid}:calls:tools    set     the tools with such a zset (to delete them)
    as:{sid}:runs           hash    run_id -> Run JSON (without steps and step_count)
    as:{sid}:runs:seq       zset    score = seq, member = run_id
    as:{sid}:steps:<run_id> list    RunStep JSON in index order; its length (LLEN, O(1))
                                    is the run's step_count, so it never drifts
    as:{sid}:audit          zset    score = audit seq, member = AuditEvent JSON
    as:{sid}:idem           set     keys of the idempotency records of this session
    as:{sid}:lock           string  the write lock: a writer's random token, PX expiry
    as:sessions, as:user:{uid}:..., as:status:..., as:agent:..., as:due
                                    the session indexes (:mod:`.index`)
    as:shared:...           the shared-memory documents (:mod:`.shared`)
    as:audit_seq            string  INCR counter of audit seqs, store-wide
    as:tombstones           hash    sid -> JSON list of the audit events of a deleted session
                                    (or of a deleted shared document's ``shm_`` audit id)
    as:idem:{uid}:<scope>:<key>  string  IdempotencyRecord JSON, with a Redis expiry
    as:idem:by_time         zset    score = created_at in us, member = record key
    as:idem:user:{uid}      zset    the same, per user: written by them, or to their data
                                    (the record's ``owner_id``, an admin's write for them)
    as:idem:owners          hash    record key -> owner_id, for the records whose owner is
                                    not their caller (to find the owner's index entry)

Timestamps are microseconds since the Unix epoch in scores (exact in a double until the
year 2255) and in fixed-width index members, ISO 8601 with microseconds in JSON.

Atomicity: a transaction reads through to Redis and buffers every write. In a write
transaction each read of a session or idempotency record is remembered as a *guard*
(the exact stored text, or "absent"). On exit, one Lua script receives the guards, the
checks (no duplicate seq, call id or run id, a step list of the expected length) and the
buffered writes: it verifies every guard and check first and returns a conflict without
writing anything if one fails (raised as :class:`~agentsession.stores.base.StoreConflict`,
so the manager re-runs the transaction), else it applies every write. A script runs
atomically in Redis, so the whole transaction is written, or none of it. Every change
to a session's content also rewrites its session key (version + 1), so the guard on it
makes the manager's read-check-write a compare-and-set. Reads inside a write transaction see its own
buffered writes. Reads are not a snapshot (each command sees the latest commit), so
when a transaction ends with an error (say RunAlreadyRunning from a run that another
writer started after this one read the session), the store first re-reads its guards:
if one changed, StoreConflict replaces the stale verdict and the manager re-runs the
transaction. A read transaction that succeeds reads committed state command by command.

Writers of one session wait for a lock: before a write transaction first reads a
session, it takes ``as:{sid}:lock`` (``SET NX PX`` with a random token; released by a
compare-and-delete script when the transaction ends). Without it, N concurrent writers
of one session (16 appenders, say) would each read, lose the compare-and-set, re-run,
and exhaust their retries; with it, one writes while the others wait. The wait polls
(``SET NX`` every 0.5-10 ms), so it is not a fair queue, and a waiter keeps its thread.
The lock is only a traffic light: correctness stays with the guards, so a holder that
stalls past the lock's expiry (``LOCK_TTL_MS`` in :mod:`.locks`, 500 ms, also what a
writer that died holding it costs the next one) costs a re-run, never a lost update. A transaction
waits for at most one session lock (the first session it reads; others are only
guarded); a wait longer than ``LOCK_WAIT_S`` raises StoreBusy (the manager re-runs the
transaction within its retry budget, then it is a 503). Writers of one shared document
queue the same way on ``<shared key>:lock``, taken before a write transaction's
guarded read of the document, after its session's lock (app document before user
document, as the manager reads them), so lock waits follow one order; a wait that
still meets another writer's lock in the other order (an erasure) ends by expiry or
StoreBusy and a re-run, never a deadlock.

TTL: an idle session becomes EXPIRED through the manager (lazily or by the sweep); its
keys have no Redis expiry and stay readable until deleted. ``delete_session`` is the
purge: it removes every key of the session, its index entries and its idempotency
records; only the content-free tombstone event stays, in ``as:tombstones``.
Idempotency records carry a Redis expiry at their ``expires_at`` (the manager's
idempotency retention after creation) on top of the manager's retention check, so keys
never purged by a sweep still go away.

Durability: no acknowledged write is lost only with ``appendonly yes`` and
``appendfsync always`` (AOF, fsync before each reply). The store reads both with
``CONFIG GET`` when it opens: other values raise StoreError (``require_durable=True``,
the default) or log a warning (``False``); a server that refuses ``CONFIG`` (managed
Redis) logs a warning.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel

from ...errors import StoreBusy, StoreError
from ...jsonvalues import dumps, loads
from ...models import (
    AuditEvent,
    Message,
    Run,
    RunStatus,
    RunStep,
    Session,
    SessionStatus,
    SharedMemory,
    ToolCall,
    WorkingMemory,
)
from ..base import IdempotencyRecord, JSONTexts, ScrubReport, SessionHead, StoreConflict
from ..listing import merge_newest, status_as_of
from .index import (
    ALL_SESSIONS,
    DUE,
    INDEX_VERSION,
    INDEX_VERSION_KEY,
    LeaseIndexOps,
    cursor_member,
    index_for,
    index_writes,
    key_index,
    us,
    user_due,
    user_index,
)
from .memory import MemoryOps
from .records import RecordOps
from .replies import integer as _integer
from .replies import maybe_texts as _maybe_texts
from .replies import text as _text
from .replies import texts as _texts
from .rewinds import RewindOps, dec_message, enc_message

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as _exc:  # pragma: no cover - depends on the installed extras
    raise StoreError("the Redis store needs redis-py: pip install 'agentsession[redis]'") from _exc

from .errors import translate as _translate
from .errors import translated as _translated
from .forks import FORK_LUA, ForkOps
from .locks import UNLOCK_LUA, SessionLock
from .scrub import config_of
from .scrub import scrub as scrub_files
from .shared import SharedMemoryOps
from .summaries import SummaryOps

__all__ = ["AOF_REWRITE_WAIT_S", "RedisStore"]

#: How long :meth:`RedisStore.scrub` waits for an AOF rewrite, in seconds.
AOF_REWRITE_WAIT_S = 300.0

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

_AUDIT_SEQ = "as:audit_seq"
_TOMBSTONES = "as:tombstones"
_IDEM_BY_TIME = "as:idem:by_time"
_IDEM_OWNERS = "as:idem:owners"
#: Sessions whose indexes one commit of the rebuild at open writes.
_REINDEX_BATCH = 50

# Checks first (nothing written if one fails), then writes. ARGV[1] = number of checks;
# each op is an opcode and its operands; a key operand is an index into KEYS.
_APPLY_LUA = (
    r"""
local i = 2
local function arg() local a = ARGV[i]; i = i + 1; return a end
local function key() return KEYS[tonumber(arg())] end
for _ = 1, tonumber(ARGV[1]) do
  local op = arg()
  local k = key()
  if op == 'EQ' then
    local v = arg()
    if redis.call('GET', k) ~= v then return 'CONFLICT ' .. k .. ' changed' end
  elseif op == 'NX' then
    if redis.call('EXISTS', k) == 1 then return 'CONFLICT ' .. k .. ' exists' end
  elseif op == 'HNX' then
    local f = arg()
    if redis.call('HEXISTS', k, f) == 1 then return 'CONFLICT ' .. f .. ' exists' end
  elseif op == 'HX' then
    local f = arg()
    if redis.call('HEXISTS', k, f) == 0 then return 'CONFLICT ' .. f .. ' is gone' end
  elseif op == 'ZFREE' then
    local s = arg()
    if redis.call('ZCOUNT', k, s, s) > 0 then return 'CONFLICT seq ' .. s .. ' exists' end
  elseif op == 'LLEN' then
    local n = arg()
    if redis.call('LLEN', k) ~= tonumber(n) then return 'CONFLICT ' .. k .. ' length' end
  else
    return redis.error_reply('unknown check ' .. tostring(op))
  end
end
while i <= #ARGV do
  local op = arg()
  if op == 'PURGE' then
    local p = arg()
    for _, r in ipairs(redis.call('HKEYS', p .. 'runs')) do
      redis.call('DEL', p .. 'steps:' .. r)
    end
    for _, rk in ipairs(redis.call('SMEMBERS', p .. 'idem')) do
      redis.call('DEL', rk)
      redis.call('ZREM', 'as:idem:by_time', rk)
      local uid = string.match(rk, '^as:idem:{([^}]*)}')
      if uid then redis.call('ZREM', 'as:idem:user:{' .. uid .. '}', rk) end
      local owner = redis.call('HGET', 'as:idem:owners', rk)
      if owner then
        redis.call('ZREM', 'as:idem:user:{' .. owner .. '}', rk)
        redis.call('HDEL', 'as:idem:owners', rk)
      end
    end
    for _, t in ipairs(redis.call('SMEMBERS', p .. 'calls:tools')) do
      redis.call('DEL', p .. 'calls:tool:' .. t)
    end
    redis.call('DEL', p .. 'session', p .. 'msgs', p .. 'memory', p .. 'calls',
      p .. 'calls:seq', p .. 'calls:find', p .. 'calls:provider', p .. 'calls:tools',
      p .. 'runs', p .. 'runs:seq', p .. 'audit', p .. 'idem', p .. 'records',
      p .. 'records:idx', p .. 'summaries', p .. 'memhist', p .. 'memhist:at')
    for n = 1, redis.call('ZCARD', p .. 'rewinds') do redis.call('DEL', p .. 'rewound:' .. n) end
    redis.call('DEL', p .. 'rewinds')
  elseif op == 'FORK' then
"""
    + FORK_LUA
    + r"""
  else
    local k = key()
    if op == 'SET' then
      local v = arg()
      redis.call('SET', k, v)
    elseif op == 'SETEX' then
      local v = arg()
      local ttl = arg()
      redis.call('SET', k, v, 'EX', ttl)
    elseif op == 'DEL' then
      redis.call('DEL', k)
    elseif op == 'HSET' then
      local f = arg()
      local v = arg()
      redis.call('HSET', k, f, v)
    elseif op == 'HDEL' then
      local f = arg()
      redis.call('HDEL', k, f)
    elseif op == 'ZADD' then
      local s = arg()
      local m = arg()
      redis.call('ZADD', k, s, m)
    elseif op == 'ZREM' then
      local m = arg()
      redis.call('ZREM', k, m)
    elseif op == 'ZCUT' then
      local s = arg()
      redis.call('ZREMRANGEBYSCORE', k, '(' .. s, '+inf')
    elseif op == 'ZCLAMP' or op == 'ZDROPAT' then
      -- k: a memhist:at zset; its hash is k without ':at', fields the unpadded members.
      -- ZCLAMP keeps the last member scored s or above, at s; ZDROPAT drops those at s.
      local s = arg()
      local h = string.sub(k, 1, -4)
      local ms = redis.call('ZRANGEBYSCORE', k, s, op == 'ZCLAMP' and '+inf' or s)
      local keep = op == 'ZCLAMP' and #ms or 0
      for j = 1, #ms do
        if j ~= keep then
          redis.call('ZREM', k, ms[j])
          redis.call('HDEL', h, (string.gsub(ms[j], '^0+(%d)', '%1')))
        end
      end
      if keep > 0 then redis.call('ZADD', k, s, ms[keep]) end
    elseif op == 'SADD' then
      local m = arg()
      redis.call('SADD', k, m)
    elseif op == 'SREM' then
      local m = arg()
      redis.call('SREM', k, m)
    elseif op == 'RPUSH' then
      local v = arg()
      redis.call('RPUSH', k, v)
    elseif op == 'TOMB' then
      local f = arg()
      local v = arg()
      local old = redis.call('HGET', k, f)
      if old then v = string.sub(old, 1, -2) .. ',' .. v .. ']' else v = '[' .. v .. ']' end
      redis.call('HSET', k, f, v)
    else
      return redis.error_reply('unknown write ' .. tostring(op))
    end
  end
end
return 'OK'
"""
)


def _prefix(sid: str) -> str:
    return f"as:{{{sid}}}:"


def _idem_key(user_id: str, scope: str, key: str) -> str:
    return f"as:idem:{{{user_id}}}:{scope}:{key}"


def _idem_user_index(user_id: str) -> str:
    return f"as:idem:user:{{{user_id}}}"


def _enc(model: BaseModel) -> str:
    return dumps(model.model_dump(mode="json"))


def _enc_run(run: Run) -> str:
    # The step list's length is the count (see the key layout); steps live in the list.
    return dumps(run.model_dump(mode="json", exclude={"steps", "step_count"}))


def _dec(cls: type[M], text: str) -> M:
    return cls.model_validate(loads(text))


def _copy(model: M) -> M:
    return model.model_copy(deep=True)


def _stored_audit(
    r: redis.Redis, session_id: str, after_seq: int | None, limit: int | None
) -> list[AuditEvent]:
    """The committed audit events of a stored session after ``after_seq``, oldest first,
    at most ``limit`` (None = all)."""
    low = "-inf" if after_seq is None else f"({after_seq}"
    start = None if limit is None else 0
    raw = _texts(
        r.zrangebyscore(_prefix(session_id) + "audit", low, "+inf", start=start, num=limit)
    )
    return [_dec(AuditEvent, text) for text in raw]


def _tombstone_audit(r: redis.Redis, session_id: str) -> list[AuditEvent]:
    """The audit trail kept in a deleted session's tombstone ([] when there is none)."""
    text = _text(r.hget(_TOMBSTONES, session_id))
    return [AuditEvent.model_validate(e) for e in loads(text)] if text else []


def _stored_messages(
    client: redis.Redis,
    sid: str,
    after_seq: int | None,
    before_seq: int | None,
    limit: int | None,
    newest: bool,
) -> list[Message]:
    """The committed messages of ``sid`` with ``after_seq < seq < before_seq``, oldest
    first; with ``limit``, the newest or the first ``limit`` of them."""
    key = _prefix(sid) + "msgs"
    low = "-inf" if after_seq is None else f"({after_seq}"
    high = "+inf" if before_seq is None else f"({before_seq}"
    if limit is None:
        raw = _texts(client.zrangebyscore(key, low, high))
    elif newest:
        raw = _texts(client.zrevrangebyscore(key, high, low, start=0, num=limit))[::-1]
    else:
        raw = _texts(client.zrangebyscore(key, low, high, start=0, num=limit))
    return [dec_message(sid, text) for text in raw]


def _enc_record(r: IdempotencyRecord) -> str:
    return dumps(
        {
            "user_id": r.user_id,
            "scope": r.scope,
            "key": r.key,
            "fingerprint": r.fingerprint,
            "session_id": r.session_id,
            "result": r.result,
            "created_at": r.created_at.isoformat(),
            "owner_id": r.owner_id,
        }
    )


def _dec_record(text: str) -> IdempotencyRecord:
    row = loads(text)
    return IdempotencyRecord(
        user_id=row["user_id"],
        scope=row["scope"],
        key=row["key"],
        fingerprint=row["fingerprint"],
        session_id=row["session_id"],
        result=row["result"],
        created_at=datetime.fromisoformat(row["created_at"]).astimezone(UTC),
        owner_id=row.get("owner_id"),
    )


def _masked(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _sessions_of(r: redis.Redis, session_ids: Sequence[str]) -> list[Session]:
    """The sessions of these ids that exist, in that order (one MGET)."""
    if not session_ids:
        return []
    raws = _maybe_texts(r.mget([_prefix(sid) + "session" for sid in session_ids]))
    return [_dec(Session, raw) for raw in raws if raw is not None]


def _scan_index(
    r: redis.Redis,
    index: str,
    after: tuple[datetime, str] | None,
    limit: int,
    keep: Callable[[Session], bool],
) -> list[Session]:
    """Up to ``limit`` sessions of the lexicographic set ``index`` (:mod:`.index`),
    newest first, strictly after the cursor ``after``, that ``keep`` accepts. Reads the
    set in chunks, one MGET each, so the few rows ``keep`` refuses (due sessions in an
    ACTIVE listing, sessions changed since the set was read) cost no round trip each."""
    high = "+" if after is None else "(" + cursor_member(after)
    chunk = max(limit, 32)
    out: list[Session] = []
    while len(out) < limit:
        members = _texts(r.zrevrangebylex(index, high, "-", start=0, num=chunk))
        if not members:
            break
        out += [s for s in _sessions_of(r, [m.partition("|")[2] for m in members]) if keep(s)]
        if len(members) < chunk:
            break
        high = "(" + members[-1]
    return out[:limit]


def _list_sessions(
    r: redis.Redis,
    filters: tuple[str | None, SessionStatus | None, str | None, str | None],
    after: tuple[datetime, str] | None,
    limit: int,
    now: datetime,
) -> list[Session]:
    """``StoreTransaction.list_sessions`` on the index sets (:mod:`.index`);
    ``filters`` are its ``user_id``, ``status``, ``agent`` and ``parent_session_id``."""
    user_id, status, agent, parent = filters
    if limit <= 0:
        return []

    def keep(s: Session) -> bool:
        # The set may be a step behind the session (changed since it was read); the
        # forks set of a parent is not per user.
        wanted = status is None or status_as_of(s, now) == status
        mine = user_id in (None, s.user_id) and parent in (None, s.parent_session_id)
        return wanted and mine and agent in (None, s.agent)

    rows = _scan_index(r, index_for(user_id, status, agent, parent), after, limit, keep)
    if status is not SessionStatus.EXPIRED:
        return rows
    due_key = DUE if user_id is None else user_due(user_id)
    due = [s for s in _sessions_of(r, _texts(r.zrangebyscore(due_key, "-inf", us(now)))) if keep(s)]
    return merge_newest(rows, due, after=after, limit=limit)


class RedisStore:
    """A store in Redis. URLs: ``redis://[:password@]host[:port][/db]``, ``rediss://...``.

    Thread-safe: transactions take connections from redis-py's pool. Writers of one
    session wait for a lock, and commit by compare-and-set: a loser of a race
    (past an expired lock) gets StoreConflict and the manager re-runs its transaction
    (see the module docstring).

    Attributes:
        url: the URL, with any password masked as ``***``.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: redis.Redis | None = None,
        require_durable: bool = True,
        socket_timeout_seconds: float = 30.0,
        rewrite_aof_after_erasure: bool = False,
    ) -> None:
        """Connect and check the server's persistence settings.

        Args:
            url: server URL (see the class docstring); ignored when ``client`` is given.
            client: an existing ``redis.Redis`` made with ``decode_responses=True``; the
                store does not close it.
            require_durable: raise when the server does not run with ``appendonly yes``
                and ``appendfsync always``; False only logs a warning (a crash may then
                lose acknowledged writes).
            socket_timeout_seconds: how long one command may take before StoreError.
            rewrite_aof_after_erasure: :meth:`scrub` (run after every erasure) rewrites
                the append-only file (``BGREWRITEAOF``, waited for), so the erased
                values leave it at once; off, only ``scrub(compact=True)`` does.

        Raises:
            ValidationError: neither ``url`` nor ``client``.
            StoreError: the server is unreachable, not durable (``require_durable``), or
                ``client`` does not decode responses.
        """
        from ...errors import ValidationError

        if client is None and url is None:
            raise ValidationError("pass a redis:// URL or a client", field="url")
        self._owns_client = client is None
        if client is None:
            assert url is not None
            try:
                client = redis.Redis.from_url(
                    url,
                    decode_responses=True,
                    socket_timeout=socket_timeout_seconds,
                    socket_connect_timeout=socket_timeout_seconds,
                    # No silent re-send: a resent commit could apply twice.
                    retry=Retry(NoBackoff(), 0),
                )
            except ValueError as exc:
                raise ValidationError(f"bad Redis URL: {exc}", field="url") from exc
            self.url = _masked(url)
        else:
            self.url = url or repr(client)
            if not client.get_connection_kwargs().get("decode_responses"):
                raise StoreError("the Redis client must be made with decode_responses=True")
        self._client: redis.Redis | None = client
        self._rewrite_aof = rewrite_aof_after_erasure
        try:
            self._apply = client.register_script(_APPLY_LUA)
            self._unlock = client.register_script(UNLOCK_LUA)
            self._check_durability(client, require_durable)
            self._ensure_indexes(client)
        except BaseException as exc:
            self.close()
            if isinstance(exc, redis.RedisError):
                raise _translate(exc) from exc
            raise

    def _check_durability(self, client: redis.Redis, require: bool) -> None:
        try:
            config = config_of(client.config_get("append*"))
        except redis.exceptions.ResponseError as exc:
            logger.warning(
                "cannot read the persistence settings of Redis at %s (%s): make sure it "
                "runs with appendonly yes and appendfsync always, or a crash may lose "
                "acknowledged writes",
                self.url,
                exc,
            )
            return
        appendonly, appendfsync = config.get("appendonly"), config.get("appendfsync")
        if appendonly == "yes" and appendfsync == "always":
            return
        message = (
            f"Redis at {self.url} runs with appendonly {appendonly} and appendfsync "
            f"{appendfsync}: a crash may lose acknowledged writes; set appendonly yes and "
            "appendfsync always (or pass require_durable=False to accept the risk)"
        )
        if require:
            raise StoreError(message, appendonly=appendonly, appendfsync=appendfsync)
        logger.warning("%s", message)

    def _ensure_indexes(self, client: redis.Redis) -> None:
        """Build the indexes a store written by an older version lacks (status, agent,
        per-user due, per-tool call sets), :data:`_REINDEX_BATCH` sessions per commit;
        one GET once they are complete. Upgrade every process together: an older one
        does not maintain them."""
        if _text(client.get(INDEX_VERSION_KEY)) == INDEX_VERSION:
            return
        start = 0
        while members := _texts(client.zrange(ALL_SESSIONS, start, start + _REINDEX_BATCH - 1)):
            sids = [m.partition("|")[2] for m in members]
            for attempt in range(1, 9):
                try:
                    with self.transaction(write=True) as tx:
                        _reindex(tx, sids)
                    break
                except StoreConflict:
                    if attempt == 8:
                        raise
            start += len(members)
        client.set(INDEX_VERSION_KEY, INDEX_VERSION)

    @property
    def client(self) -> redis.Redis:
        """The redis-py client, for diagnostics. Writing through it bypasses every rule.

        Raises:
            StoreError: the store is closed.
        """
        if self._client is None:
            raise StoreError("the Redis store is closed")
        return self._client

    def __repr__(self) -> str:
        return f"RedisStore({self.url!r})"

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[_RedisTransaction]:
        """Open a transaction (see :class:`~agentsession.stores.base.SessionStore`).

        Writes are buffered and applied by one Lua script when the block ends; nothing
        is written if it raises.

        Raises:
            StoreConflict: a session or key read here changed before the commit.
            StoreError: the store is closed, or Redis failed.
        """
        tx = _RedisTransaction(self, self.client, write=write)
        try:
            try:
                yield tx
            except StoreBusy:
                raise
            except BaseException:
                # Reads are not a snapshot: an error the caller raised may come from
                # state that changed under it (a run started after the session was read).
                # Then the caller's verdict is stale: ask for a re-run instead.
                tx.raise_if_stale()
                raise
            if write:
                try:
                    tx.commit()
                except redis.RedisError as exc:
                    raise _translate(exc, committing=True) from exc
        finally:
            tx.unlock()

    def scrub(self, *, compact: bool = False) -> ScrubReport:
        """Get erased keys out of Redis's files (:mod:`.scrub`): with ``compact``
        or ``rewrite_aof_after_erasure``, rewrite the AOF and wait for it (at most
        :data:`AOF_REWRITE_WAIT_S`); report the RDB snapshots and replicas.

        Raises:
            StoreError: the store is closed, or Redis failed.
        """
        try:
            return scrub_files(
                self.client,
                rewrite_aof=compact or self._rewrite_aof,
                timeout_seconds=AOF_REWRITE_WAIT_S,
            )
        except redis.RedisError as exc:
            raise _translate(exc) from exc

    def close(self) -> None:
        """Close the client if the store made it. Idempotent; further use raises."""
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            client.close()


def _key_owner(tx: _RedisTransaction, user_id: str, agent: str, external_key: str) -> str | None:
    """The id in the key's entry if that session exists and has this key, else None.

    An entry naming a missing session, or one of another key (left by an interrupted
    or older writer), counts as absent: it must not block the key for good. The
    session row is read as a guard too, so the answer holds at commit.
    """
    sid = tx._read(key_index(user_id, agent, external_key))
    if sid is None:
        return None
    if sid in tx._sessions:
        owner = tx._sessions[sid]
    else:
        raw = tx._read(_prefix(sid) + "session")
        owner = None if raw is None else _dec(Session, raw)
    if owner is None or (owner.user_id, owner.agent, owner.external_key) != (
        user_id,
        agent,
        external_key,
    ):
        return None
    return sid


class _RedisTransaction(
    SharedMemoryOps, RecordOps, LeaseIndexOps, SummaryOps, MemoryOps, RewindOps, ForkOps
):
    """One transaction: reads go to Redis (through this transaction's own buffered
    writes), writes are buffered for :meth:`commit`."""

    def __init__(self, store: RedisStore, client: redis.Redis, *, write: bool) -> None:
        self._store = store
        self._r = client
        self._write = write
        self._guards: dict[str, str | None] = {}
        self._checks: list[str] = []
        self._writes: list[str] = []
        self._n_checks = 0
        self._keys: dict[str, int] = {}
        # What this transaction wrote, for reading its own writes.
        self._sessions: dict[str, Session | None] = {}
        self._fresh: set[str] = set()  # deleted here: stored children are gone
        self._memory: dict[str, WorkingMemory] = {}
        self._shared: dict[str, SharedMemory | None] = {}  # None: deleted here
        self._messages: dict[str, list[Message]] = {}
        # session id -> seq: stored messages above it are deleted at commit.
        self._cut: dict[str, int] = {}
        self._calls: dict[str, list[ToolCall]] = {}
        self._runs: dict[str, dict[str, Run]] = {}
        self._new_runs: set[tuple[str, str]] = set()
        self._steps: dict[tuple[str, str], list[RunStep]] = {}
        self._audit: dict[str, list[AuditEvent]] = {}
        self._idem: dict[str, IdempotencyRecord | None] = {}
        self._lock = SessionLock(client, store._unlock)
        self._may_lock = write  # only before the first session read

    def unlock(self) -> None:
        """Release the write locks this transaction holds (session, shared documents)."""
        self._lock.release()

    # -- buffering -------------------------------------------------------------------
    def _writing(self) -> None:
        if not self._write:
            raise StoreError("write attempted in a read-only transaction")

    def _k(self, key: str) -> str:
        index = self._keys.get(key)
        if index is None:
            index = self._keys[key] = len(self._keys) + 1
        return str(index)

    def _check(self, op: str, key: str, *args: str) -> None:
        self._checks += [op, self._k(key), *args]
        self._n_checks += 1

    def _do(self, op: str, key: str, *args: str | int) -> None:
        self._writes += [op, self._k(key), *(str(a) for a in args)]

    def _read(self, key: str) -> str | None:
        """GET ``key`` once per transaction; a commit requires it unchanged."""
        if key in self._guards:
            return self._guards[key]
        value = _text(self._r.get(key))
        self._guards[key] = value
        return value

    def raise_if_stale(self) -> None:
        """Raise StoreConflict if a session or record this transaction read has changed."""
        if not self._guards:
            return
        keys = list(self._guards)
        try:
            now = _maybe_texts(self._r.mget(keys))
        except redis.RedisError:
            return  # the caller's own error is the one to report
        if any(self._guards[k] != v for k, v in zip(keys, now, strict=True)):
            raise StoreConflict("what the transaction read changed before it ended")

    def commit(self) -> None:
        """Apply the buffered writes if every guard and check still holds."""
        if not self._writes:
            return
        checks = list(self._checks)
        n_checks = self._n_checks
        for key, value in self._guards.items():
            if value is None:
                checks += ["NX", self._k(key)]
            else:
                checks += ["EQ", self._k(key), value]
            n_checks += 1
        keys = sorted(self._keys, key=self._keys.__getitem__)
        result = self._store._apply(
            keys=keys, args=[str(n_checks), *checks, *self._writes], client=self._r
        )
        if result != "OK":
            raise StoreConflict(f"Redis commit refused: {result}")

    def _session_known(self, session_id: str) -> Session | None:
        """The session as this transaction sees it (read and guarded if need be)."""
        if session_id in self._sessions:
            return self._sessions[session_id]
        return self.get_session(session_id)

    def _require_session(self, session_id: str) -> None:
        if self._session_known(session_id) is None:
            raise StoreConflict(f"session {session_id!r} vanished during the transaction")

    def _stored(self, session_id: str) -> bool:
        """Whether stored children of the session count (not deleted in this transaction)."""
        return session_id not in self._fresh

    # -- sessions --------------------------------------------------------------------
    @_translated
    def get_session(self, session_id: str) -> Session | None:
        if session_id in self._sessions:
            s = self._sessions[session_id]
            return None if s is None else _copy(s)
        if self._may_lock:
            self._may_lock = False
            self._lock.take(_prefix(session_id) + "lock", f"session {session_id!r}")
        raw = self._read(_prefix(session_id) + "session")
        session = None if raw is None else _dec(Session, raw)
        if self._write:
            self._sessions[session_id] = session
        return None if session is None else _copy(session)

    def get_session_head(self, session_id: str) -> SessionHead | None:
        session = self.get_session(session_id)  # the row is one stored value
        return None if session is None else SessionHead.of(session)

    @_translated
    def insert_session(self, session: Session) -> None:
        self._writing()
        if self._session_known(session.session_id) is not None:
            raise StoreConflict(f"session {session.session_id!r} exists")
        key = session.external_key
        # The entry is read as a guard: the commit checks it is still what was read (absent,
        # or stale and then overwritten), so of two racing inserts of one key one commits.
        if key is not None and _key_owner(self, session.user_id, session.agent, key):
            raise StoreConflict("a session with this external key exists")
        self._put_session(None, session)

    @_translated
    def find_session_by_key(self, user_id: str, agent: str, external_key: str) -> str | None:
        return _key_owner(self, user_id, agent, external_key)

    @_translated
    def update_session(self, session: Session, *, expected_version: int) -> None:
        self._writing()
        old = self._session_known(session.session_id)
        if old is None or old.version != expected_version:
            raise StoreConflict(f"session {session.session_id!r} changed concurrently")
        self._put_session(old, session)

    def _put_session(self, old: Session | None, new: Session) -> None:
        sid = new.session_id
        self._sessions[sid] = _copy(new)
        self._do("SET", _prefix(sid) + "session", _enc(new))
        for op, key, *args in index_writes(old, new):
            self._do(op, key, *args)

    @_translated
    def delete_session(self, session_id: str) -> None:
        self._writing()
        old = self._session_known(session_id)
        if old is None:
            return
        self._writes += ["PURGE", _prefix(session_id)]
        for op, key, *args in index_writes(old, None):
            self._do(op, key, *args)
        self._sessions[session_id] = None
        self._fresh.add(session_id)
        pending_rows = (self._memory, self._new_history, self._messages, self._calls)
        for pending in (*pending_rows, self._runs, self._audit):
            pending.pop(session_id, None)
        self._new_runs = {k for k in self._new_runs if k[0] != session_id}
        self._steps = {k: v for k, v in self._steps.items() if k[0] != session_id}
        for key, record in list(self._idem.items()):
            if record is not None and record.session_id == session_id:
                self._idem[key] = None
        # The PURGE deletes the stored records of the session at commit: known absent
        # from now on, so a purge_idempotency later in this transaction skips them.
        for key in _texts(self._r.smembers(_prefix(session_id) + "idem")):
            self._idem[key] = None

    @_translated
    def list_sessions(
        self,
        *,
        user_id: str | None,
        status: SessionStatus | None,
        agent: str | None,
        after: tuple[datetime, str] | None,
        limit: int,
        now: datetime,
        parent_session_id: str | None = None,
    ) -> list[Session]:
        filters = (user_id, status, agent, parent_session_id)
        return _list_sessions(self._r, filters, after, limit, now)

    @_translated
    def list_due_sessions(self, *, now: datetime, limit: int) -> list[str]:
        if limit <= 0:
            return []
        return _texts(self._r.zrangebyscore(DUE, "-inf", us(now), start=0, num=limit))

    @_translated
    def list_user_session_ids(self, user_id: str) -> list[str]:
        return [m.partition("|")[2] for m in _texts(self._r.zrange(user_index(user_id), 0, -1))]

    # -- messages --------------------------------------------------------------------
    @_translated
    def insert_messages(self, messages: Sequence[Message], *, payloads: JSONTexts = None) -> None:
        self._writing()
        for m in messages:
            sid = m.session_id
            self._require_session(sid)
            pending = self._messages.setdefault(sid, [])
            if any(p.seq == m.seq for p in pending):
                raise StoreConflict(f"message seq {m.seq} exists in {sid!r}")
            key = _prefix(sid) + "msgs"
            if self._stored(sid) and m.seq <= self._cut.get(sid, m.seq):
                self._check("ZFREE", key, str(m.seq))
            self._do("ZADD", key, m.seq, enc_message(m))
            pending.append(_copy(m))

    @_translated
    def get_messages(
        self,
        session_id: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int | None = None,
        newest: bool = True,
    ) -> list[Message]:
        if limit is not None and limit <= 0:
            return []
        rows: list[Message] = []
        if self._stored(session_id):
            top, cut = before_seq, self._cut.get(session_id)
            if cut is not None:  # stored messages above the cut go at commit
                top = cut + 1 if top is None else min(top, cut + 1)
            rows = _stored_messages(self._r, session_id, after_seq, top, limit, newest)
        rows += [
            _copy(m)
            for m in self._messages.get(session_id, [])
            if (after_seq is None or m.seq > after_seq)
            and (before_seq is None or m.seq < before_seq)
        ]
        if limit is not None and len(rows) > limit:
            rows = rows[-limit:] if newest else rows[:limit]
        return rows

    @_translated
    def delete_messages(self, session_id: str, *, after_seq: int) -> int:
        self._writing()
        self._require_session(session_id)
        pending = self._messages.pop(session_id, [])
        self._messages[session_id] = [m for m in pending if m.seq <= after_seq]
        removed = len(pending) - len(self._messages[session_id])
        cut, key = self._cut.get(session_id), _prefix(session_id) + "msgs"
        if self._stored(session_id) and (cut is None or after_seq < cut):
            stored = _integer(self._r.zcount(key, f"({after_seq}", cut or "+inf"))
            if stored:  # a cut hides stored rows above it and skips their seq checks
                removed, self._cut[session_id] = removed + stored, after_seq
        if removed:  # after the buffered ZADDs too, so it also drops those above the cut
            self._do("ZCUT", key, after_seq)
        return removed

    # -- tool calls ------------------------------------------------------------------
    @_translated
    def insert_tool_call(self, call: ToolCall) -> None:
        self._writing()
        sid = call.session_id
        self._require_session(sid)
        if self.get_tool_call(sid, call.call_id) is not None:
            raise StoreConflict(f"tool call {call.call_id!r} exists")
        p = _prefix(sid)
        if self._stored(sid):
            self._check("HNX", p + "calls", call.call_id)
        self._do("HSET", p + "calls", call.call_id, _enc(call))
        self._do("ZADD", p + "calls:seq", call.seq, call.call_id)
        self._do("HSET", p + "calls:find", f"{call.tool}\x1f{call.arguments_hash}", call.call_id)
        self._do("ZADD", f"{p}calls:tool:{call.tool}", call.seq, call.call_id)
        self._do("SADD", p + "calls:tools", call.tool)
        if call.provider_call_id is not None:
            self._do("HSET", p + "calls:provider", call.provider_call_id, call.call_id)
        self._calls.setdefault(sid, []).append(_copy(call))

    @_translated
    def get_tool_call(self, session_id: str, call_id: str) -> ToolCall | None:
        for call in self._calls.get(session_id, []):
            if call.call_id == call_id:
                return _copy(call)
        if not self._stored(session_id):
            return None
        raw = _text(self._r.hget(_prefix(session_id) + "calls", call_id))
        return None if raw is None else _dec(ToolCall, raw)

    @_translated
    def list_tool_calls(
        self,
        session_id: str,
        *,
        tool: str | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[ToolCall]:
        if limit is not None and limit <= 0:
            return []
        rows: list[ToolCall] = []
        if self._stored(session_id):
            p = _prefix(session_id)
            index = p + ("calls:seq" if tool is None else f"calls:tool:{tool}")
            low = "-inf" if after_seq is None else f"({after_seq}"
            start = None if limit is None else 0
            ids = _texts(self._r.zrangebyscore(index, low, "+inf", start=start, num=limit))
            if ids:
                raws = _maybe_texts(self._r.hmget(p + "calls", ids))
                rows = [_dec(ToolCall, raw) for raw in raws if raw]
        rows += [
            _copy(c)
            for c in self._calls.get(session_id, [])
            if after_seq is None or c.seq > after_seq
        ]
        rows = [c for c in rows if tool is None or c.tool == tool]
        return rows if limit is None else rows[:limit]

    @_translated
    def find_tool_call(self, session_id: str, *, tool: str, arguments_hash: str) -> ToolCall | None:
        return self._newest_call(
            session_id,
            "calls:find",
            f"{tool}\x1f{arguments_hash}",
            lambda c: c.tool == tool and c.arguments_hash == arguments_hash,
        )

    @_translated
    def find_tool_call_by_provider_id(
        self, session_id: str, provider_call_id: str
    ) -> ToolCall | None:
        return self._newest_call(
            session_id,
            "calls:provider",
            provider_call_id,
            lambda c: c.provider_call_id == provider_call_id,
        )

    def _newest_call(
        self, session_id: str, index: str, field: str, match: Callable[[ToolCall], bool]
    ) -> ToolCall | None:
        """The newest call this transaction added that ``match`` accepts, else the one
        the session's hash ``index`` names under ``field`` (it maps to the newest)."""
        for call in reversed(self._calls.get(session_id, [])):
            if match(call):
                return _copy(call)
        if not self._stored(session_id):
            return None
        p = _prefix(session_id)
        call_id = _text(self._r.hget(p + index, field))
        raw = None if call_id is None else _text(self._r.hget(p + "calls", call_id))
        return None if raw is None else _dec(ToolCall, raw)

    # -- runs ------------------------------------------------------------------------
    def _run_rows(self, session_id: str, run_ids: Sequence[str]) -> list[Run | None]:
        """The runs (``step_count`` set, no steps) in one round trip, whatever their
        number: the hash fields and the lengths of their step lists."""
        pending = self._runs.get(session_id, {})
        stored: list[str | None] = [None] * len(run_ids)
        lengths = [0] * len(run_ids)
        if self._stored(session_id) and run_ids:
            p = _prefix(session_id)
            pipe = self._r.pipeline(transaction=False)
            pipe.hmget(p + "runs", list(run_ids))
            for run_id in run_ids:
                pipe.llen(f"{p}steps:{run_id}")
            stored, *lengths = pipe.execute()
        out: list[Run | None] = []
        for run_id, raw, length in zip(run_ids, stored, lengths, strict=True):
            run = pending.get(run_id) or (None if raw is None else _dec(Run, raw))
            if run is not None:
                stored_count = 0 if (session_id, run_id) in self._new_runs else length
                count = stored_count + len(self._steps.get((session_id, run_id), []))
                run = _copy(run).model_copy(update={"step_count": count})
            out.append(run)
        return out

    @_translated
    def insert_run(self, run: Run) -> None:
        self._writing()
        sid = run.session_id
        self._require_session(sid)
        pending = self._runs.setdefault(sid, {})
        if run.run_id in pending or self._run_rows(sid, [run.run_id])[0] is not None:
            raise StoreConflict(f"run {run.run_id!r} exists")
        bare = _copy(run).model_copy(update={"steps": [], "step_count": 0})
        p = _prefix(sid)
        if self._stored(sid):
            self._check("HNX", p + "runs", run.run_id)
        self._do("HSET", p + "runs", run.run_id, _enc_run(bare))
        self._do("ZADD", p + "runs:seq", run.seq, run.run_id)
        pending[run.run_id] = bare
        self._new_runs.add((sid, run.run_id))

    @_translated
    def update_run(self, run: Run) -> None:
        self._writing()
        sid = run.session_id
        pending = self._runs.setdefault(sid, {})
        new = (sid, run.run_id) in self._new_runs
        if not new and self._run_rows(sid, [run.run_id])[0] is None:
            raise StoreConflict(f"run {run.run_id!r} vanished during the transaction")
        bare = _copy(run).model_copy(update={"steps": [], "step_count": 0})
        p = _prefix(sid)
        if not new:
            self._check("HX", p + "runs", run.run_id)
        self._do("HSET", p + "runs", run.run_id, _enc_run(bare))
        pending[run.run_id] = bare

    @_translated
    def insert_run_step(self, session_id: str, step: RunStep) -> None:
        self._writing()
        self._require_session(session_id)
        run = self._run_rows(session_id, [step.run_id])[0]
        if run is None or step.index != run.step_count:
            raise StoreConflict(f"step {step.index} of run {step.run_id!r} is not next")
        key = f"{_prefix(session_id)}steps:{step.run_id}"
        mine = self._steps.setdefault((session_id, step.run_id), [])
        if self._stored(session_id) and (session_id, step.run_id) not in self._new_runs:
            self._check("LLEN", key, str(step.index - len(mine)))
        self._do("RPUSH", key, _enc(step))
        mine.append(_copy(step))

    @_translated
    def get_run(self, session_id: str, run_id: str) -> Run | None:
        return self._run_rows(session_id, [run_id])[0]

    @_translated
    def list_run_steps(
        self,
        session_id: str,
        run_id: str,
        *,
        after_index: int | None = None,
        limit: int | None = None,
    ) -> list[RunStep]:
        if limit is not None and limit <= 0:
            return []
        start = 0 if after_index is None else after_index + 1
        rows: list[RunStep] = []
        if self._stored(session_id) and (session_id, run_id) not in self._new_runs:
            stop = -1 if limit is None else start + limit - 1
            key = f"{_prefix(session_id)}steps:{run_id}"
            rows = [_dec(RunStep, t) for t in _texts(self._r.lrange(key, start, stop))]
        rows += [_copy(s) for s in self._steps.get((session_id, run_id), []) if s.index >= start]
        return rows if limit is None else rows[:limit]

    @_translated
    def list_runs(
        self,
        session_id: str,
        *,
        status: RunStatus | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        if limit is not None and limit <= 0:
            return []
        pending = self._runs.get(session_id, {})
        ids: list[str] = []
        if self._stored(session_id):
            low = "-inf" if after_seq is None else f"({after_seq}"
            num = limit if status is None and not pending and limit is not None else None
            start = None if num is None else 0
            key = _prefix(session_id) + "runs:seq"
            ids = _texts(self._r.zrangebyscore(key, low, "+inf", start=start, num=num))
        seen = set(ids)
        ids += [
            i
            for i, r in pending.items()
            if i not in seen and (after_seq is None or r.seq > after_seq)
        ]
        chosen = sorted(
            (r for r in self._run_rows(session_id, ids) if r is not None), key=lambda r: r.seq
        )
        chosen = [r for r in chosen if status is None or r.status == status]
        return chosen if limit is None else chosen[:limit]

    # -- audit -----------------------------------------------------------------------
    @_translated
    def insert_audit(self, event: AuditEvent) -> int:
        self._writing()
        sid = event.session_id
        seq = _integer(self._r.incr(_AUDIT_SEQ))
        stored = event.model_copy(update={"seq": seq}, deep=True)
        if self._session_known(sid) is None:
            # A deleted session's tombstone outlives every key of the session.
            self._do("TOMB", _TOMBSTONES, sid, _enc(stored))
        else:
            self._do("ZADD", _prefix(sid) + "audit", seq, _enc(stored))
            self._audit.setdefault(sid, []).append(stored)
        return seq

    @_translated
    def list_audit(
        self, session_id: str, *, after_seq: int | None = None, limit: int | None = None
    ) -> list[AuditEvent]:
        if limit is not None and limit <= 0:
            return []
        if self._write:
            exists = self._session_known(session_id) is not None
        else:
            exists = bool(self._r.exists(_prefix(session_id) + "session"))
        if not exists:
            rows = _tombstone_audit(self._r, session_id)
        else:
            stored = self._stored(session_id)
            rows = _stored_audit(self._r, session_id, after_seq, limit) if stored else []
            rows += [_copy(e) for e in self._audit.get(session_id, [])]
        rows = [e for e in rows if after_seq is None or e.seq > after_seq]
        return rows if limit is None else rows[:limit]

    # -- idempotency -----------------------------------------------------------------
    @_translated
    def get_idempotency(self, user_id: str, scope: str, key: str) -> IdempotencyRecord | None:
        k = _idem_key(user_id, scope, key)
        if k in self._idem:
            return self._idem[k]
        raw = self._read(k)
        return None if raw is None else _dec_record(raw)

    @_translated
    def put_idempotency(self, record: IdempotencyRecord) -> None:
        self._writing()
        if self.get_idempotency(record.user_id, record.scope, record.key) is not None:
            raise StoreConflict(f"idempotency key {record.key!r} exists")
        k = _idem_key(record.user_id, record.scope, record.key)
        at = us(record.created_at)
        if record.expires_at is None:
            self._do("SET", k, _enc_record(record))
        else:
            lifetime = (record.expires_at - record.created_at).total_seconds()
            self._do("SETEX", k, _enc_record(record), max(1, math.ceil(lifetime)))
        self._do("ZADD", _IDEM_BY_TIME, at, k)
        self._do("ZADD", _idem_user_index(record.user_id), at, k)
        if record.owner_id is not None and record.owner_id != record.user_id:
            self._do("ZADD", _idem_user_index(record.owner_id), at, k)
            self._do("HSET", _IDEM_OWNERS, k, record.owner_id)
        if record.session_id is not None:
            self._do("SADD", _prefix(record.session_id) + "idem", k)
        self._idem[k] = record

    def _drop_idempotency(self, k: str, record: IdempotencyRecord) -> None:
        self._do("DEL", k)
        self._do("ZREM", _IDEM_BY_TIME, k)
        self._do("ZREM", _idem_user_index(record.user_id), k)
        if record.owner_id is not None and record.owner_id != record.user_id:
            self._do("ZREM", _idem_user_index(record.owner_id), k)
            self._do("HDEL", _IDEM_OWNERS, k)
        if record.session_id is not None:
            self._do("SREM", _prefix(record.session_id) + "idem", k)
        self._idem[k] = None

    @_translated
    def delete_idempotency(self, user_id: str, scope: str, key: str) -> None:
        self._writing()
        record = self.get_idempotency(user_id, scope, key)
        if record is not None:
            self._drop_idempotency(_idem_key(user_id, scope, key), record)

    @_translated
    def purge_idempotency(self, *, created_before: datetime, user_id: str | None = None) -> int:
        self._writing()
        index = _IDEM_BY_TIME if user_id is None else _idem_user_index(user_id)
        keys = [
            k
            for k in _texts(self._r.zrangebyscore(index, "-inf", f"({us(created_before)}"))
            if k not in self._idem
        ]
        count = 0
        raws = _maybe_texts(self._r.mget(keys)) if keys else []
        owners = _maybe_texts(self._r.hmget(_IDEM_OWNERS, keys)) if keys else []
        for k, raw, owner in zip(keys, raws, owners, strict=True):
            if raw is None:  # expired by Redis already: drop the stale index entries
                self._do("ZREM", _IDEM_BY_TIME, k)
                uid = k.split("{", 1)[1].split("}", 1)[0]
                self._do("ZREM", _idem_user_index(uid), k)
                if owner is not None:
                    self._do("ZREM", _idem_user_index(owner), k)
                    self._do("HDEL", _IDEM_OWNERS, k)
                continue
            self._drop_idempotency(k, _dec_record(raw))
            count += 1
        for k, record in list(self._idem.items()):
            if (
                record is not None
                and record.created_at < created_before
                and user_id in (None, record.user_id, record.owner_id)
            ):
                self._drop_idempotency(k, record)
                count += 1
        return count


@_translated
def _reindex(tx: _RedisTransaction, session_ids: Sequence[str]) -> None:
    """Write the index entries of these sessions and of their tool calls, as
    ``update_session`` and ``insert_tool_call`` do, for data written before the entries
    existed. Each session is read as a guard: a concurrent change makes the commit a
    StoreConflict."""
    tx._writing()
    for sid in session_ids:
        p = _prefix(sid)
        raw = tx._read(p + "session")
        if raw is None:
            continue
        for op, key, *args in index_writes(None, _dec(Session, raw)):
            tx._do(op, key, *args)
        for text in _texts(tx._r.hvals(p + "calls")):
            call = _dec(ToolCall, text)
            tx._do("ZADD", f"{p}calls:tool:{call.tool}", call.seq, call.call_id)
            tx._do("SADD", p + "calls:tools", call.tool)
