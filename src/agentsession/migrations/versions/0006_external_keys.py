"""External keys: a caller-chosen name per session, unique per owner and agent.

Revision ID: 0006_external_keys
Revises: 0005_field_widths

* ``sessions.external_key``: the caller's own name of the session (a framework's
  session or thread id), up to 256 characters; NULL when none was given (every
  existing row).
* ``sessions.external_key_hash``: hex SHA-256 of the key's UTF-8, NULL with it. The
  unique index ``(user_id, agent, external_key_hash)`` makes a key unique per owner and
  agent (NULLs never collide). It indexes the hash, not the key: MariaDB compares
  ``VARCHAR`` with PAD SPACE (``"a"`` would equal ``"a "``), while keys compare exactly,
  and the hash is a fixed 64 ASCII characters on every dialect.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_external_keys"
down_revision = "0005_field_widths"
branch_labels = None
depends_on = None

# Written out, not taken from the current limits: this revision stays what it was.
KEY_CHARS = 256
HASH_CHARS = 64
INDEX = ("user_id", "agent", "external_key_hash")


def _name() -> str:
    return op.f(f"ix_sessions_{'_'.join(INDEX)}")


def upgrade() -> None:
    """Add the two columns and the unique index."""
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("external_key", sa.String(KEY_CHARS), nullable=True))
        batch.add_column(sa.Column("external_key_hash", sa.String(HASH_CHARS), nullable=True))
    op.create_index(_name(), "sessions", list(INDEX), unique=True)


def downgrade() -> None:
    """Drop the index and the columns (the keys are lost)."""
    op.drop_index(_name(), table_name="sessions")
    # In place (SQLite 3.35+ ALTER TABLE DROP COLUMN), never a batch rebuild: with
    # foreign keys on, dropping the old sessions table would cascade to every child row.
    op.drop_column("sessions", "external_key_hash")
    op.drop_column("sessions", "external_key")
