"""Record the SQL statements a store sends to its driver (tests of query counts and
plans)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from agentsession.stores.sql.store import SQLStore


@contextmanager
def captured_sql(store: SQLStore) -> Iterator[list[tuple[str, Any]]]:
    """Record (statement, parameters) of every statement ``store`` executes while the
    block runs, as the driver receives them."""
    seen: list[tuple[str, Any]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
        seen.append((statement, params))

    sa.event.listen(store.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", record)
