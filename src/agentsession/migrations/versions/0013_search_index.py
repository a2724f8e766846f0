"""The search index: ``search_texts`` and each dialect's index on its text.

Revision ID: 0013_search_index
Revises: 0012_idempotency_owner

* ``search_texts`` (id, session_id, kind, seq, role, text; unique
  ``(session_id, kind, seq)``; deleted with its session): one row per message with
  text, per session title and per tool call (docs/guide.md, "Search").
* SQLite: ``search_fts``, an FTS5 table with the ``trigram`` tokenizer over
  ``search_texts.text`` (external content, ``content_rowid='id'``; ``detail='none'``:
  no positions, about a third of the insert cost, enough for ``LIKE``), kept by three
  triggers on ``search_texts``, so every insert and delete (a cascade's too) reaches it.
* PostgreSQL: the ``pg_trgm`` extension and a GIN index ``gin_trgm_ops`` on the text
  (it takes trigrams of letters beyond ASCII, CJK too, when the database's
  ``LC_CTYPE`` is a UTF-8 locale; docs/guide.md, "Search").
* MariaDB/MySQL: no index on the text (InnoDB FULLTEXT has no n-gram parser in
  MariaDB): a search reads the caller's rows.

The existing messages, titles and tool calls are indexed in batches of
:data:`BATCH` rows, each batch read by keyset on its table's key, so memory does not
grow with the database.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from agentsession.models import Message
from agentsession.searchtext import message_text, tool_call_text
from agentsession.stores.sql.columns import PlainText
from agentsession.stores.sql.schema import TableOptions

revision = "0013_search_index"
down_revision = "0012_idempotency_owner"
branch_labels = None
depends_on = None

#: Rows read and indexed per batch.
BATCH = 1000

_OPTIONS: TableOptions = {
    "mysql_engine": "InnoDB",
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
}

_SQLITE = (
    "CREATE VIRTUAL TABLE search_fts USING fts5("
    "text, content='search_texts', content_rowid='id', tokenize='trigram', detail='none')",
    "CREATE TRIGGER search_texts_ai AFTER INSERT ON search_texts BEGIN "
    "INSERT INTO search_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER search_texts_ad AFTER DELETE ON search_texts BEGIN "
    "INSERT INTO search_fts(search_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE TRIGGER search_texts_au AFTER UPDATE ON search_texts BEGIN "
    "INSERT INTO search_fts(search_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "INSERT INTO search_fts(rowid, text) VALUES (new.id, new.text); END",
)
_POSTGRES = (
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE INDEX ix_search_texts_text_trgm ON search_texts USING gin (text gin_trgm_ops)",
)

_texts = sa.table(
    "search_texts",
    *(sa.column(c) for c in ("session_id", "kind", "role", "text")),
    sa.column("seq", sa.Integer),
)
_sessions = sa.table("sessions", sa.column("session_id"), sa.column("title", PlainText()))
_messages = sa.table(
    "messages",
    *(sa.column(c) for c in ("message_id", "session_id", "payload")),
    sa.column("seq", sa.Integer),
)
_calls = sa.table(
    "tool_calls",
    *(sa.column(c) for c in ("session_id", "call_id", "tool", "arguments", "result")),
    sa.column("seq", sa.Integer),
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def upgrade() -> None:
    """Create the table and the dialect's index, then index the existing rows."""
    op.create_table(
        "search_texts",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column(
            "session_id",
            sa.String(64),
            sa.ForeignKey(
                "sessions.session_id",
                ondelete="CASCADE",
                name="fk_search_texts_session_id_sessions",
            ),
            nullable=False,
        ),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("role", sa.String(16), nullable=True),
        sa.Column(
            "text", sa.Text().with_variant(mysql.LONGTEXT(), "mysql", "mariadb"), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name="pk_search_texts"),
        sqlite_autoincrement=True,
        **_OPTIONS,
    )
    op.create_index(
        "ix_search_texts_session_id_kind_seq",
        "search_texts",
        ["session_id", "kind", "seq"],
        unique=True,
    )
    name = op.get_bind().dialect.name
    for statement in {"sqlite": _SQLITE, "postgresql": _POSTGRES}.get(name, ()):
        op.execute(statement)
    for rows in _existing():
        op.bulk_insert(_texts, rows)


def _existing() -> Iterator[list[dict[str, Any]]]:
    """Batches of index rows for the titles, messages and tool calls already stored."""
    bind = op.get_bind()
    for table, key in ((_sessions, ()), (_messages, ("seq",)), (_calls, ("seq",))):
        after: tuple[Any, ...] | None = None
        order = [table.c.session_id, *(table.c[k] for k in key)]
        while True:
            stmt = sa.select(table).order_by(*order).limit(BATCH)
            if after is not None:
                stmt = stmt.where(sa.tuple_(*order) > sa.tuple_(*after))
            batch = bind.execute(stmt).mappings().all()
            if not batch:
                break
            after = tuple(batch[-1][c.key] for c in order)
            rows = [_row(table.name, dict(r)) for r in batch]
            kept = [r for r in rows if r is not None and r["text"]]
            if kept:
                yield kept


def _row(table: str, r: dict[str, Any]) -> dict[str, Any] | None:
    """The index row of one stored title, message or tool call (None: nothing to index)."""
    sid = r["session_id"]
    if table == "sessions":
        if not r["title"]:
            return None
        return {"session_id": sid, "kind": "title", "seq": 0, "role": None, "text": r["title"]}
    if table == "messages":
        payload = json.loads(r["payload"])
        message = Message.model_validate(
            {
                **payload,
                "message_id": r["message_id"],
                "session_id": sid,
                "seq": r["seq"],
                "created_at": _EPOCH,
            }
        )
        text = message_text(message)
        return {
            "session_id": sid,
            "kind": "message",
            "seq": r["seq"],
            "role": message.role.value,
            "text": text,
        }
    return {
        "session_id": sid,
        "kind": "tool_call",
        "seq": r["seq"],
        "role": None,
        "text": tool_call_text(r["tool"], json.loads(r["arguments"]), json.loads(r["result"])),
    }


def downgrade() -> None:
    """Drop the dialect's index objects and the table."""
    if op.get_bind().dialect.name == "sqlite":
        for name in ("search_texts_ai", "search_texts_ad", "search_texts_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS search_fts")
    op.drop_table("search_texts")
