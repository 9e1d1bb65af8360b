"""The data directory: durable appends, torn tails, corruption, compaction."""

from __future__ import annotations

import logging
import struct
import zlib
from pathlib import Path

import pytest

from tenure.server import CorruptLogError, DataDir, FsyncMode
from tenure.server._durability.storage import FIRST_PREALLOCATION, MAGIC, RECORD_LIMIT


def write(path: Path, records: list[bytes], *, compact_after: int | None = None) -> DataDir:
    data_dir = DataDir(path)
    data_dir.recover()
    for i, record in enumerate(records):
        data_dir.append(record)
        data_dir.commit()
        if compact_after is not None and i == compact_after:
            data_dir.compact(b"state after " + record)
    data_dir.close()
    return data_dir


def recover(path: Path) -> tuple[bytes | None, list[bytes]]:
    data_dir = DataDir(path)
    found = data_dir.recover()
    data_dir.close()
    return found.snapshot, found.records


def segment(path: Path) -> Path:
    (only,) = sorted(path.glob("wal-*.log"))
    return only


def test_a_fresh_directory_recovers_empty(tmp_path: Path) -> None:
    assert recover(tmp_path / "data") == (None, [])
    assert (tmp_path / "data").is_dir()


def test_records_come_back_in_order_across_restarts(tmp_path: Path) -> None:
    write(tmp_path, [b"one", b"two"])
    write(tmp_path, [b"three"])
    assert recover(tmp_path) == (None, [b"one", b"two", b"three"])


def test_group_commit_writes_a_batch_at_once(tmp_path: Path) -> None:
    data_dir = DataDir(tmp_path, FsyncMode.OFF)
    data_dir.recover()
    for i in range(100):
        data_dir.append(b"r%d" % i)
    assert segment(tmp_path).stat().st_size == len(MAGIC)  # nothing written yet
    data_dir.commit()
    data_dir.close()
    assert recover(tmp_path)[1] == [b"r%d" % i for i in range(100)]


@pytest.mark.parametrize("cut", [1, 3, 7, 8, 9, 12])
def test_a_torn_last_record_is_dropped_with_a_warning(
    tmp_path: Path, cut: int, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, [b"kept", b"torn-record"])
    path = segment(tmp_path)
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.truncate(size - cut)
    with caplog.at_level(logging.WARNING, logger="tenure.storage"):
        assert recover(tmp_path) == (None, [b"kept"])
    assert "torn tail" in caplog.text
    write(tmp_path, [b"after"])  # appends continue cleanly after the cut
    assert recover(tmp_path) == (None, [b"kept", b"after"])


def test_a_zero_filled_tail_is_the_end_and_is_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, [b"kept"])
    with segment(tmp_path).open("ab") as file:
        file.write(bytes(12_345))  # as a crash in the middle of preallocating leaves it
    size = segment(tmp_path).stat().st_size
    with caplog.at_level(logging.WARNING, logger="tenure.storage"):
        assert recover(tmp_path) == (None, [b"kept"])
    assert "torn" not in caplog.text
    assert segment(tmp_path).stat().st_size == size  # the zeros stay, for the appends
    write(tmp_path, [b"after"])
    assert recover(tmp_path) == (None, [b"kept", b"after"])
    assert segment(tmp_path).stat().st_size == size  # written over the zeros, not after


def test_a_last_record_with_a_bad_checksum_is_a_torn_tail(tmp_path: Path) -> None:
    write(tmp_path, [b"kept", b"last"])
    path = segment(tmp_path)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    assert recover(tmp_path) == (None, [b"kept"])


def test_a_bad_checksum_in_the_middle_stops_start_up_naming_file_and_offset(
    tmp_path: Path,
) -> None:
    write(tmp_path, [b"first", b"second", b"third"])
    path = segment(tmp_path)
    data = bytearray(path.read_bytes())
    offset = len(MAGIC) + 8 + len(b"first")  # the second record's header
    data[offset + 8] ^= 0xFF  # flip a payload byte of the second record
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptLogError) as caught:
        recover(tmp_path)
    assert caught.value.path == path
    assert caught.value.offset == offset
    assert str(path) in str(caught.value)
    assert path.read_bytes() == bytes(data)  # nothing was "repaired" away


def test_a_huge_length_is_corruption_not_an_allocation(tmp_path: Path) -> None:
    write(tmp_path, [b"first"])
    with segment(tmp_path).open("ab") as file:
        file.write(struct.pack(">II", RECORD_LIMIT + 1, 0) + b"x" * 16)
    with pytest.raises(CorruptLogError, match="over the limit"):
        recover(tmp_path)


def test_a_file_of_zeros_or_garbage_is_not_a_log(tmp_path: Path) -> None:
    write(tmp_path, [b"first"])
    segment(tmp_path).write_bytes(b"\x00" * 100)
    with pytest.raises(CorruptLogError, match="bad header"):
        recover(tmp_path)


def test_garbage_between_records_is_corruption(tmp_path: Path) -> None:
    write(tmp_path, [b"first"])
    payload = b"second"
    with segment(tmp_path).open("ab") as file:
        file.write(bytes(8) + struct.pack(">II", len(payload), zlib.crc32(payload)) + payload)
    with pytest.raises(CorruptLogError, match="empty record header"):
        recover(tmp_path)


def test_compaction_keeps_the_state_and_drops_old_segments(tmp_path: Path) -> None:
    write(tmp_path, [b"a", b"b", b"c", b"d"], compact_after=1)
    assert recover(tmp_path) == (b"state after b", [b"c", b"d"])
    assert len(list(tmp_path.glob("wal-*.log"))) == 1
    assert len(list(tmp_path.glob("snapshot-*.bin"))) == 1


def test_an_interrupted_compaction_recovers_the_same_state(tmp_path: Path) -> None:
    write(tmp_path, [b"a", b"b"])
    # A crash between writing the temp snapshot and renaming it: the temp file is junk.
    (tmp_path / "snapshot-0000000000000001.tmp").write_bytes(b"half a snapshot")
    # ... and a crash that left a half-written snapshot under its final name.
    (tmp_path / "snapshot-0000000000000001.bin").write_bytes(MAGIC + b"\x00\x00")
    assert recover(tmp_path) == (None, [b"a", b"b"])


def test_a_missing_segment_is_corruption(tmp_path: Path) -> None:
    write(tmp_path, [b"a"])
    data_dir = DataDir(tmp_path)
    data_dir.recover()
    data_dir.compact(b"snap")
    data_dir.append(b"b")
    data_dir.close()
    segment(tmp_path).unlink()
    with pytest.raises(CorruptLogError, match="missing"):
        recover(tmp_path)


def test_records_must_be_non_empty_and_bounded(tmp_path: Path) -> None:
    data_dir = DataDir(tmp_path)
    data_dir.recover()
    with pytest.raises(ValueError, match="1 to"):
        data_dir.append(b"")
    with pytest.raises(ValueError, match="1 to"):
        data_dir.append(bytes(RECORD_LIMIT + 1))
    data_dir.close()


def test_a_log_that_starts_late_without_a_snapshot_is_corruption(tmp_path: Path) -> None:
    write(tmp_path, [b"a"])
    segment(tmp_path).rename(tmp_path / "wal-0000000000000005.log")
    with pytest.raises(CorruptLogError, match="segment 0 is missing"):
        recover(tmp_path)


def test_a_header_torn_while_being_written_recovers_empty(tmp_path: Path) -> None:
    (tmp_path / "wal-0000000000000000.log").write_bytes(MAGIC[:5])
    assert recover(tmp_path) == (None, [])
    write(tmp_path, [b"new"])
    assert recover(tmp_path) == (None, [b"new"])


# -- preallocated segments ---------------------------------------------------------------


def preallocated(path: Path, records: list[bytes], chunk: int = 64 * 1024) -> DataDir:
    """Records committed as the writer thread does, zeros preallocated after each; closed."""
    data_dir = DataDir(path, preallocate_chunk=chunk)
    data_dir.recover()
    for record in records:
        data_dir.append(record)
        data_dir.write(data_dir.take_pending())
        data_dir.sync()
        data_dir.preallocate()
    data_dir.close()
    return data_dir


def test_a_preallocated_segment_recovers_and_appends_continue_after_its_records(
    tmp_path: Path,
) -> None:
    records = [f"record {n}".encode() for n in range(50)]
    preallocated(tmp_path, records[:20])
    path = segment(tmp_path)
    used = len(MAGIC) + sum(8 + len(r) for r in records[:20])
    assert path.stat().st_size > used
    assert not any(path.read_bytes()[used:])  # zeros, after the records
    assert recover(tmp_path) == (None, records[:20])
    preallocated(tmp_path, records[20:])
    assert recover(tmp_path) == (None, records)


def test_preallocation_doubles_up_to_its_chunk_and_only_when_due(tmp_path: Path) -> None:
    data_dir = DataDir(tmp_path, FsyncMode.OFF, preallocate_chunk=4 * FIRST_PREALLOCATION)
    data_dir.recover()
    grown = [data_dir.preallocate()]
    assert data_dir.preallocate() == 0  # a quarter of the next chunk is free
    record = bytes(range(256)) * 256  # 64 KiB
    for _ in range(112):  # 7 MiB of records, preallocating as the writer does
        data_dir.append(record)
        data_dir.commit()
        grown.append(data_dir.preallocate())
    data_dir.close()
    assert [n for n in grown if n] == [
        FIRST_PREALLOCATION,
        2 * FIRST_PREALLOCATION,
        4 * FIRST_PREALLOCATION,
        4 * FIRST_PREALLOCATION,
    ]
    assert recover(tmp_path) == (None, [record] * 112)


def test_a_preallocation_chunk_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="preallocate_chunk"):
        DataDir(tmp_path, preallocate_chunk=0)


@pytest.mark.parametrize("damage", ["cut", "flip"])
def test_a_torn_record_in_the_preallocated_zeros_is_a_torn_tail(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    preallocated(tmp_path, [b"kept"])
    path = segment(tmp_path)
    end = len(MAGIC) + 8 + len(b"kept")
    payload = b"torn while the disk wrote it"
    record = struct.pack(">II", len(payload), zlib.crc32(payload)) + payload
    # "cut": the rest stayed zeros; "flip": every byte there, the last one wrong.
    record = record[:20] if damage == "cut" else record[:-1] + b"?"
    with path.open("r+b") as file:
        file.seek(end)
        file.write(record)
    with caplog.at_level(logging.WARNING, logger="tenure.storage"):
        assert recover(tmp_path) == (None, [b"kept"])
    assert "torn tail" in caplog.text
    preallocated(tmp_path, [b"after"])  # appends continue cleanly where it was
    assert recover(tmp_path) == (None, [b"kept", b"after"])


def test_a_header_of_zeros_ends_the_log_and_a_record_after_it_is_corruption(
    tmp_path: Path,
) -> None:
    # No record is empty (append refuses it), so a zero header is never a record: it
    # ends the log, and a record found behind it is damage, never silently dropped.
    preallocated(tmp_path, [b"first"])
    path = segment(tmp_path)
    end = len(MAGIC) + 8 + len(b"first")
    payload = b"behind a zero header"
    with path.open("r+b") as file:
        file.seek(end + 8)
        file.write(struct.pack(">II", len(payload), zlib.crc32(payload)) + payload)
    with pytest.raises(CorruptLogError, match="empty record header") as caught:
        recover(tmp_path)
    assert caught.value.offset == end


def test_compaction_starts_a_fresh_segment_after_a_preallocated_one(tmp_path: Path) -> None:
    data_dir = DataDir(tmp_path, preallocate_chunk=64 * 1024)
    data_dir.recover()
    data_dir.append(b"before")
    data_dir.commit()
    data_dir.preallocate()
    data_dir.compact(b"state")
    data_dir.append(b"after")
    data_dir.commit()
    data_dir.preallocate()
    data_dir.close()
    assert recover(tmp_path) == (b"state", [b"after"])
