"""The change feed: an index of each user's audit events, and the feed's gate.

Revision ID: 0014_change_feed
Revises: 0013_search_index

* Index ``(user_id, seq)`` on ``audit_events``: a user's change feed reads its events
  in seq order from a cursor.
* ``change_feed_gate``: one row (id 1). On MariaDB/MySQL a write transaction holds a
  shared lock on it from its first audit event to its end, and a feed reader takes it
  exclusively for a moment to learn the newest seq no running transaction can still
  commit below (docs/semantics.md, "Change feed"). Other databases keep the table unused.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentsession.stores.sql.schema import TableOptions

revision = "0014_change_feed"
down_revision = "0013_search_index"
branch_labels = None
depends_on = None

TABLE_OPTIONS: TableOptions = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}
_INDEX = "ix_audit_events_user_id_seq"


def upgrade() -> None:
    """Create the index, and the gate with its row."""
    op.create_index(_INDEX, "audit_events", ["user_id", "seq"])
    gate = op.create_table(
        "change_feed_gate",
        sa.Column("id", sa.Integer, nullable=False, autoincrement=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_change_feed_gate")),
        **TABLE_OPTIONS,
    )
    assert gate is not None
    op.bulk_insert(gate, [{"id": 1}])


def downgrade() -> None:
    """Drop the gate and the index."""
    op.drop_table("change_feed_gate")
    op.drop_index(_INDEX, table_name="audit_events")
