"""A data directory made from a backup, with its fencing tokens moved past every earlier one.

The old server may have gone on granting after the backup was taken, so the
backup's highest token is not the highest its holders carry; and the same backup
may be restored more than once (into two directories, or again after a restore went
wrong), by restores that cannot see each other. A restored engine's fencing counter
therefore starts at the **restore's wall clock**, in nanoseconds since 1970
(docs/fencing.md, "Across a restore"), or higher where the operator asks
(``--token-floor``): two restores of any backups of one service start at different
floors, the later one higher, and a server restored earlier would have had to hand
out more tokens than nanoseconds passed between the two restores (a billion a
second; a server hands out about a hundred thousand) to reach the later one's. A
server never restored counts from 1 and is further behind still.

The clock must be ahead of the backup: a restore whose clock reads no later than the
backup's highest token (a machine whose clock is wrong, or a backup of a server
restored with a floor above its clock) is refused and names ``--token-floor``,
never silently started at a floor an earlier restore may have used; so is a floor that
would leave fewer than :data:`HEADROOM` tokens below the wire's limit (2**64).

Sessions are not restored as live: each session the backup holds is ended as an
operator's KillSession would end it (its holds released, its waits withdrawn, the
lock-delay kept), and the directory gets a new instance id, so a client that
reconnects is told its session is gone (docs/protocol.md section 11): a clear loss,
never a silent hold. Resuming them could not be sound: the old server may have
moved their holds on after the backup, and the restored state would hand a client a
hold it lost. Nodes, their settings and annexes, semaphores and their data, and
claims (not a session's: a claim keeps its slot until its end) are restored.
Session ids move to the next multiple of :data:`SESSION_EPOCH` (a new instance id
already tells every client of the old server that its session is gone).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgpack

from tenure._core import Engine, KillSession
from tenure._core.snapshot import dump
from tenure.server._durability.backup import Backup
from tenure.server._durability.dirlock import LOCK_FILE, DataDirLock
from tenure.server._durability.identity import INSTANCE_ID_BYTES, INSTANCE_ID_FILE, write_durably
from tenure.server._durability.storage import PRIVATE_DIR, DataDir

__all__ = [
    "HEADROOM",
    "SESSION_EPOCH",
    "TOKEN_LIMIT",
    "BadTokenFloorError",
    "NotADataDirError",
    "NotEmptyError",
    "Restored",
    "restore",
    "restored_engine",
    "token_floor",
]

#: Tokens travel as unsigned 64-bit integers: every token is below this.
TOKEN_LIMIT: Final = 1 << 64
#: The tokens a restored server must have left below :data:`TOKEN_LIMIT` (2**48: nine
#: years at a million grants a second).
HEADROOM: Final = 1 << 48
#: Session-id epochs: a restored server's first session id likewise.
SESSION_EPOCH: Final = 1 << 40


class NotEmptyError(Exception):
    """The data directory to restore into holds files already (``--force`` replaces them)."""


class NotADataDirError(Exception):
    """``--force`` was given for a directory that is not a tenure data directory: it
    replaces only a data directory's files, never a directory of anything else."""


class BadTokenFloorError(ValueError):
    """No floor a restore may start at: the clock (or ``--token-floor``) is not above the
    backup's highest token, or leaves too few tokens below the limit (the message says
    which, and what to give)."""


@dataclass(frozen=True, slots=True)
class Restored:
    """What a restore did: sessions ended, the highest token of the backup, and the
    floor: every token the restored server hands out is greater."""

    sessions_ended: int
    backup_token: int
    token_floor: int


def token_floor(backup_token: int, clock_ns: int, at_least: int = 0) -> int:
    """The restored fencing counter's start (module docstring): the restore's wall clock
    ``clock_ns`` (nanoseconds since 1970), or ``at_least`` (``--token-floor``) where that
    is higher; every token handed out after is greater.

    Raises:
        BadTokenFloorError: that floor is not above ``backup_token`` (the clock is behind
            the backup's tokens), or leaves fewer than :data:`HEADROOM` tokens.
    """
    floor = max(clock_ns, at_least)
    if floor <= backup_token and at_least > clock_ns:
        raise BadTokenFloorError(
            f"--token-floor {at_least} is not above the backup's highest token "
            f"{backup_token}: give N above every token the service ever handed out"
        )
    if floor <= backup_token:
        raise BadTokenFloorError(
            f"this machine's clock ({floor} ns since 1970) is not above the backup's "
            f"highest token {backup_token}: a restore starts its tokens at its wall clock, "
            "and this one is behind the backup's (set the clock, or give --token-floor N, "
            "N above every token the service ever handed out)"
        )
    if floor > TOKEN_LIMIT - HEADROOM:
        raise BadTokenFloorError(
            f"a floor of {floor} leaves fewer than 2**48 tokens below 2**64: "
            f"restore with a lower --token-floor (above {backup_token})"
        )
    return floor


def restored_engine(
    backup: Backup, *, token_floor_at_least: int = 0, clock_ns: int | None = None
) -> tuple[Engine, Restored]:
    """The backup's engine with its sessions ended and its counters moved (module
    docstring); and what was done. ``clock_ns`` is the restore's wall clock
    (``time.time_ns()`` unless given); ``token_floor_at_least`` is ``--token-floor``.

    Raises:
        BadTokenFloorError: no floor above the backup's tokens (:func:`token_floor`).
    """
    engine = backup.engine()
    # (before the sessions end: ending a holder's serves its queue, with new tokens)
    backup_token = max(engine.last_token, backup.header.last_token)
    clock = time.time_ns() if clock_ns is None else clock_ns
    floor = token_floor(backup_token, clock, token_floor_at_least)
    now = engine.now
    live = [(s.node, s.session_id) for s in engine.sessions.values()]
    for node, session_id in live:
        engine.apply(KillSession(node, session_id), now)
    engine.take_effects()  # (nobody to tell: the connections were the old server's)
    engine.last_token = floor
    engine.last_session_id = (engine.last_session_id // SESSION_EPOCH + 1) * SESSION_EPOCH
    return engine, Restored(len(live), backup_token, engine.last_token)


def restore(
    backup: Backup, data_dir: Path, *, force: bool = False, token_floor_at_least: int = 0
) -> Restored:
    """Write ``backup``'s state, restored (module docstring), as a new data directory.

    Raises:
        BadTokenFloorError: no floor above the backup's tokens (:func:`token_floor`).
        NotEmptyError: ``data_dir`` holds files and ``force`` is false.
        NotADataDirError: ``data_dir`` holds files and is no tenure data directory
            (no instance id, no journal segment): ``force`` is refused there.
        DataDirLockedError: a running server holds ``data_dir``.
        OSError: the directory cannot be written.
    """
    # (before touching the directory)
    engine, done = restored_engine(backup, token_floor_at_least=token_floor_at_least)
    snapshot = msgpack.packb(dump(engine), use_bin_type=True)
    data_dir.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    with DataDirLock(data_dir):  # (DataDirLockedError: a server runs on it)
        present = [entry for entry in data_dir.iterdir() if entry.name != LOCK_FILE]
        if present and not force:
            raise NotEmptyError(f"{data_dir} is not empty: add --force to replace what it holds")
        if present and not _is_data_dir(data_dir):
            # (a mistyped --data-dir with --force deleted everything it held)
            strange = sorted(entry.name for entry in present)[0]
            raise NotADataDirError(
                f"{data_dir} is not a tenure data directory (it holds {strange!r}, and no "
                f"{INSTANCE_ID_FILE} or journal): --force replaces only a data directory's "
                "files; restore into a new or empty directory"
            )
        for entry in present:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        directory = DataDir(data_dir)
        directory.recover()  # (opens segment 0, which the compaction replaces)
        directory.compact(snapshot)
        directory.close()
        # A new state: clients of the old one are told their sessions are gone.
        write_durably(data_dir / INSTANCE_ID_FILE, os.urandom(INSTANCE_ID_BYTES), 0o644)
    return done


def _is_data_dir(path: Path) -> bool:
    """Whether ``path`` holds a tenure data directory: the instance id a server writes
    as it first starts, or a journal segment."""
    return (path / INSTANCE_ID_FILE).is_file() or any(path.glob("wal-*.log"))
