"""Initial schema: sessions and everything that belongs to them.

Revision ID: 0001_initial
Revises: (none)

Written out in full rather than derived from ``agentsession.stores.sql.schema``, so this
revision keeps creating the same tables however the current schema moves on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import sqlalchemy as sa
from alembic import op

from agentsession.stores.sql.columns import LONG_TEXT, JSONText, UTCDateTime

if TYPE_CHECKING:
    # Only the type (which keywords ``**`` passes): the values stay written out below.
    from agentsession.stores.sql.schema import TableOptions

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None

ID = 64
NAME = 128
LABEL = 255
TABLE_OPTIONS: Final[TableOptions] = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}


def _session_fk(table: str) -> sa.ForeignKey:
    return sa.ForeignKey(
        "sessions.session_id", ondelete="CASCADE", name=op.f(f"fk_{table}_session_id_sessions")
    )


def upgrade() -> None:
    """Create the eight tables and their indexes."""
    _create_sessions()
    _create_messages()
    _create_working_memory()
    _create_tool_calls()
    _create_runs()
    _create_run_steps()
    _create_audit_events()
    _create_idempotency_keys()


def _create_sessions() -> None:
    """The sessions, with indexes for listing by user and by recency."""
    op.create_table(
        "sessions",
        sa.Column("session_id", sa.String(ID), nullable=False),
        sa.Column("user_id", sa.String(NAME), nullable=False),
        sa.Column("agent", sa.String(NAME), nullable=False),
        sa.Column("title", sa.Text, nullable=True),
        sa.Column("metadata", JSONText, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("last_active_at", UTCDateTime, nullable=False),
        sa.Column("closed_at", UTCDateTime, nullable=True),
        sa.Column("expired_at", UTCDateTime, nullable=True),
        sa.Column("ttl_seconds", sa.Double, nullable=True),
        sa.Column("message_count", sa.Integer, nullable=False),
        sa.Column("run_count", sa.Integer, nullable=False),
        sa.Column("tool_call_count", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_sessions")),
        **TABLE_OPTIONS,
    )
    op.create_index(
        op.f("ix_sessions_user_id_updated_at_session_id"),
        "sessions",
        ["user_id", "updated_at", "session_id"],
    )
    op.create_index(
        op.f("ix_sessions_updated_at_session_id"), "sessions", ["updated_at", "session_id"]
    )


def _create_messages() -> None:
    """The messages, one seq per session."""
    op.create_table(
        "messages",
        sa.Column("message_id", sa.String(ID), nullable=False),
        sa.Column("session_id", sa.String(ID), _session_fk("messages"), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(ID), nullable=True),
        sa.Column("payload", JSONText, nullable=False),
        sa.PrimaryKeyConstraint("message_id", name=op.f("pk_messages")),
        **TABLE_OPTIONS,
    )
    op.create_index(
        op.f("ix_messages_session_id_seq"), "messages", ["session_id", "seq"], unique=True
    )


def _create_working_memory() -> None:
    """One working-memory document per session."""
    op.create_table(
        "working_memory",
        sa.Column("session_id", sa.String(ID), _session_fk("working_memory"), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=True),
        sa.Column("data", JSONText, nullable=False),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_working_memory")),
        **TABLE_OPTIONS,
    )


def _create_tool_calls() -> None:
    """The tool history, with the lookup of an earlier identical call."""
    op.create_table(
        "tool_calls",
        sa.Column("session_id", sa.String(ID), _session_fk("tool_calls"), nullable=False),
        sa.Column("call_id", sa.String(LABEL), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("run_id", sa.String(ID), nullable=True),
        sa.Column("tool", sa.String(LABEL), nullable=False),
        sa.Column("arguments", JSONText, nullable=False),
        sa.Column("arguments_hash", sa.String(64), nullable=False),
        sa.Column("result", JSONText, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", LONG_TEXT, nullable=True),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("ended_at", UTCDateTime, nullable=False),
        sa.Column("duration_ms", sa.Double, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("session_id", "call_id", name=op.f("pk_tool_calls")),
        **TABLE_OPTIONS,
    )
    op.create_index(
        op.f("ix_tool_calls_session_id_seq"), "tool_calls", ["session_id", "seq"], unique=True
    )
    op.create_index(
        op.f("ix_tool_calls_session_id_tool_arguments_hash"),
        "tool_calls",
        ["session_id", "tool", "arguments_hash"],
    )


def _create_runs() -> None:
    """The runs, one seq per session."""
    op.create_table(
        "runs",
        sa.Column("session_id", sa.String(ID), _session_fk("runs"), nullable=False),
        sa.Column("run_id", sa.String(ID), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("input", JSONText, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=True),
        sa.Column("ended_at", UTCDateTime, nullable=True),
        sa.Column("error", LONG_TEXT, nullable=True),
        sa.Column("output", JSONText, nullable=False),
        sa.Column("usage", JSONText, nullable=False),
        sa.Column("metadata", JSONText, nullable=False),
        sa.PrimaryKeyConstraint("session_id", "run_id", name=op.f("pk_runs")),
        **TABLE_OPTIONS,
    )
    op.create_index(op.f("ix_runs_session_id_seq"), "runs", ["session_id", "seq"], unique=True)


def _create_run_steps() -> None:
    """The steps of each run."""
    op.create_table(
        "run_steps",
        sa.Column("session_id", sa.String(ID), nullable=False),
        sa.Column("run_id", sa.String(ID), nullable=False),
        sa.Column("step_index", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("name", sa.String(LABEL), nullable=True),
        sa.Column("input", JSONText, nullable=False),
        sa.Column("output", JSONText, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("error", LONG_TEXT, nullable=True),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("ended_at", UTCDateTime, nullable=True),
        sa.PrimaryKeyConstraint("session_id", "run_id", "step_index", name=op.f("pk_run_steps")),
        sa.ForeignKeyConstraint(
            ["session_id", "run_id"],
            ["runs.session_id", "runs.run_id"],
            name=op.f("fk_run_steps_session_id_runs"),
            ondelete="CASCADE",
        ),
        **TABLE_OPTIONS,
    )


def _create_audit_events() -> None:
    """The audit log (kept as the tombstone of a deleted session)."""
    op.create_table(
        "audit_events",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
            autoincrement=True,
        ),
        sa.Column("session_id", sa.String(ID), nullable=False),
        sa.Column("user_id", sa.String(NAME), nullable=False),
        sa.Column("actor", sa.String(LABEL), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("at", UTCDateTime, nullable=False),
        sa.Column("version_before", sa.Integer, nullable=True),
        sa.Column("version_after", sa.Integer, nullable=True),
        sa.Column("request_id", sa.String(LABEL), nullable=True),
        sa.Column("details", JSONText, nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_audit_events")),
        sqlite_autoincrement=True,
        **TABLE_OPTIONS,
    )
    op.create_index(op.f("ix_audit_events_session_id_seq"), "audit_events", ["session_id", "seq"])


def _create_idempotency_keys() -> None:
    """The idempotency records, purged by age and with their session."""
    op.create_table(
        "idempotency_keys",
        sa.Column("user_id", sa.String(NAME), nullable=False),
        sa.Column("scope", sa.String(64), nullable=False),
        sa.Column("idem_key", sa.String(NAME), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("session_id", sa.String(ID), nullable=True),
        sa.Column("result", LONG_TEXT, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("user_id", "scope", "idem_key", name=op.f("pk_idempotency_keys")),
        **TABLE_OPTIONS,
    )
    op.create_index(op.f("ix_idempotency_keys_session_id"), "idempotency_keys", ["session_id"])
    op.create_index(op.f("ix_idempotency_keys_created_at"), "idempotency_keys", ["created_at"])


def downgrade() -> None:
    """Drop every table (children first)."""
    for table in (
        "idempotency_keys",
        "audit_events",
        "run_steps",
        "runs",
        "tool_calls",
        "working_memory",
        "messages",
        "sessions",
    ):
        op.drop_table(table)
