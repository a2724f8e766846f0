"""The schema revision of any store, by URL: where it stands and bringing it to the newest
(what ``agentsession db current`` and ``db upgrade`` do). A store without a schema
(``memory://``, ``redis://``) is opened and closed instead, so one deployment script fits
every store.
"""

from __future__ import annotations

from dataclasses import dataclass

from .registry import has_schema, open_store
from .sql.dialect import masked_url, parse_url
from .sql.migrate import current_revision, head_revision, upgrade

__all__ = ["StoreSchema", "inspect_store", "upgrade_store"]


@dataclass(frozen=True)
class StoreSchema:
    """Where a store's schema stands, for any store URL.

    Attributes:
        url: the store URL with any password masked.
        current: the database's revision (None: no schema yet, or a store without one).
        head: the revision this code expects (None: the store has no schema, e.g.
            ``memory://`` and ``redis://``).
    """

    url: str
    current: str | None
    head: str | None

    @property
    def has_schema(self) -> bool:
        """Whether the store has a schema to migrate (the SQL stores)."""
        return self.head is not None

    @property
    def up_to_date(self) -> bool:
        """Whether the schema is at the revision this code expects (always for none)."""
        return self.current == self.head


def upgrade_store(url: str) -> StoreSchema:
    """Bring any store's schema to the newest revision; what ``agentsession db upgrade`` does.

    A store without a schema (``memory://``, ``redis://``) is opened and closed instead,
    so the URL, the connection and Redis's durability check fail as they would at start:
    one deployment script fits every store.

    Args:
        url: any store URL :func:`~agentsession.stores.registry.open_store` accepts.

    Returns:
        The schema after the upgrade (``current == head``; both None without a schema).

    Raises:
        ValidationError: an unsupported URL.
        SchemaOutOfDate: the database is at a revision this code does not know (newer).
        StoreError: the store cannot be reached, or the migration failed.
    """
    if not has_schema(url):
        return StoreSchema(url=_check_schemaless(url), current=None, head=None)
    revision = upgrade(url)
    return StoreSchema(url=masked_url(parse_url(url)), current=revision, head=head_revision())


def inspect_store(url: str) -> StoreSchema:
    """Read any store's schema revision without changing it (``agentsession db current``).

    Args:
        url: any store URL :func:`~agentsession.stores.registry.open_store` accepts; a
            store without a schema is opened and closed to check it.

    Returns:
        The database's revision and the one this code expects (both None without a schema).

    Raises:
        ValidationError: an unsupported URL.
        StoreError: the store cannot be reached or read.
    """
    if not has_schema(url):
        return StoreSchema(url=_check_schemaless(url), current=None, head=None)
    current = current_revision(url)
    return StoreSchema(url=masked_url(parse_url(url)), current=current, head=head_revision())


def _check_schemaless(url: str) -> str:
    """Open and close a store without a schema (raising what its start would raise);
    return its URL with any password masked."""
    store = open_store(url)
    try:
        return str(store.url)
    finally:
        store.close()
