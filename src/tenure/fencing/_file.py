"""The file guard: a data file, its token file next to it, both replaced atomically.

For the data file ``report.json`` the guard keeps ``report.json.fence`` (the highest
token accepted, in decimal) and ``report.json.lock`` (for flock). A write takes the
lock, reads the token file, refuses a lower token, then replaces the token file
and then the data file, each by writing a temporary file in the same directory,
fsyncing it, renaming it over the old one and fsyncing the directory. So readers
see the old data or the new, never a mix; a crash between the two replacements
leaves a raised token with the old data (a newer holder simply did not write yet),
never new data behind an old token.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from tenure.errors import FencedError, InvalidArgumentError, PreconditionFailedError
from tenure.fencing._token import MAX_TOKEN, check_token

__all__ = ["LOCK_TIMEOUT", "FileFence"]

#: Default of ``lock_timeout``: how long a write waits for another writer's lock, in seconds.
LOCK_TIMEOUT: Final = 10.0
#: Pause between two tries of a busy lock, in seconds.
_LOCK_POLL: Final = 0.005
_TOKEN_DIGITS: Final = len(str(MAX_TOKEN))


def _fsync_dir(directory: Path) -> None:
    """Make the renames in ``directory`` durable (they live in the directory's entries)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace(target: Path, content: bytes, mode: int) -> None:
    """Replace ``target`` by a file holding ``content``: temporary file, fsync, rename."""
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    _fsync_dir(target.parent)


class FileFence:
    """Fences writes of one file on a local file system.

    ::

        fence = FileFence("/srv/data/report.json")
        fence.write(lock.token, b"...")  # FencedError if a newer holder wrote
        await fence.awrite(lock.token, b"...")
        fence.read()                     # the data, None before the first write

    A token equal to the highest seen passes (the holder writes again); a lower one
    raises :class:`~tenure.errors.FencedError` and the file is left as it was.
    Writers on one machine take turns by flock on ``<file>.lock``, waiting at most
    ``lock_timeout`` seconds (then :class:`TimeoutError`). New files get ``mode``
    (less the umask). Only processes that write through a FileFence are fenced: a
    plain ``open(path, "w")`` elsewhere is not, and neither are writers on other
    machines of a network file system (docs/fencing.md).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, lock_timeout: float = LOCK_TIMEOUT, mode: int = 0o644
    ) -> None:
        """See the class. ``path`` is the data file; its directory must exist."""
        if not isinstance(path, str | os.PathLike) or not os.fspath(path):
            raise InvalidArgumentError(f"path must be a file's path, got {path!r}")
        if isinstance(lock_timeout, bool) or not isinstance(lock_timeout, int | float):
            raise InvalidArgumentError(f"lock_timeout must be seconds, got {lock_timeout!r}")
        if not 0 <= lock_timeout <= 3600:
            raise InvalidArgumentError(f"lock_timeout must be in [0, 3600], got {lock_timeout!r}")
        if type(mode) is not int or not 0 <= mode <= 0o777:
            raise InvalidArgumentError(f"mode must be permission bits in [0, 0o777], got {mode!r}")
        self.path = Path(path)
        self.token_path = self.path.with_name(self.path.name + ".fence")
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.lock_timeout = float(lock_timeout)
        self.mode = mode

    def __repr__(self) -> str:
        return f"FileFence({os.fspath(self.path)!r})"

    def read(self) -> bytes | None:
        """The data last written, None before the first write (no lock needed: renames)."""
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

    def highest(self) -> int | None:
        """The highest token accepted, None before the first write."""
        try:
            text = self.token_path.read_bytes()
        except FileNotFoundError:
            return None
        digits = text.strip()
        valid = digits.isdigit() and len(digits) <= _TOKEN_DIGITS
        if not (valid and 1 <= int(digits) <= MAX_TOKEN):
            raise PreconditionFailedError(
                f"{self.token_path} holds {text[:40]!r}, not a fencing token: refusing to"
                " trust it (something other than this guard wrote it)"
            )
        return int(digits)

    def write(self, token: int, data: bytes | bytearray | memoryview) -> None:
        """Replace the file's content by ``data`` if ``token`` passes the fence.

        Raises :class:`~tenure.errors.FencedError` (nothing written) when ``token``
        is lower than the highest accepted; :class:`TimeoutError` when another
        writer holds the lock longer than ``lock_timeout``.
        """
        token = check_token(token)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidArgumentError(f"data must be bytes, got {type(data).__name__}")
        content = bytes(data)
        with self._locked():
            highest = self.highest()
            if highest is not None and token < highest:
                raise FencedError(os.fspath(self.path), token, highest)
            if token != highest:  # the token first: see the module
                _replace(self.token_path, f"{token}\n".encode(), self.mode)
            _replace(self.path, content, self.mode)

    async def awrite(self, token: int, data: bytes | bytearray | memoryview) -> None:
        """:meth:`write` in a worker thread (it fsyncs, and may wait for the lock).

        Cancelling the awaiting task does not stop the thread: a write it had begun
        still completes, or is refused, as a whole.
        """
        await asyncio.to_thread(self.write, token, data)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the exclusive flock of ``<file>.lock``, waiting at most ``lock_timeout``."""
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, self.mode)
        try:
            deadline = time.monotonic() + self.lock_timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TimeoutError(
                            f"{self.lock_path} stayed locked by another writer for"
                            f" lock_timeout={self.lock_timeout} s"
                        ) from None
                    time.sleep(_LOCK_POLL)
            yield  # the lock ends with the descriptor
        finally:
            os.close(fd)
