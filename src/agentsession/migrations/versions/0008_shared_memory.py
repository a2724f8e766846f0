"""Shared memory: JSON documents shared by the sessions of an agent or of a user.

Revision ID: 0008_shared_memory
Revises: 0007_records

* ``shared_memory(agent, user_id, version, updated_at, data)``, primary key
  ``(agent, user_id)``: ``user_id`` is ``''`` for the app scope (every user of the
  agent). ``version`` counts the writes; ``data`` is the JSON object. An index on
  ``user_id`` serves the erasure of a user's documents. No foreign key: a document
  outlives every session.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentsession.stores.sql.columns import JSONText, UTCDateTime

revision = "0008_shared_memory"
down_revision = "0007_records"
branch_labels = None
depends_on = None

# Written out, not taken from the current limits: this revision stays what it was.
NAME_CHARS = 128


def upgrade() -> None:
    """Create the table and its index."""
    op.create_table(
        "shared_memory",
        sa.Column("agent", sa.String(NAME_CHARS), nullable=False),
        sa.Column("user_id", sa.String(NAME_CHARS), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=True),
        sa.Column("data", JSONText, nullable=False),
        sa.PrimaryKeyConstraint("agent", "user_id", name=op.f("pk_shared_memory")),
        mysql_engine="InnoDB",
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )
    op.create_index(op.f("ix_shared_memory_user_id"), "shared_memory", ["user_id"])


def downgrade() -> None:
    """Drop the table (the documents are lost)."""
    op.drop_index(op.f("ix_shared_memory_user_id"), table_name="shared_memory")
    op.drop_table("shared_memory")
