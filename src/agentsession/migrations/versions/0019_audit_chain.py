"""The audit chain: each audit event's hash and its predecessor's, and each session's head.

Revision ID: 0019_audit_chain
Revises: 0018_session_metadata

* ``audit_events.prev_hash`` and ``audit_events.hash``: SHA-256 hex of the event's
  canonical encoding chained after the session's previous event
  (:mod:`agentsession.auditchain`). NULL on events written before this revision: a
  session's chain starts at its first hashed event.
* ``sessions.audit_head``: the hash of the session's newest audit event, so an append
  chains its event without reading the previous one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_audit_chain"
down_revision = "0018_session_metadata"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the three nullable columns."""
    op.add_column("audit_events", sa.Column("prev_hash", sa.String(64), nullable=True))
    op.add_column("audit_events", sa.Column("hash", sa.String(64), nullable=True))
    op.add_column("sessions", sa.Column("audit_head", sa.String(64), nullable=True))


def downgrade() -> None:
    """Drop them (the chain is lost)."""
    op.drop_column("sessions", "audit_head")
    op.drop_column("audit_events", "hash")
    op.drop_column("audit_events", "prev_hash")
