"""Which state a data directory holds, which process may use it, and its secret.

:func:`lock_data_dir` holds the directory (and its lock file) for as long as the
server runs, so that two servers never write one log. :func:`instance_id` names the state
the directory holds: a client that reconnects to a server with another id knows
its sessions are gone (docs/protocol.md section 11). :func:`server_secret` is what
the faces sign with (the tokens and tickets they hand out), so that what they hand
out outlives a restart (a cluster's members share one kept in etcd instead).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Final

from tenure.server._durability.dirlock import LOCK_FILE as LOCK_FILE
from tenure.server._durability.dirlock import DataDirLock

log = logging.getLogger("tenure.server")

INSTANCE_ID_FILE: Final = "instance-id"
INSTANCE_ID_BYTES: Final = 16
#: The secret's file (named for the face that first needed one; kept so that the
#: tokens of existing data directories stay valid).
SECRET_FILE: Final = "dflockd.key"
SECRET_BYTES: Final = 32


def has_state(path: Path) -> bool:
    """Whether ``path`` holds a state already (a log or a snapshot)."""
    if not path.is_dir():
        return False
    return any(entry.name.startswith(("wal-", "snapshot-")) for entry in os.scandir(path))


def instance_id(path: Path, *, fresh: bool) -> bytes:
    """The data directory's instance id, created (16 random bytes) when the state is new.

    ``fresh``: the directory held no state before this start, so any old id names a
    state that is gone and is replaced (docs/protocol.md section 11).
    """
    file = path / INSTANCE_ID_FILE
    if not fresh:
        try:
            data = file.read_bytes()
        except FileNotFoundError:
            log.warning("%s is missing: the state gets a new instance id", file)
        else:
            if len(data) == INSTANCE_ID_BYTES:
                return data
            log.warning("%s is not %d bytes: replaced", file, INSTANCE_ID_BYTES)
    data = os.urandom(INSTANCE_ID_BYTES)
    write_durably(file, data, 0o644)
    return data


def write_durably(file: Path, data: bytes, mode: int) -> None:
    """Put ``data`` in ``file`` whole or not at all, and durably: written to a temp
    file and fsynced, renamed over ``file``, and the directory fsynced, so that a
    power cut keeps the new name (a rename is durable only once its directory is)."""
    temp = file.with_suffix(".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temp, file)
    directory = os.open(file.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def lock_data_dir(path: Path) -> DataDirLock:
    """Hold the data directory ``path`` exclusively: the directory and ``<path>/lock``
    (:mod:`tenure.server._durability.dirlock`), until closed or the process exits.

    Raises:
        OSError: another process holds it (a BlockingIOError: DataDirLockedError), or the
            directory is unusable.
    """
    return DataDirLock(path)


def server_secret(path: Path) -> bytes:
    """The data directory's secret, made on first use (mode 0600; the file and its
    directory fsynced, so a power cut soon after cannot make the next start mint
    another and void every token and ticket signed with this one)."""
    file = path / SECRET_FILE
    try:
        secret = file.read_bytes()
        if len(secret) == SECRET_BYTES:
            return secret
    except FileNotFoundError:
        pass
    secret = os.urandom(SECRET_BYTES)
    path.mkdir(parents=True, exist_ok=True)
    write_durably(file, secret, 0o600)
    return secret
