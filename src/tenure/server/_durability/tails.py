"""Reading a log file's records, and telling a torn tail from damage before it.

A crash (or a power cut) during an append leaves the end of the last segment torn:
the last record cut short, a checksum that fails, zeros where a write never reached
the disk, or, when the disk wrote a batch's later blocks but not its first, zeros
followed by pieces of records. Recovery may drop such a *tail*: nothing in it was
acknowledged with ``--fsync always`` (an append is acknowledged only after the
fdatasync that covers it, and every append after a lost write came later). Damage
*before* a whole record is something else (a bad disk, a stray write) and stops
start-up: dropping it would drop acknowledged records.

The exact rule (:func:`scan`). Let D be the offset of the first record that does not
check out (a header cut short, a zero length, a record running past the end of the
file, a bad crc32; a length over the limit is never torn, as the writer never wrote
one). What follows D is a **tail** when no whole record
(length 1 to the limit, inside the file, crc32 matching) starts at any byte offset
after D and before Z. Z is D itself when the bytes from D to the end of D's 512-byte
sector are all zeros (the write that was to put a record there never reached that
sector: a batch that starts part way into a sector, its first sector lost and its
later ones written; etcd's WAL reads a record one of whose sector pieces is all
zeros as torn, ``isTornEntry``). Else Z is the first 512-byte sector at or after D
(aligned in the file) that holds only zeros, or the end of the file if there is
none. Zeros count as the end: a write the disk never made reads back as zeros, and
a record is never empty, so zeros from a record's start to its sector's end, or a
whole sector of zeros, are never the middle of the log as written. What lies after
them came later than the lost write, so it is part of the tail too. Anything else is
damage before the tail.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass
from typing import Final

MAGIC: Final = b"TENURE-LOG\x00\x01"
HEAD: Final = struct.Struct(">II")
#: The unit a disk writes whole (or not at all): 512 bytes, the smallest sector.
SECTOR: Final = 512
#: The most payload bytes checksummed while looking for a whole record after damage;
#: past it (megabytes of non-zero bytes after the damage) the damage is not a tail.
CRC_BUDGET: Final = 256 * 1024 * 1024
_ZERO_SECTOR: Final = bytes(SECTOR)
_NONZERO: Final = re.compile(rb"[^\x00]")


@dataclass(frozen=True, slots=True)
class Scan:
    """What one log file holds.

    ``records``: the whole records from the start; ``end``: the offset just after the
    last of them (0: not even a whole header). ``damage``: what is wrong at ``end``
    (None: nothing, or only zeros, follows). ``later``: where a whole record starts
    after the damage (it is then not a tail). ``tail``: the damage is a torn tail.
    """

    records: list[bytes]
    end: int
    size: int
    damage: str | None = None
    later: int | None = None
    tail: bool = False


def scan(data: bytes, limit: int) -> Scan:
    """The records of a log file's bytes, and what (if anything) follows them."""
    size = len(data)
    if not data.startswith(MAGIC):
        if size < len(MAGIC) and MAGIC.startswith(data):
            # Torn while writing the header itself (a new segment: no record yet).
            return Scan([], 0, size, "header cut short" if data else None, None, bool(data))
        return Scan([], 0, size, "not a tenure log (bad header)")
    records: list[bytes] = []
    offset = len(MAGIC)
    view = memoryview(data)
    damage: str | None = None
    while offset < size:
        if size - offset < HEAD.size:
            damage = "record header cut short"
            break
        length, crc = HEAD.unpack_from(data, offset)
        end = offset + HEAD.size + length
        if length == 0:
            damage = "empty record header before more data"
        elif length > limit:
            damage = f"record length {length} over the limit {limit}"
        elif end > size:
            damage = f"record of {length} bytes cut short"
        elif zlib.crc32(view[offset + HEAD.size : end]) != crc:
            damage = "checksum mismatch"
        if damage is not None:
            break
        records.append(bytes(view[offset + HEAD.size : end]))
        offset = end
    if damage is None or zeros_from(data, offset):
        return Scan(records, offset, size)  # the end, or the preallocated zeros
    later, decided = _later_record(view, offset, limit)
    if not decided:
        damage += " (too much data after it to rule out a whole record)"
    # A length over the limit is never torn: the writer never wrote one, and a write
    # that did not reach the disk reads back as zeros, not as another length.
    torn = decided and later is None and not damage.startswith("record length")
    return Scan(records, offset, size, damage, later, torn)


def zeros_from(data: bytes, offset: int) -> bool:
    """Whether every byte of ``data`` from ``offset`` on is zero (counted in C: a
    preallocated tail is megabytes)."""
    return data.count(0, offset) == len(data) - offset


def zero_sector(data: bytes | memoryview, start: int) -> int:
    """The first sector-aligned offset at or after ``start`` from which a whole sector
    (or all that is left of the file) is zeros; the file's size if there is none."""
    size = len(data)
    at = -(-start // SECTOR) * SECTOR
    while at < size:
        piece = data[at : at + SECTOR]
        if piece == _ZERO_SECTOR[: len(piece)]:
            return at
        at += SECTOR
    return size


def zeros_to_sector_end(data: bytes | memoryview, start: int) -> bool:
    """Whether the bytes from ``start`` to the end of its sector (or of the file) are
    all zeros, and there is at least one."""
    end = min(len(data), (start // SECTOR + 1) * SECTOR)
    piece = data[start:end]
    return len(piece) > 0 and piece == _ZERO_SECTOR[: len(piece)]


def _later_record(view: memoryview, damage: int, limit: int) -> tuple[int | None, bool]:
    """Where the first whole record after offset ``damage`` and before the next zero
    sector starts (None: nowhere), and whether that could be decided within the budget."""
    size = len(view)
    stop = damage if zeros_to_sector_end(view, damage) else zero_sector(view, damage)
    budget = CRC_BUDGET
    at = damage + 1
    while at < stop and at + HEAD.size <= size:
        length, crc = HEAD.unpack_from(view, at)
        if length == 0:
            # Skip a run of zeros at once: a length needs a non-zero byte among 4.
            found = _NONZERO.search(view, at, stop)
            if found is None:
                break
            at = max(at + 1, found.start() - 3)
            continue
        end = at + HEAD.size + length
        if length <= limit and end <= size:
            budget -= length
            if budget < 0:
                return None, False
            if zlib.crc32(view[at + HEAD.size : end]) == crc:
                return at, True
        at += 1
    return None, True
