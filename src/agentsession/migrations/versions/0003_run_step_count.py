"""Run step counts: ``runs.step_count``, so a run is read and written without its steps.

Revision ID: 0003_run_step_count
Revises: 0002_expiry_columns

Adds ``step_count`` (NOT NULL, server default 0) and backfills it from ``run_steps`` with
one ``UPDATE`` and a correlated ``COUNT(*)`` per run, which every supported dialect runs
over the ``run_steps`` primary key ``(session_id, run_id, step_index)``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_run_step_count"
down_revision = "0002_expiry_columns"
branch_labels = None
depends_on = None

# Lightweight stand-ins of the tables as this revision sees them (not the current schema).
runs = sa.table(
    "runs",
    sa.column("session_id", sa.String),
    sa.column("run_id", sa.String),
    sa.column("step_count", sa.Integer),
)
run_steps = sa.table(
    "run_steps", sa.column("session_id", sa.String), sa.column("run_id", sa.String)
)


def upgrade() -> None:
    """Add ``runs.step_count`` and set it to each run's number of steps."""
    op.add_column(
        "runs", sa.Column("step_count", sa.Integer, nullable=False, server_default=sa.text("0"))
    )
    count = (
        sa.select(sa.func.count())
        .select_from(run_steps)
        .where(run_steps.c.session_id == runs.c.session_id, run_steps.c.run_id == runs.c.run_id)
        .scalar_subquery()
    )
    op.get_bind().execute(sa.update(runs).values(step_count=count))


def downgrade() -> None:
    """Drop ``runs.step_count``."""
    # In place (SQLite 3.35+ ALTER TABLE DROP COLUMN), never a batch rebuild: with
    # foreign keys on, dropping the old runs table would cascade to run_steps.
    op.drop_column("runs", "step_count")
