"""A store whose content is sealed with a keyring: any store, wrapped at its port.

:class:`SealedStore` wraps a :class:`~.base.SessionStore` (memory, SQL or Redis) and
seals every content value on its way in, opening it on its way out, so the store below
only ever holds ciphertext for content and keeps ids, versions, times, counts, statuses,
roles, tool names and hashes in clear (its indexes and rules work unchanged). One
function per content kind below names each value's place (:class:`Place`: user,
session, kind, position), bound into its ciphertext:

====================  ============================  ==========================
content               kind                          position
====================  ============================  ==========================
message payload       ``message``                   seq
session title, meta   ``session.title`` ...         ``0``
working memory        ``memory`` (history rows too) version
tool call             ``tool.arguments`` ...        call id
run, step             ``run.input`` ..., ``step.*`` run id, ``run id/index``
summary               ``summary``                   number
record data, meta     ``record.data`` ...           ``[namespace, key]``
shared memory         ``shared``                    agent (session "")
idempotency result    ``idempotency``               ``[scope, key]``
====================  ============================  ==========================

The port's content rewrites (``rewrite_*``, and :meth:`_SealedTransaction.reseal_session`)
open nothing: they seal the values given, as the writes do; what a sealing pass
(:mod:`.sealpass`) writes back.

Search is off (:class:`SearchNotSupported`): the store's index would need plaintext.
With ``search=True`` (``AGENTSESSION_SEARCH_WITH_KEYRING``) the operator turns it on
knowingly: each write of a title, a message or a tool call also hands the store its
plaintext search text (:meth:`~.base.StoreTransaction.index_search_texts`), which the
store's index keeps in clear (docs/security.md, "Search with a keyring").
A fork copies its parent's ciphertexts as they are (one bulk copy, as without a
keyring): a fork's message, summary or memory-history row up to its fork point that
does not open at the fork's place is opened at its ancestors' places, as far as their
session rows remain (docs/security.md, "Encryption at rest").
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from ..crypto import ContentCipher, Place
from ..crypto.envelope import is_sealed_text
from ..errors import KeyringError, SearchNotSupported
from ..jsonvalues import dumps, loads
from ..metafilter import MetadataFilter, matches
from ..models import (
    MemoryVersion,
    Message,
    Record,
    Run,
    RunStep,
    Session,
    SharedMemory,
    Summary,
    ToolCall,
    WorkingMemory,
)
from ..searchtext import message_text, tool_call_text
from .base import (
    FeedRead,
    IdempotencyRecord,
    JSONTexts,
    ScrubReport,
    SearchRow,
    SearchText,
    SessionHead,
    SessionRow,
    SessionStore,
    StoreTransaction,
    rebuilt,
)

__all__ = ["SealedStore"]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class SealedStore:
    """A :class:`~.base.SessionStore` sealing the content of ``inner`` (see the module).

    Args:
        inner: the store holding the ciphertexts; closed by :meth:`close`.
        cipher: the content cipher (its keyring, and whether plaintext reads pass).
        search: index the plaintext search texts of titles, messages and tool calls in
            the store's search index, and search it (off by default: the index holds
            them in clear).
    """

    def __init__(self, inner: SessionStore, cipher: ContentCipher, *, search: bool = False) -> None:
        self.inner = inner
        self.cipher = cipher
        self.search = search
        self.url = inner.url

    @property
    def keyring(self) -> Any:
        """The keyring content is sealed with (erasure destroys a user's keys in it)."""
        return self.cipher.keyring

    def __repr__(self) -> str:
        return f"SealedStore({self.inner!r})"

    def __getattr__(self, name: str) -> Any:
        # The inner store's optional capabilities that hold no content (API key
        # hashes, failed-authentication counts) pass through; a store without one
        # still answers AttributeError, so callers' getattr(store, name, None) holds.
        if name not in _CONTENT_FREE_CAPABILITIES:
            raise AttributeError(name)
        return getattr(self.inner, name)

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[StoreTransaction]:
        """See :meth:`SessionStore.transaction`: the inner store's, sealing content."""
        with self.inner.transaction(write=write) as tx:
            yield _SealedTransaction(tx, self.cipher, self.search)

    def scrub(self, *, compact: bool = False) -> ScrubReport:
        """See :meth:`SessionStore.scrub`."""
        return self.inner.scrub(compact=compact)

    def read_changes(
        self,
        *,
        after: str | None,
        user_ids: Sequence[str] | None,
        session_id: str | None,
        limit: int,
    ) -> FeedRead:
        """See :meth:`SessionStore.read_changes` (content-free: passed through)."""
        return self.inner.read_changes(
            after=after, user_ids=user_ids, session_id=session_id, limit=limit
        )

    def change_tail(self) -> str | None:
        """See :meth:`SessionStore.change_tail`."""
        return self.inner.change_tail()

    def close(self) -> None:
        """Close the inner store."""
        self.inner.close()


_SESSION_TEXTS = ("title", "status_reason")


# The store-port methods that carry no content (ids, seqs, versions, counts, audit
# facts): they pass through unchanged. Every other method is defined on
# _SealedTransaction; a new port method must be added to one or the other
# (tests/test_crypto.py checks it), so no content ever passes through unsealed.
_CONTENT_FREE = frozenset(
    {
        "advance_session",
        "copy_history",
        "delete_budget",
        "delete_idempotency",
        "delete_messages",
        "delete_records",
        "delete_session",
        "delete_shared_memory",
        "delete_summaries",
        "delete_user_shared_memory",
        "find_session_by_key",
        "get_budget",
        "get_store_meta",
        "insert_chain_links",
        "insert_usage",
        "hide_messages",
        "insert_audit",
        "insert_rewind",
        "list_audit",
        "list_chain_links",
        "list_due_sessions",
        "list_lapsed_leases",
        "list_session_ids",
        "list_rewinds",
        "list_user_session_ids",
        "purge_idempotency",
        "put_budget",
        "put_store_meta",
        "rebase_memory_history",
        "sum_usage",
    }
)


# Sessions read per page when a metadata filter is answered here (see _matching).
_SCAN_PAGE = 500

# Optional store-level capabilities (not part of the port) that carry no content.
_CONTENT_FREE_CAPABILITIES = frozenset({"api_keys", "auth_failures"})


class _SealedTransaction:
    """The inner transaction with content sealed on writes and opened on reads. Only the
    methods named in ``_CONTENT_FREE`` pass through (``__getattr__``); any other name
    raises AttributeError rather than reach the store unsealed."""

    def __init__(self, tx: StoreTransaction, cipher: ContentCipher, search: bool = False) -> None:
        self._tx = tx
        self._c = cipher
        self._search = search  # plaintext search texts go to the store's index
        self._owners: dict[str, str] = {}
        # session id -> (the session as opened, as stored): an update reuses the stored
        # texts it did not change (the very objects), so the store sees them unchanged.
        self._sessions: dict[str, tuple[Session, Session]] = {}
        self._metadata_texts: dict[str, str] = {}  # session id -> its metadata's JSON
        self._lineages: dict[str, list[tuple[str, int]]] = {}

    def __getattr__(self, name: str) -> Any:
        if name not in _CONTENT_FREE:
            raise AttributeError(f"{name!r} is not a content-free store method")
        return getattr(self._tx, name)

    # -- places ----------------------------------------------------------------------
    def _owner(self, session_id: str) -> str:
        owner = self._owners.get(session_id)
        if owner is None:
            head = self._tx.get_session_head(session_id)
            owner = "" if head is None else head.user_id
            self._owners[session_id] = owner
        return owner

    def _place(self, session_id: str, kind: str, position: str | int) -> Place:
        return Place(self._owner(session_id), session_id, kind, position)

    # -- sessions --------------------------------------------------------------------
    def get_session(self, session_id: str) -> Session | None:
        stored = self._tx.get_session(session_id)
        return None if stored is None else self._open_session(stored)

    def get_session_head(self, session_id: str) -> SessionHead | None:
        head = self._tx.get_session_head(session_id)
        if head is not None:
            self._owners[session_id] = head.user_id
        return head

    def lock_session_row(self, session_id: str) -> SessionRow | None:
        # Content-free (ids, status, counts, times, a hash); its owner places what the
        # write seals next, as get_session's does.
        row = self._tx.lock_session_row(session_id)
        if row is not None:
            self._owners[session_id] = row.user_id
        return row

    def insert_session(self, session: Session) -> None:
        self._owners[session.session_id] = session.user_id
        sealed = self._seal_session(session)
        self._tx.insert_session(sealed)
        self._sessions[session.session_id] = (session, sealed)
        if self._search and session.title:
            self._index_title(session)

    def update_session(self, session: Session, *, expected_version: int) -> None:
        seen = self._sessions.get(session.session_id)
        sealed = self._seal_session(session)
        self._tx.update_session(sealed, expected_version=expected_version)
        self._sessions[session.session_id] = (session, sealed)
        # The store re-indexes a title it is given anew (a new ciphertext): so here too.
        if self._search and (seen is None or seen[0].title is not session.title):
            self._index_title(session)

    def list_sessions(
        self,
        *,
        metadata: MetadataFilter | None = None,
        after: tuple[datetime, str] | None,
        limit: int,
        **filters: Any,
    ) -> list[Session]:
        if metadata is None:
            stored = self._tx.list_sessions(after=after, limit=limit, **filters)
            return [self._open_session(s) for s in stored]
        return list(itertools.islice(self._matching(metadata, after, filters), limit))

    def count_sessions(self, *, metadata: MetadataFilter | None = None, **filters: Any) -> int:
        if metadata is None:
            return self._tx.count_sessions(**filters)
        return sum(1 for _ in self._matching(metadata, None, filters))

    def _matching(
        self, wanted: MetadataFilter, after: tuple[datetime, str] | None, filters: Any
    ) -> Iterator[Session]:
        """The sessions of the listing ``filters`` whose opened metadata passes
        ``wanted``, in listing order from ``after``: the store's metadata index holds
        only ciphertext, so the listing is read in pages and filtered here. The cost
        grows with the sessions the other filters leave (docs/security.md)."""
        while True:
            page = self._tx.list_sessions(after=after, limit=_SCAN_PAGE, **filters)
            for stored in page:
                opened = self._open_session(stored)
                if matches(opened.metadata, wanted):
                    yield opened
            if len(page) < _SCAN_PAGE:
                return
            after = (page[-1].updated_at, page[-1].session_id)

    def search(self, *args: Any, **kwargs: Any) -> list[SearchRow]:
        if self._search:
            return self._tx.search(*args, **kwargs)
        raise SearchNotSupported(
            "search is off on a store with a keyring: a full-text index holds plaintext "
            "terms; AGENTSESSION_SEARCH_WITH_KEYRING=1 (from_url(..., "
            "search_with_keyring=True)) turns it on knowingly (docs/security.md, "
            "'Search with a keyring')",
            store="sealed",
        )

    def index_search_texts(self, texts: Sequence[SearchText]) -> None:
        """The store's :meth:`~.base.StoreTransaction.index_search_texts` with search
        on; dropped with search off (nothing in clear then)."""
        if self._search:
            self._tx.index_search_texts(texts)

    def _index_title(self, session: Session) -> None:
        text = (session.title or "").replace("\x00", " ")
        self._tx.index_search_texts([SearchText(session.session_id, "title", 0, None, text)])

    def _index_messages(self, messages: Sequence[Message]) -> None:
        texts = [
            SearchText(m.session_id, "message", m.seq, m.role.value, message_text(m))
            for m in messages
        ]
        self._tx.index_search_texts(texts)

    def _index_calls(self, calls: Sequence[ToolCall]) -> None:
        texts = [
            SearchText(
                c.session_id,
                "tool_call",
                c.seq,
                None,
                tool_call_text(c.tool, c.arguments, c.result),
            )
            for c in calls
        ]
        self._tx.index_search_texts(texts)

    def _seal_session(self, session: Session) -> Session:
        sid = session.session_id
        self._owners[sid] = session.user_id
        seen = self._sessions.get(sid)
        update: dict[str, Any] = {}
        for field in _SESSION_TEXTS:
            value = getattr(session, field)
            if seen is not None and value is getattr(seen[0], field):
                update[field] = getattr(seen[1], field)  # unchanged: the same stored value
            else:
                update[field] = self._c.seal_text(value, self._session_place(session, field))
        # Compared by its JSON text, since a dict may have been changed in place (the
        # same object): unchanged, the stored ciphertext is kept, so the store's metadata
        # index sees no change on an append.
        text = dumps(session.metadata)
        if seen is not None and self._metadata_texts.get(sid) == text:
            update["metadata"] = seen[1].metadata
        else:
            place = self._session_place(session, "metadata")
            update["metadata"] = self._c.seal_json(session.metadata, place)
        self._metadata_texts[sid] = text
        return session.model_copy(update=update)

    def _open_session(self, stored: Session) -> Session:
        sid = stored.session_id
        self._owners[sid] = stored.user_id
        update: dict[str, Any] = {
            f: self._c.open_text(getattr(stored, f), self._session_place(stored, f))
            for f in _SESSION_TEXTS
        }
        place = self._session_place(stored, "metadata")
        update["metadata"] = self._c.open_json(stored.metadata, place)
        opened = stored.model_copy(update=update)
        self._sessions[sid] = (opened, stored)
        self._metadata_texts[sid] = dumps(opened.metadata)
        return opened

    @staticmethod
    def _session_place(session: Session, field: str) -> Place:
        return Place(session.user_id, session.session_id, f"session.{field}", 0)

    # -- messages --------------------------------------------------------------------
    def insert_messages(self, messages: Sequence[Message], *, payloads: JSONTexts = None) -> None:
        texts = payloads if payloads is not None else [dumps(m.payload()) for m in messages]
        sealed = [self._seal_message(m, t) for m, t in zip(messages, texts, strict=True)]
        self._tx.insert_messages(sealed, payloads=[dumps(m.payload()) for m in sealed])
        if self._search:
            self._index_messages(messages)

    def get_messages(self, session_id: str, **kwargs: Any) -> list[Message]:
        # Each message built once, from its opened payload (not built sealed, then again).
        return self._tx.get_messages(session_id, **kwargs, build=self._message_builder())

    def get_rewound_messages(self, session_id: str, number: int, **kwargs: Any) -> list[Message]:
        found = self._tx.get_rewound_messages(session_id, number, **kwargs)
        return rebuilt(found, self._message_builder())

    def _seal_message(self, message: Message, text: str) -> Message:
        place = self._place(message.session_id, "message", message.seq)
        payload: dict[str, Any] = {"role": message.role.value}
        payload["content"] = self._c.seal_text(text, place)
        if message.run_id is not None:
            payload["run_id"] = message.run_id
        return Message.from_store(
            payload,
            message_id=message.message_id,
            session_id=message.session_id,
            seq=message.seq,
            created_at=message.created_at,
        )

    def _message_builder(self) -> Callable[..., Message]:
        """A :data:`~.base.MessageBuilder` for one read: the message whose stored
        payload (its content sealed) is ``payload``, opened; one opener per session
        for the read's rows (:meth:`ContentCipher.text_opener`)."""
        openers: dict[str, Callable[[str, str | int], str]] = {}

        def build(
            payload: dict[str, Any],
            *,
            message_id: str,
            session_id: str,
            seq: int,
            created_at: datetime,
        ) -> Message:
            content = payload.get("content")
            if not is_sealed_text(content):
                stored = Message.from_store(
                    payload,
                    message_id=message_id,
                    session_id=session_id,
                    seq=seq,
                    created_at=created_at,
                )
                place = self._place(session_id, "message", seq)
                opened: Message = self._c.plaintext(stored, place)  # a migration's reads only
                return opened
            opener = openers.get(session_id)
            if opener is None:
                owner = self._owner(session_id)
                opener = openers[session_id] = self._c.text_opener(owner, session_id, "message")
            text: str | None
            try:
                text = opener(content, seq)
            except KeyringError:  # a fork's copied row, or none opens it: the lineage says
                place = self._place(session_id, "message", seq)
                text = self._open_copied(place, seq, lambda at: self._c.open_text(content, at))
            return Message.from_store(
                loads(text or "null"),
                message_id=message_id,
                session_id=session_id,
                seq=seq,
                created_at=created_at,
            )

        return build

    # -- forks -----------------------------------------------------------------------
    def _lineage(self, session_id: str) -> list[tuple[str, int]]:
        """``(ancestor, the seq up to which its history was copied)`` of each session
        ``session_id`` was forked from, nearest first, as far as their rows remain."""
        found = self._lineages.get(session_id)
        if found is None:
            found = []
            session = self._tx.get_session(session_id)
            while session is not None and session.parent_session_id is not None:
                upto = session.fork_seq if session.fork_seq is not None else -1
                found.append((session.parent_session_id, upto))
                session = self._tx.get_session(session.parent_session_id)
            self._lineages[session_id] = found
        return found

    def _open_copied(self, place: Place, seq: int, opener: Callable[[Place], T]) -> T:
        """``opener(place)``, or, for a value a fork copied from an ancestor (a fork's
        rows up to its fork point are the parent's ciphertexts, bound to the parent),
        ``opener`` at the ancestor's place.

        Raises:
            KeyringError: no place of the lineage opens it.
        """
        try:
            return opener(place)
        except KeyringError:
            for ancestor, upto in self._lineage(place.session_id):
                if seq > upto:
                    break
                try:
                    return opener(Place(place.user_id, ancestor, place.kind, place.position))
                except KeyringError:
                    continue
            raise

    # -- working memory --------------------------------------------------------------
    def get_working_memory(self, session_id: str) -> WorkingMemory | None:
        return self._open_memory(self._tx.get_working_memory(session_id), session_id)

    def get_working_memory_at(self, session_id: str, seq: int) -> WorkingMemory | None:
        stored = self._tx.get_working_memory_at(session_id, seq)
        return self._open_memory(stored, session_id, forked_at=seq)

    def list_memory_history(
        self, session_id: str, *, before_seq: int | None, limit: int
    ) -> list[MemoryVersion]:
        rows = self._tx.list_memory_history(session_id, before_seq=before_seq, limit=limit)
        return [self._open_version(row, session_id) for row in rows]

    def _open_version(self, stored: MemoryVersion, session_id: str) -> MemoryVersion:
        place = self._place(session_id, "memory", stored.version)
        # a history row up to a fork point may be the parent's ciphertext
        data = self._open_copied(place, stored.seq, lambda at: self._c.open_json(stored.data, at))
        return stored.model_copy(update={"data": data})

    def put_working_memory(self, memory: WorkingMemory, *, at_seq: int) -> None:
        place = self._place(memory.session_id, "memory", memory.version)
        sealed = memory.model_copy(update={"data": self._c.seal_json(memory.data, place)})
        self._tx.put_working_memory(sealed, at_seq=at_seq)

    def _open_memory(
        self, stored: WorkingMemory | None, session_id: str, *, forked_at: int | None = None
    ) -> WorkingMemory | None:
        if stored is None:
            return None
        place = self._place(session_id, "memory", stored.version)
        if forked_at is None:
            data = self._c.open_json(stored.data, place)
        else:  # a history row: perhaps copied by a fork
            data = self._open_copied(
                place, forked_at, lambda at: self._c.open_json(stored.data, at)
            )
        return stored.model_copy(update={"data": data})

    # -- shared memory ---------------------------------------------------------------
    def get_shared_memory(self, agent: str, user_id: str | None) -> SharedMemory | None:
        stored = self._tx.get_shared_memory(agent, user_id)
        if stored is None:
            return None
        opened = self._c.open_json(stored.data, _shared_place(agent, user_id))
        return stored.model_copy(update={"data": opened})

    def put_shared_memory(self, doc: SharedMemory, *, expected_version: int) -> None:
        data = self._c.seal_json(doc.data, _shared_place(doc.agent, doc.user_id))
        self._tx.put_shared_memory(
            doc.model_copy(update={"data": data}), expected_version=expected_version
        )

    # -- tool calls ------------------------------------------------------------------
    def insert_tool_call(self, call: ToolCall) -> None:
        place = self._place(call.session_id, "tool", call.call_id)
        self._tx.insert_tool_call(_sealed(self._c, call, place, _TOOL_JSON, ("error",)))
        if self._search:
            self._index_calls([call])

    def get_tool_call(self, session_id: str, call_id: str) -> ToolCall | None:
        return self._open_call(self._tx.get_tool_call(session_id, call_id))

    def list_tool_calls(self, session_id: str, **kwargs: Any) -> list[ToolCall]:
        found = self._tx.list_tool_calls(session_id, **kwargs)
        return [c for c in map(self._open_call, found) if c is not None]

    def find_tool_call(self, session_id: str, *, tool: str, arguments_hash: str) -> ToolCall | None:
        found = self._tx.find_tool_call(session_id, tool=tool, arguments_hash=arguments_hash)
        return self._open_call(found)

    def find_tool_call_by_provider_id(
        self, session_id: str, provider_call_id: str
    ) -> ToolCall | None:
        return self._open_call(self._tx.find_tool_call_by_provider_id(session_id, provider_call_id))

    def _open_call(self, stored: ToolCall | None) -> ToolCall | None:
        if stored is None:
            return None
        place = self._place(stored.session_id, "tool", stored.call_id)
        return _opened(self._c, stored, place, _TOOL_JSON, ("error",))

    # -- runs ------------------------------------------------------------------------
    def insert_run(self, run: Run) -> None:
        self._tx.insert_run(self._seal_run(run))

    def update_run(self, run: Run) -> None:
        self._tx.update_run(self._seal_run(run))

    def get_run(self, session_id: str, run_id: str) -> Run | None:
        stored = self._tx.get_run(session_id, run_id)
        return None if stored is None else self._open_run(stored)

    def list_runs(self, session_id: str, **kwargs: Any) -> list[Run]:
        return [self._open_run(r) for r in self._tx.list_runs(session_id, **kwargs)]

    def insert_run_step(self, session_id: str, step: RunStep) -> None:
        place = self._place(session_id, "step", f"{step.run_id}/{step.index}")
        self._tx.insert_run_step(session_id, _sealed(self._c, step, place, _STEP_JSON, _STEP_TEXT))

    def list_run_steps(self, session_id: str, run_id: str, **kwargs: Any) -> list[RunStep]:
        steps = self._tx.list_run_steps(session_id, run_id, **kwargs)
        return [
            _opened(
                self._c,
                s,
                self._place(session_id, "step", f"{run_id}/{s.index}"),
                _STEP_JSON,
                _STEP_TEXT,
            )
            for s in steps
        ]

    def _seal_run(self, run: Run) -> Run:
        place = self._place(run.session_id, "run", run.run_id)
        return _sealed(self._c, run, place, _RUN_JSON, ("error",))

    def _open_run(self, stored: Run) -> Run:
        place = self._place(stored.session_id, "run", stored.run_id)
        return _opened(self._c, stored, place, _RUN_JSON, ("error",))

    # -- summaries -------------------------------------------------------------------
    def insert_summary(self, summary: Summary) -> None:
        place = self._place(summary.session_id, "summary", summary.number)
        self._tx.insert_summary(_sealed(self._c, summary, place, (), ("text",)))

    def list_summaries(self, session_id: str, **kwargs: Any) -> list[Summary]:
        return [
            self._open_copied(
                self._place(session_id, "summary", s.number),
                s.to_seq,
                lambda at, s=s: _opened(self._c, s, at, (), ("text",)),  # type: ignore[misc]
            )
            for s in self._tx.list_summaries(session_id, **kwargs)
        ]

    # -- records ---------------------------------------------------------------------
    def put_records(self, records: Sequence[Record]) -> None:
        self._tx.put_records([self._seal_record(r) for r in records])

    def get_record(self, session_id: str, namespace: str, key: str) -> Record | None:
        stored = self._tx.get_record(session_id, namespace, key)
        return None if stored is None else self._open_record(stored)

    def list_records(self, session_id: str, **kwargs: Any) -> list[Record]:
        return [self._open_record(r) for r in self._tx.list_records(session_id, **kwargs)]

    def _record_place(self, record: Record, kind: str) -> Place:
        return self._place(record.session_id, kind, dumps([record.namespace, record.key]))

    def _seal_record(self, record: Record) -> Record:
        data = self._c.seal_bytes(record.data, self._record_place(record, "record.data"))
        meta = self._c.seal_json(record.meta, self._record_place(record, "record.meta"))
        return record.model_copy(update={"data": data, "meta": meta})

    def _open_record(self, stored: Record) -> Record:
        data = self._c.open_bytes(stored.data, self._record_place(stored, "record.data"))
        meta = self._c.open_json(stored.meta, self._record_place(stored, "record.meta"))
        return stored.model_copy(update={"data": data, "meta": meta})

    # -- idempotency -----------------------------------------------------------------
    def get_idempotency(self, user_id: str, scope: str, key: str) -> IdempotencyRecord | None:
        found = self._tx.get_idempotency(user_id, scope, key)
        if found is None:
            return None
        result = self._c.open_text(found.result, _idempotency_place(found))
        return _replace_result(found, result or "")

    def put_idempotency(self, record: IdempotencyRecord) -> None:
        sealed = self._c.seal_text(record.result, _idempotency_place(record))
        self._tx.put_idempotency(_replace_result(record, sealed or ""))

    # -- content rewrite (a sealing pass: agentsession encrypt, keyring reencrypt) ----
    def reseal_session(self, session_id: str) -> Session | None:
        """Seal the session's texts again and write them back (compare-and-set on its
        version, which stays as it is); return the session as opened, or None if gone."""
        session = self.get_session(session_id)
        if session is not None:
            self._sessions.pop(session_id, None)  # seal every text, not the stored ones
            self.update_session(session, expected_version=session.version)
        return session

    def rewrite_messages(self, messages: Sequence[Message]) -> None:
        self._tx.rewrite_messages([self._seal_message(m, dumps(m.payload())) for m in messages])
        if self._search:
            self._index_messages(messages)

    def rewrite_rewound_messages(
        self, session_id: str, number: int, messages: Sequence[Message]
    ) -> None:
        sealed = [self._seal_message(m, dumps(m.payload())) for m in messages]
        self._tx.rewrite_rewound_messages(session_id, number, sealed)

    def rewrite_working_memory(self, memory: WorkingMemory) -> None:
        place = self._place(memory.session_id, "memory", memory.version)
        data = self._c.seal_json(memory.data, place)
        self._tx.rewrite_working_memory(memory.model_copy(update={"data": data}))

    def rewrite_memory_history(self, session_id: str, versions: Sequence[MemoryVersion]) -> None:
        sealed = [
            v.model_copy(
                update={
                    "data": self._c.seal_json(v.data, self._place(session_id, "memory", v.version))
                }
            )
            for v in versions
        ]
        self._tx.rewrite_memory_history(session_id, sealed)

    def rewrite_tool_calls(self, calls: Sequence[ToolCall]) -> None:
        sealed = [
            _sealed(
                self._c, c, self._place(c.session_id, "tool", c.call_id), _TOOL_JSON, ("error",)
            )
            for c in calls
        ]
        self._tx.rewrite_tool_calls(sealed)
        if self._search:
            self._index_calls(calls)

    def rewrite_run_steps(self, session_id: str, steps: Sequence[RunStep]) -> None:
        sealed = [
            _sealed(
                self._c,
                s,
                self._place(session_id, "step", f"{s.run_id}/{s.index}"),
                _STEP_JSON,
                _STEP_TEXT,
            )
            for s in steps
        ]
        self._tx.rewrite_run_steps(session_id, sealed)

    def rewrite_summaries(self, summaries: Sequence[Summary]) -> None:
        sealed = [
            _sealed(self._c, s, self._place(s.session_id, "summary", s.number), (), ("text",))
            for s in summaries
        ]
        self._tx.rewrite_summaries(sealed)

    def list_shared_memory(
        self, *, after: tuple[str, str] | None, limit: int
    ) -> list[SharedMemory]:
        return [
            d.model_copy(
                update={"data": self._c.open_json(d.data, _shared_place(d.agent, d.user_id))}
            )
            for d in self._tx.list_shared_memory(after=after, limit=limit)
        ]

    def list_idempotency(
        self, *, after: tuple[str, str, str] | None, limit: int
    ) -> list[IdempotencyRecord]:
        found = self._tx.list_idempotency(after=after, limit=limit)
        opened = [(r, self._c.open_text(r.result, _idempotency_place(r))) for r in found]
        return [_replace_result(r, result or "") for r, result in opened]

    def rewrite_idempotency(self, record: IdempotencyRecord) -> None:
        sealed = self._c.seal_text(record.result, _idempotency_place(record))
        self._tx.rewrite_idempotency(_replace_result(record, sealed or ""))


_TOOL_JSON = ("arguments", "result")
_RUN_JSON = ("input", "output", "metadata")
_STEP_JSON = ("input", "output")
_STEP_TEXT = ("error",)  # its name is a label, like a tool's: clear


def _sealed(
    cipher: ContentCipher,
    model: M,
    place: Place,
    json_fields: tuple[str, ...],
    text_fields: tuple[str, ...],
) -> M:
    """A copy of ``model`` with its JSON and text content fields sealed for ``place``
    (each field's name is its kind's last part)."""
    update: dict[str, Any] = {}
    for field in json_fields:
        update[field] = cipher.seal_json(getattr(model, field), _kind(place, field))
    for field in text_fields:
        update[field] = cipher.seal_text(getattr(model, field), _kind(place, field))
    return model.model_copy(update=update)


def _opened(
    cipher: ContentCipher,
    model: M,
    place: Place,
    json_fields: tuple[str, ...],
    text_fields: tuple[str, ...],
) -> M:
    """A copy of a stored ``model`` with the fields :func:`_sealed` sealed opened."""
    update: dict[str, Any] = {}
    for field in json_fields:
        update[field] = cipher.open_json(getattr(model, field), _kind(place, field))
    for field in text_fields:
        update[field] = cipher.open_text(getattr(model, field), _kind(place, field))
    return model.model_copy(update=update)


def _kind(place: Place, field: str) -> Place:
    return Place(place.user_id, place.session_id, f"{place.kind}.{field}", place.position)


def _shared_place(agent: str, user_id: str | None) -> Place:
    return Place(user_id or "", "", "shared", agent)


def _idempotency_place(record: IdempotencyRecord) -> Place:
    owner = record.owner_id or record.user_id
    return Place(owner, record.session_id or "", "idempotency", dumps([record.scope, record.key]))


def _replace_result(record: IdempotencyRecord, result: str) -> IdempotencyRecord:
    from dataclasses import replace

    return replace(record, result=result)
