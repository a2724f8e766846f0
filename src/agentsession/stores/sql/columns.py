"""Portable column types of the SQL store, one per storage decision.

* :class:`UTCDateTime`: aware UTC in, aware UTC out, on every dialect and whatever the
  process time zone. SQLite has no date type, so it stores fixed-width
  ISO 8601 text with microseconds, which sorts in time order; PostgreSQL uses
  ``timestamptz``; MySQL/MariaDB ``DATETIME(6)`` holding UTC.
* :class:`JSONText`: a JSON value stored as the text :func:`agentsession.jsonvalues.dumps`
  makes: real UTF-8, NUL kept as the escape ``\\u0000``. Deliberately
  not ``jsonb``, which cannot hold ``\\u0000``.
* :data:`LONG_TEXT`: text without a practical size limit (MySQL ``TEXT`` stops at 64 KB),
  sent to MySQL as base64 like every long text and JSON column (:class:`Base64Text`).
* :data:`BLOB`: bytes without a practical size limit (``BLOB``, ``BYTEA``, ``LONGBLOB``),
  sent to MySQL as base64 so a record at its maximum fits the default packet size.
* :func:`binary_text`: text that sorts by code point and compares exactly everywhere.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.engine import Dialect

from ...jsonvalues import dumps, loads

Processor = Callable[[Any], Any]

__all__ = ["BLOB", "LONG_TEXT", "Base64Text", "JSONText", "UTCDateTime", "binary_text"]


class _Base64Blob(sa.types.TypeDecorator[bytes]):
    """``LONGBLOB`` whose values travel to MySQL/MariaDB as base64 text and are decoded
    by the server (``FROM_BASE64(%s)``).

    PyMySQL has no binary parameters: it writes bytes into the statement's text as hex
    (``_binary X'...'``, two bytes per byte), so one statement holding an 8 MiB record
    (``Limits.max_record_bytes``) is over 16 MiB, the default ``max_allowed_packet`` of
    both servers, and the server drops the connection. Base64 is 4 bytes per 3, needs
    no escaping, and keeps such a statement near 11 MiB, under the default; no server
    setting is needed. Reads are unchanged (results are binary).
    """

    impl = mysql.LONGBLOB
    cache_ok = True

    def bind_expression(self, bindvalue: Any) -> Any:
        return sa.func.from_base64(bindvalue, type_=self)

    def bind_processor(self, dialect: Dialect) -> Processor:
        def process(value: bytes | None) -> str | None:
            return None if value is None else base64.b64encode(value).decode("ascii")

        return process


#: Bytes of any length: ``BLOB`` (SQLite), ``BYTEA`` (PostgreSQL), ``LONGBLOB`` (MySQL,
#: sent as base64: :class:`_Base64Blob`).
BLOB = sa.LargeBinary().with_variant(_Base64Blob(), "mysql", "mariadb")


class Base64Text(sa.types.TypeDecorator[str]):
    """MySQL/MariaDB ``LONGTEXT`` whose values travel as the base64 of their UTF-8 and
    are decoded by the server (``CAST(FROM_BASE64(%s) AS CHAR CHARACTER SET utf8mb4)``).

    For the same reason as :class:`_Base64Blob`: PyMySQL escapes text into the
    statement, ``\\``, quotes and NUL taking two bytes each, and JSON text already
    writes a backslash or NUL of the content as two or six characters. A message
    write's idempotency result of about 8 MiB of JSON could so become a statement over
    16 MiB, the servers' default ``max_allowed_packet``, and the server drops the
    connection. Base64 is 4 bytes per 3 whatever the text holds. Used on MySQL only,
    by every long text or JSON column (:data:`LONG_TEXT`, :class:`JSONText`,
    ``PlainText(long=True)``); reads are unchanged.
    """

    impl = mysql.LONGTEXT
    cache_ok = True

    def bind_expression(self, bindvalue: Any) -> Any:
        return sa.cast(sa.func.from_base64(bindvalue), mysql.CHAR(charset="utf8mb4"))

    def bind_processor(self, dialect: Dialect) -> Processor:
        def process(value: str | None) -> str | None:
            if value is None:
                return None
            return base64.b64encode(value.encode("utf-8")).decode("ascii")

        return process


#: Text of any length: ``TEXT`` on SQLite and PostgreSQL, ``LONGTEXT`` (4 GB) on MySQL
#: (sent as base64: :class:`Base64Text`).
LONG_TEXT = sa.Text().with_variant(Base64Text(), "mysql", "mariadb")

_MYSQL = ("mysql", "mariadb")


def binary_text(length: int) -> sa.types.TypeEngine[str]:
    """``VARCHAR(length)`` ordered by Unicode code point and compared exactly: SQLite's
    default BINARY collation, ``COLLATE "C"`` on PostgreSQL (UTF-8 byte order), and
    ``utf8mb4_nopad_bin`` on MariaDB (``utf8mb4_bin`` would ignore trailing spaces,
    so ``"k"`` and ``"k "`` would be one key)."""
    return (
        sa.String(length)
        .with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")
        .with_variant(mysql.VARCHAR(length, collation="utf8mb4_nopad_bin"), "mysql", "mariadb")
    )


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A timezone-aware UTC ``datetime`` column.

    Binding a naive datetime raises ``ValueError`` (the caller's bug, never guessed at);
    an aware one in any zone is converted to UTC. Results are always aware UTC.
    SQLite text looks like ``2026-01-01T12:00:00.000000+00:00`` (always 32 characters).
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "sqlite":
            return sa.String(32)
        if dialect.name == "postgresql":
            return postgresql.TIMESTAMP(timezone=True)
        if dialect.name in _MYSQL:
            return mysql.DATETIME(fsp=6)
        return sa.DateTime(timezone=True)

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if dialect.name == "sqlite":
            return _sqlite_datetime_bind(value)
        if value is None:
            return None
        utc = _utc(value)
        if dialect.name in _MYSQL:
            return utc.replace(tzinfo=None)
        return utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        # A zone-less value (MySQL DATETIME) is UTC: we only ever write UTC into it.
        return _sqlite_datetime_result(value)

    # The two processors below are the methods above as one plain function on SQLite
    # (whose String has no processor of its own to chain): a value costs one call.
    def bind_processor(self, dialect: Dialect) -> Processor | None:
        if dialect.name == "sqlite" and not _impl_processes(self, dialect):
            return _sqlite_datetime_bind
        return super().bind_processor(dialect)

    def result_processor(self, dialect: Dialect, coltype: Any) -> Processor | None:
        if dialect.name == "sqlite" and not _impl_processes(self, dialect, coltype):
            return _sqlite_datetime_result
        return super().result_processor(dialect, coltype)


def _utc(value: datetime) -> datetime:
    """``value`` in UTC. Raises ValueError for a naive datetime."""
    zone = value.tzinfo
    if zone is UTC:
        return value
    if zone is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value!r}: timestamps must be timezone-aware")
    return value.astimezone(UTC)


#: The datetime bound last and its text: one write binds the same ``now`` to several
#: columns (message, session row, audit event), so it is formatted once. The tuple
#: holds the datetime, so its id cannot be reused while it is the key.
_last_bound: tuple[datetime | None, str | None] = (None, None)


def _sqlite_datetime_bind(value: datetime | None) -> str | None:
    """:meth:`UTCDateTime.process_bind_param` on SQLite: ISO text in UTC, or None."""
    global _last_bound
    if value is None:
        return None
    last = _last_bound
    if value is last[0]:
        return last[1]
    text = _utc(value).isoformat(timespec="microseconds")
    _last_bound = (value, text)
    return text


def _sqlite_datetime_result(value: Any) -> datetime | None:
    """:meth:`UTCDateTime.process_result_value` (ISO text or a datetime, or None);
    zone-less values are UTC."""
    if value is None:
        return None
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    zone = moment.tzinfo
    if zone is UTC:
        return moment
    if zone is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _impl_processes(
    decorator: sa.types.TypeDecorator[Any], dialect: Dialect, coltype: Any = None
) -> bool:
    """Whether the dialect's own type under ``decorator`` converts values itself (bind
    or result), so a processor of ours must chain to it (TypeDecorator's own does)."""
    impl = decorator.load_dialect_impl(dialect).dialect_impl(dialect)
    return impl.bind_processor(dialect) is not None or (
        impl.result_processor(dialect, coltype) is not None
    )


class JSONText(sa.types.TypeDecorator[Any]):
    """A JSON value kept as compact UTF-8 JSON text (see the module docstring).

    Values must already have passed :func:`agentsession.jsonvalues.check_json`; the
    manager checks them before anything reaches a store.
    """

    impl = sa.Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name in _MYSQL:
            return Base64Text()
        return sa.Text()

    def process_bind_param(self, value: Any, dialect: Dialect) -> str:
        return dumps(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        return _json_result(value)

    # As UTCDateTime's: the methods above as one plain function, where nothing chains.
    def bind_processor(self, dialect: Dialect) -> Processor | None:
        if not _impl_processes(self, dialect):
            return dumps
        return super().bind_processor(dialect)

    def result_processor(self, dialect: Dialect, coltype: Any) -> Processor | None:
        if not _impl_processes(self, dialect, coltype):
            return _json_result
        return super().result_processor(dialect, coltype)


def _json_result(value: str | None) -> Any:
    """:meth:`JSONText.process_result_value`."""
    return None if value is None else loads(value)


_PG_ESCAPED = re.compile(r"\\([\\0])")


class PlainText(sa.types.TypeDecorator[str]):
    """Free text kept exactly, NUL included (titles, reasons, error texts).

    PostgreSQL ``text`` cannot hold NUL, so on PostgreSQL only the value is stored
    backslash-escaped (``\\`` as ``\\\\``, NUL as ``\\0``) and unescaped on read;
    SQLite and MySQL store it as it is.

    Args:
        length: a VARCHAR length; None gives TEXT.
        long: with no length, LONGTEXT on MySQL (whose TEXT holds only 64 KiB).
    """

    impl = sa.Text
    cache_ok = True

    def __init__(self, length: int | None = None, long: bool = False) -> None:
        super().__init__()
        self.length = length
        self.long = long

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        # The generic types, as JSONText does: TypeDecorator adapts them to the dialect
        # itself, and pre-adapting Text on psycopg gave its String subclass, which
        # renders as VARCHAR (what the migrations made is TEXT).
        if self.length is not None:
            return sa.String(self.length)
        if self.long and dialect.name in _MYSQL:
            return Base64Text()
        return sa.Text()

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        if value is None or dialect.name != "postgresql":
            return value
        return value.replace("\\", "\\\\").replace("\x00", "\\0")

    def process_result_value(self, value: str | None, dialect: Dialect) -> str | None:
        if value is None or dialect.name != "postgresql" or "\\" not in value:
            return value
        return _PG_ESCAPED.sub(lambda m: "\x00" if m.group(1) == "0" else "\\", value)

    # Off PostgreSQL both methods above return the value as it is: no processor at all.
    def bind_processor(self, dialect: Dialect) -> Processor | None:
        if dialect.name != "postgresql" and not _impl_processes(self, dialect):
            return None
        return super().bind_processor(dialect)

    def result_processor(self, dialect: Dialect, coltype: Any) -> Processor | None:
        if dialect.name != "postgresql" and not _impl_processes(self, dialect, coltype):
            return None
        return super().result_processor(dialect, coltype)
