"""The owner of each idempotency record: ``idempotency_keys.owner_id``.

Revision ID: 0012_idempotency_owner
Revises: 0011_memory_history

``owner_id`` (nullable, indexed) names the user whose data the keyed request wrote,
beside ``user_id``, the caller: an admin's write on a user's behalf is that user's too,
and the user's erasure purges it. Existing rows are filled in: a session's write from
its session's owner, a shared-memory write from the document's ``user_id`` in the
stored result (NULL for the ``app`` document, which is no user's).
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0012_idempotency_owner"
down_revision = "0011_memory_history"
branch_labels = None
depends_on = None

# Written out, not taken from the current limits: this revision stays what it was.
NAME_CHARS = 128
_INDEX = "ix_idempotency_keys_owner_id"

_keys = sa.table(
    "idempotency_keys",
    *(sa.column(c) for c in ("user_id", "scope", "idem_key", "session_id", "result")),
    sa.column("owner_id"),
)
_sessions = sa.table("sessions", sa.column("session_id"), sa.column("user_id"))


def upgrade() -> None:
    """Add the column and its index, then fill it in for the existing rows."""
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.add_column(sa.Column("owner_id", sa.String(NAME_CHARS), nullable=True))
        batch.create_index(_INDEX, ["owner_id"])
    owner = (
        sa.select(_sessions.c.user_id)
        .where(_sessions.c.session_id == _keys.c.session_id)
        .scalar_subquery()
    )
    op.execute(_keys.update().where(_keys.c.session_id.is_not(None)).values(owner_id=owner))
    bind = op.get_bind()
    shared = bind.execute(
        sa.select(_keys.c.user_id, _keys.c.scope, _keys.c.idem_key, _keys.c.result).where(
            _keys.c.session_id.is_(None), _keys.c.scope == "update_shared_memory"
        )
    ).all()
    for user_id, scope, key, result in shared:
        document = json.loads(result)
        if isinstance(document, dict) and isinstance(document.get("user_id"), str):
            bind.execute(
                _keys.update()
                .where(_keys.c.user_id == user_id, _keys.c.scope == scope)
                .where(_keys.c.idem_key == key)
                .values(owner_id=document["user_id"])
            )


def downgrade() -> None:
    """Drop the index and the column."""
    with op.batch_alter_table("idempotency_keys") as batch:
        batch.drop_index(_INDEX)
        batch.drop_column("owner_id")
