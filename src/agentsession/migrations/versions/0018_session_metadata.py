"""The metadata index: ``session_metadata``, one row per metadata entry a filter can name.

Revision ID: 0018_session_metadata
Revises: 0017_auth_failures

* ``session_metadata`` (session_id, key, value, user_id; primary key
  ``(session_id, key)``; deleted with its session): the session's top-level metadata
  entries whose key and match text fit a filter (:mod:`agentsession.metafilter`),
  with the index ``(key, value, user_id, session_id)`` that a filtered count or listing
  reads (docs/semantics.md, "Metadata filters"). ``key`` and ``value`` compare exactly:
  ``COLLATE "C"`` on PostgreSQL, ``utf8mb4_nopad_bin`` on MariaDB, SQLite's BINARY. The
  index fits MariaDB's 3072-byte limit: (64 + 200 + 128 + 64) x 4 bytes.

The existing sessions are indexed in batches of :data:`BATCH`, read by keyset on
``session_id``, so memory does not grow with the database.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql, postgresql

from agentsession.metafilter import indexed_entries
from agentsession.stores.sql.columns import JSONText
from agentsession.stores.sql.schema import TableOptions

revision = "0018_session_metadata"
down_revision = "0017_auth_failures"
branch_labels = None
depends_on = None

#: Sessions read and indexed per batch.
BATCH = 1000

# Written out, not taken from the current limits: this revision stays what it was.
ID = 64
KEY_CHARS = 64
VALUE_CHARS = 200
NAME_CHARS = 128

_OPTIONS: TableOptions = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}

_sessions = sa.table(
    "sessions", sa.column("session_id"), sa.column("user_id"), sa.column("metadata", JSONText)
)
_rows = sa.table(
    "session_metadata", *(sa.column(c) for c in ("session_id", "key", "value", "user_id"))
)


def _binary_text(length: int) -> sa.types.TypeEngine[str]:
    return (
        sa.String(length)
        .with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")
        .with_variant(mysql.VARCHAR(length, collation="utf8mb4_nopad_bin"), "mysql", "mariadb")
    )


def upgrade() -> None:
    """Create the table and its index, then index the existing sessions."""
    op.create_table(
        "session_metadata",
        sa.Column(
            "session_id",
            sa.String(ID),
            sa.ForeignKey(
                "sessions.session_id",
                ondelete="CASCADE",
                name="fk_session_metadata_session_id_sessions",
            ),
            nullable=False,
        ),
        sa.Column("key", _binary_text(KEY_CHARS), nullable=False),
        sa.Column("value", _binary_text(VALUE_CHARS), nullable=False),
        sa.Column("user_id", sa.String(NAME_CHARS), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "key", name="pk_session_metadata"),
        **_OPTIONS,
    )
    op.create_index(
        "ix_session_metadata_key_value_user_id_session_id",
        "session_metadata",
        ["key", "value", "user_id", "session_id"],
    )
    for rows in _existing():
        op.bulk_insert(_rows, rows)


def _existing() -> Iterator[list[dict[str, Any]]]:
    """Batches of index rows for the sessions already stored."""
    bind = op.get_bind()
    after: str | None = None
    while True:
        stmt = sa.select(_sessions).order_by(_sessions.c.session_id).limit(BATCH)
        if after is not None:
            stmt = stmt.where(_sessions.c.session_id > after)
        batch = bind.execute(stmt).mappings().all()
        if not batch:
            return
        after = batch[-1]["session_id"]
        rows = [
            {"session_id": r["session_id"], "user_id": r["user_id"], "key": k, "value": v}
            for r in batch
            for k, v in indexed_entries(r["metadata"] or {})
        ]
        if rows:
            yield rows


def downgrade() -> None:
    """Drop the table."""
    op.drop_table("session_metadata")
