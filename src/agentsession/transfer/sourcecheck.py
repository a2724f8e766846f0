"""Reading an import's source as untrusted input: every SQLite value is checked for its
storage class before use, JSON text for its encoding and depth before it is parsed, and
each refusal is one :class:`~agentsession.errors.ImportSourceError` naming the source,
the row and the field (docs/export.md, "What an import refuses").

The depth limit is the store's own (:data:`~agentsession.jsonvalues.MAX_DEPTH` levels
below a stored value): text nesting deeper could never be stored, and is refused before
a parser recurses into it (no ``RecursionError``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import AgentSessionError, ImportSourceError, StoreError, ValidationError
from ..jsonvalues import MAX_DEPTH, text_depth

__all__ = [
    "Column",
    "at_row",
    "column",
    "first_lines",
    "json_text",
    "parse_json",
    "refusal",
    "scan",
    "unreadable",
    "utc_text",
]

#: How a SQLite storage class (``typeof``) is named in a refusal.
_KINDS = {
    "integer": "an integer",
    "real": "a real number",
    "text": "text",
    "blob": "a blob",
    "null": "NULL",
}
#: ``PRAGMA encoding`` -> the codec of the database's text (CAST AS BLOB keeps it).
_CODECS = {"UTF-8": "utf-8", "UTF-16le": "utf-16-le", "UTF-16be": "utf-16-be"}


@dataclass(frozen=True)
class Column:
    """A column an import reads.

    Attributes:
        name: the column's name (a plain identifier: it goes into SQL text).
        kinds: the SQLite storage classes it may hold (``typeof``: ``integer``,
            ``real``, ``text``, ``blob``, ``null``).
        read: False to check only the class, not load the value (a blob the import
            reads later through another reader).
    """

    name: str
    kinds: frozenset[str]
    read: bool = True


def column(name: str, *kinds: str, read: bool = True) -> Column:
    """``Column(name, frozenset(kinds), read)``: e.g. ``column("id", "integer")``."""
    return Column(name, frozenset(kinds), read)


def refusal(
    source: str, row: str | None, reason: str, *, field: str | None = None
) -> ImportSourceError:
    """The error refusing ``source``: ``"<source>: <row>: <reason>"``.

    Args:
        source: the file as given; row: where in it, or None for the whole source;
        reason: what is wrong, e.g. ``message_data nests deeper than 64 levels``;
        field: the column or field, when known.
    """
    where = f"{source}: {row}" if row else source
    return ImportSourceError(f"{where}: {reason}", source=source, row=row, field=field)


def unreadable(source: str, exc: BaseException) -> ImportSourceError:
    """The error of a source its reader cannot read at all (a SQLite file cut short
    or damaged, not a database, a server that does not answer): ``cannot read
    <source>: <the reader's first line>``."""
    return ImportSourceError(f"cannot read {source}: {first_lines(exc)}", source=source)


def first_lines(exc: BaseException) -> str:
    """``exc``'s message on one line: its first three lines joined (a pydantic error
    says what is wrong on its second), at most 300 characters; its class when empty."""
    lines = [text.strip() for text in str(exc).splitlines() if text.strip()]
    return "; ".join(lines[:3])[:300] or type(exc).__name__


@contextmanager
def at_row(source: str, row: str | None) -> Iterator[None]:
    """Turn a refusal raised inside into one :class:`ImportSourceError` naming
    ``source`` and ``row``: a check of this module's (ValidationError) or any refusal
    of the manager (ValidationError, Conflict, ...), chained as ``__cause__``. An
    ImportSourceError passes unchanged, and so does a StoreError: the store failed, not
    the source.

    Raises:
        ImportSourceError: for a refusal raised inside; StoreError: as raised.
    """
    try:
        yield
    except (ImportSourceError, StoreError):
        raise
    except AgentSessionError as exc:
        field = exc.context.get("field")
        raise refusal(source, row, exc.message, field=field) from exc


def json_text(raw: str | bytes, *, field: str, levels: int = MAX_DEPTH) -> str:
    """``raw`` as JSON text a parser may read: UTF-8, at most ``levels`` levels deep.

    Args:
        raw: the text, or its UTF-8 bytes; field: its name in a refusal; levels: how
            deep below the value its containers may sit (the store's ``MAX_DEPTH``;
            more where the value sits inside a larger one, e.g. a line of an export).

    Raises:
        ValidationError: bytes that are not UTF-8, or nesting deeper than ``levels``.
    """
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{field} is not UTF-8 (byte {exc.start})", field=field) from None
    if text_depth(raw) > levels + 1:
        raise ValidationError(
            f"{field} nests deeper than {levels} levels (the most a stored value may)", field=field
        )
    return raw


def parse_json(raw: str | bytes, *, field: str, levels: int = MAX_DEPTH) -> Any:
    """The JSON value of ``raw``, checked by :func:`json_text` first.

    Raises:
        ValidationError: as :func:`json_text`, or not JSON (``... is not JSON (...)``,
            an integer of over 4300 digits too).
    """
    text = json_text(raw, field=field, levels=levels)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValidationError(f"{field} is not JSON ({str(exc)[:200]})", field=field) from None


def utc_text(value: Any, *, field: str) -> datetime:
    """A SQLite ``CURRENT_TIMESTAMP`` text (UTC, ``YYYY-MM-DD HH:MM:SS``, or any ISO
    8601 time) as an aware time.

    Raises:
        ValidationError: not a text of that form.
    """
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValidationError(f"{field} is not a time ({str(value)[:40]!r})", field=field) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def scan(
    db: sqlite3.Connection,
    source: str,
    table: str,
    columns: Sequence[Column],
    *,
    where: str = "",
    params: Sequence[Any] = (),
    order: str = "rowid",
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each row of ``table`` (``WHERE where ORDER BY order``), checked, read lazily.

    Args:
        db: the source's connection; source: its name in errors; table, columns,
            where, order: plain SQL identifiers and clauses of the caller's (never
            the source's) text; params: the values of ``where``'s ``?``.

    Yields:
        ``(label, values)``: ``label`` names the row (``<table> rowid N``), ``values``
        maps each column to its value: int, float, str (decoded in the database's
        encoding), bytes or None (and None for a column not ``read``).

    Raises:
        ImportSourceError: a value of a class its column does not allow, or text that
            is not valid in the database's encoding (naming the row and the column);
            the file cannot be read (``cannot read <source>: ...``).
    """
    parts = ["rowid"]
    for c in columns:
        parts += [f"typeof({c.name})", f"CAST({c.name} AS BLOB)" if c.read else "NULL"]
    sql = f"SELECT {', '.join(parts)} FROM {table}"
    sql += f" WHERE {where} ORDER BY {order}" if where else f" ORDER BY {order}"
    try:
        codec = _CODECS.get(db.execute("PRAGMA encoding").fetchone()[0], "utf-8")
        for raw in db.execute(sql, tuple(params)):
            label = f"{table} rowid {raw[0]}"
            values = {
                c.name: _value(source, label, c, raw[1 + 2 * i], raw[2 + 2 * i], codec)
                for i, c in enumerate(columns)
            }
            yield label, values
    except sqlite3.DatabaseError as exc:
        raise unreadable(source, exc) from None


def _value(source: str, label: str, column: Column, kind: str, raw: Any, codec: str) -> Any:
    """One value of a row, checked against ``column`` (see :func:`scan`)."""
    if kind not in column.kinds:
        allowed = " or ".join(_KINDS.get(k, k) for k in sorted(column.kinds))
        reason = f"{column.name} holds {_KINDS.get(kind, kind)}, not {allowed}"
        raise refusal(source, label, reason, field=column.name)
    if not column.read or raw is None:
        return None
    if kind == "text":
        try:
            return bytes(raw).decode(codec)
        except UnicodeDecodeError as exc:
            reason = f"{column.name} is not valid {codec} text (byte {exc.start})"
            raise refusal(source, label, reason, field=column.name) from None
    if kind == "integer":
        return int(raw)
    if kind == "real":
        return float(raw)
    return bytes(raw)
