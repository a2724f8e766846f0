"""Choose a store by URL: the one place that maps URL schemes to store classes.

Store modules are imported only when their scheme is asked for, so ``import
agentsession`` needs no database driver.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..errors import ValidationError
from .base import SessionStore

__all__ = ["SUPPORTED_SCHEMES", "open_store"]

#: URL schemes open_store accepts (a ``+driver`` suffix is allowed on the SQL ones).
SUPPORTED_SCHEMES = ("memory://", "sqlite:///", "postgresql+psycopg://", "mysql+pymysql://")

_SQL_BACKENDS = ("sqlite", "postgresql", "mysql", "mariadb")


def open_store(url: str, **options: Any) -> SessionStore:
    """Open the store that ``url`` names.

    Args:
        url: ``memory://`` (:class:`~agentsession.stores.memory.MemoryStore`),
            ``sqlite:///path/to/file.db``, ``postgresql+psycopg://user:pw@host/db`` or
            ``mysql+pymysql://user:pw@host/db`` (:class:`~agentsession.stores.sql.SQLStore`).
        options: keyword arguments of the store's constructor, e.g. ``auto_migrate=True``
            or ``sqlite_synchronous="NORMAL"``. ``auto_migrate`` is accepted and
            ignored by ``memory://``, which has no schema.

    Returns:
        An open store; the caller closes it.

    Raises:
        ValidationError: an unknown scheme (the message lists the supported ones), a
            scheme whose store does not exist yet (``redis://``), or options the store
            does not take.
        SchemaOutOfDate, StoreError: as raised by the store's constructor; a missing
            database driver names the extra to install.
    """
    scheme, sep, _ = url.partition("://")
    backend = scheme.partition("+")[0].lower() if sep else ""
    if backend == "memory":
        from .memory import MemoryStore

        options.pop("auto_migrate", None)
        if options:
            raise ValidationError(
                f"memory:// takes no options, got {', '.join(sorted(options))}", field="url"
            )
        return MemoryStore()
    if backend in _SQL_BACKENDS:
        from .sql import SQLStore

        unknown = set(options) - set(inspect.signature(SQLStore).parameters) - {"url"}
        if unknown:
            raise ValidationError(
                f"SQL stores take no option {', '.join(sorted(unknown))}", field="url"
            )
        return SQLStore(url, **options)
    if backend in ("redis", "rediss"):
        raise ValidationError(
            "the Redis store is not available yet; use sqlite:/// or postgresql+psycopg://",
            field="url",
        )
    raise ValidationError(
        f"unsupported store URL scheme {scheme!r}; supported: {', '.join(SUPPORTED_SCHEMES)}",
        field="url",
    )
