"""What a data directory holds is its owner's alone (issue 58, D7): the journal and the
snapshots carry every session's protection key, with which a client resumes the
session, and were written 0644 in a directory anyone could enter. Now the directory
is made 0700 and every segment and snapshot 0600, whatever the umask; a segment an
older build left 0644 is made 0600 as it is opened."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenure.server._durability.backup import read_backup
from tenure.server._durability.restore import restore
from tenure.server._durability.storage import DataDir
from tests.server.durability.test_backup_file import engine_with_holds, write_backup


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The umask most machines have (022: files 0644, directories 0755)."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def test_the_journal_and_snapshots_are_their_owners_alone(tmp_path: Path, open_umask: None) -> None:
    data = DataDir(tmp_path / "data")
    data.recover()
    data.append(b"a record")
    data.compact(b"a snapshot")
    data.append(b"another record")
    data.close()
    assert mode(tmp_path / "data") == 0o700
    files = sorted((tmp_path / "data").iterdir())
    assert any(f.name.startswith("wal-") for f in files), files
    assert any(f.name.startswith("snapshot-") for f in files), files
    for file in files:
        if file.name.startswith(("wal-", "snapshot-")):
            assert mode(file) == 0o600, file


def test_a_segment_left_readable_by_an_older_build_is_made_private(
    tmp_path: Path, open_umask: None
) -> None:
    data = DataDir(tmp_path / "data")
    data.recover()
    data.append(b"a record")
    data.close()
    [segment] = (tmp_path / "data").glob("wal-*.log")
    segment.chmod(0o644)
    again = DataDir(tmp_path / "data")
    again.recover()
    again.close()
    assert mode(segment) == 0o600


def test_a_restored_directory_is_private_too(tmp_path: Path, open_umask: None) -> None:
    write_backup(tmp_path / "b", engine_with_holds())
    restore(read_backup(tmp_path / "b"), tmp_path / "restored")
    assert mode(tmp_path / "restored") == 0o700
    for file in (tmp_path / "restored").iterdir():
        if file.name.startswith(("wal-", "snapshot-")):
            assert mode(file) == 0o600, file
