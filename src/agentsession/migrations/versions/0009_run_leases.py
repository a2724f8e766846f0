"""Run leases: a run's lease and its deadline, and the session's, for the sweep.

Revision ID: 0009_run_leases
Revises: 0008_shared_memory

* ``runs.lease_seconds`` (the run's lease, NULL: none) and ``runs.lease_expires_at``
  (when it lapses unless a heartbeat extends it);
* ``sessions.lease_expires_at``: the deadline of the session's RUNNING run, kept on the
  row every access reads, so spotting a lapsed lease costs no extra query; an index on
  it serves the sweep.

Every column is nullable and stays NULL for existing rows: runs started before this
revision hold no lease, as before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentsession.stores.sql.columns import UTCDateTime

revision = "0009_run_leases"
down_revision = "0008_shared_memory"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the three nullable columns and the sweep's index."""
    op.add_column("runs", sa.Column("lease_seconds", sa.Double, nullable=True))
    op.add_column("runs", sa.Column("lease_expires_at", UTCDateTime, nullable=True))
    op.add_column("sessions", sa.Column("lease_expires_at", UTCDateTime, nullable=True))
    op.create_index(op.f("ix_sessions_lease_expires_at"), "sessions", ["lease_expires_at"])


def downgrade() -> None:
    """Drop the index and the columns (leases are forgotten; runs stay)."""
    op.drop_index(op.f("ix_sessions_lease_expires_at"), table_name="sessions")
    # In place (SQLite 3.35+ ALTER TABLE DROP COLUMN), never a batch rebuild: with
    # foreign keys on, dropping the old tables would cascade to their child rows.
    op.drop_column("sessions", "lease_expires_at")
    op.drop_column("runs", "lease_expires_at")
    op.drop_column("runs", "lease_seconds")
