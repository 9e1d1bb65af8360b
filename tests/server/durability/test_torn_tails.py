"""Torn tails of the last segment are cut at the last whole record; damage before one
refuses (issue 28). The rule is in tenure.server._durability.tails."""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from tenure.server import CorruptLogError, DataDir
from tenure.server._durability.storage import MAGIC

KEPT = [f"acknowledged {n}".encode() for n in range(5)]
#: A batch being written at the crash: 40 records of ~100 bytes (several sectors).
BATCH = [f"in flight {n:03d} ".encode() * 6 for n in range(40)]
SECTOR = 512


def frame(payload: bytes) -> bytes:
    return struct.pack(">II", len(payload), zlib.crc32(payload)) + payload


def committed(path: Path, *, preallocate: bool) -> tuple[Path, int]:
    """KEPT logged and synced (zeros preallocated after them if asked); the segment
    and the offset after its last record."""
    data_dir = DataDir(path, preallocate_chunk=64 * 1024)
    data_dir.recover()
    for record in KEPT:
        data_dir.append(record)
        data_dir.commit()
        if preallocate:
            data_dir.preallocate()
    data_dir.close()
    (segment,) = path.glob("wal-*.log")
    return segment, len(MAGIC) + sum(8 + len(r) for r in KEPT)


def put(segment: Path, offset: int, data: bytes) -> None:
    with segment.open("r+b") as file:
        file.seek(offset)
        file.write(data)


def recovered(path: Path) -> list[bytes]:
    data_dir = DataDir(path)
    try:
        return data_dir.recover().records
    finally:
        data_dir.close()


def batch() -> bytes:
    return b"".join(frame(r) for r in BATCH)


def partial_header(segment: Path, end: int) -> None:
    put(segment, end, batch()[:5])


def partial_body(segment: Path, end: int) -> None:
    put(segment, end, batch()[:60])


def bad_crc_on_the_last_record(segment: Path, end: int) -> None:
    record = bytearray(frame(b"the last record, one bit off"))
    record[-1] ^= 0x01
    put(segment, end, bytes(record))


def later_blocks_but_not_the_start(segment: Path, end: int) -> None:
    # The disk wrote the batch's sectors after the first two, not the ones it starts in
    # (they read back as zeros): pieces of records, and whole ones, behind zeros.
    data = batch()
    cut = -(-end // SECTOR) * SECTOR + SECTOR
    put(segment, cut, data[cut - end :])


def later_sectors_but_not_the_rest_of_the_first(segment: Path, end: int) -> None:
    # The batch starts part way into a sector, whose rest never reached the disk (it
    # reads back as zeros, beside older records: the sector is not all zeros), while
    # the batch's next sectors did: whole records follow in the next sector. (Found
    # by the power-loss scenario, tools/faults/power.py.)
    data = batch()
    cut = -(-end // SECTOR) * SECTOR
    assert cut > end, "the kept records end part way into a sector"
    put(segment, cut, data[cut - end :])


def zeros(segment: Path, end: int) -> None:
    put(segment, end, bytes(3 * SECTOR))


SHAPES: dict[str, Callable[[Path, int], None]] = {
    "partial header": partial_header,
    "partial body": partial_body,
    "bad crc on the last record": bad_crc_on_the_last_record,
    "later blocks but not the start": later_blocks_but_not_the_start,
    "later sectors but not the rest of the first": later_sectors_but_not_the_rest_of_the_first,
    "zeros": zeros,
}


@pytest.mark.parametrize("preallocate", [True, False], ids=["preallocated", "plain"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_torn_tail_is_cut_at_the_last_whole_record_and_logged(
    tmp_path: Path, shape: str, preallocate: bool, caplog: pytest.LogCaptureFixture
) -> None:
    segment, end = committed(tmp_path, preallocate=preallocate)
    SHAPES[shape](segment, end)
    before = segment.stat().st_size
    with caplog.at_level(logging.WARNING, logger="tenure.storage"):
        assert recovered(tmp_path) == KEPT
    cuts = [r for r in caplog.records if getattr(r, "event", None) == "torn_tail_dropped"]
    if shape == "zeros":
        assert not cuts  # zeros are the end of the log, not damage: kept for appends
    else:
        (cut,) = cuts
        fields = cut.fields  # type: ignore[attr-defined]
        assert (fields["offset"], fields["bytes"]) == (end, before - end)
        assert f"offset {end}" in cut.getMessage()
        assert segment.stat().st_size == end
    # Appends go on after the last whole record, and come back with the rest.
    data_dir = DataDir(tmp_path)
    data_dir.recover()
    data_dir.append(b"after the restart")
    data_dir.commit()
    data_dir.close()
    assert recovered(tmp_path) == [*KEPT, b"after the restart"]


def flip_a_middle_record(segment: Path, end: int) -> None:
    second = len(MAGIC) + 8 + len(KEPT[0])
    data = bytearray(segment.read_bytes())
    data[second + 8] ^= 0x40
    put(segment, 0, bytes(data))


def zero_a_middle_header(segment: Path, end: int) -> None:
    put(segment, len(MAGIC) + 8 + len(KEPT[0]), bytes(8))


@pytest.mark.parametrize("damage", [flip_a_middle_record, zero_a_middle_header])
@pytest.mark.parametrize("preallocate", [True, False], ids=["preallocated", "plain"])
def test_damage_before_a_whole_record_refuses_and_names_tenure_repair(
    tmp_path: Path, damage: Callable[[Path, int], None], preallocate: bool
) -> None:
    segment, end = committed(tmp_path, preallocate=preallocate)
    damage(segment, end)
    data = segment.read_bytes()
    with pytest.raises(CorruptLogError) as caught:
        recovered(tmp_path)
    second = len(MAGIC) + 8 + len(KEPT[0])
    assert caught.value.offset == second
    assert f"followed by a whole record at offset {second + 8 + len(KEPT[1])}" in str(
        caught.value
    ) or f"followed by a whole record at offset {second + 8}" in str(caught.value)
    assert segment.read_bytes() == data  # nothing cut


def test_a_torn_tail_in_a_segment_that_is_not_the_last_refuses(tmp_path: Path) -> None:
    data_dir = DataDir(tmp_path)
    data_dir.recover()
    data_dir.append(b"in segment 0")
    data_dir.commit()
    data_dir.begin_compaction()  # segment 1 starts; no snapshot yet
    data_dir.append(b"in segment 1")
    data_dir.close()
    first = tmp_path / "wal-0000000000000000.log"
    with first.open("ab") as file:
        file.write(frame(b"cut short")[:10])
    with pytest.raises(CorruptLogError, match="not the last segment"):
        recovered(tmp_path)
