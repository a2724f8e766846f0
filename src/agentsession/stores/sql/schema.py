"""The current SQL schema, as SQLAlchemy Core tables.

This module describes the schema at the newest migration; the database itself is only
ever created and changed by the migrations in :mod:`agentsession.migrations` (never
``metadata.create_all``). Keep the two in step: a new column here needs a new revision.

Every table that belongs to a session references ``sessions`` with
``ON DELETE CASCADE`` (``run_steps`` through ``runs``), so deleting the session row
removes all of it. ``audit_events`` and ``idempotency_keys`` carry a
``session_id`` without a foreign key: a session's tombstone audit event is written after
the session is gone, and the store deletes their other rows explicitly.

JSON documents are :class:`~agentsession.stores.sql.columns.JSONText`, timestamps
:class:`~agentsession.stores.sql.columns.UTCDateTime`. A column holding a bounded field is
at least as wide as the field's limit in :mod:`agentsession.fieldlimits` (the one table
of them; ``tests/test_field_limits.py`` checks every pair), and every key fits
MariaDB's 3072-byte InnoDB key limit at 4 bytes per utf8mb4 character.
"""

from __future__ import annotations

from typing import Final, TypedDict

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from ...fieldlimits import (
    EXTERNAL_KEY_CHARS,
    IDEMPOTENCY_KEY_CHARS,
    METADATA_KEY_CHARS,
    METADATA_VALUE_CHARS,
    MODEL_CHARS,
    NAME_CHARS,
    RECORD_KEY_CHARS,
    RECORD_NAMESPACE_CHARS,
    STEP_KIND_CHARS,
    STEP_STATUS_CHARS,
    SUMMARY_LABEL_CHARS,
)
from .columns import BLOB, LONG_TEXT, JSONText, PlainText, UTCDateTime, binary_text

__all__ = [
    "api_keys",
    "audit_events",
    "auth_failures",
    "change_feed_gate",
    "idempotency_keys",
    "memory_history",
    "messages",
    "metadata",
    "rewinds",
    "rewound_messages",
    "run_steps",
    "runs",
    "search_texts",
    "session_budgets",
    "session_chain",
    "session_metadata",
    "session_records",
    "sessions",
    "shared_memory",
    "store_meta",
    "summaries",
    "tool_calls",
    "usage_ledger",
    "user_budgets",
    "working_memory",
]

ID = 64  # generated ids (fieldlimits.ID_CHARS), with room to spare
LABEL = 255  # tool names, tool call ids, actors, request ids, step names: wider than needed


class TableOptions(TypedDict):
    """Dialect keyword arguments of every ``sa.Table`` (a TypedDict, so that ``**`` passes
    them as exactly these keywords rather than as any of ``Table``'s typed ones)."""

    mysql_engine: str
    mysql_charset: str
    mysql_collate: str


# MySQL: 4-byte UTF-8 and binary collation, so ids compare and sort like everywhere else.
TABLE_OPTIONS: Final[TableOptions] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


def _session_fk() -> sa.ForeignKey:
    return sa.ForeignKey("sessions.session_id", ondelete="CASCADE")


sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("session_id", sa.String(ID), primary_key=True),
    sa.Column("user_id", sa.String(NAME_CHARS), nullable=False),
    sa.Column("agent", sa.String(NAME_CHARS), nullable=False),
    sa.Column("title", PlainText(), nullable=True),
    sa.Column("metadata", JSONText, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("status_reason", PlainText(), nullable=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.Column("last_active_at", UTCDateTime, nullable=False),
    sa.Column("closed_at", UTCDateTime, nullable=True),
    sa.Column("expired_at", UTCDateTime, nullable=True),
    sa.Column("ttl_seconds", sa.Double, nullable=True),
    sa.Column("expires_at", UTCDateTime, nullable=True),
    sa.Column("message_count", sa.Integer, nullable=False),
    sa.Column("run_count", sa.Integer, nullable=False),
    sa.Column("tool_call_count", sa.Integer, nullable=False),
    # The caller's key, and its hex SHA-256 that the unique index holds (exact compare
    # on every dialect; MariaDB's VARCHAR compare ignores trailing spaces).
    sa.Column("external_key", sa.String(EXTERNAL_KEY_CHARS), nullable=True),
    sa.Column("external_key_hash", sa.String(64), nullable=True),
    # The lease deadline of the session's RUNNING run (docs/semantics.md, "Run leases").
    sa.Column("lease_expires_at", UTCDateTime, nullable=True),
    sa.Index(None, "user_id", "agent", "external_key_hash", unique=True),
    # Listings, newest first: one index per filter, so none scans or sorts.
    sa.Index(None, "user_id", "updated_at", "session_id"),
    sa.Index(None, "user_id", "status", "updated_at", "session_id"),
    sa.Index(None, "user_id", "agent", "updated_at", "session_id"),
    sa.Index(None, "updated_at", "session_id"),
    sa.Index(None, "status", "updated_at", "session_id"),
    sa.Index(None, "agent", "updated_at", "session_id"),
    # Due sessions (ACTIVE past expires_at): the sweep, and listings by status.
    sa.Index(None, "status", "expires_at"),
    sa.Index(None, "user_id", "status", "expires_at"),
    # Runs whose lease lapsed: the sweep.
    sa.Index(None, "lease_expires_at"),
    # A fork's parent and the parent's message seq it was taken at (NULL: no fork).
    sa.Column("parent_session_id", sa.String(ID), nullable=True),
    sa.Column("fork_seq", sa.Integer, nullable=True),
    # The hash of the session's newest audit event (agentsession.auditchain).
    sa.Column("audit_head", sa.String(64), nullable=True),
    # A parent's forks, newest first.
    sa.Index(None, "parent_session_id", "updated_at", "session_id"),
    **TABLE_OPTIONS,
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("message_id", sa.String(ID), primary_key=True),
    sa.Column("session_id", sa.String(ID), _session_fk(), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("run_id", sa.String(ID), nullable=True),
    # Message.payload(): exactly what the client appended, unset fields left out.
    sa.Column("payload", JSONText, nullable=False),
    sa.Index(None, "session_id", "seq", unique=True),
    **TABLE_OPTIONS,
)

working_memory = sa.Table(
    "working_memory",
    metadata,
    sa.Column("session_id", sa.String(ID), _session_fk(), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=True),
    sa.Column("data", JSONText, nullable=False),
    **TABLE_OPTIONS,
)

# Every working-memory write: the memory as of a message seq is the row with the
# highest version among those with at_seq <= seq (docs/semantics.md,
# "Working-memory history"); the primary key serves that read.
memory_history = sa.Table(
    "memory_history",
    metadata,
    sa.Column("session_id", sa.String(ID), _session_fk(), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("at_seq", sa.Integer, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=True),
    sa.Column("data", JSONText, nullable=False),
    # The memory as of a seq (a seek, not a walk back over the newer versions) and the
    # clamp of a removal (only the rows above the new end).
    sa.Index(None, "session_id", "at_seq", "version"),
    **TABLE_OPTIONS,
)

# Documents shared by sessions: per agent (user_id '' = the app scope) or per user and
# agent. No foreign key: they outlive every session; erasure deletes a user's rows.
shared_memory = sa.Table(
    "shared_memory",
    metadata,
    sa.Column("agent", sa.String(NAME_CHARS), primary_key=True),
    sa.Column("user_id", sa.String(NAME_CHARS), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=True),
    sa.Column("data", JSONText, nullable=False),
    sa.Index(None, "user_id"),
    **TABLE_OPTIONS,
)

session_records = sa.Table(
    "session_records",
    metadata,
    sa.Column("session_id", sa.String(ID), _session_fk(), primary_key=True),
    # Code-point order and exact compare on every dialect (binary_text).
    sa.Column("namespace", binary_text(RECORD_NAMESPACE_CHARS), primary_key=True),
    sa.Column("key", binary_text(RECORD_KEY_CHARS), primary_key=True),
    sa.Column("data", BLOB, nullable=False),
    sa.Column("meta", JSONText, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    **TABLE_OPTIONS,
)

# Stored summaries of seq ranges (compaction), numbered 1, 2, 3... per session.
summaries = sa.Table(
    "summaries",
    metadata,
    sa.Column("session_id", sa.String(ID), _session_fk(), primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("from_seq", sa.Integer, nullable=False),
    sa.Column("to_seq", sa.Integer, nullable=False),
    sa.Column("author", sa.String(SUMMARY_LABEL_CHARS), nullable=False),
    sa.Column("model", sa.String(SUMMARY_LABEL_CHARS), nullable=True),
    sa.Column("summary_tokens", sa.Integer, nullable=False),
    sa.Column("replaced_tokens", sa.Integer, nullable=False),
    sa.Column("tokenizer", sa.String(SUMMARY_LABEL_CHARS), nullable=False),
    sa.Column("supersedes", sa.Integer, nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("text", PlainText(long=True), nullable=False),
    **TABLE_OPTIONS,
)

# Every rewind of a session, numbered 1, 2, 3... per session.
rewinds = sa.Table(
    "rewinds",
    metadata,
    sa.Column("session_id", sa.String(ID), _session_fk(), primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("to_seq", sa.Integer, nullable=False),
    sa.Column("count", sa.Integer, nullable=False),
    sa.Column("mode", sa.String(16), nullable=False),
    sa.Column("memory_version", sa.Integer, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    **TABLE_OPTIONS,
)

# The messages a hiding rewind took out of the history, by rewind number and seq.
rewound_messages = sa.Table(
    "rewound_messages",
    metadata,
    sa.Column("session_id", sa.String(ID), _session_fk(), primary_key=True),
    sa.Column("rewind_number", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("message_id", sa.String(ID), nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("run_id", sa.String(ID), nullable=True),
    sa.Column("payload", JSONText, nullable=False),
    **TABLE_OPTIONS,
)

tool_calls = sa.Table(
    "tool_calls",
    metadata,
    sa.Column("session_id", sa.String(ID), _session_fk(), primary_key=True),
    sa.Column("call_id", sa.String(LABEL), primary_key=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("provider_call_id", sa.String(LABEL), nullable=True),
    sa.Column("run_id", sa.String(ID), nullable=True),
    sa.Column("tool", sa.String(LABEL), nullable=False),
    sa.Column("arguments", JSONText, nullable=False),
    sa.Column("arguments_hash", sa.String(64), nullable=False),
    sa.Column("result", JSONText, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("error", PlainText(long=True), nullable=True),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("ended_at", UTCDateTime, nullable=False),
    sa.Column("duration_ms", sa.Double, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Index(None, "session_id", "seq", unique=True),
    # Newest first by seq within each lookup: find_tool_call, tool history, provider id.
    sa.Index(None, "session_id", "tool", "arguments_hash", "seq"),
    sa.Index(None, "session_id", "tool", "seq"),
    sa.Index(None, "session_id", "provider_call_id", "seq"),
    **TABLE_OPTIONS,
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("session_id", sa.String(ID), _session_fk(), primary_key=True),
    sa.Column("run_id", sa.String(ID), primary_key=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("input", JSONText, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("started_at", UTCDateTime, nullable=True),
    sa.Column("ended_at", UTCDateTime, nullable=True),
    sa.Column("error", PlainText(long=True), nullable=True),
    sa.Column("output", JSONText, nullable=False),
    sa.Column("usage", JSONText, nullable=False),
    # The usage normalised, one entry per model (the run's ledger rows); NULL before
    # the ledger (0015), read as none.
    sa.Column("usage_entries", JSONText, nullable=True),
    sa.Column("metadata", JSONText, nullable=False),
    # Kept by every step insert, so a run is read and written without its steps.
    sa.Column("step_count", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("lease_seconds", sa.Double, nullable=True),
    sa.Column("lease_expires_at", UTCDateTime, nullable=True),
    sa.Index(None, "session_id", "seq", unique=True),
    **TABLE_OPTIONS,
)

run_steps = sa.Table(
    "run_steps",
    metadata,
    sa.Column("session_id", sa.String(ID), primary_key=True),
    sa.Column("run_id", sa.String(ID), primary_key=True),
    sa.Column("step_index", sa.Integer, primary_key=True),
    sa.Column("kind", sa.String(STEP_KIND_CHARS), nullable=False),
    sa.Column("name", PlainText(LABEL), nullable=True),
    sa.Column("input", JSONText, nullable=False),
    sa.Column("output", JSONText, nullable=False),
    sa.Column("status", sa.String(STEP_STATUS_CHARS), nullable=False),
    sa.Column("error", PlainText(long=True), nullable=True),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("ended_at", UTCDateTime, nullable=True),
    # Cascades from sessions through runs.
    sa.ForeignKeyConstraint(
        ["session_id", "run_id"], ["runs.session_id", "runs.run_id"], ondelete="CASCADE"
    ),
    **TABLE_OPTIONS,
)

audit_events = sa.Table(
    "audit_events",
    metadata,
    # SQLite AUTOINCREMENT: never reuse the seq of a deleted row ("seqs increase").
    sa.Column(
        "seq",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    sa.Column("session_id", sa.String(ID), nullable=False),
    sa.Column("user_id", sa.String(NAME_CHARS), nullable=False),
    sa.Column("actor", sa.String(LABEL), nullable=False),
    sa.Column("action", sa.String(64), nullable=False),
    sa.Column("at", UTCDateTime, nullable=False),
    sa.Column("version_before", sa.Integer, nullable=True),
    sa.Column("version_after", sa.Integer, nullable=True),
    sa.Column("request_id", sa.String(LABEL), nullable=True),
    sa.Column("details", JSONText, nullable=False),
    # The audit chain (agentsession.auditchain); NULL on events written before it.
    sa.Column("prev_hash", sa.String(64), nullable=True),
    sa.Column("hash", sa.String(64), nullable=True),
    sa.Index(None, "session_id", "seq"),
    sa.Index(None, "user_id", "seq"),  # a user's change feed
    sqlite_autoincrement=True,
    **TABLE_OPTIONS,
)

# One row (id 1): on MariaDB/MySQL, a write transaction holds a shared lock on it from
# its first audit event to its end, and a change feed reader takes it exclusively for a
# moment to learn which events are final (stores/sql/changes.py).
change_feed_gate = sa.Table(
    "change_feed_gate",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    **TABLE_OPTIONS,
)

idempotency_keys = sa.Table(
    "idempotency_keys",
    metadata,
    sa.Column("user_id", sa.String(NAME_CHARS), primary_key=True),
    sa.Column("scope", sa.String(64), primary_key=True),
    sa.Column("idem_key", sa.String(IDEMPOTENCY_KEY_CHARS), primary_key=True),
    sa.Column("fingerprint", sa.String(64), nullable=False),
    sa.Column("session_id", sa.String(ID), nullable=True),
    sa.Column("result", LONG_TEXT, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    # The user whose data the request wrote (the caller may be an admin): erased with them.
    sa.Column("owner_id", sa.String(NAME_CHARS), nullable=True),
    sa.Index(None, "session_id"),
    sa.Index(None, "created_at"),
    sa.Index(None, "owner_id"),
    **TABLE_OPTIONS,
)

_COUNT = sa.BigInteger()

# The usage ledger (docs/semantics.md, "Usage and budgets"): one row per model of a
# finished run, written in the run's finish transaction, deleted with the session (ON
# DELETE CASCADE). ``runs`` is 1 on a run's first row, 0 on its others. A user's sums
# read the index (user_id, at), a session's (session_id, at).
usage_ledger = sa.Table(
    "usage_ledger",
    metadata,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    sa.Column("session_id", sa.String(ID), _session_fk(), nullable=False),
    sa.Column("user_id", sa.String(NAME_CHARS), nullable=False),
    sa.Column("agent", sa.String(NAME_CHARS), nullable=False),
    sa.Column("run_id", sa.String(ID), nullable=False),
    sa.Column("model", sa.String(MODEL_CHARS), nullable=True),
    sa.Column("at", UTCDateTime, nullable=False),
    sa.Column("day", sa.String(10), nullable=False),
    sa.Column("input_tokens", _COUNT, nullable=False),
    sa.Column("output_tokens", _COUNT, nullable=False),
    sa.Column("cache_read_tokens", _COUNT, nullable=False),
    sa.Column("cache_write_tokens", _COUNT, nullable=False),
    sa.Column("reasoning_tokens", _COUNT, nullable=False),
    sa.Column("runs", sa.Integer, nullable=False),
    sa.Index(None, "user_id", "at"),
    sa.Index(None, "session_id", "at"),
    sqlite_autoincrement=True,
    **TABLE_OPTIONS,
)

# Budgets: a user's over all their sessions, and a session's (gone with the session).
user_budgets = sa.Table(
    "user_budgets",
    metadata,
    sa.Column("user_id", sa.String(NAME_CHARS), primary_key=True),
    sa.Column("max_tokens", _COUNT, nullable=True),
    sa.Column("max_cost", sa.Double, nullable=True),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    **TABLE_OPTIONS,
)

session_budgets = sa.Table(
    "session_budgets",
    metadata,
    sa.Column("session_id", sa.String(ID), _session_fk(), primary_key=True),
    sa.Column("user_id", sa.String(NAME_CHARS), nullable=False),
    sa.Column("max_tokens", _COUNT, nullable=True),
    sa.Column("max_cost", sa.Double, nullable=True),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    **TABLE_OPTIONS,
)

# API keys (agentsession.apikeys): the SHA-256 of each token, never the token. Shared by
# every instance of the service.
api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("key_id", sa.String(ID), primary_key=True),
    sa.Column("token_sha256", sa.String(64), nullable=False),
    sa.Column("user_id", sa.String(NAME_CHARS), nullable=False),
    sa.Column("name", sa.String(LABEL), nullable=True),
    sa.Column("admin", sa.Boolean, nullable=False),
    sa.Column("scope", sa.String(16), nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=True),
    sa.Column("last_used_at", UTCDateTime, nullable=True),
    sa.Column("revoked_at", UTCDateTime, nullable=True),
    # The agents the key is limited to, sorted and comma-joined; NULL: every agent.
    sa.Column("agents", sa.Text, nullable=True),
    sa.Index(None, "token_sha256", unique=True),
    sa.Index(None, "user_id"),
    **TABLE_OPTIONS,
)

# Failed authentications of the HTTP service, one row per failure (kind "address" or
# "key", the client address or key id, Unix seconds), shared by every instance
# (stores/sql/authfailures.py); rows older than the window are deleted as failures come.
auth_failures = sa.Table(
    "auth_failures",
    metadata,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("name", sa.String(LABEL), nullable=False),
    sa.Column("at", sa.Double, nullable=False),
    sa.Index(None, "kind", "name", "at"),
    sa.Index(None, "at"),
    sqlite_autoincrement=True,
    **TABLE_OPTIONS,
)

# The search index's texts (docs/guide.md, "Search"): one row per message with text, per
# session title and per tool call, written in the transaction that writes what it
# indexes and deleted with it (the session's rows by ON DELETE CASCADE). ``kind`` is
# message / title / tool_call; ``seq`` the message's or tool call's seq, 0 for a title.
# The id orders hits newest first and is the cursor. Each dialect's index on ``text`` is
# made by the migration, outside this metadata (:data:`NATIVE_SEARCH_OBJECTS`): an FTS5
# trigram table on SQLite, a pg_trgm GIN index on PostgreSQL; MariaDB has none.
search_texts = sa.Table(
    "search_texts",
    metadata,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    sa.Column("session_id", sa.String(ID), _session_fk(), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("role", sa.String(16), nullable=True),
    sa.Column("text", sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb"), nullable=False),
    sa.Index(None, "session_id", "kind", "seq", unique=True),
    sqlite_autoincrement=True,
    **TABLE_OPTIONS,
)

# The metadata index (docs/semantics.md, "Metadata filters"): one row per metadata entry a
# filter can name (agentsession.metafilter.indexed_entries), written with the session row
# and deleted with it. Exact compare on every dialect (binary_text); the index serves a
# user's filtered count alone, and an admin's by its (key, value) prefix.
session_metadata = sa.Table(
    "session_metadata",
    metadata,
    sa.Column("session_id", sa.String(ID), _session_fk(), primary_key=True),
    sa.Column("key", binary_text(METADATA_KEY_CHARS), primary_key=True),
    sa.Column("value", binary_text(METADATA_VALUE_CHARS), nullable=False),
    sa.Column("user_id", sa.String(NAME_CHARS), nullable=False),
    sa.Index(None, "key", "value", "user_id", "session_id"),
    **TABLE_OPTIONS,
)

# Store-wide values (agentsession.stores.sql.meta): the keyring mark (the id of the
# keyring the store's content is sealed with; never key material) and the head of the
# session chain ("<seq>:<hash>").
store_meta = sa.Table(
    "store_meta",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(255), nullable=False),
    **TABLE_OPTIONS,
)

# The session chain (agentsession.sessionchain): one link per session created and per
# session deleted, hash-chained store-wide; never deleted, not even by an erasure (it
# holds session ids and hashes only). ``seq`` is given by the writer, 1, 2, 3...
session_chain = sa.Table(
    "session_chain",
    metadata,
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("session_id", sa.String(ID), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("event_hash", sa.String(64), nullable=False),
    sa.Column("prev_hash", sa.String(64), nullable=True),
    sa.Column("hash", sa.String(64), nullable=False),
    **TABLE_OPTIONS,
)

#: The search index objects each dialect's migration makes beside :data:`search_texts`,
#: which this metadata does not describe (an FTS5 virtual table and its shadow tables,
#: an index on an operator class): the schema comparison leaves them out.
NATIVE_SEARCH_OBJECTS: Final = frozenset(
    {
        "search_fts",
        "search_fts_data",
        "search_fts_idx",
        "search_fts_docsize",
        "search_fts_config",
        "ix_search_texts_text_trgm",
    }
)
