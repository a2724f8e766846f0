"""Summaries: stored summaries of a session's seq ranges (compaction).

Revision ID: 0010_summaries
Revises: 0009_run_leases

* ``summaries``: primary key ``(session_id, number)`` (numbers 1, 2, 3... per
  session), deleted with its session (``ON DELETE CASCADE``). ``text`` is free text
  (``LONGTEXT`` on MariaDB, whose ``TEXT`` holds 64 KiB; kept escaped on PostgreSQL,
  which cannot hold NUL); the primary key serves every read (newest first or a range).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentsession.stores.sql.columns import PlainText, UTCDateTime

revision = "0010_summaries"
down_revision = "0009_run_leases"
branch_labels = None
depends_on = None

# Written out, not taken from the current limits: this revision stays what it was.
ID = 64
LABEL_CHARS = 255


def upgrade() -> None:
    """Create the table."""
    op.create_table(
        "summaries",
        sa.Column(
            "session_id",
            sa.String(ID),
            sa.ForeignKey(
                "sessions.session_id",
                ondelete="CASCADE",
                name=op.f("fk_summaries_session_id_sessions"),
            ),
            nullable=False,
        ),
        sa.Column("number", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("from_seq", sa.Integer, nullable=False),
        sa.Column("to_seq", sa.Integer, nullable=False),
        sa.Column("author", sa.String(LABEL_CHARS), nullable=False),
        sa.Column("model", sa.String(LABEL_CHARS), nullable=True),
        sa.Column("summary_tokens", sa.Integer, nullable=False),
        sa.Column("replaced_tokens", sa.Integer, nullable=False),
        sa.Column("tokenizer", sa.String(LABEL_CHARS), nullable=False),
        sa.Column("supersedes", sa.Integer, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("text", PlainText(long=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "number", name=op.f("pk_summaries")),
        mysql_engine="InnoDB",
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )


def downgrade() -> None:
    """Drop the table (the summaries are lost)."""
    op.drop_table("summaries")
