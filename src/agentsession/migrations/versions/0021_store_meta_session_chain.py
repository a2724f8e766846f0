"""Store metadata and the session chain: ``store_meta`` and ``session_chain``.

Revision ID: 0021_store_meta_session_chain
Revises: 0020_api_key_agents

* ``store_meta`` (name, value): store-wide values, the keyring mark (the id of the
  keyring the store's content is sealed with, so a process opening the store without
  it is refused) and the head of the session chain.
* ``session_chain``: one hash-chained link per session created and per session deleted
  (:mod:`agentsession.sessionchain`), so ``audit verify`` notices a session removed
  with all its audit events. Sessions created before this revision have no link.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentsession.stores.sql.schema import TableOptions

revision = "0021_store_meta_session_chain"
down_revision = "0020_api_key_agents"
branch_labels = None
depends_on = None


TABLE_OPTIONS: TableOptions = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}


def upgrade() -> None:
    """Create the two tables, empty."""
    op.create_table(
        "store_meta",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("value", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_store_meta")),
        **TABLE_OPTIONS,
    )
    op.create_table(
        "session_chain",
        sa.Column("seq", sa.BigInteger, nullable=False, autoincrement=False),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("event_hash", sa.String(64), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=True),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_session_chain")),
        **TABLE_OPTIONS,
    )


def downgrade() -> None:
    """Drop them (the keyring mark and the session chain are lost)."""
    op.drop_table("session_chain")
    op.drop_table("store_meta")
