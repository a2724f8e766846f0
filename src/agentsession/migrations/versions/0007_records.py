"""Session records: opaque ``(namespace, key) -> (data, meta)`` per session.

Revision ID: 0007_records
Revises: 0006_external_keys

* ``session_records``: primary key ``(session_id, namespace, key)``, deleted with its
  session (``ON DELETE CASCADE``). ``namespace`` and ``key`` sort by Unicode code point
  and compare exactly: ``COLLATE "C"`` on PostgreSQL, ``utf8mb4_nopad_bin`` on MariaDB,
  SQLite's default BINARY. ``data`` is ``BLOB`` / ``BYTEA`` / ``LONGBLOB``, ``meta`` JSON
  text. The key fits MariaDB's 3072-byte index limit: (64 + 128 + 512) x 4 bytes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql

from agentsession.stores.sql.columns import JSONText, UTCDateTime

revision = "0007_records"
down_revision = "0006_external_keys"
branch_labels = None
depends_on = None

# Written out, not taken from the current limits: this revision stays what it was.
ID = 64
NAMESPACE_CHARS = 128
KEY_CHARS = 512


def _binary_text(length: int) -> sa.types.TypeEngine[str]:
    return (
        sa.String(length)
        .with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")
        .with_variant(mysql.VARCHAR(length, collation="utf8mb4_nopad_bin"), "mysql", "mariadb")
    )


def upgrade() -> None:
    """Create the table."""
    op.create_table(
        "session_records",
        sa.Column(
            "session_id",
            sa.String(ID),
            sa.ForeignKey(
                "sessions.session_id",
                ondelete="CASCADE",
                name=op.f("fk_session_records_session_id_sessions"),
            ),
            nullable=False,
        ),
        sa.Column("namespace", _binary_text(NAMESPACE_CHARS), nullable=False),
        sa.Column("key", _binary_text(KEY_CHARS), nullable=False),
        sa.Column(
            "data",
            sa.LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb"),
            nullable=False,
        ),
        sa.Column("meta", JSONText, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("session_id", "namespace", "key", name=op.f("pk_session_records")),
        mysql_engine="InnoDB",
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
    )


def downgrade() -> None:
    """Drop the table (the records are lost)."""
    op.drop_table("session_records")
