"""A backup file: one engine snapshot wrapped in a header and a checksum (docs/operations.md).

Layout, in order::

    MAGIC                      b"TENURE-BACKUP\\n" (14 bytes)
    format version             2 bytes, big-endian (:data:`BACKUP_FORMAT`)
    header length              4 bytes, big-endian
    header                     msgpack map (:class:`BackupHeader`)
    snapshot                   msgpack of :func:`tenure._core.snapshot.dump`, to the end
    sha256                     32 bytes: the digest of every byte before it

The digest comes last so that a server can stream a backup while its snapshot is
still being written (by a forked child, :mod:`tenure.server._http.backup`), hashing as
it goes. The snapshot inside is the data directory's own format, versioned by
:mod:`tenure._core.snapshot_layout` (a server loads every older version), so a
backup is read with the code that reads a data directory.

:func:`read_backup` checks the magic, the format version and the digest before it
trusts a byte of the rest; :func:`summary` is what ``tenure backup verify`` prints.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import signal
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

import msgpack

from tenure._core import Engine
from tenure._core.snapshot import dump, load
from tenure.errors import InvalidArgumentError

__all__ = [
    "BACKUP_FORMAT",
    "DIGEST_BYTES",
    "MAGIC",
    "Backup",
    "fork_dump",
    "BackupHeader",
    "BadBackupError",
    "preamble",
    "read_backup",
    "summary",
]

#: What every backup file starts with.
MAGIC: Final = b"TENURE-BACKUP\n"
#: The layout above; a reader refuses any other (a newer tenure's backup says so).
BACKUP_FORMAT: Final = 1
#: The trailing sha256 digest's size.
DIGEST_BYTES: Final = 32
_PREFIX: Final = struct.Struct(">HI")  # format version, header length
#: A header larger than this is damage, not a header (it holds a few short fields).
_MAX_HEADER: Final = 64 * 1024


class BadBackupError(InvalidArgumentError):
    """A file that is not a backup this version can read: wrong magic, unknown format
    version, a digest that does not match, or a malformed header or snapshot."""


@dataclass(frozen=True, slots=True)
class BackupHeader:
    """What a backup says of itself: when (UNIX seconds), which server made it (its
    instance id in hex, its tenure version, its role: standalone or a cluster's
    leader) and the highest fencing token its server had handed out then."""

    created_at: float
    instance_id: str
    version: str
    role: str
    last_token: int

    def plain(self) -> dict[str, Any]:
        """The header as the map the file stores."""
        return {
            "created_at": self.created_at,
            "instance_id": self.instance_id,
            "version": self.version,
            "role": self.role,
            "last_token": self.last_token,
        }

    @classmethod
    def from_plain(cls, plain: object) -> BackupHeader:
        """The header of a stored map.

        Raises:
            BadBackupError: a field is missing or of the wrong type.
        """
        if not isinstance(plain, dict):
            raise BadBackupError("the backup's header is not a map")
        try:
            header = cls(
                float(plain["created_at"]),
                str(plain["instance_id"]),
                str(plain["version"]),
                str(plain["role"]),
                int(plain["last_token"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise BadBackupError(f"the backup's header is malformed: {error!r}") from None
        return header


def preamble(header: BackupHeader) -> bytes:
    """The bytes before the snapshot: magic, format version, the header."""
    packed: bytes = msgpack.packb(header.plain(), use_bin_type=True)
    return MAGIC + _PREFIX.pack(BACKUP_FORMAT, len(packed)) + packed


@dataclass(frozen=True, slots=True)
class Backup:
    """A backup read and checked: its header and its snapshot's plain data."""

    header: BackupHeader
    snapshot: dict[str, Any]

    def engine(self) -> Engine:
        """The engine the snapshot holds (as a data directory's would load).

        Raises:
            BadBackupError: the snapshot is of a version this tenure cannot load.
        """
        try:
            return load(self.snapshot)
        except InvalidArgumentError as error:
            raise BadBackupError(str(error)) from None


def read_backup(path: Path) -> Backup:
    """Read and check the backup at ``path`` (module docstring).

    Raises:
        BadBackupError: see the class; OSError: the file cannot be read.
    """
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise BadBackupError(f"{path} is not a tenure backup (no {MAGIC!r} at its start)")
    start = len(MAGIC) + _PREFIX.size
    if len(data) < start + DIGEST_BYTES:
        raise BadBackupError(f"{path} is cut short ({len(data)} bytes)")
    version, header_bytes = _PREFIX.unpack_from(data, len(MAGIC))
    if version != BACKUP_FORMAT:
        raise BadBackupError(
            f"{path} is a backup of format {version}; this tenure reads format {BACKUP_FORMAT}"
        )
    body, digest = data[:-DIGEST_BYTES], data[-DIGEST_BYTES:]
    actual = hashlib.sha256(body).digest()
    if actual != digest:
        raise BadBackupError(
            f"{path}: bad checksum (sha256 {actual.hex()[:16]}..., "
            f"stored {digest.hex()[:16]}...): the file is damaged or incomplete"
        )
    if header_bytes > _MAX_HEADER or start + header_bytes > len(body):
        raise BadBackupError(f"{path}: a header of {header_bytes} bytes does not fit")
    try:
        header = msgpack.unpackb(body[start : start + header_bytes], raw=False)
        snapshot = msgpack.unpackb(body[start + header_bytes :], raw=False)
    except (ValueError, msgpack.UnpackException) as error:
        raise BadBackupError(f"{path}: malformed: {error!r}") from None
    if not isinstance(snapshot, dict):
        raise BadBackupError(f"{path}: the snapshot is not a map")
    return Backup(BackupHeader.from_plain(header), snapshot)


def summary(backup: Backup) -> dict[str, Any]:
    """What ``tenure backup verify`` prints: the header, and counted from the loaded
    engine its nodes, sessions, semaphores, holds (owners), waiters and claims.

    Raises:
        BadBackupError: the snapshot does not load.
    """
    engine = backup.engine()
    semaphores = holds = waiters = claims = 0
    for node in engine.nodes.values():
        claims += len(node.claims)
        for sem in node.semaphores.values():
            semaphores += 1
            holds += len(sem.owners)
            waiters += len(sem.waiters)
    return {
        "format": BACKUP_FORMAT,
        "snapshot_version": backup.snapshot.get("version"),
        **backup.header.plain(),
        "highest_token": engine.last_token,
        "nodes": len(engine.nodes),
        "sessions": len(engine.sessions),
        "semaphores": semaphores,
        "holds": holds,
        "waiters": waiters,
        "claims": claims,
    }


def fork_dump(engine: Engine) -> tuple[int, int]:
    """Fork a child that writes the msgpack of ``engine``'s snapshot (as it is now) to
    a pipe and exits; the child's pid and the pipe's read end (EOF: done; the child's
    exit code says whether it wrote it whole: 0).

    The server's loop pays for the fork only: the state is walked and encoded in the
    child, from its copy-on-write view of the engine at the instant of the fork.
    """
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():
        # (as the journal's snapshot child: the child only encodes, writes and exits)
        warnings.filterwarnings("ignore", r".*multi-threaded.*fork", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        _dump_in_child(engine, write_fd)
    os.close(write_fd)
    return pid, read_fd


def _dump_in_child(engine: Engine, write_fd: int) -> NoReturn:
    """The forked child: every inherited descriptor but ``write_fd`` closed (a restart
    must be able to lock the data directory and listen), the snapshot written, exit."""
    status = 1
    try:
        gc.disable()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        os.closerange(3, write_fd)
        os.closerange(write_fd + 1, 65536)
        data = memoryview(msgpack.packb(dump(engine), use_bin_type=True))
        while data:
            data = data[os.write(write_fd, data) :]
        status = 0
    except BaseException as error:
        with contextlib.suppress(OSError):  # stderr is the server's log
            os.write(2, f"backup child: {error!r}\n".encode())
    finally:
        os._exit(status)
