"""The benchmark's participants: one thin adapter per session store, one small interface.

Every adapter answers the same operations (:class:`Participant`); each is the call a user
of that library makes, on a SQLite file of its own in the run's temporary directory:

============== ====================================================================
operation      meaning
============== ====================================================================
new_session    create an empty session (conversation, thread) for ``user``
append         append one message (~200 bytes, mixed roles, some Chinese text)
append_batch   append ``k`` messages the fastest way the library offers (history)
load_all       read every message of the session, decoded, oldest first
load_last      read the newest ``n`` messages, decoded, oldest first
create_with    create a session of ``OWNER`` and store its first ``k`` messages
list_sessions  list the sessions of ``OWNER``
update_memory  replace the working-memory document, refused if the session moved on
restore        everything an agent needs to continue: state and recent history
============== ====================================================================

An operation a library has no equivalent for is listed in ``unsupported`` with the
reason, and is never timed (never faked with a lookalike). A figure that is timed but
is not quite the same operation carries a note in ``caveats``.

Durability settings (:class:`Setting`) are applied on each library's own connections,
the way its user would: our ``sqlite_synchronous`` option, an SQLAlchemy ``connect``
listener (ADK DatabaseSessionService), PRAGMAs on the connection we hand over (LangGraph),
and, where the library opens its connections itself and has no option, a subclass that
runs the PRAGMA on each connection it opens (openai-agents, ADK SqliteSessionService).
Each adapter reads ``journal_mode`` and ``synchronous`` back from the connections the
library really used (:meth:`Participant.observed`), so the report says what each ran at.

Imports of the peer libraries happen in :meth:`Participant.open`, so this module imports
without them (the unit tests run it in the project's own environment).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from agentsession.ids import new_id

#: ~200 bytes of UTF-8 (Chinese characters are 3 bytes each), as the first benchmark used.
CONTENT = "请检查 requirements.txt 是否缺少 requests — mixed text for a ~200 byte message. " * 2
#: Roles cycle user, assistant, user, assistant, system... (mixed, mostly a dialogue).
ROLES = ("user", "assistant", "user", "assistant", "user", "assistant", "system")
USER = "bench-user"
#: The one user of (d)'s 1,000 sessions (so the sessions of (a) and (c) are not listed).
OWNER = "bench-owner"
APP = "bench"
#: What (e)'s restored session holds besides its messages, for every participant that
#: records runs and tool calls: this many finished runs, each with ``RESTORE_CALLS`` calls.
RESTORE_RUNS = 10
RESTORE_CALLS = 2
#: The working-memory document (e) writes, with ``step`` changed on every update.
MEMORY = {
    "goal": "make the app start",
    "completed": ["located: requests missing"],
    "errors": ["ModuleNotFoundError: No module named 'requests'"],
    "next_action": "check and fix requirements.txt",
    "facts": {"missing_module": "requests"},
}


def role(i: int) -> str:
    """The role of the ``i``-th message (0-based)."""
    return ROLES[i % len(ROLES)]


def text(i: int) -> str:
    """The content of the ``i``-th message: ~200 bytes, a little different each time."""
    return f"{i:06d} {CONTENT}"


def memory_doc(step: int) -> dict[str, Any]:
    """The working-memory document of update number ``step``."""
    return {**MEMORY, "facts": {**MEMORY["facts"], "step": step}}


@dataclass(frozen=True)
class Setting:
    """A durability setting every participant runs at.

    ``journal_mode`` and ``synchronous`` None mean the participant's own default (what a
    user gets out of the box); otherwise the PRAGMA values applied to its connections.
    """

    name: str
    journal_mode: str | None
    synchronous: str | None

    @property
    def is_default(self) -> bool:
        """True for the "each at its own default" setting."""
        return self.journal_mode is None and self.synchronous is None


DEFAULT = Setting("default", None, None)
WAL_FULL = Setting("wal-full", "wal", "FULL")
WAL_NORMAL = Setting("wal-normal", "wal", "NORMAL")

_SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def pragmas_of(conn: sqlite3.Connection) -> tuple[str, str]:
    """``(journal_mode, synchronous)`` of an open sqlite3 connection, e.g. ``("wal", "FULL")``."""
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    level = conn.execute("PRAGMA synchronous").fetchone()[0]
    return str(journal).lower(), _SYNCHRONOUS_NAMES.get(int(level), str(level))


def apply_pragmas(conn: sqlite3.Connection, setting: Setting) -> None:
    """Run the setting's PRAGMAs on a sqlite3 connection (nothing at the default)."""
    if setting.journal_mode is not None:
        conn.execute(f"PRAGMA journal_mode={setting.journal_mode}")
    if setting.synchronous is not None:
        conn.execute(f"PRAGMA synchronous={setting.synchronous}")


def set_file_journal_mode(path: Path, setting: Setting) -> None:
    """Put a database file in the setting's journal mode before a library opens it.

    ``journal_mode=WAL`` is stored in the file, so every later connection runs in it; the
    adapters read it back from the library's own connections to prove it.
    """
    if setting.journal_mode is None:
        return
    conn = sqlite3.connect(path)
    try:
        conn.execute(f"PRAGMA journal_mode={setting.journal_mode}")
    finally:
        conn.close()


class Participant:
    """One session store under test. Subclasses implement the operations they support.

    Methods may be plain or coroutines; the runner awaits what needs awaiting. A session
    is an opaque ``handle`` returned by :meth:`new_session` / :meth:`create_with`.

    Attributes:
        key: short identifier used in results.json.
        label: the name printed in tables.
        api: the calls used, for the report.
        packages: distributions whose versions the report records.
        unsupported: operation name -> why this library has no equivalent.
        caveats: operation name -> how the timed call differs from ours.
        history_cost: how building history scales: ``"constant"`` per message, or
            ``"linear"`` when each append costs O(history) (the runner projects with it).
        slow_history_reason: why building a long history is slow, for the report.
        asynchronous: True for an asyncio API; its ratios are to the async baseline
            (raw sqlite3 through ``asyncio.to_thread``), a sync API's to raw sqlite3.
    """

    key: ClassVar[str]
    label: ClassVar[str]
    api: ClassVar[str]
    packages: ClassVar[tuple[str, ...]] = ()
    unsupported: ClassVar[dict[str, str]] = {}
    caveats: ClassVar[dict[str, str]] = {}
    history_cost: ClassVar[str] = "constant"
    slow_history_reason: ClassVar[str] = "its batch call is slow"
    asynchronous: ClassVar[bool] = False

    def __init__(self, directory: Path, setting: Setting) -> None:
        self.path = directory / f"{self.key}.db"
        self.setting = setting
        self._observed: set[tuple[str, str]] = set()

    def observed(self) -> list[dict[str, str]]:
        """The distinct ``journal_mode``/``synchronous`` pairs read back from the
        library's connections (usually exactly one)."""
        return [{"journal_mode": j, "synchronous": s} for j, s in sorted(self._observed)]

    def _observe(self, conn: sqlite3.Connection) -> None:
        self._observed.add(pragmas_of(conn))

    def supports(self, op: str) -> bool:
        """Whether ``op`` is timed for this participant."""
        return op not in self.unsupported

    # -- lifecycle and operations; see the module docstring -----------------------
    def open(self) -> Any:
        raise NotImplementedError

    def close(self) -> Any:
        raise NotImplementedError

    def new_session(self, user: str = USER) -> Any:
        raise NotImplementedError

    def append(self, handle: Any, i: int) -> Any:
        raise NotImplementedError

    def append_batch(self, handle: Any, start: int, k: int) -> Any:
        raise NotImplementedError

    def load_all(self, handle: Any) -> Any:
        raise NotImplementedError

    def load_last(self, handle: Any, n: int) -> Any:
        raise NotImplementedError

    def create_with(self, k: int) -> Any:
        raise NotImplementedError

    def list_sessions(self) -> Any:
        raise NotImplementedError

    def forget(self, handle: Any) -> Any:
        """Release what :meth:`create_with` left open (untimed); nothing by default."""
        return None

    def before_memory(self, handle: Any) -> Any:
        """Untimed preparation for :meth:`update_memory` (e.g. read the version)."""
        return None

    def update_memory(self, handle: Any, step: int) -> Any:
        raise NotImplementedError

    def prepare_restore(self, handle: Any) -> Any:
        """Untimed: give the session ``RESTORE_RUNS`` finished runs of ``RESTORE_CALLS``
        tool calls each (nothing for a library without runs or tool calls)."""
        return None

    def restore(self, handle: Any) -> Any:
        raise NotImplementedError


# ====================================================================== raw sqlite3

_SESSION_COLUMNS = (
    "session_id, user_id, agent, title, metadata, status, status_reason, version, "
    "created_at, updated_at, last_active_at, closed_at, expired_at, ttl_seconds, "
    "expires_at, message_count, run_count, tool_call_count, external_key, "
    "external_key_hash, lease_expires_at, parent_session_id, fork_seq, audit_head"
)
_RAW_SCHEMA = """
CREATE TABLE sessions (
    session_id VARCHAR(64) PRIMARY KEY, user_id VARCHAR(128) NOT NULL,
    agent VARCHAR(128) NOT NULL, title TEXT, metadata TEXT NOT NULL,
    status VARCHAR(16) NOT NULL, status_reason TEXT, version INTEGER NOT NULL,
    created_at VARCHAR(32) NOT NULL, updated_at VARCHAR(32) NOT NULL,
    last_active_at VARCHAR(32) NOT NULL, closed_at VARCHAR(32), expired_at VARCHAR(32),
    ttl_seconds FLOAT, expires_at VARCHAR(32), message_count INTEGER NOT NULL,
    run_count INTEGER NOT NULL, tool_call_count INTEGER NOT NULL,
    external_key VARCHAR(256), external_key_hash VARCHAR(64),
    lease_expires_at VARCHAR(32), parent_session_id VARCHAR(64), fork_seq INTEGER,
    audit_head VARCHAR(64));
CREATE INDEX ix_sessions_user ON sessions (user_id, updated_at, session_id);
CREATE INDEX ix_sessions_updated ON sessions (updated_at, session_id);
CREATE INDEX ix_sessions_status ON sessions (status, expires_at);
CREATE INDEX ix_sessions_user_status ON sessions (user_id, status, updated_at, session_id);
CREATE INDEX ix_sessions_user_agent ON sessions (user_id, agent, updated_at, session_id);
CREATE INDEX ix_sessions_status_updated ON sessions (status, updated_at, session_id);
CREATE INDEX ix_sessions_agent ON sessions (agent, updated_at, session_id);
CREATE INDEX ix_sessions_user_status_expires ON sessions (user_id, status, expires_at);
CREATE UNIQUE INDEX ix_sessions_key ON sessions (user_id, agent, external_key_hash);
CREATE INDEX ix_sessions_lease ON sessions (lease_expires_at);
CREATE INDEX ix_sessions_parent ON sessions (parent_session_id, updated_at, session_id);
CREATE TABLE messages (
    message_id VARCHAR(64) PRIMARY KEY,
    session_id VARCHAR(64) NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL, created_at VARCHAR(32) NOT NULL, role VARCHAR(16) NOT NULL,
    run_id VARCHAR(64), payload TEXT NOT NULL);
CREATE UNIQUE INDEX ix_messages_seq ON messages (session_id, seq);
CREATE TABLE working_memory (
    session_id VARCHAR(64) PRIMARY KEY REFERENCES sessions (session_id) ON DELETE CASCADE,
    version INTEGER NOT NULL, updated_at VARCHAR(32), data TEXT NOT NULL);
CREATE TABLE tool_calls (
    session_id VARCHAR(64) NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    call_id VARCHAR(255) NOT NULL, seq INTEGER NOT NULL, tool VARCHAR(255) NOT NULL,
    result TEXT NOT NULL, PRIMARY KEY (session_id, call_id));
CREATE UNIQUE INDEX ix_tool_calls_seq ON tool_calls (session_id, seq);
CREATE TABLE runs (
    session_id VARCHAR(64) NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    run_id VARCHAR(64) NOT NULL, seq INTEGER NOT NULL, status VARCHAR(16) NOT NULL,
    output TEXT NOT NULL, PRIMARY KEY (session_id, run_id));
CREATE UNIQUE INDEX ix_runs_seq ON runs (session_id, seq);
CREATE TABLE audit_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, session_id VARCHAR(64) NOT NULL,
    user_id VARCHAR(128) NOT NULL, actor VARCHAR(255) NOT NULL, action VARCHAR(64) NOT NULL,
    at VARCHAR(32) NOT NULL, version_before INTEGER, version_after INTEGER,
    request_id VARCHAR(255), details TEXT NOT NULL, prev_hash VARCHAR(64),
    hash VARCHAR(64));
CREATE INDEX ix_audit_session ON audit_events (session_id, seq);
CREATE INDEX ix_audit_user ON audit_events (user_id, seq);
CREATE TABLE memory_history (
    session_id VARCHAR(64) NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    version INTEGER NOT NULL, at_seq INTEGER NOT NULL, updated_at VARCHAR(32),
    data TEXT NOT NULL, PRIMARY KEY (session_id, version));
CREATE INDEX ix_memory_history ON memory_history (session_id, at_seq, version);
CREATE TABLE search_texts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id VARCHAR(64) NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
    kind VARCHAR(16) NOT NULL, seq INTEGER NOT NULL, role VARCHAR(16), text TEXT NOT NULL);
CREATE UNIQUE INDEX ix_search_texts ON search_texts (session_id, kind, seq);
CREATE VIRTUAL TABLE search_fts USING fts5(
    text, content='search_texts', content_rowid='id', tokenize='trigram', detail='none');
CREATE TRIGGER search_texts_ai AFTER INSERT ON search_texts BEGIN
    INSERT INTO search_fts(rowid, text) VALUES (new.id, new.text); END;
"""
# The columns an append or a memory update sets, as the store's statement does.
_UPDATE_SESSION = (
    "UPDATE sessions SET version=?, updated_at=?, last_active_at=?, expires_at=?, "
    "message_count=?, audit_head=? WHERE session_id = ? AND version = ?"
)
_INSERT_TEXT = "INSERT INTO search_texts (session_id, kind, seq, role, text) VALUES (?, ?, ?, ?, ?)"
_INSERT_AUDIT = (
    "INSERT INTO audit_events (session_id, user_id, actor, action, at, version_before, "
    "version_after, request_id, details, prev_hash, hash) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: The audit chain's canonical JSON (keys sorted, compact, UTF-8 kept), as the store's.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class RawSQLite(Participant):
    """Plain sqlite3 executing the statements agentsession's SQL store executes.

    The tables, indexes, foreign keys and the search index (an FTS5 trigram table kept
    by a trigger, as the store's migration makes it) mirror agentsession's schema. Per
    append, as traced from the SQL store: ``BEGIN IMMEDIATE``; SELECT the session row;
    INSERT the message; INSERT its search text; compare-and-set UPDATE of the session
    row (version + 1); INSERT the audit event; COMMIT. A working-memory update also
    writes the memory's history row (after dropping the older one at its seq). Reads
    run in a transaction that first reads the session row (the ownership check), then
    the messages by ``(session_id, seq)``, decoded as agentsession decodes them (JSON
    payload, ISO timestamp). So the ratio to it is our overhead, not
    a different amount of work: the physical limit for this store.
    """

    key = "raw"
    label = "raw sqlite3"
    api = "sqlite3: the SQL store's statements, one BEGIN IMMEDIATE transaction per write"

    def open(self) -> None:
        self.db = self.connect()
        self.db.executescript(_RAW_SCHEMA)
        self._observe(self.db)

    def connect(self) -> sqlite3.Connection:
        """A new connection to this participant's file at its setting (autocommit mode,
        30 s busy timeout: concurrent writers wait for the write lock as the store does)."""
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
        apply_pragmas(db, self.setting)
        db.execute("PRAGMA foreign_keys = ON")  # agentsession sets it too
        return db

    def close(self) -> None:
        self.db.close()

    @staticmethod
    def _id(prefix: str) -> str:
        """An id as agentsession makes it (128 random bits): random keys land anywhere
        in the primary-key B-tree, as ours do, not at its right edge."""
        return new_id(prefix)

    def _session(self, sid: str) -> tuple[Any, ...]:
        row = self.db.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (sid,)
        ).fetchone()
        if row is None:
            raise LookupError(sid)
        return tuple(row)

    def _bump(self, row: tuple[Any, ...], now: str, added: int, head: str) -> int:
        """CAS-update the session row read in this transaction (the new version, times,
        count and audit chain head ``head``); return the new version."""
        version = row[7]
        values = (version + 1, now, now, row[14], row[15] + added, head, row[0], version)
        cur = self.db.execute(_UPDATE_SESSION, values)
        if cur.rowcount != 1:
            raise RuntimeError("version conflict")
        return int(version + 1)

    @staticmethod
    def _event(
        sid: str,
        user: str,
        action: str,
        versions: tuple[int | None, int],
        details: Any,
        prev: str | None,
    ) -> tuple[Any, ...]:
        """The audit row chained after ``prev`` (the hash of the session's event before
        it, as the store's chain does); its hash is the last value."""
        at = _now()
        fields = {
            "session_id": sid,
            "user_id": user,
            "actor": user,
            "action": action,
            "at": at,
            "version_before": versions[0],
            "version_after": versions[1],
            "request_id": None,
            "details": details,
            "prev_hash": prev,
        }
        digest = hashlib.sha256(_CANONICAL.encode(fields).encode("utf-8")).hexdigest()
        return (sid, user, user, action, at, *versions, None, json.dumps(details), prev, digest)

    def new_session(self, user: str = USER) -> str:
        sid, now = self._id("ses"), _now()
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute(
            f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES ({', '.join('?' * 24)})",
            (sid, user, "bench", None, "{}", "active", None, 1, now, now, now,
             None, None, None, None, 0, 0, 0, None, None, None, None, None, None),
        )  # fmt: skip
        event = self._event(sid, user, "session.created", (None, 1), {"agent": "bench"}, None)
        self.db.execute("UPDATE sessions SET audit_head = ? WHERE session_id = ?", (event[-1], sid))
        self.db.execute(_INSERT_AUDIT, event)
        self.db.execute("COMMIT")
        return sid

    # Internal calls name RawSQLite's methods: RawSQLiteAsync overrides them with
    # coroutines and runs these bodies in a worker thread.
    def append(self, handle: str, i: int) -> None:
        RawSQLite.append_batch(self, handle, i, 1)

    def append_batch(self, handle: str, start: int, k: int) -> None:
        now = _now()
        self.db.execute("BEGIN IMMEDIATE")
        row = self._session(handle)
        seq0 = row[15]
        rows = [
            (
                self._id("msg"),
                handle,
                seq0 + 1 + j,
                now,
                role(start + j),
                None,
                json.dumps(
                    {"role": role(start + j), "content": text(start + j)}, ensure_ascii=False
                ),
            )
            for j in range(k)
        ]
        insert = "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)"
        texts = [(handle, "message", r[2], r[4], text(start + j)) for j, r in enumerate(rows)]
        if k == 1:
            self.db.execute(insert, rows[0])
            self.db.execute(_INSERT_TEXT, texts[0])
        else:
            self.db.executemany(insert, rows)
            self.db.executemany(_INSERT_TEXT, texts)
        details = {"count": k, "first_seq": seq0 + 1, "last_seq": seq0 + k}
        versions = (row[7], row[7] + 1)
        event = self._event(handle, row[1], "message.appended", versions, details, row[23])
        self._bump(row, now, k, event[-1])
        self.db.execute(_INSERT_AUDIT, event)
        self.db.execute("COMMIT")

    def _read_messages(self, sid: str, limit: int | None) -> list[tuple[Any, ...]]:
        self.db.execute("BEGIN")
        try:
            self._session(sid)
            sql = "SELECT message_id, session_id, seq, created_at, payload FROM messages "
            sql += "WHERE session_id = ? ORDER BY seq"
            if limit is None:
                rows = self.db.execute(sql, (sid,)).fetchall()
            else:
                rows = self.db.execute(sql + " DESC LIMIT ?", (sid, limit)).fetchall()
                rows.reverse()
        finally:
            self.db.execute("COMMIT")
        return [
            (mid, s, seq, datetime.fromisoformat(at), json.loads(payload))
            for mid, s, seq, at, payload in rows
        ]

    def load_all(self, handle: str) -> int:
        return len(self._read_messages(handle, None))

    def load_last(self, handle: str, n: int) -> int:
        return len(self._read_messages(handle, n))

    def create_with(self, k: int) -> str:
        sid = RawSQLite.new_session(self, OWNER)
        RawSQLite.append_batch(self, sid, 0, k)
        return sid

    def list_sessions(self) -> int:
        self.db.execute("BEGIN")
        try:
            rows = self.db.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE user_id = ? "
                "ORDER BY updated_at DESC, session_id DESC LIMIT ?",
                (OWNER, 1001),
            ).fetchall()
        finally:
            self.db.execute("COMMIT")
        # Decoded as agentsession returns them: the metadata JSON and every timestamp
        # column (created, updated, last active, closed, expired, expires) that is set.
        decoded = [
            (
                *r[:4],
                json.loads(r[4]),
                *r[5:8],
                *(None if t is None else datetime.fromisoformat(t) for t in r[8:13]),
                r[13],
                None if r[14] is None else datetime.fromisoformat(r[14]),
                *r[15:],
            )
            for r in rows
        ]
        return len(decoded)

    def update_memory(self, handle: str, step: int) -> None:
        now = _now()
        data = json.dumps(memory_doc(step), ensure_ascii=False)
        self.db.execute("BEGIN IMMEDIATE")
        row = self._session(handle)
        version = row[7]
        self.db.execute(
            "DELETE FROM memory_history WHERE session_id = ? AND at_seq = ? AND version < ?",
            (handle, row[15], version + 1),
        )
        self.db.execute(
            "INSERT INTO memory_history (session_id, version, at_seq, updated_at, data) "
            "VALUES (?, ?, ?, ?, ?)",
            (handle, version + 1, row[15], now, data),
        )
        cur = self.db.execute(
            "UPDATE working_memory SET version=?, updated_at=?, data=? WHERE session_id = ?",
            (version + 1, now, data, handle),
        )
        if cur.rowcount == 0:
            self.db.execute(
                "INSERT INTO working_memory (session_id, version, updated_at, data) "
                "VALUES (?, ?, ?, ?)",
                (handle, version + 1, now, data),
            )
        versions = (row[7], row[7] + 1)
        details = {"mode": "replace"}
        event = self._event(handle, row[1], "memory.updated", versions, details, row[23])
        self._bump(row, now, 0, event[-1])
        self.db.execute(_INSERT_AUDIT, event)
        self.db.execute("COMMIT")

    def prepare_restore(self, handle: str) -> None:
        """The runs and tool calls agentsession's ``prepare_restore`` records, as rows."""
        self.db.execute("BEGIN IMMEDIATE")
        for r in range(RESTORE_RUNS):
            run_id = self._id("run")
            self.db.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?)",
                (handle, run_id, r + 1, "SUCCEEDED", json.dumps({"answer": f"done {r}"})),
            )
            for c in range(RESTORE_CALLS):
                seq = r * RESTORE_CALLS + c + 1
                result = json.dumps({"arguments": {"q": f"step {r}.{c}"}, "hits": [1, 2, 3]})
                self.db.execute(
                    "INSERT INTO tool_calls VALUES (?, ?, ?, ?, ?)",
                    (handle, self._id("call"), seq, "search", result),
                )
        self.db.execute("COMMIT")

    def restore(self, handle: str) -> int:
        """Session, working memory and the newest 50 messages, 50 tool calls and 20 runs
        (agentsession's restore windows), every row fetched and decoded."""
        self.db.execute("BEGIN IMMEDIATE")  # the take-over: any run left RUNNING?
        self._session(handle)
        self.db.execute(
            "SELECT * FROM runs WHERE session_id = ? AND status = ? ORDER BY seq",
            (handle, "RUNNING"),
        ).fetchall()
        self.db.execute("COMMIT")
        messages = self._read_messages(handle, 50)
        self.db.execute("BEGIN")
        try:
            memory = self.db.execute(
                "SELECT version, updated_at, data FROM working_memory WHERE session_id = ?",
                (handle,),
            ).fetchone()
            calls = self.db.execute(
                "SELECT * FROM tool_calls WHERE session_id = ? ORDER BY seq DESC LIMIT 50",
                (handle,),
            ).fetchall()
            runs = self.db.execute(
                "SELECT * FROM runs WHERE session_id = ? ORDER BY seq DESC LIMIT 20", (handle,)
            ).fetchall()
        finally:
            self.db.execute("COMMIT")
        if memory is not None:
            (memory[0], datetime.fromisoformat(memory[1]), json.loads(memory[2]))
        decoded = [(*row[:4], json.loads(row[4])) for row in calls + runs]
        return len(messages) + len(decoded)


# ===================================================================== agentsession


@dataclass
class _OurSession:
    session_id: str
    user_id: str
    version: int = 0


class AgentSessionSync(Participant):
    """agentsession's SessionManager on SQLite, in-process."""

    key = "agentsession"
    label = "agentsession (sync)"
    api = (
        "SessionManager.from_url('sqlite:///…', auto_migrate=True, sqlite_synchronous=…): "
        "create_session, append_message / append_messages, get_messages(limit=), "
        "list_sessions(limit=1000), update_working_memory(expected_version=), "
        "restore_session"
    )
    packages = ("agentsession", "SQLAlchemy")

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"auto_migrate": True}
        if self.setting.synchronous is not None:
            options["sqlite_synchronous"] = self.setting.synchronous
        # journal_mode: agentsession always runs SQLite in WAL (no option to change).
        return options

    def open(self) -> None:
        from agentsession import SessionManager

        self.sm = SessionManager.from_url(f"sqlite:///{self.path}", **self._options())
        self._read_back(self.sm)

    def _read_back(self, manager: Any) -> None:
        with manager.store.engine.connect() as conn:
            self._observe(conn.connection.driver_connection)

    def close(self) -> None:
        self.sm.close()

    def new_session(self, user: str = USER) -> _OurSession:
        return _OurSession(self.sm.create_session(user_id=user, agent=APP).session_id, user)

    def append(self, handle: _OurSession, i: int) -> None:
        self.sm.append_message(
            session_id=handle.session_id,
            user_id=handle.user_id,
            message={"role": role(i), "content": text(i)},
        )

    def append_batch(self, handle: _OurSession, start: int, k: int) -> None:
        self.sm.append_messages(
            session_id=handle.session_id,
            user_id=handle.user_id,
            messages=[{"role": role(i), "content": text(i)} for i in range(start, start + k)],
        )

    def load_all(self, handle: _OurSession) -> int:
        # Every message: pages of the largest size, forwards from the first.
        kw = {"session_id": handle.session_id, "user_id": handle.user_id, "limit": 1000}
        page = self.sm.get_messages(**kw, after=0)
        count = len(page.items)
        while page.next_cursor is not None:
            page = self.sm.get_messages(**kw, cursor=page.next_cursor)
            count += len(page.items)
        return count

    def load_last(self, handle: _OurSession, n: int) -> int:
        page = self.sm.get_messages(session_id=handle.session_id, user_id=handle.user_id, limit=n)
        return len(page.items)

    def create_with(self, k: int) -> _OurSession:
        handle = self.new_session(OWNER)
        self.append_batch(handle, 0, k)
        return handle

    def list_sessions(self) -> int:
        return len(self.sm.list_sessions(user_id=OWNER, limit=1000).items)

    def before_memory(self, handle: _OurSession) -> None:
        handle.version = self.sm.get_session(
            session_id=handle.session_id, user_id=handle.user_id
        ).version

    def update_memory(self, handle: _OurSession, step: int) -> None:
        memory = self.sm.update_working_memory(
            session_id=handle.session_id,
            user_id=handle.user_id,
            data=memory_doc(step),
            expected_version=handle.version,
        )
        handle.version = memory.version

    def prepare_restore(self, handle: _OurSession) -> None:
        kw = {"session_id": handle.session_id, "user_id": handle.user_id}
        for r in range(RESTORE_RUNS):
            run_id = self.sm.start_run(**kw, input={"task": f"task {r}"}).run_id
            for c in range(RESTORE_CALLS):
                self.sm.record_tool_call(
                    **kw,
                    tool="search",
                    arguments={"q": f"step {r}.{c}"},
                    result={"hits": [1, 2, 3]},
                    run_id=run_id,
                )
            self.sm.finish_run(
                **kw, run_id=run_id, status="SUCCEEDED", output={"answer": f"done {r}"}
            )

    def restore(self, handle: _OurSession) -> int:
        state = self.sm.restore_session(session_id=handle.session_id, user_id=handle.user_id)
        return len(state.messages)


class AgentSessionAsync(AgentSessionSync):
    """agentsession's AsyncSessionManager (each call in a worker thread), in-process."""

    key = "agentsession_async"
    label = "agentsession (async)"
    api = "AsyncSessionManager.from_url(…): the same calls, awaited (asyncio.to_thread)"
    asynchronous = True

    def open(self) -> None:
        from agentsession import AsyncSessionManager

        self.am = AsyncSessionManager.from_url(f"sqlite:///{self.path}", **self._options())
        self._read_back(self.am.manager)

    async def close(self) -> None:
        await self.am.close()

    async def new_session(self, user: str = USER) -> _OurSession:
        session = await self.am.create_session(user_id=user, agent=APP)
        return _OurSession(session.session_id, user)

    async def append(self, handle: _OurSession, i: int) -> None:
        await self.am.append_message(
            session_id=handle.session_id,
            user_id=handle.user_id,
            message={"role": role(i), "content": text(i)},
        )

    async def append_batch(self, handle: _OurSession, start: int, k: int) -> None:
        await self.am.append_messages(
            session_id=handle.session_id,
            user_id=handle.user_id,
            messages=[{"role": role(i), "content": text(i)} for i in range(start, start + k)],
        )

    async def load_all(self, handle: _OurSession) -> int:
        kw = {"session_id": handle.session_id, "user_id": handle.user_id, "limit": 1000}
        page = await self.am.get_messages(**kw, after=0)
        count = len(page.items)
        while page.next_cursor is not None:
            page = await self.am.get_messages(**kw, cursor=page.next_cursor)
            count += len(page.items)
        return count

    async def load_last(self, handle: _OurSession, n: int) -> int:
        page = await self.am.get_messages(
            session_id=handle.session_id, user_id=handle.user_id, limit=n
        )
        return len(page.items)

    async def create_with(self, k: int) -> _OurSession:
        handle = await self.new_session(OWNER)
        await self.append_batch(handle, 0, k)
        return handle

    async def list_sessions(self) -> int:
        return len((await self.am.list_sessions(user_id=OWNER, limit=1000)).items)

    async def before_memory(self, handle: _OurSession) -> None:
        session = await self.am.get_session(session_id=handle.session_id, user_id=handle.user_id)
        handle.version = session.version

    async def update_memory(self, handle: _OurSession, step: int) -> None:
        memory = await self.am.update_working_memory(
            session_id=handle.session_id,
            user_id=handle.user_id,
            data=memory_doc(step),
            expected_version=handle.version,
        )
        handle.version = memory.version

    async def prepare_restore(self, handle: _OurSession) -> None:
        await asyncio.to_thread(AgentSessionSync.prepare_restore, self._sync_view(), handle)

    def _sync_view(self) -> AgentSessionSync:
        view = AgentSessionSync(self.path.parent, self.setting)
        view.sm = self.am.manager
        return view

    async def restore(self, handle: _OurSession) -> int:
        state = await self.am.restore_session(session_id=handle.session_id, user_id=handle.user_id)
        return len(state.messages)


# ==================================================================== openai-agents


class OpenAIAgents(Participant):
    """openai-agents ``agents.memory.SQLiteSession``: one object per conversation."""

    key = "openai_agents"
    label = "openai-agents SQLiteSession"
    api = (
        "agents.memory.SQLiteSession(session_id, db_path): add_items([item]), "
        "get_items(), get_items(limit=n); items {'role', 'content'}"
    )
    packages = ("openai-agents",)
    asynchronous = True
    unsupported: ClassVar[dict[str, str]] = {
        "list_sessions": "no API lists sessions, and sessions have no owner (user) to list by",
        "update_memory": "stores conversation items only: no state document, no version",
        "restore": "nothing to restore beyond the item history, which (b) reads",
    }
    caveats: ClassVar[dict[str, str]] = {
        "create_with": "no create call: the session row appears with the first add_items; "
        "timed = SQLiteSession(...) (schema check, connection) + add_items(5 items)"
    }

    def open(self) -> None:
        from agents.memory import SQLiteSession

        adapter, setting = self, self.setting

        class Configured(SQLiteSession):  # type: ignore[misc]
            """SQLiteSession with the benchmark's PRAGMAs on each connection it opens."""

            def _configure_connection(self, conn: sqlite3.Connection) -> None:  # type: ignore[override]
                SQLiteSession._configure_connection(conn)
                apply_pragmas(conn, setting)
                adapter._observe(conn)

        self._cls = Configured
        self._sessions: list[Any] = []
        self._count = 0

    def _new(self) -> Any:
        self._count += 1
        session = self._cls(f"conv-{self._count}", self.path)
        self._sessions.append(session)
        return session

    def close(self) -> None:
        for session in self._sessions:
            session.close()

    def new_session(self, user: str = USER) -> Any:
        return self._new()  # SQLiteSession has no owner

    @staticmethod
    def _item(i: int) -> dict[str, str]:
        r = role(i)
        return {"role": "developer" if r == "system" else r, "content": text(i)}

    async def append(self, handle: Any, i: int) -> None:
        await handle.add_items([self._item(i)])

    async def append_batch(self, handle: Any, start: int, k: int) -> None:
        await handle.add_items([self._item(i) for i in range(start, start + k)])

    async def load_all(self, handle: Any) -> int:
        return len(await handle.get_items())

    async def load_last(self, handle: Any, n: int) -> int:
        return len(await handle.get_items(limit=n))

    async def create_with(self, k: int) -> Any:
        session = self._new()
        await session.add_items([self._item(i) for i in range(k)])
        return session

    def forget(self, handle: Any) -> None:
        """Close a session object created by :meth:`create_with` (untimed)."""
        handle.close()
        self._sessions.remove(handle)


# ======================================================================= google-adk


def _adk_event(i: int) -> Any:
    from google.adk.events import Event
    from google.genai import types

    r = role(i)
    author = "user" if r == "user" else "assistant"
    return Event(
        invocation_id=f"inv-{i // 2}",
        author=author,
        content=types.Content(
            role="user" if r == "user" else "model", parts=[types.Part(text=text(i))]
        ),
    )


class _ADKBase(Participant):
    """What both ADK session services share: the BaseSessionService calls."""

    packages = ("google-adk", "google-genai")
    asynchronous = True
    caveats: ClassVar[dict[str, str]] = {
        "update_memory": "state_delta on an appended Event (EventActions); the stale-session "
        "check (last_update_time of the Session object held) is ADK's optimistic lock",
        "restore": "get_session(config=GetSessionConfig(num_recent_events=50)): session "
        "state + the newest 50 events (as restore_session's default message_limit)",
        "create_with": "create_session + 5 append_event calls (no batch append)",
    }
    slow_history_reason = (
        "no batch append: history can only be built with single append_event calls, "
        "one transaction each"
    )
    svc: Any

    async def new_session(self, user: str = USER) -> Any:
        return await self.svc.create_session(app_name=APP, user_id=user)

    async def append(self, handle: Any, i: int) -> None:
        await self.svc.append_event(handle, _adk_event(i))

    async def append_batch(self, handle: Any, start: int, k: int) -> None:
        for i in range(start, start + k):
            await self.svc.append_event(handle, _adk_event(i))

    async def load_all(self, handle: Any) -> int:
        session = await self.svc.get_session(
            app_name=APP, user_id=handle.user_id, session_id=handle.id
        )
        return len(session.events)

    async def load_last(self, handle: Any, n: int) -> int:
        from google.adk.sessions.base_session_service import GetSessionConfig

        session = await self.svc.get_session(
            app_name=APP,
            user_id=handle.user_id,
            session_id=handle.id,
            config=GetSessionConfig(num_recent_events=n),
        )
        return len(session.events)

    async def create_with(self, k: int) -> Any:
        session = await self.new_session(OWNER)
        await self.append_batch(session, 0, k)
        return session

    async def list_sessions(self) -> int:
        return len((await self.svc.list_sessions(app_name=APP, user_id=OWNER)).sessions)

    async def update_memory(self, handle: Any, step: int) -> None:
        from google.adk.events import Event, EventActions

        event = Event(
            invocation_id=f"mem-{step}",
            author="assistant",
            actions=EventActions(state_delta=memory_doc(step)),
        )
        await self.svc.append_event(handle, event)

    async def restore(self, handle: Any) -> int:
        return await self.load_last(handle, 50)

    async def close(self) -> None:
        await self.svc.close()


class ADKSqlite(_ADKBase):
    """google-adk ``SqliteSessionService`` (aiosqlite, a new connection per call)."""

    key = "adk_sqlite"
    label = "ADK SqliteSessionService"
    api = (
        "google.adk.sessions.SqliteSessionService(db_path): create_session, append_event, "
        "get_session(config=GetSessionConfig(num_recent_events=n)), list_sessions"
    )

    def open(self) -> None:
        from google.adk.sessions.sqlite_session_service import SqliteSessionService

        adapter, setting = self, self.setting
        set_file_journal_mode(self.path, setting)

        class Configured(SqliteSessionService):  # type: ignore[misc]
            """SqliteSessionService with the PRAGMAs on each connection it opens."""

            @asynccontextmanager
            async def _get_db_connection(self):  # type: ignore[no-untyped-def, override]
                async with super()._get_db_connection() as db:
                    if setting.synchronous is not None:
                        await db.execute(f"PRAGMA synchronous={setting.synchronous}")
                    if len(adapter._observed) == 0 or adapter._check_more():
                        await adapter._observe_async(db)
                    yield db

        self.svc = Configured(str(self.path))
        self._checks = 0

    def _check_more(self) -> bool:
        """Read the PRAGMAs back on the first 5 connections only (each call opens one)."""
        self._checks += 1
        return self._checks < 5

    async def _observe_async(self, db: Any) -> None:
        journal = (await (await db.execute("PRAGMA journal_mode")).fetchone())[0]
        level = (await (await db.execute("PRAGMA synchronous")).fetchone())[0]
        self._observed.add((str(journal).lower(), _SYNCHRONOUS_NAMES.get(int(level), str(level))))


class ADKDatabase(_ADKBase):
    """google-adk ``DatabaseSessionService`` over ``sqlite+aiosqlite`` (SQLAlchemy)."""

    key = "adk_database"
    label = "ADK DatabaseSessionService"
    api = (
        "google.adk.sessions.DatabaseSessionService('sqlite+aiosqlite:///…'): the same "
        "calls; PRAGMAs by an SQLAlchemy 'connect' event listener"
    )
    packages = ("google-adk", "google-genai", "SQLAlchemy", "aiosqlite")

    async def open(self) -> None:
        from google.adk.sessions import DatabaseSessionService
        from sqlalchemy import event

        self.svc = DatabaseSessionService(f"sqlite+aiosqlite:///{self.path}")
        setting, adapter = self.setting, self

        def on_connect(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            for pragma in _pragma_statements(setting):
                cursor.execute(pragma)
            cursor.execute("PRAGMA journal_mode")
            journal = cursor.fetchone()[0]
            cursor.execute("PRAGMA synchronous")
            level = cursor.fetchone()[0]
            cursor.close()
            adapter._observed.add(
                (str(journal).lower(), _SYNCHRONOUS_NAMES.get(int(level), str(level)))
            )

        event.listen(self.svc.db_engine.sync_engine, "connect", on_connect)
        await self.svc.prepare_tables()  # as ADK recommends for latency-sensitive apps


def _pragma_statements(setting: Setting) -> list[str]:
    statements = []
    if setting.journal_mode is not None:
        statements.append(f"PRAGMA journal_mode={setting.journal_mode}")
    if setting.synchronous is not None:
        statements.append(f"PRAGMA synchronous={setting.synchronous}")
    return statements


# ======================================================================== langgraph


def _no_update(state):  # type: ignore[no-untyped-def]
    """The graph's one node: a model call would go here; appends use update_state."""
    return {}


class LangGraph(Participant):
    """LangGraph ``SqliteSaver`` behind a compiled one-node ``StateGraph``.

    State: ``messages`` (``add_messages``, as in ``MessagesState``) and ``memory`` (a
    plain last-value channel). One message is appended with
    ``graph.update_state(config, {"messages": [msg]}, as_node="agent")``: the graph's
    own API for writing to a thread without running a model, through the same
    ``add_messages`` reducer and one new checkpoint, which is also what a chat turn
    costs per message (a turn's ``invoke`` stores the user's and the model's message in
    two checkpoints). Reads are ``graph.get_state(config)``: the whole thread state.
    """

    key = "langgraph"
    label = "LangGraph SqliteSaver"
    api = (
        "StateGraph(messages: add_messages, memory).compile(checkpointer="
        "SqliteSaver(sqlite3.connect(…))): update_state(config, {'messages': [m]}, "
        "as_node='agent'), get_state(config)"
    )
    packages = (
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-sqlite",
        "langchain-core",
    )
    unsupported: ClassVar[dict[str, str]] = {
        "list_sessions": "the checkpointer lists checkpoints, not threads; threads have no "
        "owner to list by"
    }
    caveats: ClassVar[dict[str, str]] = {
        "load_last": "no windowed read: get_state loads the whole message list, sliced [-n:]",
        "update_memory": "update_state has no expected-version check (a stale checkpoint_id "
        "forks the thread instead of failing): timed without one",
        "restore": "get_state(config): the whole state, every message",
        "create_with": "no create call: the thread appears with its first checkpoint; timed = "
        "update_state with the 5 messages",
    }
    history_cost = "linear"
    slow_history_reason = (
        "every append re-serialises the whole message list into a new checkpoint, so "
        "each append costs O(history) time and bytes"
    )

    def open(self) -> None:
        from typing import Annotated, TypedDict

        from langchain_core.messages import AnyMessage
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph
        from langgraph.graph.message import add_messages

        # The functional form evaluates the annotations here, where the imports are (the
        # class form's would be strings resolved in this module's globals, and fail).
        state = TypedDict(  # noqa: UP013
            "State",
            {"messages": Annotated[list[AnyMessage], add_messages], "memory": dict},
            total=False,
        )

        self.conn = sqlite3.connect(self.path, check_same_thread=False)
        apply_pragmas(self.conn, self.setting)
        saver = SqliteSaver(self.conn)
        saver.setup()
        builder = StateGraph(state)
        builder.add_node("agent", _no_update)
        builder.add_edge(START, "agent")
        builder.add_edge("agent", END)
        self.graph = builder.compile(checkpointer=saver)
        self._observe(self.conn)
        self._threads = 0

    def close(self) -> None:
        self._observe(self.conn)
        self.conn.close()

    @staticmethod
    def _message(i: int) -> Any:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        r = role(i)
        kind = {"user": HumanMessage, "assistant": AIMessage, "system": SystemMessage}[r]
        return kind(content=text(i))

    def new_session(self, user: str = USER) -> dict[str, Any]:
        self._threads += 1
        return {"configurable": {"thread_id": f"thread-{self._threads}"}}

    def append(self, handle: dict[str, Any], i: int) -> None:
        self.graph.update_state(handle, {"messages": [self._message(i)]}, as_node="agent")

    def append_batch(self, handle: dict[str, Any], start: int, k: int) -> None:
        messages = [self._message(i) for i in range(start, start + k)]
        self.graph.update_state(handle, {"messages": messages}, as_node="agent")

    def load_all(self, handle: dict[str, Any]) -> int:
        return len(self.graph.get_state(handle).values.get("messages", []))

    def load_last(self, handle: dict[str, Any], n: int) -> int:
        return len(self.graph.get_state(handle).values.get("messages", [])[-n:])

    def create_with(self, k: int) -> dict[str, Any]:
        handle = self.new_session()
        self.append_batch(handle, 0, k)
        return handle

    def update_memory(self, handle: dict[str, Any], step: int) -> None:
        self.graph.update_state(handle, {"memory": memory_doc(step)}, as_node="agent")

    def restore(self, handle: dict[str, Any]) -> int:
        state = self.graph.get_state(handle)
        return len(state.values.get("messages", []))


class RawSQLiteAsync(RawSQLite):
    """raw sqlite3 behind asyncio: each call of :class:`RawSQLite` in a worker thread
    (``asyncio.to_thread``), the baseline of the async APIs (they pay the same hop)."""

    key = "raw_async"
    label = "raw sqlite3 (async)"
    api = "RawSQLite's calls, each awaited through asyncio.to_thread"
    asynchronous = True

    async def new_session(self, user: str = USER) -> str:  # type: ignore[override]
        return await asyncio.to_thread(RawSQLite.new_session, self, user)

    async def append(self, handle: str, i: int) -> None:  # type: ignore[override]
        await asyncio.to_thread(RawSQLite.append, self, handle, i)

    async def append_batch(self, handle: str, start: int, k: int) -> None:  # type: ignore[override]
        await asyncio.to_thread(RawSQLite.append_batch, self, handle, start, k)

    async def load_all(self, handle: str) -> int:  # type: ignore[override]
        return await asyncio.to_thread(RawSQLite.load_all, self, handle)

    async def load_last(self, handle: str, n: int) -> int:  # type: ignore[override]
        return await asyncio.to_thread(RawSQLite.load_last, self, handle, n)

    async def create_with(self, k: int) -> str:  # type: ignore[override]
        return await asyncio.to_thread(RawSQLite.create_with, self, k)

    async def list_sessions(self) -> int:  # type: ignore[override]
        return await asyncio.to_thread(RawSQLite.list_sessions, self)

    async def update_memory(self, handle: str, step: int) -> None:  # type: ignore[override]
        await asyncio.to_thread(RawSQLite.update_memory, self, handle, step)

    async def prepare_restore(self, handle: str) -> None:  # type: ignore[override]
        await asyncio.to_thread(RawSQLite.prepare_restore, self, handle)

    async def restore(self, handle: str) -> int:  # type: ignore[override]
        return await asyncio.to_thread(RawSQLite.restore, self, handle)


#: Every participant, in table order. A new one (e.g. agentsession over HTTP) is a
#: subclass of Participant added here.
PARTICIPANTS: tuple[type[Participant], ...] = (
    RawSQLite,
    RawSQLiteAsync,
    AgentSessionSync,
    AgentSessionAsync,
    OpenAIAgents,
    ADKSqlite,
    ADKDatabase,
    LangGraph,
)


async def call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a plain function or coroutine function and return its result."""
    result = fn(*args)
    if isinstance(result, Awaitable):
        return await result
    return result


async def close_quietly(participant: Participant) -> None:
    """Close a participant, ignoring errors (used on the way out of a failed run)."""
    with suppress(Exception):
        await call(participant.close)
