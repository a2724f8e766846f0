"""Keys limited to agents: ``api_keys.agents``.

Revision ID: 0020_api_key_agents
Revises: 0019_audit_chain

* ``api_keys.agents`` (text, nullable): the agents a key is limited to, their names
  sorted and joined by commas (a comma is in no agent name); NULL for a key that may
  touch every agent's sessions, as every key written before this revision.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_api_key_agents"
down_revision = "0019_audit_chain"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the nullable column."""
    op.add_column("api_keys", sa.Column("agents", sa.Text, nullable=True))


def downgrade() -> None:
    """Drop it (every key then reaches every agent again)."""
    op.drop_column("api_keys", "agents")
