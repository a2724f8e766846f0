"""Working-memory history, rewinds, and the fork columns of sessions.

Revision ID: 0011_memory_history
Revises: 0010_summaries

* ``memory_history``: one row per working-memory write, primary key
  ``(session_id, version)``, index ``(session_id, at_seq, version)``; ``at_seq`` is the
  session's ``message_count`` once the write was stored (docs/semantics.md,
  "Working-memory history"). Each existing ``working_memory`` row seeds one history row
  (its version, at the session's current ``message_count``) in one ``INSERT ... SELECT``.
* ``rewinds`` (primary key ``(session_id, number)``) records every rewind of a session;
  ``rewound_messages`` (primary key ``(session_id, rewind_number, seq)``) keeps the
  messages a hiding rewind took out of the history.
* ``sessions.parent_session_id`` and ``sessions.fork_seq`` (nullable, NULL for every
  existing session: no fork), and an index ``(parent_session_id, updated_at,
  session_id)`` that lists a parent's forks.

Every new table is deleted with its session (``ON DELETE CASCADE``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentsession.stores.sql.columns import JSONText, UTCDateTime
from agentsession.stores.sql.schema import TableOptions

revision = "0011_memory_history"
down_revision = "0010_summaries"
branch_labels = None
depends_on = None

# Written out, not taken from the current limits: this revision stays what it was.
ID = 64
TABLE_OPTIONS: TableOptions = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}
_FORK_INDEX = "ix_sessions_parent_session_id_updated_at_session_id"


def _session_id(table: str) -> sa.Column[str]:
    """The ``session_id`` column of a new table, deleted with its session."""
    fk = sa.ForeignKey(
        "sessions.session_id", ondelete="CASCADE", name=op.f(f"fk_{table}_session_id_sessions")
    )
    return sa.Column("session_id", sa.String(ID), fk, nullable=False)


def upgrade() -> None:
    """Create the three tables, seed the history, add the fork columns and index."""
    op.create_table(
        "memory_history",
        _session_id("memory_history"),
        sa.Column("version", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("at_seq", sa.Integer, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=True),
        sa.Column("data", JSONText, nullable=False),
        sa.PrimaryKeyConstraint("session_id", "version", name=op.f("pk_memory_history")),
        **TABLE_OPTIONS,
    )
    op.create_index(
        op.f("ix_memory_history_session_id_at_seq_version"),
        "memory_history",
        ["session_id", "at_seq", "version"],
    )
    op.execute(
        "INSERT INTO memory_history (session_id, version, at_seq, updated_at, data) "
        "SELECT w.session_id, w.version, s.message_count, w.updated_at, w.data "
        "FROM working_memory w JOIN sessions s ON s.session_id = w.session_id"
    )
    op.create_table(
        "rewinds",
        _session_id("rewinds"),
        sa.Column("number", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("to_seq", sa.Integer, nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("memory_version", sa.Integer, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("session_id", "number", name=op.f("pk_rewinds")),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "rewound_messages",
        _session_id("rewound_messages"),
        sa.Column("rewind_number", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("seq", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("message_id", sa.String(ID), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(ID), nullable=True),
        sa.Column("payload", JSONText, nullable=False),
        sa.PrimaryKeyConstraint(
            "session_id", "rewind_number", "seq", name=op.f("pk_rewound_messages")
        ),
        **TABLE_OPTIONS,
    )
    op.add_column("sessions", sa.Column("parent_session_id", sa.String(ID), nullable=True))
    op.add_column("sessions", sa.Column("fork_seq", sa.Integer, nullable=True))
    op.create_index(
        op.f(_FORK_INDEX), "sessions", ["parent_session_id", "updated_at", "session_id"]
    )


def downgrade() -> None:
    """Drop the fork index and columns and the three tables (history, rewinds and
    hidden messages are lost; sessions and their current memory stay)."""
    op.drop_index(op.f(_FORK_INDEX), table_name="sessions")
    # In place (SQLite 3.35+ ALTER TABLE DROP COLUMN), never a batch rebuild: with
    # foreign keys on, dropping the old table would cascade to its child rows.
    op.drop_column("sessions", "fork_seq")
    op.drop_column("sessions", "parent_session_id")
    op.drop_table("rewound_messages")
    op.drop_table("rewinds")
    op.drop_table("memory_history")
