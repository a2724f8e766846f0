"""Alembic environment of agentsession, run only through :mod:`agentsession.stores.sql.migrate`.

The caller hands over a connection that already holds the migration lock and an open
transaction (``config.attributes["connection"]``); Alembic runs inside that transaction,
so the version check and the migrations happen under one lock.
"""

from __future__ import annotations

from alembic import context

from agentsession.stores.sql.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "agentsession migrations run through `agentsession db upgrade` or "
        "agentsession.stores.sql.migrate.upgrade(url), not the alembic command line"
    )

context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
