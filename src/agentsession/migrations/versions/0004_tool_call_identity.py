"""Tool-call identity and the indexes that serve lookups and listings.

Revision ID: 0004_tool_call_identity
Revises: 0002_expiry_columns

* ``tool_calls.provider_call_id``: the model provider's id of a call, not unique
  (providers reuse ids within a conversation); existing rows keep NULL.
* Tool-call lookups newest first by ``seq``: ``(session_id, tool, arguments_hash, seq)``
  replaces ``(session_id, tool, arguments_hash)``, plus ``(session_id, tool, seq)`` for
  one tool's history and ``(session_id, provider_call_id, seq)``.
* Session listings by status or agent, per user and for every user, in
  ``(updated_at, session_id)`` order, and the due sessions of one user.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_tool_call_identity"
down_revision = "0003_run_step_count"
branch_labels = None
depends_on = None

LABEL = 255

SESSION_INDEXES = (
    ("user_id", "status", "updated_at", "session_id"),
    ("user_id", "agent", "updated_at", "session_id"),
    ("status", "updated_at", "session_id"),
    ("agent", "updated_at", "session_id"),
    ("user_id", "status", "expires_at"),
)
TOOL_CALL_INDEXES = (
    ("session_id", "tool", "arguments_hash", "seq"),
    ("session_id", "tool", "seq"),
    ("session_id", "provider_call_id", "seq"),
)
OLD_FIND_INDEX = ("session_id", "tool", "arguments_hash")


def _name(table: str, columns: tuple[str, ...]) -> str:
    return op.f(f"ix_{table}_{'_'.join(columns)}")


def upgrade() -> None:
    """Add the column, swap the find index for one ending in ``seq``, add the others."""
    op.add_column("tool_calls", sa.Column("provider_call_id", sa.String(LABEL), nullable=True))
    for columns in TOOL_CALL_INDEXES:
        op.create_index(_name("tool_calls", columns), "tool_calls", list(columns))
    op.drop_index(_name("tool_calls", OLD_FIND_INDEX), table_name="tool_calls")
    for columns in SESSION_INDEXES:
        op.create_index(_name("sessions", columns), "sessions", list(columns))


def downgrade() -> None:
    """Drop the new indexes and the column; restore the old find index."""
    for columns in SESSION_INDEXES:
        op.drop_index(_name("sessions", columns), table_name="sessions")
    op.create_index(_name("tool_calls", OLD_FIND_INDEX), "tool_calls", list(OLD_FIND_INDEX))
    for columns in TOOL_CALL_INDEXES:
        op.drop_index(_name("tool_calls", columns), table_name="tool_calls")
    with op.batch_alter_table("tool_calls") as batch:
        batch.drop_column("provider_call_id")
