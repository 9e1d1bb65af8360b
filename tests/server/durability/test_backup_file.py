"""The backup file (header, snapshot, checksum) and a restore into a data directory:
the tokens moved past the old server's, the sessions ended, the directory a server
recovers. Engines in this process; the real servers are tests/server/test_backup.py's."""

from __future__ import annotations

import hashlib
import struct
import time
from pathlib import Path

import msgpack
import pytest

from tenure._core import Acquire, CreateNode, CreateSemaphore, CreateSession, Engine
from tenure._core.snapshot import dump
from tenure.server._backups import _last_token
from tenure.server._durability.backup import (
    BACKUP_FORMAT,
    MAGIC,
    BackupHeader,
    BadBackupError,
    preamble,
    read_backup,
    summary,
)
from tenure.server._durability.dirlock import DataDirLock, DataDirLockedError
from tenure.server._durability.identity import INSTANCE_ID_FILE
from tenure.server._durability.journal import Journal
from tenure.server._durability.restore import (
    HEADROOM,
    TOKEN_LIMIT,
    BadTokenFloorError,
    NotADataDirError,
    NotEmptyError,
    restore,
    restored_engine,
    token_floor,
)
from tenure.server._durability.storage import DataDir


def engine_with_holds() -> Engine:
    """Two sessions of node ``n``: one holds ``a`` and ``b``, the other waits for ``a``."""
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    holder = engine.apply(CreateSession("n", b"k1", 10.0), 0.0)
    waiter = engine.apply(CreateSession("n", b"k2", 10.0), 0.0)
    engine.apply(CreateSemaphore(holder.session_id, "a", 1), 0.0)  # (a mutex: one waits)
    engine.apply(Acquire(holder.session_id, "a", 1, request_id=1), 0.0)
    engine.apply(Acquire(holder.session_id, "b", 1, ephemeral=True, request_id=2), 0.0)
    engine.apply(Acquire(waiter.session_id, "a", 1, request_id=3), 0.0)
    engine.take_effects()
    return engine


def write_backup(path: Path, engine: Engine, *, format_version: int = BACKUP_FORMAT) -> bytes:
    header = BackupHeader(1_800_000_000.0, "ab" * 16, "9.9", "standalone", engine.last_token)
    snapshot: bytes = msgpack.packb(dump(engine), use_bin_type=True)
    body = preamble(header) + snapshot
    if format_version != BACKUP_FORMAT:
        body = body[: len(MAGIC)] + struct.pack(">H", format_version) + body[len(MAGIC) + 2 :]
    data = body + hashlib.sha256(body).digest()
    path.write_bytes(data)
    return data


def test_a_backup_says_what_it_holds(tmp_path: Path) -> None:
    engine = engine_with_holds()
    write_backup(tmp_path / "b", engine)
    facts = summary(read_backup(tmp_path / "b"))
    assert facts["nodes"] == 1
    assert facts["sessions"] == 2
    assert facts["semaphores"] == 2
    assert facts["holds"] == 2
    assert facts["waiters"] == 1
    assert facts["highest_token"] == engine.last_token == 2
    assert facts["instance_id"] == "ab" * 16
    assert facts["created_at"] == 1_800_000_000.0


def test_damage_and_unknown_formats_are_refused(tmp_path: Path) -> None:
    data = write_backup(tmp_path / "b", engine_with_holds())
    for at in (len(MAGIC) + 10, len(data) // 2, len(data) - 1):
        damaged = bytearray(data)
        damaged[at] ^= 0x01
        (tmp_path / "d").write_bytes(damaged)
        with pytest.raises(BadBackupError, match="bad checksum"):
            read_backup(tmp_path / "d")
    (tmp_path / "cut").write_bytes(data[: len(data) // 2])
    with pytest.raises(BadBackupError, match="bad checksum"):
        read_backup(tmp_path / "cut")
    write_backup(tmp_path / "new", engine_with_holds(), format_version=BACKUP_FORMAT + 1)
    with pytest.raises(BadBackupError, match=f"format {BACKUP_FORMAT + 1}"):
        read_backup(tmp_path / "new")
    (tmp_path / "other").write_bytes(b"SQLite format 3\x00" + data)
    with pytest.raises(BadBackupError, match="not a tenure backup"):
        read_backup(tmp_path / "other")


#: A restore's wall clock in these tests (2027-01-15, in nanoseconds since 1970).
CLOCK = 1_800_000_000 * 10**9


def test_the_token_floor_is_the_restores_clock_or_the_operators_floor() -> None:
    assert token_floor(41, CLOCK) == CLOCK
    assert token_floor(CLOCK - 1, CLOCK) == CLOCK  # (a backup of a server restored then)
    assert token_floor(41, CLOCK, at_least=CLOCK + 5) == CLOCK + 5  # --token-floor, higher
    assert token_floor(41, CLOCK, at_least=7) == CLOCK  # (a lower one changes nothing)
    # Later restores of the same backup start higher: a restore cannot reuse an
    # earlier one's floor, even without seeing it.
    floors = [token_floor(41, CLOCK + n) for n in range(3)]
    assert floors == sorted(set(floors))


def test_a_clock_behind_the_backup_is_refused_and_names_the_way_out() -> None:
    # Before: the floor came from the backup alone (the next multiple of 2**48 above
    # its token), the same for every restore of it; now a clock not ahead of the
    # backup's tokens cannot order this restore after the ones that made them.
    with pytest.raises(BadTokenFloorError, match=r"this machine's clock .* --token-floor N"):
        token_floor(CLOCK, CLOCK)
    with pytest.raises(BadTokenFloorError, match=rf"--token-floor {CLOCK + 9} .* {CLOCK + 10}"):
        token_floor(CLOCK + 10, CLOCK, at_least=CLOCK + 9)
    assert token_floor(CLOCK + 10, CLOCK, at_least=CLOCK + 11) == CLOCK + 11


def test_a_floor_too_near_the_limit_is_refused_never_an_overflow() -> None:
    # Before: a backup in the last token epoch ended in "internal error: OverflowError".
    last = TOKEN_LIMIT - HEADROOM
    assert token_floor(41, CLOCK, at_least=last) == last
    with pytest.raises(BadTokenFloorError, match="fewer than 2\\*\\*48 tokens"):
        token_floor(41, CLOCK, at_least=last + 1)
    with pytest.raises(BadTokenFloorError, match="fewer than 2\\*\\*48 tokens"):
        token_floor(TOKEN_LIMIT - 2, TOKEN_LIMIT - 1)


def test_a_restored_engine_ends_its_sessions_and_moves_its_counters(tmp_path: Path) -> None:
    engine = engine_with_holds()
    write_backup(tmp_path / "b", engine)
    restored, done = restored_engine(read_backup(tmp_path / "b"), clock_ns=CLOCK)
    assert (done.sessions_ended, done.backup_token, done.token_floor) == (2, 2, CLOCK)
    assert not restored.sessions
    assert set(restored.nodes["n"].semaphores) == {"a"}  # (b was ephemeral: gone with its holder)
    assert not restored.nodes["n"].semaphores["a"].owners
    assert not restored.nodes["n"].semaphores["a"].waiters
    assert restored.last_token == CLOCK
    assert restored.last_session_id >= 1 << 40
    session = restored.apply(CreateSession("n", b"k", 10.0), restored.now)
    grant = restored.apply(Acquire(session.session_id, "a", 1, request_id=1), restored.now)
    assert grant.token == CLOCK + 1 > engine.last_token  # granted at once: nobody held it


def test_a_restored_engine_starts_at_the_wall_clock_by_default(tmp_path: Path) -> None:
    write_backup(tmp_path / "b", engine_with_holds())
    before = time.time_ns()
    _, done = restored_engine(read_backup(tmp_path / "b"))
    assert before <= done.token_floor <= time.time_ns()


def test_a_restored_directory_recovers_to_the_restored_state(tmp_path: Path) -> None:
    write_backup(tmp_path / "b", engine_with_holds())
    target = tmp_path / "data"
    before = time.time_ns()
    done = restore(read_backup(tmp_path / "b"), target)
    assert (done.sessions_ended, done.backup_token) == (2, 2)
    assert before <= done.token_floor <= time.time_ns()
    assert len((target / INSTANCE_ID_FILE).read_bytes()) == 16
    journal = Journal(DataDir(target), background=False)
    engine = journal.open(100.0)
    try:
        assert engine.last_token == done.token_floor
        assert not engine.sessions
        assert set(engine.nodes) == {"n"}
    finally:
        journal.close()


def test_a_restore_refuses_a_directory_in_use_or_not_empty(tmp_path: Path) -> None:
    write_backup(tmp_path / "b", engine_with_holds())
    backup = read_backup(tmp_path / "b")
    target = tmp_path / "data"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(NotEmptyError, match="--force"):
        restore(backup, target)
    # Before: --force deleted whatever the directory held (a mistyped --data-dir).
    with pytest.raises(NotADataDirError, match=r"'notes\.txt', and no instance-id"):
        restore(backup, target, force=True)
    assert (target / "notes.txt").read_text() == "mine"
    (target / "notes.txt").unlink()
    restore(backup, target)
    (target / "notes.txt").write_text("left in a data directory")
    restore(backup, target, force=True)  # (a data directory's files: replaced)
    assert not (target / "notes.txt").exists()
    first = (target / INSTANCE_ID_FILE).read_bytes()
    with DataDirLock(target), pytest.raises(DataDirLockedError):
        restore(backup, target, force=True)
    restore(backup, target, force=True)
    assert (target / INSTANCE_ID_FILE).read_bytes() != first  # a new state each time


def test_a_cluster_backups_highest_token_is_read_past_what_its_process_wrote_after() -> None:
    """The leader reads the backup process's last JSON line on its standard error; an
    interpreter may write more there as it exits (a warning, an ignored exception),
    which must not cost the backup."""
    said = 'a warning\n{"last_token": 281474976710661}\nException ignored in: <...>\n'
    assert _last_token(said) == 281474976710661
    with pytest.raises(RuntimeError, match="highest token"):
        _last_token("the cluster's backup failed: etcd unreachable\n")
