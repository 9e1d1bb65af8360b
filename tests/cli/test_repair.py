"""``tenure repair DATA_DIR`` explains damage and cuts the log there (issue 28)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tenure.server import CorruptLogError, DataDir
from tenure.server._durability.storage import MAGIC
from tests.cli.support import TENURE
from tests.server.wire import WAIT, ServerProcess

RECORDS = [f"record {n}".encode() for n in range(6)]


def logged(path: Path, records: list[bytes], *, compact_after: int | None = None) -> None:
    data_dir = DataDir(path)
    data_dir.recover()
    for n, record in enumerate(records):
        data_dir.append(record)
        data_dir.commit()
        if n == compact_after:
            data_dir.begin_compaction()  # a new segment (the snapshot never written)
    data_dir.close()


def recovered(path: Path) -> list[bytes]:
    data_dir = DataDir(path)
    try:
        return data_dir.recover().records
    finally:
        data_dir.close()


def repair(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TENURE), "repair", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=3 * WAIT,
        check=False,
    )


def damaged(path: Path) -> tuple[Path, int, bytes]:
    """RECORDS logged, the third one's payload flipped: the segment, the offset of the
    damage and the segment's bytes."""
    logged(path, RECORDS)
    (segment,) = path.glob("wal-*.log")
    offset = len(MAGIC) + sum(8 + len(r) for r in RECORDS[:2])
    data = bytearray(segment.read_bytes())
    data[offset + 9] ^= 0x20
    segment.write_bytes(bytes(data))
    return segment, offset, bytes(data)


def test_a_whole_log_is_fine(tmp_path: Path) -> None:
    logged(tmp_path, RECORDS)
    result = repair(str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "the log is whole (6 records in 1 segment(s)); nothing to repair" in result.stdout


def test_damage_is_explained_and_the_server_names_repair(tmp_path: Path) -> None:
    segment, offset, data = damaged(tmp_path)
    result = repair(str(tmp_path))
    assert result.returncode == 3
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"{segment}: 2 whole records, then at byte offset {offset}: checksum mismatch"
    )
    assert f"a whole record starts after it, at offset {offset + 8 + len(RECORDS[2])}" in lines[1]
    assert f"run `tenure repair {tmp_path} --truncate` to do it" in result.stdout
    assert segment.read_bytes() == data  # explaining changes nothing
    served = subprocess.run(
        [sys.executable, "-m", "tenure", "serve", "--port", "0", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=3 * WAIT,
        check=False,
    )
    assert served.returncode == 1
    assert f"`tenure repair {tmp_path}` explains the damage" in served.stderr


def test_truncate_asks_cuts_at_the_last_good_record_and_keeps_a_copy(tmp_path: Path) -> None:
    segment, offset, data = damaged(tmp_path)
    refused = repair(str(tmp_path), "--truncate")  # no terminal to confirm on
    assert refused.returncode == 2
    assert "add --yes" in refused.stderr
    assert segment.read_bytes() == data
    done = repair(str(tmp_path), "--truncate", "--yes")
    assert done.returncode == 0, done.stderr
    assert segment.stat().st_size == offset
    (kept,) = tmp_path.glob("repair-*")
    assert (kept / segment.name).read_bytes() == data  # the segment as it was
    assert f"truncated to {offset} bytes" in (kept / "README").read_text()
    assert recovered(tmp_path) == RECORDS[:2]
    assert "the log is whole" in repair(str(tmp_path)).stdout


def test_damage_in_an_earlier_segment_moves_the_later_ones_aside(tmp_path: Path) -> None:
    logged(tmp_path, RECORDS, compact_after=2)
    first, second = sorted(tmp_path.glob("wal-*.log"))
    with first.open("ab") as file:
        file.write(b"\x00\x00\x00\x09torn")
    with pytest.raises(CorruptLogError, match="not the last segment"):
        recovered(tmp_path)
    result = repair(str(tmp_path), "--truncate", "--yes")
    assert result.returncode == 0, result.stderr
    assert f"1 later segment(s): {second.name}" in result.stdout
    assert not second.exists()
    (kept,) = tmp_path.glob("repair-*")
    assert (kept / second.name).exists()
    assert recovered(tmp_path) == RECORDS[:3]


def test_a_running_server_keeps_repair_out(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ServerProcess(data) as server:
        (data / "lock").unlink()  # not even so
        result = repair(str(data), "--truncate", "--yes")
    assert result.returncode == 1
    assert f"in use by a running tenure server (pid {server.proc.pid}): stop it first" in (
        result.stderr
    )
