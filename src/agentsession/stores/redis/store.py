"""The Redis store: the storage port on redis-py, one Lua script per committed write.

URL: ``redis://[:password@]host[:port][/db]`` or ``rediss://...`` (TLS). Standalone Redis
(or the primary of a Sentinel setup); Redis Cluster is not supported, because one
transaction also writes store-wide keys (indexes, the audit counter) in other slots.

Key layout (``{sid}`` is a Redis hash tag, so one session's keys share a cluster slot)::

    as:{sid}:session        string  the Session as JSON
    as:{sid}:msgs           the messages (:mod:`.messages`)
    as:{sid}:memory, as:{sid}:memhist, as:{sid}:memhist:at  the working memory and its
                                    history (:mod:`.memory`)
    as:{sid}:records, as:{sid}:records:idx  the session's records (:mod:`.records`)
    as:{sid}:summaries      zset    the session's summaries (:mod:`.summaries`)
    as:{sid}:rewinds, as:{sid}:rewound:<n>  rewinds and hidden messages (:mod:`.rewinds`)
    as:{sid}:calls...       the tool calls and their lookups (:mod:`.toolcalls`)
    as:{sid}:runs, as:{sid}:runs:seq, as:{sid}:steps:<run_id>  runs and steps (:mod:`.runs`)
    as:{sid}:audit, as:audit_seq, as:tombstones  the audit trail (:mod:`.audit`)
    as:changes              stream  the change feed, in commit order (:mod:`.changes`)
    as:{sid}:idem, as:idem:...  the idempotency records (:mod:`.idempotency`)
    as:{sid}:lock           string  the write lock: a writer's random token, PX expiry
    as:sessions, as:user:{uid}:..., as:status:..., as:agent:..., as:due
                                    the session indexes (:mod:`.index`)
    as:shared:...           the shared-memory documents (:mod:`.shared`)
    as:{sid}:usage, as:{sid}:budget, as:budget:{uid}  the usage ledger and budgets
                                    (:mod:`.usage`)

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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

from ...authfailures import LimitsCounter
from ...errors import StoreBusy, StoreError
from ...models import (
    AuditEvent,
    Message,
    Run,
    RunStep,
    Session,
    SharedMemory,
    ToolCall,
    WorkingMemory,
)
from ..base import FeedRead, IdempotencyRecord, ScrubReport, SessionHead, StoreConflict
from ..rowwrites import RowWriteDefaults
from .apikeys import RedisKeyTable
from .audit import AuditOps
from .changes import change_tail, read_changes
from .codec import copy, dec, prefix
from .idempotency import IdempotencyOps
from .index import ALL_SESSIONS, INDEX_VERSION, INDEX_VERSION_KEY, LeaseIndexOps, index_writes
from .memory import MemoryOps
from .messages import MessageOps
from .meta import MetaOps
from .records import RecordOps
from .replies import maybe_texts as _maybe_texts
from .replies import text as _text
from .replies import texts as _texts
from .rewinds import RewindOps
from .rewrite import RewriteOps

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
from .runs import RunOps
from .scrub import config_of
from .scrub import scrub as scrub_files
from .search import SearchOps
from .sessions import SessionOps
from .shared import SharedMemoryOps
from .summaries import SummaryOps
from .toolcalls import ToolCallOps
from .usage import UsageOps

__all__ = ["AOF_REWRITE_WAIT_S", "RedisStore"]

#: How long :meth:`RedisStore.scrub` waits for an AOF rewrite, in seconds.
AOF_REWRITE_WAIT_S = 300.0

logger = logging.getLogger(__name__)

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
      p .. 'records:idx', p .. 'summaries', p .. 'memhist', p .. 'memhist:at',
      p .. 'usage', p .. 'budget')
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
    elseif op == 'SETKEEPTTL' then
      local v = arg()
      redis.call('SET', k, v, 'KEEPTTL')
    elseif op == 'LSET' then
      local i = arg()
      local v = arg()
      redis.call('LSET', k, i, v)
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
    elseif op == 'XADD' then
      local sid = arg()
      local seq = arg()
      redis.call('XADD', k, '*', 's', sid, 'q', seq)
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


def _masked(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


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

    def api_keys(self) -> RedisKeyTable:
        """The store's API keys (:mod:`agentsession.apikeys`).

        Raises:
            StoreError: the store is closed.
        """
        return RedisKeyTable(self.client)

    def auth_failures(self) -> LimitsCounter:
        """The HTTP service's failed-authentication windows, in this Redis (keys
        ``as:limits:*``, the ``limits`` library's moving windows), shared by every
        process on the server.

        Raises:
            StoreError: the store is closed.
        """
        from limits.storage import RedisStorage

        storage = RedisStorage(
            "redis://", connection_pool=self.client.connection_pool, key_prefix="as:limits"
        )
        return LimitsCounter(storage, shared=True)

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

    def read_changes(
        self,
        *,
        after: str | None,
        user_ids: Sequence[str] | None,
        session_id: str | None,
        limit: int,
    ) -> FeedRead:
        """The change feed (see
        :meth:`~agentsession.stores.base.SessionStore.read_changes`), in commit order:
        the ``as:changes`` stream (:mod:`.changes`); cursors are stream ids.

        Raises:
            ValidationError: a bad cursor. StoreError: the store is closed, or Redis failed.
        """
        try:
            return read_changes(
                self.client, after=after, user_ids=user_ids, session_id=session_id, limit=limit
            )
        except (redis.RedisError, ValueError, KeyError) as exc:
            raise _translate(exc) from exc

    def change_tail(self) -> str | None:
        """The newest entry of the ``as:changes`` stream (see
        :meth:`~agentsession.stores.base.SessionStore.change_tail`).

        Raises:
            StoreError: the store is closed, or Redis failed.
        """
        try:
            return change_tail(self.client)
        except redis.RedisError as exc:
            raise _translate(exc) from exc

    def close(self) -> None:
        """Close the client if the store made it. Idempotent; further use raises."""
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            client.close()


class _RedisTransaction(
    RowWriteDefaults,
    SessionOps,
    MessageOps,
    MemoryOps,
    RecordOps,
    SummaryOps,
    RewindOps,
    ForkOps,
    SharedMemoryOps,
    ToolCallOps,
    RunOps,
    AuditOps,
    IdempotencyOps,
    LeaseIndexOps,
    SearchOps,
    UsageOps,
    RewriteOps,
    MetaOps,
):
    """One transaction: reads go to Redis (through this transaction's own buffered
    writes), writes are buffered for :meth:`commit`. Each aggregate's methods are a
    class of their own module; this one holds the write buffer, the guards, the lock,
    what every part buffered, and the session reads and deletion that touch all of it."""

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
        self._meta: dict[str, str] = {}  # store values written here (.meta)
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
            return None if s is None else copy(s)
        if self._may_lock:
            self._may_lock = False
            self._lock.take(prefix(session_id) + "lock", f"session {session_id!r}")
        raw = self._read(prefix(session_id) + "session")
        session = None if raw is None else dec(Session, raw)
        if self._write:
            self._sessions[session_id] = session
        return None if session is None else copy(session)

    def get_session_head(self, session_id: str) -> SessionHead | None:
        session = self.get_session(session_id)  # the row is one stored value
        return None if session is None else SessionHead.of(session)

    @_translated
    def delete_session(self, session_id: str) -> None:
        self._writing()
        old = self._session_known(session_id)
        if old is None:
            return
        self._writes += ["PURGE", prefix(session_id)]
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
        for key in _texts(self._r.smembers(prefix(session_id) + "idem")):
            self._idem[key] = None


@_translated
def _reindex(tx: _RedisTransaction, session_ids: Sequence[str]) -> None:
    """Write the index entries of these sessions and of their tool calls, as
    ``update_session`` and ``insert_tool_call`` do, for data written before the entries
    existed. Each session is read as a guard: a concurrent change makes the commit a
    StoreConflict."""
    tx._writing()
    for sid in session_ids:
        p = prefix(sid)
        raw = tx._read(p + "session")
        if raw is None:
            continue
        for op, key, *args in index_writes(None, dec(Session, raw)):
            tx._do(op, key, *args)
        for text in _texts(tx._r.hvals(p + "calls")):
            call = dec(ToolCall, text)
            tx._do("ZADD", f"{p}calls:tool:{call.tool}", call.seq, call.call_id)
            tx._do("SADD", p + "calls:tools", call.tool)
