"""Files only their owner can read: the SQLite database (and its ``-wal``/``-shm``), the
API keys file and its lock.

Files are created with mode 0600 by ``os.open`` (never by changing the process umask,
which is shared by every thread). A file found wider than 0600 is tightened to 0600 if
this process owns it (with a warning), and warned about if it does not. The directory
of the database is checked: one every user may write to without the sticky bit is
refused (another user could swap the database or its ``-wal``/``-shm`` for their own),
one the group may write to is warned about, and a database file owned by another user
in a sticky directory is refused.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

from .errors import StoreError

__all__ = ["PRIVATE_MODE", "check_directory", "create_private", "open_private", "tighten"]

logger = logging.getLogger(__name__)

#: Owner read and write, nothing for group and others.
PRIVATE_MODE = 0o600


def open_private(path: str | os.PathLike[str], flags: int) -> int:
    """Open (creating it if absent) ``path`` with mode 0600, and tighten it if it was
    already there and wider (see :func:`tighten`).

    Args:
        path: the file.
        flags: ``os.open`` flags; ``O_CREAT`` is added.

    Returns:
        The file descriptor (the caller closes it).

    Raises:
        OSError: as ``os.open`` raises it.
    """
    fd = os.open(path, flags | os.O_CREAT, PRIVATE_MODE)
    try:
        _tighten_fd(fd, Path(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def create_private(path: str | os.PathLike[str]) -> None:
    """Create ``path`` empty with mode 0600 if absent; tighten it if present and wider.

    Raises:
        OSError: as ``os.open`` raises it.
    """
    os.close(open_private(path, os.O_RDONLY))


def tighten(path: str | os.PathLike[str]) -> None:
    """Make an existing file 0600 if it is readable or writable by group or others:
    ``chmod`` it (warning logged) if this process owns it, else only log a warning.
    An absent file is left absent."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    _tighten(st, Path(path), lambda mode: os.chmod(path, mode))


def _tighten_fd(fd: int, path: Path) -> None:
    _tighten(os.fstat(fd), path, lambda mode: os.fchmod(fd, mode))


def _tighten(st: os.stat_result, path: Path, chmod: Callable[[int], None]) -> None:
    wide = st.st_mode & 0o777
    if wide & 0o077 == 0:
        return
    if st.st_uid == os.geteuid():
        chmod(PRIVATE_MODE)
        logger.warning("%s had mode %o, readable by other users; changed to 0600", path, wide)
    else:
        logger.warning(
            "%s has mode %o and belongs to another user: other users may read it", path, wide
        )


def check_directory(directory: str | os.PathLike[str], files: tuple[Path, ...] = ()) -> None:
    """Check that other users cannot replace files in ``directory``.

    Args:
        directory: the directory the private files live in.
        files: files in it that must not belong to another user (root counts as ours).

    Raises:
        StoreError: the directory is writable by every user without the sticky bit, or
            one of ``files`` exists and belongs to another user.
    """
    st = os.stat(directory)
    sticky = bool(st.st_mode & stat.S_ISVTX)
    if st.st_mode & stat.S_IWOTH and not sticky:
        raise StoreError(
            f"the directory {directory} is writable by every user (mode "
            f"{st.st_mode & 0o777:o}): another user could replace the database files; "
            "use a directory only its owner can write to (chmod o-w), or set its sticky bit"
        )
    if st.st_mode & stat.S_IWGRP and not sticky:
        logger.warning(
            "the directory %s is writable by its group (mode %o): group members could "
            "replace the database files",
            directory,
            st.st_mode & 0o777,
        )
    me = os.geteuid()
    for path in files:
        try:
            owner = os.stat(path).st_uid
        except FileNotFoundError:
            continue
        if owner not in (me, 0):
            raise StoreError(
                f"{path} belongs to another user (uid {owner}): it may have been planted "
                "to read the database; remove it, or use a private directory"
            )
