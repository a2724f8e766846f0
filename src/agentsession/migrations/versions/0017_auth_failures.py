"""Failed authentications counted in the store: ``auth_failures``.

Revision ID: 0017_auth_failures
Revises: 0016_api_keys

One row per failed authentication of the HTTP service (kind ``address`` or ``key``,
the client address or key id, the time in Unix seconds), so every worker process and
instance counts the same moving window (agentsession.stores.sql.authfailures).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from agentsession.stores.sql.schema import TableOptions

revision = "0017_auth_failures"
down_revision = "0016_api_keys"
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
        "auth_failures",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
            autoincrement=True,
        ),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("at", sa.Double, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_failures")),
        sqlite_autoincrement=True,
        **TABLE_OPTIONS,
    )
    op.create_index("ix_auth_failures_kind_name_at", "auth_failures", ["kind", "name", "at"])
    op.create_index("ix_auth_failures_at", "auth_failures", ["at"])


def downgrade() -> None:
    """Drop the table (the counts start over)."""
    op.drop_table("auth_failures")
