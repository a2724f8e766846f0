"""The SQL store's key table (:class:`~agentsession.apikeys.KeyTable`): ``api_keys``.

Each call is its own short transaction on the store's engine, outside the session
transactions (a key is no part of a session). A revocation and a last-use stamp each
write only their own column, so neither undoes the other.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from ...apikeys import ApiKey
from ..base import StoreConflict
from .dialect import connection_mode, translate_error
from .schema import api_keys

__all__ = ["SQLKeyTable"]

_T = api_keys.c


def _key(row: Mapping[Any, Any]) -> ApiKey:
    def text(at: datetime | None) -> str | None:
        return None if at is None else at.isoformat()

    return ApiKey(
        key_id=row["key_id"],
        user_id=row["user_id"],
        admin=bool(row["admin"]),
        token_sha256=row["token_sha256"],
        created_at=row["created_at"].isoformat(),
        name=row["name"],
        revoked_at=text(row["revoked_at"]),
        scope=row["scope"],
        expires_at=text(row["expires_at"]),
        last_used_at=text(row["last_used_at"]),
        agents=None if row["agents"] is None else tuple(row["agents"].split(",")),
    )


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


class SQLKeyTable:
    """API keys in an SQL store's ``api_keys`` table.

    Args:
        engine: the store's engine.

    Raises (every method):
        StoreError: as the store's transactions raise it (a schema without the table:
            run ``agentsession db upgrade``).
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._errors = (SQLAlchemyError, sqlite3.Error, engine.dialect.loaded_dbapi.Error)

    @contextmanager
    def _conn(self, *, write: bool) -> Iterator[Connection]:
        try:
            with connection_mode(self._engine.connect(), write=write) as conn, conn.begin():
                yield conn
        except self._errors as exc:
            raise translate_error(exc) from exc

    def _one(self, where: sa.ColumnElement[bool]) -> ApiKey | None:
        with self._conn(write=False) as conn:
            row = conn.execute(sa.select(api_keys).where(where)).mappings().first()
        return None if row is None else _key(row)

    def get(self, token_sha256: str) -> ApiKey | None:
        """See :meth:`~agentsession.apikeys.KeyTable.get`."""
        return self._one(_T.token_sha256 == token_sha256)

    def get_by_id(self, key_id: str) -> ApiKey | None:
        """See :meth:`~agentsession.apikeys.KeyTable.get_by_id`."""
        return self._one(_T.key_id == key_id)

    def insert(self, key: ApiKey) -> bool:
        """See :meth:`~agentsession.apikeys.KeyTable.insert`."""
        values = {
            "key_id": key.key_id,
            "token_sha256": key.token_sha256,
            "user_id": key.user_id,
            "name": key.name,
            "admin": key.admin,
            "scope": key.scope,
            "created_at": _time(key.created_at),
            "expires_at": _time(key.expires_at),
            "last_used_at": _time(key.last_used_at),
            "revoked_at": _time(key.revoked_at),
            "agents": None if key.agents is None else ",".join(key.agents),
        }
        try:
            with self._conn(write=True) as conn:
                taken = conn.execute(
                    sa.select(sa.func.count())
                    .select_from(api_keys)
                    .where((_T.key_id == key.key_id) | (_T.token_sha256 == key.token_sha256))
                ).scalar_one()
                if taken:
                    return False
                conn.execute(api_keys.insert().values(values))
        except StoreConflict:  # a concurrent insert of the same key
            return False
        return True

    def revoke(self, key_id: str, at: str) -> bool:
        """See :meth:`~agentsession.apikeys.KeyTable.revoke`."""
        with self._conn(write=True) as conn:
            done = conn.execute(
                api_keys.update()
                .where(_T.key_id == key_id, _T.revoked_at.is_(None))
                .values(revoked_at=_time(at))
            )
        return bool(done.rowcount)

    def touch(self, key_id: str, at: str) -> None:
        """See :meth:`~agentsession.apikeys.KeyTable.touch`."""
        with self._conn(write=True) as conn:
            conn.execute(
                api_keys.update().where(_T.key_id == key_id).values(last_used_at=_time(at))
            )

    def list(self) -> list[ApiKey]:
        """See :meth:`~agentsession.apikeys.KeyTable.list`."""
        with self._conn(write=False) as conn:
            rows = conn.execute(sa.select(api_keys).order_by(_T.created_at, _T.key_id))
            return [_key(row) for row in rows.mappings()]

    def remove_user(self, user_id: str) -> int:
        """See :meth:`~agentsession.apikeys.KeyTable.remove_user`."""
        with self._conn(write=True) as conn:
            return int(conn.execute(api_keys.delete().where(_T.user_id == user_id)).rowcount)
