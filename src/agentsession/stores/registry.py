"""Choose a store by URL: the one place that maps URL schemes to store classes.

Store modules are imported only when their scheme is asked for, so ``import
agentsession`` needs no database driver.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..errors import ValidationError
from .base import SessionStore

__all__ = ["SUPPORTED_SCHEMES", "has_schema", "open_store"]

#: URL schemes open_store accepts (a ``+driver`` suffix is allowed on the SQL ones).
SUPPORTED_SCHEMES = (
    "memory://",
    "sqlite:///",
    "postgresql+psycopg://",
    "mysql+pymysql://",
    "redis://",
    "rediss://",
)

_SQL_BACKENDS = ("sqlite", "postgresql", "mysql", "mariadb")


def has_schema(url: str) -> bool:
    """Whether the store ``url`` names has a schema to migrate: True for the SQL stores
    (Alembic revisions), False for ``memory://`` and ``redis://`` (nothing to create).

    Raises:
        ValidationError: an unknown scheme (the message lists the supported ones).
    """
    backend = _backend(url)
    if backend in _SQL_BACKENDS:
        return True
    if backend in ("memory", "redis", "rediss"):
        return False
    raise _unsupported(url)


def _backend(url: str) -> str:
    scheme, sep, _ = url.partition("://")
    return scheme.partition("+")[0].lower() if sep else ""


def _unsupported(url: str) -> ValidationError:
    return ValidationError(
        f"unsupported store URL scheme {url.partition('://')[0]!r}; "
        f"supported: {', '.join(SUPPORTED_SCHEMES)}",
        field="url",
    )


def open_store(url: str, **options: Any) -> SessionStore:
    """Open the store that ``url`` names.

    Args:
        url: ``memory://`` (:class:`~agentsession.stores.memory.store.MemoryStore`),
            ``sqlite:///path/to/file.db``, ``postgresql+psycopg://user:pw@host/db`` or
            ``mysql+pymysql://user:pw@host/db`` (:class:`~agentsession.stores.sql.store.SQLStore`),
            ``redis://[:pw@]host[:port][/db]`` or ``rediss://...``
            (:class:`~agentsession.stores.redis.store.RedisStore`).
        options: keyword arguments of the store's constructor, e.g. ``auto_migrate=True``,
            ``sqlite_synchronous="NORMAL"`` or ``require_durable=False``.
            ``auto_migrate`` is accepted and ignored by ``memory://`` and ``redis://``,
            which have no schema.

    Returns:
        An open store; the caller closes it.

    Raises:
        ValidationError: an unknown scheme (the message lists the supported ones), or
            options the store does not take.
        SchemaOutOfDate, StoreError: as raised by the store's constructor; a missing
            database driver names the extra to install.
    """
    backend = _backend(url)
    if backend == "memory":
        from .memory.store import MemoryStore

        options.pop("auto_migrate", None)
        if options:
            raise ValidationError(
                f"memory:// takes no options, got {', '.join(sorted(options))}", field="url"
            )
        return MemoryStore()
    if backend in _SQL_BACKENDS:
        from .sql.store import SQLStore

        unknown = set(options) - set(inspect.signature(SQLStore).parameters) - {"url"}
        if unknown:
            raise ValidationError(
                f"SQL stores take no option {', '.join(sorted(unknown))}", field="url"
            )
        return SQLStore(url, **options)
    if backend in ("redis", "rediss"):
        from .redis.store import RedisStore

        options.pop("auto_migrate", None)  # Redis has no schema to migrate
        unknown = set(options) - set(inspect.signature(RedisStore).parameters) - {"url"}
        if unknown:
            raise ValidationError(
                f"the Redis store takes no option {', '.join(sorted(unknown))}", field="url"
            )
        return RedisStore(url, **options)
    raise _unsupported(url)
