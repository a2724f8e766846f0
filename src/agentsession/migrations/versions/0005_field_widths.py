"""Field widths: columns as wide as the longest value validation accepts.

Revision ID: 0005_field_widths
Revises: 0002_expiry_columns

Idempotency keys are accepted up to 255 characters but were stored in ``VARCHAR(128)``,
step kinds up to 128 in ``VARCHAR(64)`` and step statuses up to 128 in ``VARCHAR(32)``:
PostgreSQL and strict MariaDB refused the longer values with a database error, and
MariaDB in a non-strict mode cut them short (two keys sharing their first 128 characters
collided). Only widening: existing rows stay as they are. PostgreSQL and MariaDB change
the column in place; SQLite ignores widths, but its table is rebuilt (batch mode) so its
declared types match the schema. The widest key, ``idempotency_keys``' primary key, is
(128 + 64 + 255) x 4 = 1788 bytes in utf8mb4, within InnoDB's 3072.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_field_widths"
down_revision = "0004_tool_call_identity"
branch_labels = None
depends_on = None

# (table, column, width before, width after); written out, not taken from the current
# limits, so this revision keeps doing the same whatever they become.
WIDENED = [
    ("idempotency_keys", "idem_key", 128, 255),
    ("run_steps", "kind", 64, 128),
    ("run_steps", "status", 32, 128),
]


def upgrade() -> None:
    """Widen the three columns."""
    _resize(after=True)


def downgrade() -> None:
    """Narrow them back (fails on a database holding a value longer than before)."""
    _resize(after=False)


def _resize(*, after: bool) -> None:
    for table in dict.fromkeys(t for t, *_ in WIDENED):
        with op.batch_alter_table(table) as batch:
            for name, column, before, wider in WIDENED:
                if name != table:
                    continue
                batch.alter_column(
                    column,
                    existing_type=sa.String(before if after else wider),
                    type_=sa.String(wider if after else before),
                    existing_nullable=False,
                )
