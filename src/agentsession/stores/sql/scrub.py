"""After an erasure: what each SQL database can do to get the deleted rows off its disk.

* SQLite: every connection runs with ``secure_delete=ON`` (:mod:`.dialect`), so a
  delete overwrites the rows with zeros in the pages it changes; but the WAL still
  holds the older page images that carried them. ``PRAGMA wal_checkpoint(TRUNCATE)``
  copies the newest pages into the database file and truncates the ``-wal`` file to
  zero bytes. It holds the writer lock while it waits for readers to finish, so it
  waits at most ``_CHECKPOINT_WAIT_MS`` (not the connection's busy timeout): every
  writer waits that long at most; if a reader still holds its snapshot, the erased
  rows stay in the ``-wal`` until the next full checkpoint, reported as pending and
  logged as a warning. ``compact`` runs ``VACUUM`` first (rebuilds the file without
  free pages). Before the checkpoint, the search index's FTS5 table is merged into one
  segment (``optimize``): a delete only adds a marker to it, and the older segments
  would keep the erased texts' trigrams; the merge writes them out (zeroed, as every
  freed page). It rewrites the whole search index: its cost grows with every user's
  indexed text, and writers wait for it.
* PostgreSQL: a delete leaves dead row versions in the table, TOAST and index files;
  a plain VACUUM marks their space free without overwriting it. ``compact`` runs
  ``VACUUM FULL`` on every table of the store: each is rewritten into new files and the
  old ones are removed (an ACCESS EXCLUSIVE lock per table while it runs).
* MariaDB/MySQL: InnoDB purges deleted records into free space of its pages, not
  overwritten. ``compact`` runs ``OPTIMIZE TABLE`` (a rebuild for InnoDB).

What the database keeps elsewhere (PostgreSQL's WAL, recycled segments included, and
archives; MariaDB's binary, query, redo and undo logs) is reported as pending, with the
step that reaches it (docs/security.md, "What each store still keeps after an erasure").
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.engine import Engine

from ...errors import StoreError
from ..base import ScrubReport
from .schema import metadata

__all__ = ["scrub_database"]

logger = logging.getLogger(__name__)

#: The longest the -wal checkpoint waits for readers, holding the writer lock (ms).
_CHECKPOINT_WAIT_MS = 1000
_SQLITE_WAL_LEFT = (
    "the WAL checkpoint could not finish (another connection was reading): erased rows "
    "may remain in the -wal until the next full checkpoint; run `agentsession erase` again"
)

_SQLITE_SEARCH_MERGED = (
    "search index optimize: the FTS5 segments merged into one, without the erased texts"
)
_SQLITE_ZEROED = "secure_delete: the erased rows were overwritten with zeros in the database"
_PG_WAL = (
    "PostgreSQL's WAL (pg_wal) holds the erased rows, and a checkpoint recycles its "
    "segments by renaming them, not overwriting them: run CHECKPOINT; SELECT "
    "pg_switch_wal(); CHECKPOINT; with wal_recycle=off so old segments are deleted "
    "(docs/security.md); archived WAL (archive_command, pgBackRest, WAL-G...) and "
    "standby servers keep their own copies: expire them"
)
_PG_DEAD_ROWS = (
    "the table, TOAST and index files keep the erased rows as dead row versions until "
    "VACUUM FULL rewrites them (a plain VACUUM frees their space without overwriting "
    "it): run `agentsession erase --compact` (locks each table while it is rewritten)"
)
_MYSQL_LOGS = (
    "MariaDB/MySQL keep the erased rows in the binary log if it is on (PURGE BINARY "
    "LOGS, binlog_expire_logs_seconds), in the general and slow query logs if they are "
    "on, and in the redo log and undo tablespaces until they are overwritten; replicas "
    "keep their own copies"
)
_MYSQL_FREE_SPACE = (
    "the InnoDB table files keep the erased rows in freed space until OPTIMIZE TABLE "
    "rebuilds them (with innodb_file_per_table=OFF, in the shared ibdata file, which "
    "no rebuild shrinks): run `agentsession erase --compact`"
)


def scrub_database(engine: Engine, *, compact: bool) -> ScrubReport:
    """Run the steps of the module docstring on ``engine``'s database.

    Args:
        engine: the store's engine (SQLite, PostgreSQL or MariaDB/MySQL).
        compact: also rewrite the tables (``VACUUM``, ``VACUUM FULL``, ``OPTIMIZE TABLE``).

    Returns:
        The steps done and those left to the operator.

    Raises:
        StoreError: ``OPTIMIZE TABLE`` reported an error. Driver errors propagate (the
            store translates them).
    """
    name = engine.dialect.name
    if name == "sqlite":
        return _sqlite(engine, compact)
    if name == "postgresql":
        return _postgres(engine, compact)
    return _mysql(engine, compact)


def _tables() -> list[str]:
    return [t.name for t in metadata.sorted_tables]


def _sqlite(engine: Engine, compact: bool) -> ScrubReport:
    done, pending = [_SQLITE_ZEROED], []
    raw = engine.raw_connection()
    try:
        # The driver connection runs in autocommit (dialect): VACUUM and the
        # checkpoint need to run outside any transaction.
        db = raw.driver_connection
        assert db is not None
        db.execute("INSERT INTO search_fts(search_fts) VALUES ('optimize')")
        done.append(_SQLITE_SEARCH_MERGED)
        if compact:
            db.execute("VACUUM")
            done.append("VACUUM: the database file was rebuilt without free pages")
        busy = _checkpoint(db)
    finally:
        raw.close()
    if busy:
        logger.warning("%s", _SQLITE_WAL_LEFT)
        pending.append(_SQLITE_WAL_LEFT)
    else:
        done.append(
            "WAL checkpoint (TRUNCATE): the -wal file's pages copied into the database, "
            "the -wal file truncated to 0 bytes"
        )
    return ScrubReport(tuple(done), tuple(pending))


def _checkpoint(db: Any) -> bool:
    """Run ``wal_checkpoint(TRUNCATE)`` on the sqlite3 connection ``db`` waiting at most
    ``_CHECKPOINT_WAIT_MS`` for readers; return whether it could not finish."""
    (saved,) = db.execute("PRAGMA busy_timeout").fetchone()
    db.execute(f"PRAGMA busy_timeout = {_CHECKPOINT_WAIT_MS}")
    try:
        # The frame counts are -1 or 0 once the -wal is truncated: not reported.
        busy, _frames, _copied = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        db.execute(f"PRAGMA busy_timeout = {int(saved)}")
    return bool(busy)


def _postgres(engine: Engine, compact: bool) -> ScrubReport:
    if not compact:
        return ScrubReport((), (_PG_DEAD_ROWS, _PG_WAL))
    tables = _tables()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        quote = conn.dialect.identifier_preparer.quote
        for table in tables:
            conn.exec_driver_sql(f"VACUUM FULL {quote(table)}")
    done = (
        f"VACUUM FULL of {len(tables)} tables ({', '.join(tables)}): their table, TOAST "
        "and index files rewritten without the erased rows, the old files removed",
    )
    return ScrubReport(done, (_PG_WAL,))


def _mysql(engine: Engine, compact: bool) -> ScrubReport:
    if not compact:
        return ScrubReport((), (_MYSQL_FREE_SPACE, _MYSQL_LOGS))
    tables = _tables()
    with engine.connect() as conn:
        quote = conn.dialect.identifier_preparer.quote
        rows = conn.exec_driver_sql(f"OPTIMIZE TABLE {', '.join(quote(t) for t in tables)}").all()
        conn.commit()
    errors = [f"{row[0]}: {row[3]}" for row in rows if str(row[2]).lower() == "error"]
    if errors:
        raise StoreError(f"OPTIMIZE TABLE failed: {'; '.join(errors)}")
    done = (
        f"OPTIMIZE TABLE of {len(tables)} tables ({', '.join(tables)}): each rebuilt "
        "without the erased rows",
    )
    return ScrubReport(done, (_MYSQL_LOGS,))
