"""A data directory made from a backup, with its fencing tokens moved past the old server's.

The old server may have gone on granting after the backup was taken, so the
backup's highest token is not the highest its holders carry. A restored engine's
fencing counter therefore starts at the next **token epoch** (docs/fencing.md,
"Across a restore"): the next multiple of :data:`EPOCH` (2**48) above the
backup's highest token. The old server would have to grant more than 2**48
(2.8e14) times after its backup to reach it: nine years at a million grants a
second. Tokens stay below 2**64 for 65,535 restores.

Sessions are not restored as live: each session the backup holds is ended as an
operator's KillSession would end it (its holds released, its waits withdrawn, the
lock-delay kept), and the directory gets a new instance id, so a client that
reconnects is told its session is gone (docs/protocol.md section 11): a clear loss,
never a silent hold. Resuming them could not be sound: the old server may have
moved their holds on after the backup, and the restored state would hand a client a
hold it lost. Nodes, their settings and annexes, semaphores and their data, and
claims (not a session's: a claim keeps its slot until its end) are restored.
Session ids move to the next multiple of :data:`SESSION_EPOCH` likewise.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgpack

from tenure._core import Engine, KillSession
from tenure._core.snapshot import dump
from tenure.server._durability.backup import Backup
from tenure.server._durability.dirlock import LOCK_FILE, DataDirLock
from tenure.server._durability.identity import INSTANCE_ID_BYTES, INSTANCE_ID_FILE, write_durably
from tenure.server._durability.storage import DataDir

__all__ = [
    "EPOCH",
    "SESSION_EPOCH",
    "NotEmptyError",
    "Restored",
    "restore",
    "restored_engine",
    "token_floor",
]

#: Token epochs: a restored server's first token is past the next multiple of this.
EPOCH: Final = 1 << 48
#: Session-id epochs: a restored server's first session id likewise.
SESSION_EPOCH: Final = 1 << 40


class NotEmptyError(Exception):
    """The data directory to restore into holds files already (``--force`` replaces them)."""


@dataclass(frozen=True, slots=True)
class Restored:
    """What a restore did: sessions ended, the highest token of the backup, and the
    floor: every token the restored server hands out is greater."""

    sessions_ended: int
    backup_token: int
    token_floor: int


def token_floor(last_token: int) -> int:
    """The restored fencing counter's start: the next multiple of :data:`EPOCH` above
    ``last_token`` (module docstring); every token handed out after is greater."""
    return (last_token // EPOCH + 1) * EPOCH


def restored_engine(backup: Backup) -> tuple[Engine, Restored]:
    """The backup's engine with its sessions ended and its counters moved (module
    docstring); and what was done."""
    engine = backup.engine()
    # (before the sessions end: ending a holder's serves its queue, with new tokens)
    backup_token = max(engine.last_token, backup.header.last_token)
    now = engine.now
    live = [(s.node, s.session_id) for s in engine.sessions.values()]
    for node, session_id in live:
        engine.apply(KillSession(node, session_id), now)
    engine.take_effects()  # (nobody to tell: the connections were the old server's)
    engine.last_token = token_floor(backup_token)
    engine.last_session_id = (engine.last_session_id // SESSION_EPOCH + 1) * SESSION_EPOCH
    return engine, Restored(len(live), backup_token, engine.last_token)


def restore(backup: Backup, data_dir: Path, *, force: bool = False) -> Restored:
    """Write ``backup``'s state, restored (module docstring), as a new data directory.

    Raises:
        NotEmptyError: ``data_dir`` holds files and ``force`` is false.
        DataDirLockedError: a running server holds ``data_dir``.
        OSError: the directory cannot be written.
    """
    engine, done = restored_engine(backup)  # (before touching the directory)
    snapshot = msgpack.packb(dump(engine), use_bin_type=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    with DataDirLock(data_dir):  # (DataDirLockedError: a server runs on it)
        present = [entry for entry in data_dir.iterdir() if entry.name != LOCK_FILE]
        if present and not force:
            raise NotEmptyError(f"{data_dir} is not empty: add --force to replace what it holds")
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
