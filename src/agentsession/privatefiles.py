"""Files only their owner can read: the SQLite database (and its ``-wal``/``-shm``), the
API keys file and its lock.

Files are created with mode 0600 by ``os.open`` (never by changing the process umask,
which is shared by every thread), never through a symbolic link. A file found wider
than 0600 is tightened to 0600 if this process owns it (with a warning), and warned
about if it does not. The directory of the files is checked: one every user may write
to without the sticky bit is refused (another user could swap the files for their
own), one the group may write to is warned about, and a file owned by another user
(not root) or a symbolic link in place of one is refused. A secret file (the API keys)
is refused as well if the group or others may write to it: it could have been edited.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import StoreError

__all__ = [
    "PRIVATE_MODE",
    "check_directory",
    "check_secret_file",
    "create_private",
    "locked_rewrite",
    "open_private",
    "tighten",
]

logger = logging.getLogger(__name__)

#: Owner read and write, nothing for group and others.
PRIVATE_MODE = 0o600


def open_private(path: str | os.PathLike[str], flags: int) -> int:
    """Open (creating it if absent) ``path`` with mode 0600, and tighten it if it was
    already there and wider (see :func:`tighten`). A symbolic link is not followed.

    Args:
        path: the file.
        flags: ``os.open`` flags; ``O_CREAT`` is added.

    Returns:
        The file descriptor (the caller closes it).

    Raises:
        OSError: as ``os.open`` raises it (``ELOOP`` for a symbolic link).
    """
    fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_MODE)
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
    An absent file is left absent.

    Raises:
        StoreError: ``path`` is a symbolic link (never changed through it).
    """
    try:
        st = _lstat(Path(path))
    except FileNotFoundError:
        return
    # Not a link (just checked); Linux has no lchmod.
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
        files: files in it that must not belong to another user (root counts as ours)
            nor be symbolic links.

    Raises:
        StoreError: the directory is writable by every user without the sticky bit, or
            one of ``files`` is a symbolic link, or exists and belongs to another user.
    """
    st = os.stat(directory)
    sticky = bool(st.st_mode & stat.S_ISVTX)
    if st.st_mode & stat.S_IWOTH and not sticky:
        raise StoreError(
            f"the directory {directory} is writable by every user (mode "
            f"{st.st_mode & 0o777:o}): another user could replace the files in it; "
            "use a directory only its owner can write to (chmod o-w), or set its sticky bit"
        )
    if st.st_mode & stat.S_IWGRP and not sticky:
        logger.warning(
            "the directory %s is writable by its group (mode %o): group members could "
            "replace the files in it",
            directory,
            st.st_mode & 0o777,
        )
    for path in files:
        try:
            _owner_is_us(path, _lstat(path))
        except FileNotFoundError:
            continue


def check_secret_file(path: Path) -> None:
    """Check a file holding secrets before trusting what it says: not a symbolic link,
    owned by this process's user or root, writable by nobody else; tighten it (with a
    warning) if only readable by others. An absent file passes.

    Raises:
        StoreError: the file is a symbolic link, belongs to another user, or the group
            or others may write to it.
    """
    try:
        st = _lstat(path)
    except FileNotFoundError:
        return
    _owner_is_us(path, st)
    if st.st_mode & 0o022:
        raise StoreError(
            f"{path} is writable by other users (mode {st.st_mode & 0o777:o}): it may have "
            f"been edited, so it is not trusted; check its content, then chmod 600 {path}"
        )
    _tighten(st, path, lambda mode: os.chmod(path, mode))


def _lstat(path: Path) -> os.stat_result:
    """``os.lstat`` that refuses a symbolic link (a dangling one too).

    Raises:
        FileNotFoundError: nothing is there.
        StoreError: a symbolic link is.
    """
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise StoreError(
            f"{path} is a symbolic link: it may point at another user's file; replace it "
            "with a regular file, or point the setting at the real path"
        )
    return st


def _owner_is_us(path: Path, st: os.stat_result) -> None:
    if st.st_uid not in (os.geteuid(), 0):
        raise StoreError(
            f"{path} belongs to another user (uid {st.st_uid}): it may have been planted; "
            "remove it, or use a private directory"
        )


@contextlib.contextmanager
def locked_rewrite(path: Path) -> Iterator[Callable[[bytes], None]]:
    """Hold an exclusive ``fcntl`` lock on ``<path>.lock`` (mode 0600) and yield a
    function that replaces ``path`` atomically with the bytes given (a fresh 0600 file,
    fsynced, then renamed over it). Read ``path`` inside the block to update it: every
    writer holds the lock, so no update is lost between processes.

    Raises:
        StoreError: the directory or the lock could be written by another user, or the
            lock cannot be opened.
    """
    import fcntl

    lock_path = path.with_name(path.name + ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    check_directory(path.parent, (path, lock_path))
    try:
        lock_fd = open_private(lock_path, os.O_WRONLY | os.O_APPEND)
    except OSError as exc:
        raise StoreError(f"cannot open the lock {lock_path}: {exc}") from exc
    with os.fdopen(lock_fd, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)

        def write(data: bytes) -> None:
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.unlink(missing_ok=True)  # a fresh file: never one left (or planted)
            fd = open_private(tmp, os.O_WRONLY | os.O_EXCL)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)

        yield write
