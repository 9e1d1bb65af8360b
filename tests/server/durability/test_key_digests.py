"""No protection key at rest: the journal, the snapshots and a restore hold digests (issue 58, D7).

A session's protection key is all it takes to resume the session. The engine keeps
its SHA-256 digest; the journal logs CreateSession, AttachSession and ResumeSession
with the digest in the key's place (a record of its own kind, the frame's bytes not
logged as they are: they hold the key), and replays them presenting the digest. A
data directory or a backup written before holds the keys: it opens, each key hashed
as it loads, its sessions open with their keys, and what is written next holds none.
Engines and journals in this process; the real server's are
tests/server/net/test_resume_rights.py's.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgpack
import msgspec
import pytest

from tenure._core import (
    AttachSession,
    CreateNode,
    CreateSession,
    Engine,
    ResumeSession,
)
from tenure._core.snapshot import dump
from tenure._core.snapshot_layout import SESSION_FIELDS
from tenure._protocol.payloads import encode_command
from tenure.errors import CorruptLogError, PermissionDeniedError, SessionExpiredError
from tenure.server import DataDir, FsyncMode, Journal
from tenure.server._durability.backup import BackupHeader, preamble, read_backup, summary
from tenure.server._durability.records import (
    COMMAND_RECORD,
    KEYED_RECORD,
    apply_record,
    command_record,
)
from tenure.server._durability.restore import restore

from .test_journal import reopen, step

#: Two sessions' keys, long enough that nothing else holds one by chance.
FIRST, SECOND = b"first-protection-key-77", b"second-protection-key-88"


def files_bytes(directory: Path) -> bytes:
    """Every byte of every file under ``directory``."""
    return b"".join(path.read_bytes() for path in sorted(directory.rglob("*")) if path.is_file())


def assert_opens_with_its_key_only(engine: Engine, session_id: int, key: bytes) -> None:
    """The session is attached and resumed with ``key``, and refused another."""
    with pytest.raises(PermissionDeniedError, match="wrong protection key"):
        engine.apply(AttachSession(session_id, key + b"!", 1_000), engine.now)
    with pytest.raises(SessionExpiredError):
        engine.apply(ResumeSession(session_id, key + b"!", "n"), engine.now)
    assert engine.apply(AttachSession(session_id, key, 1_000), engine.now).seq_no == 1_000
    assert engine.apply(ResumeSession(session_id, key, "n"), engine.now).seq_no == 1_001
    engine.take_effects()


def test_a_keyed_command_is_logged_with_its_keys_digest_never_its_frame() -> None:
    for command in (
        CreateSession("n", FIRST),
        AttachSession(1, FIRST, 2),
        ResumeSession(1, FIRST, "n"),
    ):
        frame = encode_command(command)  # (what the native face hands on: it holds the key)
        assert FIRST in frame
        for actor in ("", "deployer"):
            record = command_record(command, 1.5, actor, frame)
            assert record is not None
            assert FIRST not in record
            assert record == command_record(command, 1.5, actor)
            assert msgspec.msgpack.decode(record)[0] == KEYED_RECORD
            assert hashlib.sha256(FIRST).digest() in record


def test_the_journal_and_its_snapshots_hold_no_key_and_replay_to_sessions_that_open(
    tmp_path: Path,
) -> None:
    journal = Journal(DataDir(tmp_path, FsyncMode.OFF))
    engine = journal.open(0.0)
    step(engine, journal, CreateNode("n"), 0.0)
    step(engine, journal, CreateSession("n", FIRST), 0.0)
    step(engine, journal, AttachSession(1, FIRST, 5), 1.0)
    step(engine, journal, ResumeSession(1, FIRST, "n"), 2.0)
    assert FIRST not in files_bytes(tmp_path)
    journal.snapshot(engine)
    step(engine, journal, CreateSession("n", SECOND), 3.0)
    step(engine, journal, ResumeSession(2, SECOND, "n"), 4.0)
    journal.abort()
    written = files_bytes(tmp_path)
    assert list(tmp_path.glob("snapshot-*.bin"))
    assert FIRST not in written
    assert SECOND not in written
    restarted = reopen(tmp_path, 100.0)
    assert (restarted.sessions[1].seq_no, restarted.sessions[2].seq_no) == (6, 2)
    assert_opens_with_its_key_only(restarted, 1, FIRST)
    assert_opens_with_its_key_only(restarted, 2, SECOND)


def older_snapshot(engine: Engine, keys: dict[int, bytes]) -> dict[str, Any]:
    """``engine``'s snapshot as a server of version 11 wrote it: the keys themselves."""
    data = dump(engine)
    flat = list(data["sessions"])
    for row in range(0, len(flat), SESSION_FIELDS):
        flat[row + 4] = keys[flat[row]]
    return {**data, "version": 11, "sessions": flat}


def older_record(command: Any, now: float, actor: str = "") -> bytes:
    """``command``'s record as an older server logged it: its frame, key and all."""
    layout = msgspec.Raw(encode_command(command))
    return msgspec.msgpack.encode([COMMAND_RECORD, now, layout, *([actor] if actor else [])])


def test_a_data_directory_an_older_server_wrote_opens_and_its_sessions_with_their_keys(
    tmp_path: Path,
) -> None:
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    engine.apply(CreateSession("n", FIRST), 0.0)
    directory = DataDir(tmp_path, FsyncMode.OFF)
    directory.recover()
    directory.compact(msgpack.packb(older_snapshot(engine, {1: FIRST}), use_bin_type=True))
    directory.append(older_record(CreateSession("n", SECOND), 1.0, "deployer"))
    directory.append(older_record(AttachSession(2, SECOND, 7), 2.0))
    directory.commit()
    directory.close()
    assert FIRST in files_bytes(tmp_path)
    assert SECOND in files_bytes(tmp_path)

    journal = Journal(DataDir(tmp_path, FsyncMode.OFF))
    opened = journal.open(50.0)
    assert opened.sessions[2].seq_no == 7
    assert opened.sessions[2].usage is not None
    assert opened.sessions[2].usage.owner == "deployer"
    assert_opens_with_its_key_only(opened, 1, FIRST)
    assert_opens_with_its_key_only(opened, 2, SECOND)
    journal.snapshot(opened)  # (what the server writes next: the old files go)
    journal.abort()
    written = files_bytes(tmp_path)
    assert FIRST not in written
    assert SECOND not in written


def test_a_keyed_record_of_another_command_is_refused_as_corrupt() -> None:
    engine = Engine()
    record = msgspec.msgpack.encode(
        [KEYED_RECORD, 0.0, msgspec.Raw(encode_command(CreateNode("n")))]
    )
    with pytest.raises(CorruptLogError, match="a keyed record of CreateNode"):
        apply_record(engine, record, "logged record 0", "here")


def test_a_backup_an_older_server_wrote_restores_with_no_key_in_clear(tmp_path: Path) -> None:
    engine = Engine()
    engine.apply(CreateNode("n"), 0.0)
    engine.apply(CreateSession("n", FIRST), 0.0)
    header = BackupHeader(1_800_000_000.0, "ab" * 16, "0.9", "standalone", engine.last_token)
    snapshot = msgpack.packb(older_snapshot(engine, {1: FIRST}), use_bin_type=True)
    body = preamble(header) + snapshot
    (tmp_path / "old.bak").write_bytes(body + hashlib.sha256(body).digest())
    backup = read_backup(tmp_path / "old.bak")
    assert summary(backup)["sessions"] == 1
    done = restore(backup, tmp_path / "restored")
    assert done.sessions_ended == 1  # (a restore ends every session, as ever)
    assert FIRST not in files_bytes(tmp_path / "restored")
    assert not reopen(tmp_path / "restored", 10.0).sessions
