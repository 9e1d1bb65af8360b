"""The data directory's lock: one server per directory, whatever is deleted meanwhile.

A lock on ``DATA/lock`` alone can be bypassed: ``rm DATA/lock`` while a server runs,
and the next server creates a new file of that name and locks it; two servers then
append to one log, and it is lost (issue 28). So the server holds two flocks:

* on the **directory itself** (a directory's descriptor can be flocked on Linux):
  it cannot be deleted while it holds files, and a directory put in its place is
  another inode, holding none of the state;
* on ``DATA/lock`` (what servers before this one locked, so that an older server
  and a newer one still exclude each other), checked after locking to still be the
  file of that name (a file deleted between open and flock locks nothing).

The lock file also holds the server's pid, so that a refused start names it.
:meth:`DataDirLock.check` (called every few seconds by the server) notices a lock
file that was deleted or replaced, says so loudly, and locks a new one.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path
from types import TracebackType
from typing import Final

log = logging.getLogger("tenure.server")

LOCK_FILE: Final = "lock"
_ATTEMPTS: Final = 5  # lock files replaced between open and flock before giving up


class DataDirLockedError(BlockingIOError):
    """Another process holds the data directory.

    ``pids``: who (from /proc/locks or the lock file; empty if unknown);
    ``lock_file``: whether ``DATA/lock`` is still there (it may have been deleted).
    """

    def __init__(self, path: Path, pids: list[int], lock_file: bool) -> None:
        who = f" (pid {', '.join(map(str, pids))})" if pids else ""
        super().__init__(f"{path} is in use by another tenure server{who}")
        self.pids = pids
        self.lock_file = lock_file


class DataDirLock:
    """Both flocks of a data directory, held until :meth:`close` (or the process exits)."""

    def __init__(self, path: Path) -> None:
        """Lock ``path`` (created if missing).

        Raises:
            DataDirLockedError: another process holds it (a BlockingIOError).
            OSError: the directory is unusable.
        """
        path.mkdir(mode=0o700, parents=True, exist_ok=True)  # (storage.PRIVATE_DIR)
        self.path = path
        self._file_fd: int | None = None
        self._dir_fd = -1
        # The lock file is opened first so that a directory the server may not use is
        # reported on it (as before the directory was locked too).
        existed = (path / LOCK_FILE).exists()
        opened = _open_lock_file(path)
        try:
            self._dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            _flock(self._dir_fd, path, existed)
        except BaseException:
            os.close(opened)
            self.close()
            raise
        try:
            self._file_fd = _lock_file(path, opened)  # closes ``opened`` if it raises
        except BaseException:
            self.close()
            raise

    def check(self) -> bool:
        """Whether ``DATA/lock`` is still the file this process locked; if not (it was
        deleted or replaced), log it loudly and lock a new one. The directory's own
        lock still keeps other servers out meanwhile."""
        if self._file_fd is None:
            return False
        if _same_file(self._file_fd, self.path / LOCK_FILE):
            return True
        log.error(
            "%s was deleted or replaced while this server runs: locked again "
            "(the data directory itself stays locked; do not delete the lock file)",
            self.path / LOCK_FILE,
            extra={"event": "lock_file_replaced", "fields": {"path": str(self.path)}},
        )
        old, self._file_fd = self._file_fd, None
        try:
            self._file_fd = _lock_file(self.path)
        except OSError as error:
            log.critical("cannot lock %s again: %s", self.path / LOCK_FILE, error)
        os.close(old)
        return False

    def close(self) -> None:
        """Let go of both locks."""
        if self._file_fd is not None:
            os.close(self._file_fd)
            self._file_fd = None
        if self._dir_fd >= 0:
            os.close(self._dir_fd)
            self._dir_fd = -1

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _flock(fd: int, path: Path, lock_file: bool = True) -> None:
    """flock ``fd`` or raise DataDirLockedError (``lock_file``: whether DATA/lock was there)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise DataDirLockedError(path, _holders(path), lock_file) from None


def _open_lock_file(path: Path) -> int:
    return os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def _lock_file(path: Path, fd: int | None = None) -> int:
    """Lock ``path/lock`` (``fd``, or opened; made if missing) and write this process's
    pid in it. ``fd`` is closed if this raises or it is not the file of that name."""
    file = path / LOCK_FILE
    for _ in range(_ATTEMPTS):
        fd = _open_lock_file(path) if fd is None else fd
        try:
            _flock(fd, path)
        except BaseException:
            os.close(fd)
            raise
        if _same_file(fd, file):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd
        os.close(fd)  # deleted or replaced between open and flock: that one locks nothing
        fd = None
    raise OSError(f"{file} keeps being replaced: cannot lock it")


def _same_file(fd: int, path: Path) -> bool:
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (named.st_dev, named.st_ino)


def _holders(path: Path) -> list[int]:
    """Who holds ``path``'s locks: the pids in /proc/locks (Linux), else the lock file's."""
    pids = _lock_holders(path) | _lock_holders(path / LOCK_FILE)
    pids.discard(os.getpid())
    if not pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pids = {int((path / LOCK_FILE).read_text().split()[0])}
    return sorted(pids)


def _lock_holders(path: Path) -> set[int]:
    """The pids /proc/locks lists as holding a lock on ``path``'s inode."""
    try:
        info = path.stat()
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return set()
    wanted = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    pids = set()
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 08:01:131 0 EOF" ("->" marks a waiter)
        if len(fields) >= 6 and fields[1] != "->" and fields[5] == wanted:
            with contextlib.suppress(ValueError):
                pids.add(int(fields[4]))
    return pids
