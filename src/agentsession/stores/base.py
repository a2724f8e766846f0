"""The storage port: what a store must do, and nothing about rules.

A store keeps rows and runs transactions. It knows nothing of lifecycle, ownership,
versions or idempotency semantics: :class:`~agentsession.service.SessionManager` decides
all of those inside one :meth:`SessionStore.transaction` and the store makes the
transaction atomic (all of it is written, or none of it).

Contract, for every method of :class:`StoreTransaction`:

* Absent is ``None`` (or an empty list), never an error.
* Everything returned is a fresh copy; nothing the caller later mutates reaches the store.
* Listings are ordered as documented and ``limit`` counts rows (``None`` = no limit);
  the manager only passes ``limit >= 0``.
* In a write transaction, :meth:`StoreTransaction.get_session` locks the session row
  until the transaction ends, so the manager's read-check-write is not check-then-act.
* Driver errors never escape: a transient one (lock timeout, serialization failure,
  a racing insert on a unique key) is raised as :class:`StoreBusy` (the manager retries
  the whole transaction); a connection the server dropped before the COMMIT as
  :class:`ConnectionLost` (the manager re-runs the transaction on a fresh connection);
  an unreachable store, a connection lost during the COMMIT or a full disk as
  :class:`~agentsession.errors.StoreUnavailable`; anything else as
  :class:`~agentsession.errors.StoreError`.

The conformance suite in ``tests/contract`` is the executable form of this contract.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NamedTuple, Protocol, TypeVar, runtime_checkable

from ..errors import StoreBusy, StoreUnavailable
from ..metafilter import MetadataFilter
from ..models import (
    AuditEvent,
    Budget,
    MemoryVersion,
    Message,
    Record,
    Rewind,
    Run,
    RunStatus,
    RunStep,
    Session,
    SessionStatus,
    SharedMemory,
    Summary,
    ToolCall,
    UsageEntry,
    WorkingMemory,
)

__all__ = [
    "ChainLink",
    "ConnectionLost",
    "FeedRead",
    "IdempotencyRecord",
    "JSONTexts",
    "ScrubReport",
    "SearchRow",
    "SearchText",
    "SessionHead",
    "SessionOrHead",
    "SessionRow",
    "SessionStore",
    "StoreConflict",
    "StoreTransaction",
    "UsageGroup",
    "UsageRow",
    "UsageSum",
]

#: The JSON text of each value of a batch, in order, made by the caller when it
#: checked them; None: the store encodes the values itself.
JSONTexts = Sequence[str] | None

#: Builds a message from its stored payload (decoded from storage, handed over) and the
#: store's fields, with :meth:`Message.from_store`'s signature; given to
#: ``get_messages``, it replaces the store's own building (the sealed store opens the
#: content before the one build). None: the store's own way.
MessageBuilder = Callable[..., Message] | None


def rebuilt(messages: Sequence[Message], build: Callable[..., Message]) -> list[Message]:
    """``messages`` (kept as :class:`Message` objects by the store) built by ``build``
    from their payloads: the ``MessageBuilder`` way for stores that keep objects."""
    return [
        build(
            m.payload(),
            message_id=m.message_id,
            session_id=m.session_id,
            seq=m.seq,
            created_at=m.created_at,
        )
        for m in messages
    ]


class StoreConflict(StoreBusy):
    """A write lost a race inside the store (compare-and-set miss, duplicate key).

    The manager re-runs the whole transaction, which then sees the winner's state.
    """

    code = "store-conflict"


class ConnectionLost(StoreUnavailable):
    """The server closed the transaction's connection before its COMMIT was sent (an
    idle timeout, a restart, a failover): the server rolled the transaction back, so
    nothing of it was written, and the manager re-runs it whole on a fresh connection.
    """


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """The stored first result of a request sent with an idempotency key.

    Attributes:
        user_id: the principal (the caller); keys are scoped per caller and ``scope``.
        scope: the operation, e.g. ``"append_messages"``.
        key: the client's idempotency key.
        fingerprint: hex SHA-256 of the canonical request, to detect a different request.
        session_id: the session the request wrote to (deleted with it), or None.
        result: JSON text of the first result, returned again on a retry.
        created_at: when the first request committed.
        expires_at: when the record may be forgotten: ``created_at`` plus the policy's
            idempotency retention, set by the service layer. A store may drop the record
            by itself then (Redis sets it as the key's expiry); None = kept until purged.
        owner_id: the user whose data the request wrote (the session's owner, the
            ``user`` shared document's), which an admin's request on their behalf is
            not; None when it wrote no user's data (the ``app`` document). The erasure
            of either user purges the record (:meth:`StoreTransaction.purge_idempotency`).
    """

    user_id: str
    scope: str
    key: str
    fingerprint: str
    session_id: str | None
    result: str
    created_at: datetime
    expires_at: datetime | None = None
    owner_id: str | None = None


class SessionHead(NamedTuple):
    """The few fields of a session row a read checks before it reads the session's
    children (ownership, lifecycle, expiry, lease, the history's length): what
    :meth:`StoreTransaction.get_session_head` returns, with no :class:`Session` built.
    Each field is the :class:`Session` field of that name."""

    session_id: str
    user_id: str
    status: SessionStatus
    message_count: int
    expires_at: datetime | None
    lease_expires_at: datetime | None
    agent: str

    @classmethod
    def of(cls, s: Session) -> SessionHead:
        """The head of ``s``."""
        return cls(
            s.session_id,
            s.user_id,
            s.status,
            s.message_count,
            s.expires_at,
            s.lease_expires_at,
            s.agent,
        )


@dataclass(frozen=True, slots=True)
class SessionRow:
    """The fields of a session row that an append or a working-memory update checks
    and changes (ownership, lifecycle, expiry, lease, the version compare-and-set, the
    history's length, the TTL clock, the audit chain's head): what
    :meth:`StoreTransaction.lock_session_row` returns, with no :class:`Session` built.
    Each field is the :class:`Session` field of that name."""

    session_id: str
    user_id: str
    agent: str
    status: SessionStatus
    version: int
    message_count: int
    ttl_seconds: float | None
    expires_at: datetime | None
    lease_expires_at: datetime | None
    audit_head: str | None

    @classmethod
    def of(cls, s: Session) -> SessionRow:
        """The row fields of ``s``."""
        return cls(
            s.session_id,
            s.user_id,
            s.agent,
            s.status,
            s.version,
            s.message_count,
            s.ttl_seconds,
            s.expires_at,
            s.lease_expires_at,
            s.audit_head,
        )


#: A session, its head or its row: what a check that reads only those fields takes.
SessionOrHead = TypeVar("SessionOrHead", Session, SessionHead, SessionRow)


class SearchRow(NamedTuple):
    """One indexed text that matched a search (:meth:`StoreTransaction.search`).

    Attributes:
        position: where the row stands in the store's order of hits, as text (an SQL
            row id, the memory store's key): the next page starts after it.
        session_id, kind, seq, role: those of :class:`~agentsession.models.SearchHit`.
        text: the whole indexed text (:mod:`agentsession.searchtext`).
    """

    position: str
    session_id: str
    kind: str
    seq: int
    role: str | None
    text: str


class SearchText(NamedTuple):
    """A text to index, given in plaintext by a sealed store whose search is on
    (:meth:`StoreTransaction.index_search_texts`): ``kind`` ``message`` / ``title`` /
    ``tool_call``, ``seq`` the message's or call's seq (0 for a title), ``role`` the
    message's role (None otherwise), ``text`` as :mod:`agentsession.searchtext` makes it."""

    session_id: str
    kind: str
    seq: int
    role: str | None
    text: str


class UsageRow(NamedTuple):
    """One row of the usage ledger: one model's counts in one finished run, with what
    it is grouped and bounded by (:meth:`StoreTransaction.insert_usage`).

    Attributes:
        user_id, agent, session_id, run_id: the run's session's owner and agent, the
            session and the run.
        at: when the run finished (UTC); day: its UTC date, ``YYYY-MM-DD``.
        entry: the counts and the model.
        runs: 1 on the first row of a run, 0 on its others, so a sum of ``runs`` counts
            each run once whatever its models.
    """

    user_id: str
    agent: str
    session_id: str
    run_id: str
    at: datetime
    day: str
    entry: UsageEntry
    runs: int


class UsageSum(NamedTuple):
    """The ledger's sums for one ``(group, model)`` (:meth:`StoreTransaction.sum_usage`):
    ``group`` the session id, agent, model or day as asked (None when not grouped),
    the five counts summed, ``runs`` the sum of the rows' ``runs`` and ``rows`` how
    many rows (one per run and model: the runs of that model)."""

    group: str | None
    model: str | None
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int
    runs: int
    rows: int


#: What :meth:`StoreTransaction.sum_usage` may group by (None: one group).
UsageGroup = Literal["session", "agent", "model", "day"] | None


@dataclass(frozen=True, slots=True)
class ScrubReport:
    """What :meth:`SessionStore.scrub` did to get erased rows off the store's disk.

    Attributes:
        done: the steps the store ran, in order, one line of text each (e.g. the WAL
            checkpoint of SQLite, with how many frames it copied).
        pending: what may still hold the erased rows and the store could not reach, one
            line each, with the step that reaches it (for the operator).
    """

    done: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One link of the store-wide session chain (:mod:`agentsession.sessionchain`): a
    session created (``kind`` ``created``) or deleted (``deleted``, its tombstone).

    Attributes:
        seq: 1, 2, 3...: the link's place, given by the service (no gaps).
        session_id: the session.
        kind: ``created`` or ``deleted``.
        event_hash: the hash of the audit event the link stands for (the session's
            creation or fork event; its tombstone).
        prev_hash: the previous link's ``hash`` (None for the first link).
        hash: SHA-256 (hex) of the link's canonical encoding.
    """

    seq: int
    session_id: str
    kind: str
    event_hash: str
    prev_hash: str | None
    hash: str


@runtime_checkable
class StoreTransaction(Protocol):
    """The operations available inside one transaction. See the module docstring."""

    # -- sessions --------------------------------------------------------------------
    def get_session(self, session_id: str) -> Session | None:
        """Return the session, or None. Locks its row in a write transaction."""

    def get_session_head(self, session_id: str) -> SessionHead | None:
        """Return the session's :class:`SessionHead` (equal to ``SessionHead.of`` its
        :meth:`get_session`), or None. Meant for read transactions: a write reads the
        session with :meth:`get_session`, which locks the row."""

    def lock_session_row(self, session_id: str) -> SessionRow | None:
        """Return the session's :class:`SessionRow` (equal to ``SessionRow.of`` its
        :meth:`get_session`), or None, locking the row as :meth:`get_session` does: the
        lean form of a write that changes only those fields (an append, a
        working-memory update), which then ends with :meth:`advance_session`."""

    def insert_session(self, session: Session) -> None:
        """Insert a new session. Raises StoreConflict if the id exists, or if its
        ``external_key`` is not None and an existing session of the same ``(user_id,
        agent)`` has it: a unique index (or an atomic check at commit), so of two
        racing inserts of one key exactly one commits."""

    def find_session_by_key(self, user_id: str, agent: str, external_key: str) -> str | None:
        """The id of the session of ``(user_id, agent)`` with this ``external_key``
        (compared exactly), or None. Served by an index, never a scan; a deleted
        session's key is free again."""

    def update_session(self, session: Session, *, expected_version: int) -> None:
        """Replace the session row if its stored version is ``expected_version``.

        Compare-and-set in one statement. Raises StoreConflict when the stored version
        differs or the row is gone.
        """

    def advance_session(
        self,
        row: SessionRow,
        *,
        at: datetime,
        expires_at: datetime | None,
        message_count: int,
        audit_head: str | None,
    ) -> None:
        """Store the session of ``row`` (as :meth:`lock_session_row` read it) one
        version up, touched at ``at``: ``version`` = ``row.version + 1``,
        ``updated_at`` = ``last_active_at`` = ``at``, and ``expires_at``,
        ``message_count``, ``audit_head`` as given; every other field as stored. The
        row stored is the one :meth:`update_session` stores for ``get_session``'s
        session with those fields changed, compared-and-set against ``row.version``.
        Raises StoreConflict when the stored version differs or the row is gone.
        """

    def delete_session(self, session_id: str) -> None:
        """Delete the session and every row that belongs to it.

        Messages, working memory (and its history), records, summaries, rewinds and
        rewound messages, tool calls, runs and their steps, audit events and
        idempotency records with this ``session_id`` all go. Absent: no-op.
        """

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
        metadata: MetadataFilter | None = None,
    ) -> list[Session]:
        """Sessions ordered by ``(updated_at, session_id)`` descending, as stored.

        Served by indexes, never a scan of every session of the user (or of the store):
        ``(user_id, status | agent, updated_at, session_id)``, ``(parent_session_id,
        updated_at, session_id)`` for the forks of a session, and ``(user_id, status,
        expires_at)`` for the due ones (:mod:`.listing`).

        Args:
            user_id: only this owner's sessions; None means every user (admin listing).
            status: the status as of ``now`` (:func:`.listing.status_as_of`): ACTIVE
                means stored ACTIVE and not past ``expires_at``; EXPIRED means stored
                EXPIRED, or ACTIVE past ``expires_at``; None means any.
            agent: equality filter; None means any.
            parent_session_id: only the forks made from this session; None means any.
            metadata: a checked filter (:func:`agentsession.metafilter.check_filter`):
                only sessions whose metadata has every key with that match text; None
                means any. Served by the store's metadata index (SQL
                ``session_metadata``, Redis sets per entry): the cost grows with the
                sessions matching it, not with the user's others.
            after: keyset cursor; only sessions strictly after ``(updated_at, session_id)``
                in that order.
            limit: at most this many rows.
            now: the moment of the read, for ``status``.
        """

    def count_sessions(
        self,
        *,
        user_id: str | None,
        status: SessionStatus | None,
        agent: str | None,
        now: datetime,
        parent_session_id: str | None = None,
        metadata: MetadataFilter | None = None,
    ) -> int:
        """How many sessions :meth:`list_sessions` returns with the same filters over
        all its pages (no cursor, no limit), as of ``now``: a session stored ACTIVE
        past its ``expires_at`` counts as EXPIRED, never ACTIVE.

        Counted on the indexes the listing reads, without reading the sessions
        themselves where the store can (SQL ``COUNT(*)``, Redis set cardinalities);
        never a scan of every session of the store for a filtered count. The
        arguments are those of :meth:`list_sessions`.
        """

    def search(
        self,
        *,
        user_id: str | None,
        query: str,
        agent: str | None,
        session_id: str | None,
        after: str | None,
        limit: int,
    ) -> list[SearchRow]:
        """At most ``limit`` indexed texts that contain ``query`` (case ignored) in the
        sessions of ``user_id`` (None: every user's), of ``agent`` and of
        ``session_id`` when given, in the store's order of hits, after the row at
        ``after`` (a :attr:`SearchRow.position` this store returned; None: from the
        first). The texts are those of :mod:`agentsession.searchtext`: titles,
        messages in the history (not hidden, removed or erased ones) and tool calls.

        Raises:
            SearchNotSupported: the store keeps no search index (Redis).
            ValidationError: ``after`` is not a position of this store.
        """

    def index_search_texts(self, texts: Sequence[SearchText]) -> None:
        """Index texts given in plaintext, each replacing what is indexed at its
        ``(session_id, kind, seq)``: what a store with a keyring and search turned on
        writes beside the sealed values (docs/security.md, "Search with a keyring"). A
        store's own indexing skips sealed texts (:func:`agentsession.searchtext.indexable`).
        The texts go with their session (deletion, erasure), their message (removal,
        rewind) or their title (replaced). A store without search ignores them."""

    def list_due_sessions(self, *, now: datetime, limit: int) -> list[str]:
        """Ids of ACTIVE sessions with ``expires_at <= now``, oldest ``expires_at`` first."""

    def list_lapsed_leases(self, *, now: datetime, limit: int) -> list[str]:
        """Ids of at most ``limit`` sessions with ``lease_expires_at <= now`` (their
        RUNNING run's lease lapsed), oldest ``lease_expires_at`` first, served by an
        index on that deadline (never a scan of every session)."""

    def list_user_session_ids(self, user_id: str) -> list[str]:
        """Ids of every session owned by ``user_id``, in any status."""

    # -- messages --------------------------------------------------------------------
    def insert_messages(self, messages: Sequence[Message], *, payloads: JSONTexts = None) -> None:
        """Append messages; their ``seq`` values are already assigned by the manager.

        ``payloads``, when given, is each message's payload as JSON text, encoded when it
        was checked (:func:`~agentsession.jsonvalues.dumps`, keys in the order sent,
        which may differ from :meth:`~Message.payload`'s order; it decodes to the same
        object): a store that keeps the payload as JSON text stores it as it is.

        The manager assigns gapless seqs under the session row lock; a store must reject
        a duplicate ``(session_id, seq)`` with StoreConflict and need not re-check for
        gaps. Must cost O(len(messages)), independent of how long the history is.
        """

    def get_messages(
        self,
        session_id: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int | None = None,
        newest: bool = True,
        build: MessageBuilder = None,
    ) -> list[Message]:
        """Messages with ``after_seq < seq < before_seq`` (None = unbounded), oldest first.

        With ``limit``, ``newest=True`` keeps the last ``limit`` of that range and
        ``newest=False`` the first ``limit``. Costs O(returned rows), not O(history).
        ``build``: each message made by it instead (:data:`MessageBuilder`).
        """

    def delete_messages(self, session_id: str, *, after_seq: int) -> int:
        """Delete the session's messages with ``seq > after_seq`` (``after_seq >= 0``);
        return how many went.

        Only the newest messages are ever removed, so the seqs left stay gapless and the
        manager appends after them again (a later insert reuses the freed seqs, even in
        the same transaction). Costs O(removed rows), independent of how long the rest
        of the history is. Tool calls and runs stay.
        """

    # -- records ---------------------------------------------------------------------
    # Opaque per-session records, ordered by ``(namespace, key)`` in Unicode code-point
    # order on every store (binary collation on SQL servers, Redis ZRANGEBYLEX).

    def put_records(self, records: Sequence[Record]) -> None:
        """Insert or replace each record by ``(session_id, namespace, key)``; the manager
        passes no two with the same key. Costs O(len(records)), not O(records held)."""

    def get_record(self, session_id: str, namespace: str, key: str) -> Record | None:
        """Return one record, or None."""

    def list_records(
        self,
        session_id: str,
        *,
        namespace: str | None = None,
        prefix: str | None = None,
        after: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        descending: bool = False,
    ) -> list[Record]:
        """Records ordered by ``(namespace, key)`` (``descending`` reverses it), of one
        namespace or of all (``namespace=None``), whose key starts with ``prefix`` and
        lies strictly between ``after`` and ``before`` (None = unbounded); at most
        ``limit``. With a namespace, served by the primary key's order (no sort)."""

    def delete_records(
        self, session_id: str, *, namespace: str | None = None, prefix: str | None = None
    ) -> int:
        """Delete the session's records of ``namespace`` (None = every namespace) whose
        key starts with ``prefix`` (None = any); return how many went."""

    # -- summaries -------------------------------------------------------------------
    # Stored summaries of seq ranges (compaction), numbered 1, 2, 3... per session (a
    # removal of messages may leave gaps: see delete_summaries).

    def insert_summary(self, summary: Summary) -> None:
        """Insert a summary. The manager numbers it (the newest number + 1, above every
        stored one) under the session row lock; a store must reject a duplicate
        ``(session_id, number)`` with StoreConflict. Costs O(1), whatever the session holds."""

    def list_summaries(
        self,
        session_id: str,
        *,
        after_number: int | None = None,
        before_number: int | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[Summary]:
        """Summaries with ``after_number < number < before_number`` (None = unbounded),
        oldest first. With ``limit``, ``newest=True`` keeps the last ``limit`` of that
        range and ``newest=False`` the first ``limit``. Costs O(returned rows)."""

    def delete_summaries(self, session_id: str, *, after_seq: int) -> int:
        """Delete the session's summaries with ``to_seq > after_seq`` (they describe
        messages that a removal of the seqs above ``after_seq`` takes away); return how
        many went. The others keep their numbers, so the numbers left may have gaps.
        Costs O(the session's summaries)."""

    # -- rewinds ---------------------------------------------------------------------
    # Every rewind of a session, numbered 1, 2, 3... per session (never deleted but with
    # the session, so without gaps), and the messages a hiding rewind kept.

    def insert_rewind(self, rewind: Rewind) -> None:
        """Insert a rewind. The manager numbers it (the newest number + 1) under the
        session row lock; a store must reject a duplicate ``(session_id, number)``
        with StoreConflict. Costs O(1)."""

    def list_rewinds(
        self,
        session_id: str,
        *,
        after_number: int | None = None,
        limit: int | None = None,
        newest: bool = False,
    ) -> list[Rewind]:
        """Rewinds with ``number > after_number`` (None = from the first), oldest
        first; with ``limit``, ``newest=True`` keeps the last ``limit`` of them.
        Costs O(returned rows)."""

    def hide_messages(self, session_id: str, *, after_seq: int, number: int) -> int:
        """Copy the session's messages with ``seq > after_seq`` into the rewound
        messages of rewind ``number`` (SQL: one ``INSERT ... SELECT``); return how
        many. The manager then deletes them from the history (:meth:`delete_messages`)
        in the same transaction. Costs O(copied rows)."""

    def get_rewound_messages(
        self,
        session_id: str,
        number: int,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """The messages rewind ``number`` hid, with ``seq > after_seq``, oldest first,
        at most ``limit``, as they were stored. Costs O(returned rows)."""

    # -- forks -----------------------------------------------------------------------
    def copy_history(
        self, source_id: str, target_id: str, *, upto_seq: int, id_part: str
    ) -> tuple[int, int]:
        """Copy into the session ``target_id`` (inserted in this transaction, empty)
        the messages of ``source_id`` with ``seq <= upto_seq`` (same seq, role, payload,
        ``created_at``, ``run_id``), its summaries with ``to_seq <= upto_seq`` (same
        numbers) and its working-memory history rows with ``at_seq <= upto_seq`` (same
        versions); not the current working memory (the manager writes the fork's), nor
        tool calls, runs, records or audit events.

        A copied message's id is ``"msg_" + id_part + source_id_of_it[17:30]``:
        ``id_part`` is 13 characters of a fresh id's random part, the rest the last 13
        characters of the original id, so the id keeps ``ids.ID_PATTERN`` and is new.

        One bulk statement per table (SQL ``INSERT ... SELECT``), or one server-side
        copy (Redis): never a round trip per row, whatever the source holds.

        Returns:
            ``(messages, summaries)``: how many of each were copied.
        """

    # -- working memory --------------------------------------------------------------
    def get_working_memory(self, session_id: str) -> WorkingMemory | None:
        """Return the session's working memory, or None if never written."""

    def put_working_memory(self, memory: WorkingMemory, *, at_seq: int) -> None:
        """Insert or replace the session's working memory, and append the history row
        ``(memory.version, at_seq, memory.updated_at, memory.data)``.

        ``at_seq`` is the session's ``message_count`` once the change that writes the
        memory is stored (an append that also patches memory: the append's last seq;
        a new session: 0). Versions only grow, so a store may rely on the history's
        ``at_seq`` never decreasing with the version (docs/semantics.md,
        "Working-memory history"). StoreConflict on a version already in the history.
        """

    def get_working_memory_at(self, session_id: str, seq: int) -> WorkingMemory | None:
        """The working memory as of message ``seq`` (``seq >= 0``): the history row with
        the highest version among those with ``at_seq <= seq`` (its ``version``,
        ``updated_at`` and ``data``), i.e. the memory in effect when message ``seq + 1``
        was appended; None if there is none. Served by the history's key, never a scan
        of every session's rows."""

    def list_memory_history(
        self, session_id: str, *, before_seq: int | None, limit: int
    ) -> list[MemoryVersion]:
        """The history rows with ``at_seq < before_seq`` (None: all), newest first, at
        most ``limit``, each as a MemoryVersion (``seq`` its ``at_seq``). Served by the
        history's key: a page costs its rows, whatever the history holds."""

    def rebase_memory_history(self, session_id: str, *, after_seq: int) -> None:
        """Set ``at_seq = after_seq`` on the history rows with ``at_seq > after_seq``
        (one statement): a removal of the messages above ``after_seq`` does not change
        the memory, so those versions were in effect at the new end of the history."""

    # -- shared memory ---------------------------------------------------------------
    def get_shared_memory(self, agent: str, user_id: str | None) -> SharedMemory | None:
        """Return the shared document of ``agent`` (``user_id`` None: the app scope) or
        of ``user_id`` and ``agent``, or None if never written. In a write transaction
        the read is the base of a compare-and-set by :meth:`put_shared_memory`."""

    def put_shared_memory(self, doc: SharedMemory, *, expected_version: int) -> None:
        """Insert or replace a shared document (keyed by ``doc.agent`` and
        ``doc.user_id``) if its stored version is still ``expected_version`` (0 =
        absent); else raise StoreConflict, so the manager re-runs the transaction
        and no concurrent update is lost."""

    def delete_shared_memory(self, agent: str, user_id: str | None) -> bool:
        """Delete one shared document; return whether it existed."""

    def delete_user_shared_memory(self, user_id: str) -> int:
        """Delete every ``user``-scope document of ``user_id`` (all agents; erasure);
        return how many there were."""

    # -- tool calls ------------------------------------------------------------------
    def insert_tool_call(self, call: ToolCall) -> None:
        """Insert a tool call (``seq`` assigned by the manager). StoreConflict on a
        duplicate ``(session_id, call_id)``; ``provider_call_id`` may repeat."""

    def get_tool_call(self, session_id: str, call_id: str) -> ToolCall | None:
        """Return one tool call of the session, or None."""

    def list_tool_calls(
        self,
        session_id: str,
        *,
        tool: str | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[ToolCall]:
        """Tool calls oldest first (by ``seq``), optionally of one tool, after a seq.
        With ``tool``, served by an index ``(session_id, tool, seq)``."""

    def find_tool_call(self, session_id: str, *, tool: str, arguments_hash: str) -> ToolCall | None:
        """The newest call of ``tool`` whose ``arguments_hash`` matches, or None.
        Served by an index ``(session_id, tool, arguments_hash, seq)``."""

    def find_tool_call_by_provider_id(
        self, session_id: str, provider_call_id: str
    ) -> ToolCall | None:
        """The newest call (highest ``seq``) with this ``provider_call_id``, or None.
        Provider ids repeat within a session; served by an index
        ``(session_id, provider_call_id, seq)``."""

    # -- runs ------------------------------------------------------------------------
    # A run is a row (its fields, status and ``step_count``) plus its steps. Every read
    # and write of the row costs O(1) in the run's steps: ``get_run`` and ``list_runs``
    # never load steps (``steps == []``); steps are read in pages by ``list_run_steps``.

    def insert_run(self, run: Run) -> None:
        """Insert a run with ``step_count`` 0 (its ``steps`` and ``step_count`` are
        ignored; steps are added one by one). StoreConflict if the run id exists."""

    def update_run(self, run: Run) -> None:
        """Replace a run's fields, but not its steps nor its ``step_count`` (only
        :meth:`insert_run_step` changes those). StoreConflict if the run is gone."""

    def insert_run_step(self, session_id: str, step: RunStep) -> None:
        """Append a step to a run and add 1 to its ``step_count``, in O(1) of its steps.

        ``step.index`` is assigned by the manager and must equal the run's current
        ``step_count``. Raises StoreConflict when it does not (a duplicate index, a
        racing writer) or when the run is gone.
        """

    def get_run(self, session_id: str, run_id: str) -> Run | None:
        """Return the run row (``step_count`` set, ``steps == []``), or None."""

    def list_run_steps(
        self,
        session_id: str,
        run_id: str,
        *,
        after_index: int | None = None,
        limit: int | None = None,
    ) -> list[RunStep]:
        """Steps of one run with ``index > after_index`` (None = from the first), oldest
        first, at most ``limit``. Costs O(returned rows), not O(steps of the run).
        Absent run: ``[]``."""

    def list_runs(
        self,
        session_id: str,
        *,
        status: RunStatus | None = None,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Run]:
        """Runs oldest first (by ``seq``), optionally of one status, after a run seq;
        rows only, as :meth:`get_run` returns them (``steps == []``)."""

    # -- usage ledger and budgets ----------------------------------------------------
    # The ledger is written with the run's finish, in its transaction, and goes with
    # the session (deleted, erased). Budgets: a user's (``session_id`` None) and a
    # session's (which goes with the session).

    def insert_usage(self, rows: Sequence[UsageRow]) -> None:
        """Add rows to the usage ledger (their sessions exist)."""

    def sum_usage(
        self,
        *,
        user_id: str | None,
        session_id: str | None = None,
        agent: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        group_by: UsageGroup = None,
    ) -> list[UsageSum]:
        """The ledger's sums per ``(group, model)`` over the rows of ``user_id`` (None:
        every user's), of ``session_id`` and ``agent`` when given, finished at or after
        ``since`` and before ``until``; ordered by group then model, None first. SQL
        stores read an index on ``(user_id, at)`` and one on ``session_id``."""

    def get_budget(self, user_id: str, session_id: str | None) -> Budget | None:
        """The budget set for the user (``session_id`` None) or the session; its
        ``used_*`` fields are not kept (0, None). None when none is set."""

    def put_budget(self, budget: Budget) -> None:
        """Set (insert or replace) a budget; a session budget's session exists."""

    def delete_budget(self, user_id: str, session_id: str | None) -> bool:
        """Remove a budget; whether there was one."""

    # -- audit -----------------------------------------------------------------------
    def insert_audit(self, event: AuditEvent) -> int:
        """Insert an audit event, ignoring ``event.seq``; return the seq the store gave it.

        Seqs increase across the whole store.
        """

    def list_audit(
        self, session_id: str, *, after_seq: int | None = None, limit: int | None = None
    ) -> list[AuditEvent]:
        """The session's audit events, oldest first."""

    # -- store metadata and the session chain ------------------------------------------
    def get_store_meta(self, name: str) -> str | None:
        """The store-wide value ``name`` (None: never set): the keyring mark, the head
        of the session chain. In a write transaction it stays locked until the
        transaction ends (SQL servers: ``FOR UPDATE``; Redis: a lock and a guard), so
        a read-then-:meth:`put_store_meta` is a compare-and-set."""

    def put_store_meta(self, name: str, value: str) -> None:
        """Set the store-wide value ``name`` (insert or replace); a racing first insert
        raises StoreConflict."""

    def insert_chain_links(self, links: Sequence[ChainLink]) -> None:
        """Append links to the session chain (their seqs are new)."""

    def list_chain_links(self, *, after_seq: int, limit: int) -> list[ChainLink]:
        """At most ``limit`` links of the session chain with a seq above ``after_seq``,
        ascending."""

    # -- idempotency -----------------------------------------------------------------
    def get_idempotency(self, user_id: str, scope: str, key: str) -> IdempotencyRecord | None:
        """Return the record stored for this key, or None."""

    def put_idempotency(self, record: IdempotencyRecord) -> None:
        """Store a record. Raises StoreConflict if one exists for (user_id, scope, key)
        (a SQL store inserts-or-ignores, so a lost race leaves no error in the server's
        log)."""

    def delete_idempotency(self, user_id: str, scope: str, key: str) -> None:
        """Remove one record (used to replace an expired one). Absent: no-op."""

    def purge_idempotency(self, *, created_before: datetime, user_id: str | None = None) -> int:
        """Delete records older than ``created_before``; with ``user_id``, only those of
        that user: written by them (``user_id``) or to their data (``owner_id``). Return
        how many went."""

    # -- content rewrite (agentsession encrypt, keyring reencrypt) ---------------------
    # A pass over the whole store rewrites each content value in place, keyed as it is
    # stored: ids, seqs, versions and times stay as they are, only the content fields
    # named below change. A row that is gone is skipped (a concurrent removal won).

    def list_session_ids(self, *, after: str | None, limit: int) -> list[str]:
        """Ids of at most ``limit`` sessions of every user, ascending, each above
        ``after`` (None: from the first): a keyset walk of the whole store."""

    def rewrite_messages(self, messages: Sequence[Message]) -> None:
        """Replace the payload of each stored message ``(session_id, seq)`` with
        ``message.payload()``."""

    def rewrite_rewound_messages(
        self, session_id: str, number: int, messages: Sequence[Message]
    ) -> None:
        """Replace the payload of each message hidden by rewind ``number`` (by seq)."""

    def rewrite_working_memory(self, memory: WorkingMemory) -> None:
        """Replace the data of the session's working memory if it is still at
        ``memory.version``; no history row is added."""

    def rewrite_memory_history(self, session_id: str, versions: Sequence[MemoryVersion]) -> None:
        """Replace the data of each history row, found by its version."""

    def rewrite_tool_calls(self, calls: Sequence[ToolCall]) -> None:
        """Replace ``arguments``, ``result`` and ``error`` of each call (by call id)."""

    def rewrite_run_steps(self, session_id: str, steps: Sequence[RunStep]) -> None:
        """Replace ``input``, ``output`` and ``error`` of each step (by run id, index)."""

    def rewrite_summaries(self, summaries: Sequence[Summary]) -> None:
        """Replace the ``text`` of each summary (by session id and number)."""

    def list_shared_memory(
        self, *, after: tuple[str, str] | None, limit: int
    ) -> list[SharedMemory]:
        """At most ``limit`` shared documents ascending by ``(agent, user_id or "")``,
        each above ``after`` (None: from the first)."""

    def list_idempotency(
        self, *, after: tuple[str, str, str] | None, limit: int
    ) -> list[IdempotencyRecord]:
        """At most ``limit`` idempotency records ascending by ``(user_id, scope, key)``,
        each above ``after`` (None: from the first)."""

    def rewrite_idempotency(self, record: IdempotencyRecord) -> None:
        """Replace the ``result`` of the record stored for ``(user_id, scope, key)``."""


class FeedRead(NamedTuple):
    """What one read of the change feed found (:meth:`SessionStore.read_changes`).

    Attributes:
        changes: ``(cursor, event)`` pairs in feed order.
        resume: where the next read starts: the last change's cursor, or a cursor past
            it when the store also passed over events the read did not select; None
            when the read passed over nothing (resume from the same ``after``).
        more: the read stopped before the end of the final events (read again now).
    """

    changes: list[tuple[str, AuditEvent]]
    resume: str | None
    more: bool


@runtime_checkable
class SessionStore(Protocol):
    """A storage backend: a factory of transactions.

    Attributes:
        url: the URL the store was opened with, with any password masked.
    """

    url: str

    def transaction(self, *, write: bool) -> AbstractContextManager[StoreTransaction]:
        """Open a transaction; commit when the block ends, roll back if it raises.

        ``write=False`` promises no writes and may run concurrently with writers.
        ``write=True`` serialises with other writers of the same session at the latest at
        the first :meth:`StoreTransaction.get_session` (SQLite: ``BEGIN IMMEDIATE``).
        """

    def scrub(self, *, compact: bool = False) -> ScrubReport:
        """Get rows deleted by committed transactions off the disk, as far as the store
        can; the manager calls it after an erasure (``delete_session``,
        ``delete_user_data``) has committed. Safe to call at any time, and again.

        Args:
            compact: also run the steps that rewrite whole tables or files and block
                other writers while they run (PostgreSQL ``VACUUM FULL``, MariaDB
                ``OPTIMIZE TABLE``, SQLite ``VACUUM``, Redis ``BGREWRITEAOF``).

        Returns:
            What was done, and what still holds erased rows (for the operator).

        Raises:
            StoreError: a step failed (the erasure itself stays committed).
        """

    def read_changes(
        self,
        *,
        after: str | None,
        user_ids: Sequence[str] | None,
        session_id: str | None,
        limit: int,
    ) -> FeedRead:
        """The change feed: committed audit events after the cursor ``after`` (None: from
        the oldest kept), oldest first, each with its cursor, at most ``limit`` (>= 1).

        Only events whose ``user_id`` is in ``user_ids`` (None: any) and, with
        ``session_id``, of that session. The feed's order is commit order: an event is
        returned only once every write that could still commit an event before it in
        this order has ended, so a reader that resumes from the last cursor it got never
        misses an event committed later (docs/semantics.md, "Change feed", says how each
        store knows). It reads the audit events as they are kept: what erasure removed
        is not returned. Runs in its own read transaction(s). See :class:`FeedRead`.

        Raises:
            ValidationError: ``after`` is not a cursor of this store's feed: not of its
                form, or past its newest event (no read issued it).
            StoreError: as a transaction would.
        """

    def change_tail(self) -> str | None:
        """The cursor of the newest final event of the change feed (what
        :meth:`read_changes` could return last right now): a reader that starts after it
        gets only what commits from now on. None when the feed is empty.

        Raises:
            StoreError: as a transaction would.
        """

    def close(self) -> None:
        """Release connections the store created. Further use raises StoreError."""
