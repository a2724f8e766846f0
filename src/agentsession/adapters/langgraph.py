"""LangGraph checkpointer over agentsession: :class:`AgentSessionSaver`.

A LangGraph thread is one session of ``(user_id, agent="langgraph")`` named by the
thread id (its external key, :meth:`SessionManager.open_session`). Checkpoints and
pending writes are session records (:meth:`SessionManager.put_records`):

* namespace ``langgraph.checkpoint``, key ``<checkpoint_ns>/<checkpoint_id>``: the
  whole checkpoint as the saver's ``serde`` dumps it, ``meta`` holding its type, the
  metadata (serialised the same way, base64) and the parent checkpoint id;
* namespace ``langgraph.writes``, key ``<checkpoint_ns>/<checkpoint_id>/<task_id>/
  <idx>``: one pending write, ``meta`` holding its type, channel, task and index.
  Regular writes (``idx >= 0``) are insert-if-absent, special ones
  (``WRITES_IDX_MAP``: errors, interrupts...) replace, as the upstream savers do.

``checkpoint_ns`` and ``task_id`` are percent-encoded in keys (so ``/`` only separates);
checkpoint ids are time-ordered uuid6 text, so the key order of one namespace is the
checkpoint order. A checkpoint is stored whole, channel values included, rather than
as one blob per channel and version as the upstream SQL savers do: one record read per
``get_tuple`` and one write per ``put``, at the price of repeating unchanged channels
in every checkpoint (and a checkpoint is limited to ``Limits.max_record_bytes``).

Serialisation is the saver's ``serde``: :func:`strict_serde` by default, a
``JsonPlusSerializer`` whose pickle fallback is off and which builds only LangGraph's
safe msgpack types (plus those of a graph's state schema, which LangGraph adds when it
compiles the graph): a stored value naming any other constructor (``os.system``, say) is
not called. Records keep their bytes as written, imported ones included: a permissive
``serde`` given by the user would run such a constructor when it loads them. The async methods run
the sync ones in a worker thread. Backend: a :class:`SessionManager`, an
:class:`AsyncSessionManager` (its manager is called) or a :class:`SessionClient` (HTTP:
the records travel as base64 in JSON), through
:func:`~agentsession.adapters.backend.sync_backend`.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import heapq
import random
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import quote, unquote

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ..client import SessionClient
from ..errors import SessionNotFound, ValidationError
from ..models import Record, RecordWrite
from ..service import Limits, SessionManager
from ..service.validation import check_external_key
from .backend import Backend, RecordBatch, sync_backend

__all__ = [
    "AGENT",
    "CHECKPOINTS",
    "WRITES",
    "AgentSessionSaver",
    "checkpoint_record",
    "strict_serde",
    "write_record",
]

#: The agent name of every LangGraph thread's session.
AGENT = "langgraph"
#: Record namespaces of checkpoints and of pending writes.
CHECKPOINTS = "langgraph.checkpoint"
WRITES = "langgraph.writes"
#: Added to a write's index so negative (special) indexes sort as digits.
_IDX_OFFSET = 2**31


def strict_serde() -> JsonPlusSerializer:
    """A ``JsonPlusSerializer`` that loads only LangGraph's safe msgpack types (LangChain
    messages among them) and never unpickles: a stored value naming another
    constructor is not called (``allowed_msgpack_modules=None``; LangGraph's default
    calls any, with a warning). The saver's default, and the import's."""
    return JsonPlusSerializer(allowed_msgpack_modules=None)


def _q(text: str) -> str:
    return quote(text, safe="")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class AgentSessionSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer keeping each thread in an agentsession session.

    Args:
        backend: a SessionManager (any store), an AsyncSessionManager or a
            SessionClient; the caller owns it.
        user_id: the owner of every thread's session. With a client it must be the
            API key's user (every call acts as that user): checked here, by one
            ``whoami`` request.
        serde: the serializer (default :func:`strict_serde`: no pickle, no msgpack
            constructor outside LangGraph's safe types and the graph's state schema).
        limits: the backend's :class:`~agentsession.Limits` (page and batch sizes): a
            manager's own by default, the server defaults for a client.

    Raises:
        TypeError: an AsyncSessionClient or another object as ``backend``.
        ValidationError: with a client, a ``user_id`` that is not the API key's user
            (``field="user_id"``), rather than threads silently kept under another.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        user_id: str,
        serde: SerializerProtocol | None = None,
        limits: Limits | None = None,
    ) -> None:
        super().__init__(serde=serde or strict_serde())
        self._m = sync_backend(backend)
        if isinstance(self._m, SessionClient):
            key_user = self._m.whoami()["user_id"]
            if key_user != user_id:
                raise ValidationError(
                    f"user_id {user_id!r} is not the API key's user {key_user!r}: over "
                    "a SessionClient every call acts as the key's user",
                    field="user_id",
                )
        if limits is None:
            limits = self._m.limits if isinstance(self._m, SessionManager) else Limits()
        self._limits = limits
        self._user = user_id

    # -- threads -------------------------------------------------------------------
    def _open(self, thread_id: str) -> str:
        """The session of the thread, created if need be.

        Raises:
            ValidationError: a ``thread_id`` no session can be named by (``field=
                "thread_id"``: empty, over 256 characters, control characters).
        """
        try:
            check_external_key(thread_id)
        except ValidationError as e:
            raise ValidationError(
                f"thread_id {thread_id[:100]!r} is not usable: it must be 1-256 characters "
                "without control characters or lone surrogates",
                field="thread_id",
            ) from e
        s, _ = self._m.open_session(user_id=self._user, agent=AGENT, external_key=thread_id)
        return s.session_id

    def _find(self, thread_id: str) -> str | None:
        """The session of the thread, or None (also for a ``thread_id`` no session can
        be named by: such a thread holds nothing)."""
        try:
            check_external_key(thread_id)
        except ValidationError:
            return None
        try:
            return self._m.get_session_by_key(
                user_id=self._user, agent=AGENT, external_key=thread_id
            ).session_id
        except SessionNotFound:
            return None

    def _threads(self) -> Iterator[tuple[str, str]]:
        """``(thread_id, session_id)`` of every thread of this saver's user."""
        cursor = None
        while True:
            page = self._m.list_sessions(user_id=self._user, agent=AGENT, cursor=cursor)
            for s in page.items:
                if s.external_key is not None:
                    yield s.external_key, s.session_id
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def _records(self, session_id: str, namespace: str, prefix: str) -> list[Record]:
        """Every record of ``namespace`` whose key starts with ``prefix``, in key order."""
        size = self._limits.max_page_size
        found: list[Record] = []
        after = None
        while True:
            page = self._m.list_records(
                session_id=session_id,
                user_id=self._user,
                namespace=namespace,
                prefix=prefix,
                after=after,
                limit=size,
            )
            found += page
            if len(page) < size:
                return found
            after = page[-1].key

    # -- reads -----------------------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``, else the newest of its
        thread and ``checkpoint_ns``), with its pending writes; None if absent."""
        thread_id = str(config["configurable"]["thread_id"])
        ns = config["configurable"].get("checkpoint_ns", "")
        sid = self._find(thread_id)
        if sid is None:
            return None
        if checkpoint_id := get_checkpoint_id(config):
            record = self._m.get_record(
                session_id=sid,
                user_id=self._user,
                namespace=CHECKPOINTS,
                key=f"{_q(ns)}/{checkpoint_id}",
            )
        else:
            newest = self._m.list_records(
                session_id=sid,
                user_id=self._user,
                namespace=CHECKPOINTS,
                prefix=f"{_q(ns)}/",
                descending=True,
                limit=1,
            )
            record = newest[0] if newest else None
        return None if record is None else self._tuple(thread_id, sid, record)

    def _metadata(self, record: Record) -> CheckpointMetadata:
        """The metadata of a checkpoint record (kept in its ``meta``)."""
        meta = record.meta
        loaded: CheckpointMetadata = self._loads(
            meta["metadata_type"], base64.b64decode(meta["metadata"])
        )
        return loaded

    def _tuple(
        self,
        thread_id: str,
        session_id: str,
        record: Record,
        metadata: CheckpointMetadata | None = None,
    ) -> CheckpointTuple:
        """The tuple of a checkpoint record, its pending writes loaded (``metadata``:
        already decoded, else decoded here)."""
        quoted_ns, _, checkpoint_id = record.key.rpartition("/")
        ns = unquote(quoted_ns)
        meta = record.meta
        checkpoint: Checkpoint = self.serde.loads_typed((meta["type"], record.data))
        writes = self._records(session_id, WRITES, f"{quoted_ns}/{checkpoint_id}/")
        # The upstream savers' order of pending writes: task path, task id, index.
        writes.sort(
            key=lambda w: writes_sort_key(w.meta["task_path"], w.meta["task_id"], w.meta["idx"])
        )
        parent = meta.get("parent")
        return CheckpointTuple(
            config=_config(thread_id, ns, checkpoint_id),
            checkpoint=checkpoint,
            metadata=self._metadata(record) if metadata is None else metadata,
            parent_config=_config(thread_id, ns, parent) if parent else None,
            pending_writes=[
                (w.meta["task_id"], w.meta["channel"], self._loads(w.meta["type"], w.data))
                for w in writes
            ],
        )

    def _loads(self, kind: str, data: bytes) -> Any:
        return self.serde.loads_typed((kind, data))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by checkpoint id): of ``config``'s thread (and its
        ``checkpoint_ns`` / ``checkpoint_id`` if given), or of every thread of this
        saver's user when ``config`` is None; ``filter`` matches metadata keys exactly,
        ``before`` keeps older checkpoints, ``limit`` caps the count. Reads lazily: the
        store lists each namespace newest first from ``before`` on, the metadata
        filter runs on the record's ``meta`` and only a checkpoint yielded has its
        pending writes read."""
        if limit is not None and limit <= 0:
            return
        if config is not None:
            thread_id = str(config["configurable"]["thread_id"])
            sid = self._find(thread_id)
            threads = iter([] if sid is None else [(thread_id, sid)])
        else:
            threads = self._threads()
        configurable = config["configurable"] if config else {}
        ns = configurable.get("checkpoint_ns")
        wanted_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        page = self._limits.max_page_size if filter or limit is None else limit
        count = 0
        for thread_id, sid in threads:
            namespaces = self._namespaces(sid) if ns is None else [_q(ns)]
            streams = [
                self._newest_first(sid, quoted, wanted_id, before_id, page) for quoted in namespaces
            ]
            for record in heapq.merge(*streams, key=_checkpoint_id, reverse=True):
                metadata = self._metadata(record)
                if filter and not all(metadata.get(k) == v for k, v in filter.items()):
                    continue
                yield self._tuple(thread_id, sid, record, metadata)
                count += 1
                if limit is not None and count >= limit:
                    return

    def _namespaces(self, session_id: str) -> builtins.list[str]:
        """The quoted checkpoint namespaces of a thread: one store read per namespace
        (each read skips to the key just below the namespace found last)."""
        found: builtins.list[str] = []
        before = None
        while True:
            last = self._m.list_records(
                session_id=session_id,
                user_id=self._user,
                namespace=CHECKPOINTS,
                before=before,
                descending=True,
                limit=1,
            )
            if not last:
                return found
            quoted = last[0].key.rpartition("/")[0]
            found.append(quoted)
            before = f"{quoted}/"  # every key of this namespace is at least this

    def _newest_first(
        self,
        session_id: str,
        quoted_ns: str,
        wanted_id: str | None,
        before_id: str | None,
        page: int,
    ) -> Iterator[Record]:
        """The checkpoint records of one namespace newest first, ``before_id``
        excluded and up, read ``page`` at a time (only ``wanted_id`` if given)."""
        if wanted_id:
            if before_id and wanted_id >= before_id:
                return
            record = self._m.get_record(
                session_id=session_id,
                user_id=self._user,
                namespace=CHECKPOINTS,
                key=f"{quoted_ns}/{wanted_id}",
            )
            if record is not None:
                yield record
            return
        upper = f"{quoted_ns}/{before_id}" if before_id else None
        while True:
            found = self._m.list_records(
                session_id=session_id,
                user_id=self._user,
                namespace=CHECKPOINTS,
                prefix=f"{quoted_ns}/",
                before=upper,
                descending=True,
                limit=page,
            )
            yield from found
            if len(found) < page:
                return
            upper = found[-1].key

    # -- writes ----------------------------------------------------------------------
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store ``checkpoint`` whole (one record) under its thread and namespace, its
        parent the ``checkpoint_id`` of ``config``; return the config naming it."""
        thread_id = str(config["configurable"]["thread_id"])
        ns = config["configurable"].get("checkpoint_ns", "")
        record = checkpoint_record(
            ns,
            checkpoint["id"],
            self.serde.dumps_typed(checkpoint),
            self.serde.dumps_typed(get_checkpoint_metadata(config, metadata)),
            config["configurable"].get("checkpoint_id"),
        )
        self._m.put_records(session_id=self._open(thread_id), user_id=self._user, records=[record])
        return _config(thread_id, ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes for the checkpoint ``config`` names: regular writes
        only if absent, special ones (``WRITES_IDX_MAP``) replacing. One ``put_records``
        call, or several when the writes pass ``limits.max_batch_messages`` records or
        ``limits.max_record_bytes`` of data together (so they fit a server's body limit).
        """
        thread_id = str(config["configurable"]["thread_id"])
        ns = config["configurable"].get("checkpoint_ns", "")
        checkpoint_id = config["configurable"]["checkpoint_id"]
        records = [
            write_record(
                ns,
                checkpoint_id,
                task_id,
                task_path,
                WRITES_IDX_MAP.get(channel, i),
                channel,
                self.serde.dumps_typed(value),
            )
            for i, (channel, value) in enumerate(writes)
        ]
        self._put(self._open(thread_id), records)

    def _put(self, session_id: str, records: Iterable[RecordWrite]) -> None:
        """Write ``records`` in as few ``put_records`` calls as the limits allow
        (:class:`~agentsession.adapters.backend.RecordBatch`: by count and by bytes)."""
        batch = RecordBatch(
            lambda found: (
                self._m.put_records(
                    session_id=session_id, user_id=self._user, records=found
                ).written
            ),
            self._limits,
        )
        for record in records:
            batch.add(record)
        batch.flush()

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's session: every checkpoint and write of it goes."""
        sid = self._find(str(thread_id))
        if sid is not None:
            self._m.delete_session(session_id=sid, user_id=self._user)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of the source thread into the target thread
        (created if need be; records of the same keys are replaced), in batches cut by
        count and by bytes. A source that does not exist copies nothing."""
        source = self._find(str(source_thread_id))
        if source is None:
            return
        copied = [
            RecordWrite(r.namespace, r.key, r.data, r.meta)
            for namespace in (CHECKPOINTS, WRITES)
            for r in self._records(source, namespace, "")
        ]
        self._put(self._open(str(target_thread_id)), copied)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete, in every thread of this saver's user, the checkpoints whose metadata
        ``run_id`` is one of ``run_ids``, with their writes."""
        wanted = set(run_ids)
        if not wanted:
            return
        for _, sid in list(self._threads()):
            for record in self._records(sid, CHECKPOINTS, ""):
                if self._metadata(record).get("run_id") in wanted:
                    self._drop(sid, record.key)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep only the newest checkpoint of each namespace of each
        thread (with its writes); ``delete``: remove every checkpoint and write.

        Raises:
            ValueError: another strategy.
        """
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}")
        for thread_id in thread_ids:
            sid = self._find(str(thread_id))
            if sid is None:
                continue
            if strategy == "delete":
                for namespace in (CHECKPOINTS, WRITES):
                    self._m.delete_records(session_id=sid, user_id=self._user, namespace=namespace)
                continue
            newest: dict[str, str] = {}
            records = self._records(sid, CHECKPOINTS, "")
            for record in records:  # key order: the last of a namespace is its newest
                newest[record.key.rpartition("/")[0]] = record.key
            for record in records:
                if newest[record.key.rpartition("/")[0]] != record.key:
                    self._drop(sid, record.key)

    def _drop(self, session_id: str, key: str) -> None:
        """Delete one checkpoint (its key: ``<ns>/<id>``, ids of one length) and its
        writes (keys under ``<ns>/<id>/``)."""
        for namespace, prefix in ((WRITES, f"{key}/"), (CHECKPOINTS, key)):
            self._m.delete_records(
                session_id=session_id, user_id=self._user, namespace=namespace, prefix=prefix
            )

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions as the upstream savers make them: a zero-padded counter and a
        random fraction, so they sort as text."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(current.split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    # -- async -----------------------------------------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple` in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list` in a worker thread."""
        found = await asyncio.to_thread(
            lambda: [*self.list(config, filter=filter, before=before, limit=limit)]
        )
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`put` in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`put_writes` in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread` in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`copy_thread` in a worker thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`delete_for_runs` in a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """:meth:`prune` in a worker thread."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def checkpoint_record(
    ns: str,
    checkpoint_id: str,
    typed: tuple[str, bytes],
    metadata: tuple[str, bytes],
    parent: str | None,
    *,
    if_absent: bool = False,
) -> RecordWrite:
    """The record that keeps one checkpoint (the layout of the module docstring).

    Args:
        ns: its ``checkpoint_ns``; checkpoint_id: its id; parent: its parent's id.
        typed, metadata: the checkpoint and its metadata as ``serde.dumps_typed``
            gives them, ``(type, bytes)``.
        if_absent: keep a record already stored under its key.

    Returns:
        A :class:`RecordWrite` of namespace :data:`CHECKPOINTS`, key
        ``<quoted ns>/<checkpoint_id>``, the checkpoint's bytes as data and ``meta``
        ``{"type", "metadata_type", "metadata" (base64), "parent"}``.
    """
    kind, data = typed
    meta = {
        "type": kind,
        "metadata_type": metadata[0],
        "metadata": _b64(metadata[1]),
        "parent": parent,
    }
    return RecordWrite(CHECKPOINTS, f"{_q(ns)}/{checkpoint_id}", data, meta, if_absent=if_absent)


def write_record(
    ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    idx: int,
    channel: str,
    typed: tuple[str, bytes],
    *,
    if_absent: bool | None = None,
) -> RecordWrite:
    """The record that keeps one pending write of the checkpoint ``ns``/``checkpoint_id``.

    Args:
        task_id, task_path: the writing task; idx: the write's index (negative for the
            special channels of ``WRITES_IDX_MAP``); channel: its channel.
        typed: the value as ``serde.dumps_typed`` gives it, ``(type, bytes)``.
        if_absent: keep a record already stored under its key; None (the saver's
            rule): regular writes (``idx >= 0``) only if absent, special ones replace.

    Returns:
        A :class:`RecordWrite` of namespace :data:`WRITES`, key ``<quoted ns>/
        <checkpoint_id>/<quoted task_id>/<idx + 2**31, 10 digits>``, the value's bytes
        as data and ``meta`` ``{"type", "channel", "task_id", "task_path", "idx"}``.
    """
    kind, data = typed
    key = f"{_q(ns)}/{checkpoint_id}/{_q(task_id)}/{idx + _IDX_OFFSET:010d}"
    meta = {
        "type": kind,
        "channel": channel,
        "task_id": task_id,
        "task_path": task_path,
        "idx": idx,
    }
    keep = idx >= 0 if if_absent is None else if_absent
    return RecordWrite(WRITES, key, data, meta, if_absent=keep)


def _checkpoint_id(record: Record) -> str:
    """The checkpoint id of a checkpoint record (its key: ``<ns>/<id>``)."""
    return record.key.rpartition("/")[2]


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }
