"""The data directory: a write-ahead log of records, and snapshots that compact it.

Layout of ``--data-dir``::

    wal-0000000000000003.log       log segment 3 (the one being appended to)
    snapshot-0000000000000003.bin  the state before segment 3's first record

A log segment is a header (``MAGIC``) followed by records, each
``length: u32 BE | crc32(payload): u32 BE | payload``, then (with ``--fsync
always``) zeros: the writer extends the segment with zeros ahead of its records
(:meth:`DataDir.preallocate`), so that a commit's fdatasync has only data to
write and no file size. No record is empty, so a header of zeros is never a
record: it is the end of the log. A snapshot is the same header and exactly one
record. Recovery reads the newest snapshot that is whole, then every record of
the segments from its number on.

What recovery accepts and refuses (never a silent loss):

* A **zero-filled tail** is the end of the log: the preallocated space (or what
  a crash during preallocation left), kept for the appends to come.
* A **torn tail** of the last segment (exactly defined in
  :mod:`tenure.server._durability.tails`: damage after which no whole record
  starts before a sector of zeros or the end of the file, as a crash or power cut
  during an append leaves it) is cut off: the segment is truncated to its last
  whole record, with one warning saying how many bytes at which offset.
* **Anything else that does not check out** (a bad record followed by a whole
  one, a torn tail in a segment that is not the last, a bad header, a missing
  segment in the sequence) stops start-up with :class:`CorruptLogError`, naming
  the file and the byte offset; ``tenure repair DATA_DIR`` explains it and can
  cut the log there (:mod:`tenure.server._durability.examine`).

Records are opaque bytes here; what they mean is the server's business.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tenure.errors import (
    CorruptLogError as CorruptLogError,
)  # re-exported: it lives in tenure.errors
from tenure.server._durability.tails import HEAD as _HEAD
from tenure.server._durability.tails import MAGIC as MAGIC
from tenure.server._durability.tails import scan

log = logging.getLogger("tenure.storage")

#: The largest record the log accepts (a snapshot may be larger: see SNAPSHOT_LIMIT).
#: The modes of what the data directory holds: the journal and snapshots carry every
#: session's protection key, with which a client may resume the session; nobody but
#: the server's user reads them (issue 58, D7). Likewise a backup (tenure backup).
PRIVATE_FILE: Final = 0o600
PRIVATE_DIR: Final = 0o700


def private_file(path: Path) -> int:
    """A new (or truncated) file at ``path`` for writing, readable by its owner alone,
    whatever the umask; its descriptor."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, PRIVATE_FILE)
    os.fchmod(fd, PRIVATE_FILE)  # (a file that was there keeps its mode through O_CREAT)
    return fd


RECORD_LIMIT: Final = 16 * 1024 * 1024
SNAPSHOT_LIMIT: Final = 4 * 1024 * 1024 * 1024 - 1
_SEGMENT = re.compile(r"^wal-([0-9a-f]{16})\.log$")
_SNAPSHOT = re.compile(r"^snapshot-([0-9a-f]{16})\.bin$")
_TEMP = re.compile(r"^snapshot-([0-9a-f]{16})\.tmp$")
#: The most a segment is extended by at once, ahead of its records (``--fsync always``).
PREALLOCATE_CHUNK: Final = 64 * 1024 * 1024
#: The first extension of a segment; each next one doubles, up to PREALLOCATE_CHUNK, so
#: a server that logs little never writes (nor later reads back) megabytes of zeros.
FIRST_PREALLOCATION: Final = 1024 * 1024
#: Zeros are written this many at a time (one buffer, reused).
_ZEROS: Final = bytes(1024 * 1024)


class FsyncMode(enum.Enum):
    """When appended records reach the disk (see docs/operations.md for the trade-off)."""

    ALWAYS = "always"  # fsync before every acknowledgement (group commit batches them)
    BATCH = "batch"  # fsync at most every batch interval: a crash loses that interval
    OFF = "off"  # leave it to the OS: a machine crash may lose recent writes


@dataclass(frozen=True, slots=True)
class Recovered:
    """What recovery found: the snapshot (if any) and the records logged after it."""

    snapshot: bytes | None
    records: list[bytes]
    segment: int  # the number of the newest segment (appends continue there)


@dataclass(frozen=True, slots=True)
class Compaction:
    """A snapshot on its way: number N, written to ``temp``, renamed to ``final``."""

    number: int
    temp: Path
    final: Path

    def write(self, snapshot: bytes) -> None:
        """Write the snapshot whole to the temp file and fsync it (nothing else)."""
        with os.fdopen(private_file(self.temp), "wb") as file:
            file.write(MAGIC + _HEAD.pack(len(snapshot), zlib.crc32(snapshot)) + snapshot)
            file.flush()
            os.fsync(file.fileno())


def _read_records(path: Path, limit: int, *, last: bool = False) -> tuple[list[bytes], int]:
    """All whole records of a file and the offset just after the last one.

    A torn tail (:mod:`tenure.server._durability.tails`) of the ``last`` segment is
    cut off, with a warning saying what was cut.

    Raises:
        CorruptLogError: damage that is not a torn tail of the last segment.
    """
    found = scan(path.read_bytes(), limit)
    if found.damage is None:
        return found.records, found.end
    if last and found.tail:
        _drop_torn_tail(path, found.end, found.damage)
        return found.records, found.end
    if found.later is not None:
        why = f"{found.damage}, followed by a whole record at offset {found.later}"
    elif found.tail:
        why = f"{found.damage} (a torn tail, but this is not the last segment)"
    else:
        why = found.damage
    raise CorruptLogError(path, found.end, why)


def framed(payload: bytes) -> bytes:
    """One record as the log holds it: length, crc32, payload."""
    return _HEAD.pack(len(payload), zlib.crc32(payload)) + payload


def unframed(data: bytes | memoryview) -> list[tuple[int, int]]:
    """Where each whole record of ``data`` (records as the log holds them) ends:
    ``(start, end)`` of its payload, checked against its crc32.

    Raises:
        ValueError: ``data`` is not whole records (cut short, or a checksum fails).
    """
    spans, offset = [], 0
    while offset < len(data):
        if len(data) - offset < _HEAD.size:
            raise ValueError(f"a record header is cut short at offset {offset}")
        length, crc = _HEAD.unpack_from(data, offset)
        start, end = offset + _HEAD.size, offset + _HEAD.size + length
        if length == 0 or end > len(data):
            raise ValueError(f"a record of {length} bytes at offset {offset} does not fit")
        if zlib.crc32(data[start:end]) != crc:
            raise ValueError(f"checksum mismatch in the record at offset {offset}")
        spans.append((start, end))
        offset = end
    return spans


#: Commits of appended records: fdatasync, as etcd's WAL does. It writes the data and
#: what reading it back needs (the file's size) but not timestamps, so one commit costs
#: fewer disk writes than fsync. (fsync where the platform has no fdatasync.)
_sync_data: Final = getattr(os, "fdatasync", os.fsync)


def _drop_torn_tail(path: Path, end: int, damage: str) -> None:
    """Cut the last segment after its last whole record ``end`` (a torn tail)."""
    size = path.stat().st_size
    log.warning(
        "%s: dropping a torn tail of %d bytes at offset %d (%s)",
        path,
        size - end,
        end,
        damage,
        extra={
            "event": "torn_tail_dropped",
            "fields": {"file": str(path), "offset": end, "bytes": size - end, "why": damage},
        },
    )
    with path.open("r+b") as file:
        file.truncate(end)
        file.flush()
        os.fsync(file.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DataDir:
    """The server's data directory: recover at start, append records, compact.

    Appending is split for a writer thread (:mod:`tenure.server._durability.writer`):
    :meth:`append` and :meth:`take_pending` run on the event loop, :meth:`write`,
    :meth:`sync` and :meth:`preallocate` on the writer; :meth:`commit` is all of it
    in one go. Opening and compacting segments needs a writer with nothing in flight.
    """

    def __init__(
        self,
        path: Path,
        fsync: FsyncMode = FsyncMode.ALWAYS,
        *,
        preallocate_chunk: int = PREALLOCATE_CHUNK,
    ) -> None:
        """``preallocate_chunk``: the most :meth:`preallocate` extends a segment by."""
        if preallocate_chunk < 1:
            raise ValueError("preallocate_chunk must be at least 1 byte")
        self.path = path
        self.fsync = fsync
        self.preallocate_chunk = preallocate_chunk
        self._segment = 0
        self._fd: int | None = None
        self._end = 0  # where the next record goes: the end of the last whole one
        self._size = 0  # the file's size: past _end, zeros (preallocated)
        self._next_chunk = FIRST_PREALLOCATION
        self._pending = bytearray()

    # -- start-up ---------------------------------------------------------------------

    def recover(self) -> Recovered:
        """Read the newest whole snapshot and every record after it; open for appending."""
        self.path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        if not os.access(self.path, os.W_OK):
            raise PermissionError(f"data directory {self.path} is not writable")
        segments = self._numbered(_SEGMENT)
        snapshot, since = self._newest_snapshot()
        wanted = [n for n in segments if n >= since]
        if wanted and wanted != list(range(wanted[0], wanted[-1] + 1)):
            raise CorruptLogError(self.path, 0, f"log segments {wanted} are not consecutive")
        # Compaction creates segment N before snapshot N appears, and deletes older
        # files only after: so the log always starts at the snapshot's number (or at
        # segment 0 when there is no snapshot). Anything else lost data.
        if (segments or snapshot is not None) and (not wanted or wanted[0] != since):
            what = f"segment {since}" + (" after the snapshot" if snapshot is not None else "")
            raise CorruptLogError(self.path, 0, f"{what} is missing (found {segments})")
        records: list[bytes] = []
        end = 0
        for number in wanted:
            path = self._segment_path(number)
            found, end = _read_records(path, RECORD_LIMIT, last=number == wanted[-1])
            records.extend(found)
        self._segment = wanted[-1] if wanted else since
        self._open_segment(self._segment, end if wanted else 0)
        for match in self._matches(_TEMP):
            # A compaction that never finished (its process was stopped): junk.
            (self.path / match.group(0)).unlink(missing_ok=True)
        return Recovered(snapshot, records, self._segment)

    def _newest_snapshot(self) -> tuple[bytes | None, int]:
        for number in reversed(self._numbered(_SNAPSHOT)):
            path = self._snapshot_path(number)
            found = scan(path.read_bytes(), SNAPSHOT_LIMIT)
            if found.end == 0 and found.damage and not found.tail:
                raise CorruptLogError(path, 0, found.damage)  # not a tenure file at all
            if len(found.records) == 1 and found.end == found.size:
                return found.records[0], number
            log.warning("%s: incomplete snapshot ignored (an interrupted compaction)", path)
        return None, 0

    # -- appending --------------------------------------------------------------------

    def append(self, payload: bytes) -> None:
        """Queue one record; it is durable once :meth:`commit` returns."""
        if not 0 < len(payload) <= RECORD_LIMIT:
            raise ValueError(f"a record must be 1 to {RECORD_LIMIT} bytes, got {len(payload)}")
        self._pending += _HEAD.pack(len(payload), zlib.crc32(payload))
        self._pending += payload

    def take_pending(self) -> bytes:
        """The queued records' bytes, for :meth:`write` (the queue is then empty)."""
        data = bytes(self._pending)
        self._pending.clear()
        return data

    def write(self, data: bytes | bytearray) -> None:
        """Write records' bytes (from :meth:`take_pending`) after the last ones."""
        fd = self._fd if self._fd is not None else self._open_fd()  # (it raises)
        # Once per turn served: the common whole write costs no view and no loop.
        written = os.pwrite(fd, data, self._end)
        self._end += written
        if written < len(data):
            view = memoryview(data)[written:]
            while view:
                written = os.pwrite(fd, view, self._end)
                self._end += written
                view = view[written:]
        if self._end > self._size:
            self._size = self._end

    @property
    def segment(self) -> Path:
        """The segment records are appended to."""
        return self._segment_path(self._segment)

    @property
    def end(self) -> int:
        """Where the next record goes in :attr:`segment` (the end of the last whole one)."""
        return self._end

    def sync(self) -> None:
        """Make what was written durable (fdatasync)."""
        _sync_data(self._open_fd())

    def check_space(self) -> None:
        """Raise if the file system holding the log has no block left.

        With preallocated segments a full disk would go unnoticed until the zeros
        run out (and a snapshot or a new segment then fails): the writer checks
        after each commit instead, so that a full disk stops the server at once,
        as an append that found no space did before segments were preallocated.

        Raises:
            OSError: ENOSPC, the file system is full (for an unprivileged writer).
        """
        if os.fstatvfs(self._open_fd()).f_bavail == 0:
            raise OSError(errno.ENOSPC, f"the file system holding {self.path} is full")

    def commit(self, *, sync: bool | None = None) -> None:
        """Write queued records in one go, and fsync as the mode (or ``sync``) says.

        Group commit: the server appends every record of a batch, then commits once
        before acknowledging any of them.
        """
        if self._pending:
            self.write(self._pending)  # no copy: nothing appends meanwhile
            self._pending.clear()
        if sync if sync is not None else self.fsync is FsyncMode.ALWAYS:
            self.sync()

    def preallocate(self) -> int:
        """Extend the segment with zeros (and sync that) if little is free past its records.

        Zeros are *written*, not ``fallocate``-d: ext4 keeps fallocated space as
        unwritten extents whose conversion is metadata every later fdatasync pays
        for (docs/durability.md has the numbers). An extension is due once less
        than a quarter of the next one is free; each doubles, from
        :data:`FIRST_PREALLOCATION` up to ``preallocate_chunk``, so zeros stay in
        proportion to the records. Returns the bytes added (0: none was due).

        Raises:
            OSError: the disk refused (full, failing); what was extended stays, as zeros.
        """
        fd = self._open_fd()
        if not self.preallocation_due():
            return 0
        chunk = min(self._next_chunk, self.preallocate_chunk)
        self._next_chunk = min(chunk * 2, self.preallocate_chunk)
        start, target = self._size, self._size + chunk
        while self._size < target:
            step = memoryview(_ZEROS)[: min(len(_ZEROS), target - self._size)]
            self._size += os.pwrite(fd, step, self._size)
        _sync_data(fd)
        return self._size - start

    def preallocation_due(self) -> bool:
        """Whether :meth:`preallocate` would extend the segment now."""
        return self._size - self._end < min(self._next_chunk, self.preallocate_chunk) // 4

    def _open_fd(self) -> int:
        if self._fd is None:
            raise OSError(errno.EBADF, "the journal is not open (not recovered, or closed)")
        return self._fd

    @property
    def free(self) -> int:
        """Bytes preallocated past the last record (zeros)."""
        return self._size - self._end

    # -- compaction -------------------------------------------------------------------

    def compact(self, snapshot: bytes) -> None:
        """Make ``snapshot`` (the state after every record so far) the new starting point.

        The snapshot is written whole (temp file, fsync, rename) before the old
        segments and snapshots are removed, so a crash at any moment leaves a
        directory that recovers to the same state.
        """
        compaction = self.begin_compaction()
        compaction.write(snapshot)
        self.finish_compaction(compaction)

    def begin_compaction(self) -> Compaction:
        """Start a new segment; the snapshot of the state *now* may then be written apart.

        Records appended from here on go to the new segment N, so the state now is
        exactly "the state before segment N's first record": the content of
        snapshot N. :meth:`Compaction.write` (which touches nothing else of this
        object, so a forked child can run it) writes it to a temp file; then
        :meth:`finish_compaction` renames it and removes what it replaces. Until
        then the older snapshot and every segment since stay, and recover as before.
        """
        self.commit(sync=True)
        number = self._segment + 1
        self._open_segment(number)
        final = self._snapshot_path(number)
        return Compaction(number, final.with_suffix(".tmp"), final)

    def finish_compaction(self, compaction: Compaction) -> None:
        """Put a written snapshot in place and remove the files it replaces."""
        os.replace(compaction.temp, compaction.final)
        _fsync_dir(self.path)
        for old in self._numbered(_SEGMENT):
            if old < compaction.number:
                self._segment_path(old).unlink()
        for old in self._numbered(_SNAPSHOT):
            if old < compaction.number:
                self._snapshot_path(old).unlink()

    def abandon_compaction(self, compaction: Compaction) -> None:
        """Forget a snapshot that was not written whole (the older one still holds)."""
        compaction.temp.unlink(missing_ok=True)

    def close(self) -> None:
        """Commit what is queued (with fsync unless the mode is off) and close."""
        if self._fd is not None:
            self.commit(sync=self.fsync is not FsyncMode.OFF)
            os.close(self._fd)
            self._fd = None

    def abort(self) -> None:
        """Close without writing what is queued: what a crash would leave on disk.

        The server uses it when an fsync fails (the write's fate is unknown, and
        retrying the fsync could report a success that did not happen).
        """
        self._pending.clear()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- files ------------------------------------------------------------------------

    def _open_segment(self, number: int, end: int = 0) -> None:
        """Open segment ``number`` for appends at ``end`` (0: a new one, header first)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        path = self._segment_path(number)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
        os.fchmod(fd, PRIVATE_FILE)  # (a segment an older build made keeps its mode otherwise)
        self._fd, self._segment = fd, number
        self._size = os.fstat(fd).st_size
        self._next_chunk = FIRST_PREALLOCATION
        if end == 0:
            self._end = 0
            self.write(MAGIC)
            os.fsync(fd)
            _fsync_dir(self.path)
        else:
            self._end = end

    def _numbered(self, pattern: re.Pattern[str]) -> list[int]:
        return sorted(int(m.group(1), 16) for m in self._matches(pattern))

    def _matches(self, pattern: re.Pattern[str]) -> Iterator[re.Match[str]]:
        for entry in os.scandir(self.path):
            match = pattern.match(entry.name)
            if match:
                yield match

    def _segment_path(self, number: int) -> Path:
        return self.path / f"wal-{number:016x}.log"

    def _snapshot_path(self, number: int) -> Path:
        return self.path / f"snapshot-{number:016x}.bin"
