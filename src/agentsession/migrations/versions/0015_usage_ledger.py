"""The usage ledger and budgets.

Revision ID: 0015_usage_ledger
Revises: 0014_change_feed

* ``runs.usage_entries``: a run's usage normalised, one entry per model (nullable:
  NULL reads as none).
* ``usage_ledger``: one row per model of a finished run (session, user, agent, run,
  model, finish time and UTC day, the five counts, ``runs``); indexes
  ``(user_id, at)`` and ``(session_id, at)``; deleted with its session.
* ``user_budgets`` (per user) and ``session_budgets`` (per session, deleted with it).

The usage of runs finished before this revision is entered in the ledger in batches of
:data:`BATCH` runs (model unknown: NULL), read by keyset on the runs' key, so memory
does not grow with the database. A run whose usage names one count twice (say
``input_tokens`` and ``prompt_tokens``) is left out: which one was meant cannot be
told.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import op

from agentsession.errors import ValidationError
from agentsession.stores.sql.columns import JSONText, UTCDateTime
from agentsession.stores.sql.schema import TableOptions
from agentsession.usage import KINDS, normalise

revision = "0015_usage_ledger"
down_revision = "0014_change_feed"
branch_labels = None
depends_on = None

#: Runs read and entered per batch.
BATCH = 1000

_OPTIONS: TableOptions = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}

_runs = sa.table(
    "runs",
    sa.column("session_id"),
    sa.column("run_id"),
    sa.column("status"),
    sa.column("ended_at", UTCDateTime()),
    sa.column("usage", JSONText()),
    sa.column("usage_entries", JSONText()),
)
_sessions = sa.table("sessions", sa.column("session_id"), sa.column("user_id"), sa.column("agent"))
_ledger = sa.table(
    "usage_ledger",
    *(sa.column(c) for c in ("session_id", "user_id", "agent", "run_id", "model", "day")),
    sa.column("at", UTCDateTime()),
    *(sa.column(c, sa.BigInteger()) for c in KINDS),
    sa.column("runs", sa.Integer()),
)


def _fk(table: str) -> sa.ForeignKey:
    return sa.ForeignKey(
        "sessions.session_id", ondelete="CASCADE", name=f"fk_{table}_session_id_sessions"
    )


def upgrade() -> None:
    """Add the column and the tables, then enter the finished runs' usage."""
    op.add_column("runs", sa.Column("usage_entries", JSONText, nullable=True))
    op.create_table(
        "usage_ledger",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("session_id", sa.String(64), _fk("usage_ledger"), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("model", sa.String(128), nullable=True),
        sa.Column("at", UTCDateTime, nullable=False),
        sa.Column("day", sa.String(10), nullable=False),
        *(sa.Column(kind, sa.BigInteger(), nullable=False) for kind in KINDS),
        sa.Column("runs", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_usage_ledger"),
        sqlite_autoincrement=True,
        **_OPTIONS,
    )
    op.create_index("ix_usage_ledger_user_id_at", "usage_ledger", ["user_id", "at"])
    op.create_index("ix_usage_ledger_session_id_at", "usage_ledger", ["session_id", "at"])
    op.create_table(
        "user_budgets",
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("max_tokens", sa.BigInteger(), nullable=True),
        sa.Column("max_cost", sa.Double, nullable=True),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("user_id", name="pk_user_budgets"),
        **_OPTIONS,
    )
    op.create_table(
        "session_budgets",
        sa.Column("session_id", sa.String(64), _fk("session_budgets"), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("max_tokens", sa.BigInteger(), nullable=True),
        sa.Column("max_cost", sa.Double, nullable=True),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("session_id", name="pk_session_budgets"),
        **_OPTIONS,
    )
    bind = op.get_bind()
    for rows, entries in _existing():
        op.bulk_insert(_ledger, rows)
        for (session_id, run_id), entry in entries.items():
            bind.execute(
                sa.update(_runs)
                .where(_runs.c.session_id == session_id, _runs.c.run_id == run_id)
                .values(usage_entries=[entry])
            )


def _existing() -> Iterator[tuple[list[dict[str, Any]], dict[tuple[str, str], Any]]]:
    """Batches of ledger rows of the finished runs with usage, and each run's entry."""
    bind = op.get_bind()
    order = [_runs.c.session_id, _runs.c.run_id]
    after: tuple[Any, ...] | None = None
    while True:
        stmt = (
            sa.select(*_runs.c, _sessions.c.user_id, _sessions.c.agent)
            .join(_sessions, _sessions.c.session_id == _runs.c.session_id)
            .order_by(*order)
            .limit(BATCH)
        )
        if after is not None:
            stmt = stmt.where(sa.tuple_(*order) > sa.tuple_(*after))
        batch = bind.execute(stmt).mappings().all()
        if not batch:
            return
        after = (batch[-1]["session_id"], batch[-1]["run_id"])
        rows, entries = [], {}
        for r in batch:
            if r["status"] == "RUNNING" or r["ended_at"] is None or not r["usage"]:
                continue
            try:
                entry = normalise(r["usage"], None)
            except ValidationError:
                continue
            at = r["ended_at"]
            rows.append(
                {
                    "session_id": r["session_id"],
                    "user_id": r["user_id"],
                    "agent": r["agent"],
                    "run_id": r["run_id"],
                    "model": None,
                    "at": at,
                    "day": at.date().isoformat(),
                    **{kind: getattr(entry, kind) for kind in KINDS},
                    "runs": 1,
                }
            )
            entries[(r["session_id"], r["run_id"])] = entry.model_dump(mode="json")
        if rows:
            yield rows, entries


def downgrade() -> None:
    """Drop the tables and the column (the ledger and budgets are forgotten)."""
    op.drop_table("session_budgets")
    op.drop_table("user_budgets")
    op.drop_table("usage_ledger")
    # In place (SQLite 3.35+ ALTER TABLE DROP COLUMN), never a batch rebuild.
    op.drop_column("runs", "usage_entries")
