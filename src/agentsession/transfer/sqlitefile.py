"""Opening another framework's SQLite database for an import: read, never written, and
no file created beside it (a read-only file in a read-only folder imports too)."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

from ..errors import ImportSourceError

__all__ = ["ReadOnlyDatabase", "require_file"]


def require_file(file: Path, field: str) -> None:
    """Refuse a source that is not a file: a directory says so.

    Args:
        file: the source's path; field: the error's field.

    Raises:
        ImportSourceError: ``file`` is a directory (``... is a directory, not a
            database file``) or is not there (``no such database file: ...``).
    """
    if file.is_dir():
        message = f"{file} is a directory, not a database file"
        raise ImportSourceError(message, source=str(file), field=field)
    if not file.is_file():
        raise ImportSourceError(f"no such database file: {file}", source=str(file), field=field)


class ReadOnlyDatabase:
    """A SQLite file opened for reading only: :attr:`connection`, then :meth:`close`.

    Without a ``-wal`` file beside it the database file holds everything, and
    ``immutable=1`` reads it alone. With one (a writer is open, or did not checkpoint),
    ``mode=ro`` reads both; ``mode=ro`` creates a ``-shm`` file where there is none, so
    where that cannot open (no ``-shm`` and a folder this user cannot write) a private
    copy of the file and its log is read instead, removed by :meth:`close`.

    Args:
        file: the database file.

    Raises:
        sqlite3.OperationalError, OSError: the file cannot be opened or read.
        sqlite3.DatabaseError: the file is not a SQLite database.
    """

    def __init__(self, file: Path) -> None:
        self._copy: tempfile.TemporaryDirectory[str] | None = None
        uri = file.resolve().as_uri()
        log = file.with_name(file.name + "-wal")
        if not log.exists():
            self.connection = _probed(sqlite3.connect(f"{uri}?immutable=1", uri=True))
            return
        try:
            self.connection = _probed(sqlite3.connect(f"{uri}?mode=ro", uri=True))
        except sqlite3.OperationalError:
            self._copy = tempfile.TemporaryDirectory(prefix="agentsession-import-")
            copy = Path(self._copy.name) / "source.db"
            shutil.copyfile(file, copy)
            shutil.copyfile(log, copy.with_name("source.db-wal"))
            self.connection = _probed(sqlite3.connect(copy))

    def close(self) -> None:
        """Close the connection (and remove the private copy, if one was read)."""
        self.connection.close()
        if self._copy is not None:
            self._copy.cleanup()


def _probed(db: sqlite3.Connection) -> sqlite3.Connection:
    """``db`` once it has read the schema (SQLite opens lazily).

    Raises:
        sqlite3.DatabaseError: as reading the schema raises (``db`` is closed).
    """
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError:
        db.close()
        raise
    return db
