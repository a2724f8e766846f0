"""API keys in the session store: ``api_keys``.

Revision ID: 0016_api_keys
Revises: 0015_usage_ledger

One row per key: its id, the SHA-256 of its token (never the token), its user, name,
admin flag, scope and times (created, expires, last used, revoked). Every instance of
the service reads it (agentsession.apikeys).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentsession.stores.sql.columns import UTCDateTime
from agentsession.stores.sql.schema import TableOptions

revision = "0016_api_keys"
down_revision = "0015_usage_ledger"
branch_labels = None
depends_on = None

TABLE_OPTIONS: TableOptions = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}


def upgrade() -> None:
    """Create the table and its indexes."""
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("admin", sa.Boolean, nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("expires_at", UTCDateTime, nullable=True),
        sa.Column("last_used_at", UTCDateTime, nullable=True),
        sa.Column("revoked_at", UTCDateTime, nullable=True),
        sa.PrimaryKeyConstraint("key_id", name=op.f("pk_api_keys")),
        **TABLE_OPTIONS,
    )
    op.create_index("ix_api_keys_token_sha256", "api_keys", ["token_sha256"], unique=True)
    op.create_index("ix_api_keys_user_id", "api_keys", ["user_id"])


def downgrade() -> None:
    """Drop the table (its keys are lost: export them first if they matter)."""
    op.drop_table("api_keys")
