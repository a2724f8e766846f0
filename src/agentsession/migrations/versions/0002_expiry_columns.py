"""Session expiry: ``status_reason``, ``expires_at`` and the index the TTL sweep uses.

Revision ID: 0002_expiry_columns
Revises: 0001_initial

Backfills ``expires_at = last_active_at + ttl_seconds`` for ACTIVE sessions with a TTL,
in Python over keyset-paged batches: date arithmetic differs in every SQL dialect, and
batches keep memory flat on large tables.
"""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from alembic import op

from agentsession.stores.sql.columns import UTCDateTime

revision = "0002_expiry_columns"
down_revision = "0001_initial"
branch_labels = None
depends_on = None

BATCH = 500

# Lightweight stand-in of the table as this revision sees it (not the current schema).
sessions = sa.table(
    "sessions",
    sa.column("session_id", sa.String),
    sa.column("status", sa.String),
    sa.column("last_active_at", UTCDateTime),
    sa.column("ttl_seconds", sa.Double),
    sa.column("expires_at", UTCDateTime),
)


def upgrade() -> None:
    """Add the two nullable columns and the index, then backfill ``expires_at``."""
    op.add_column("sessions", sa.Column("status_reason", sa.Text, nullable=True))
    op.add_column("sessions", sa.Column("expires_at", UTCDateTime, nullable=True))
    op.create_index(op.f("ix_sessions_status_expires_at"), "sessions", ["status", "expires_at"])
    _backfill_expires_at(op.get_bind())


def _backfill_expires_at(conn: sa.Connection) -> None:
    page = (
        sa.select(sessions.c.session_id, sessions.c.last_active_at, sessions.c.ttl_seconds)
        .where(
            sessions.c.status == "ACTIVE",
            sessions.c.ttl_seconds.is_not(None),
            sessions.c.session_id > sa.bindparam("after"),
        )
        .order_by(sessions.c.session_id)
        .limit(BATCH)
    )
    update = (
        sa.update(sessions)
        .where(sessions.c.session_id == sa.bindparam("b_session_id"))
        .values(expires_at=sa.bindparam("b_expires_at"))
    )
    after = ""
    while rows := conn.execute(page, {"after": after}).all():
        conn.execute(
            update,
            [
                {
                    "b_session_id": row.session_id,
                    "b_expires_at": row.last_active_at + timedelta(seconds=row.ttl_seconds),
                }
                for row in rows
            ],
        )
        after = rows[-1].session_id


def downgrade() -> None:
    """Drop the index and the two columns."""
    op.drop_index(op.f("ix_sessions_status_expires_at"), table_name="sessions")
    # In place (SQLite 3.35+ ALTER TABLE DROP COLUMN), never a batch rebuild: with
    # foreign keys on, dropping the old sessions table would cascade to every child row.
    op.drop_column("sessions", "expires_at")
    op.drop_column("sessions", "status_reason")
