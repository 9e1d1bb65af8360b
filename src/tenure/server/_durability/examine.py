"""What ``tenure repair`` finds in a data directory, and the cut it offers.

:func:`examine` reads every log segment (as recovery would, without changing
anything) and names the first damage: which segment, at which offset, what is
wrong, and what follows. :func:`cut` truncates the log there, keeping a copy of
every file it changes or removes in ``DATA/repair-<time>/``. It runs with the
server stopped: the caller holds the data directory's lock.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from tenure.server._durability.storage import RECORD_LIMIT
from tenure.server._durability.tails import Scan, scan

_SEGMENT = re.compile(r"^wal-([0-9a-f]{16})\.log$")


@dataclass(frozen=True, slots=True)
class Damage:
    """The first damage of the log: in ``segment`` at ``scan.end``; ``after`` are the
    segments that follow it (their records come after the damage, so a cut drops them)."""

    segment: Path
    scan: Scan
    last: bool
    after: list[Path]

    def explain(self) -> list[str]:
        """What is wrong and what a cut would drop, in lines for an operator."""
        found, where = self.scan, self.scan.end
        follows = found.size - where
        lines = [
            f"{self.segment}: {len(found.records)} whole records, then at byte offset "
            f"{where}: {found.damage}",
        ]
        if found.later is not None:
            lines.append(
                f"  a whole record starts after it, at offset {found.later}: this is damage "
                "before the end of the log (a bad disk, a stray write), not a torn tail, "
                "and the server refuses to start on it"
            )
        elif found.tail and self.last:
            lines.append(
                "  a torn tail (no whole record follows): the server cuts it itself at start"
            )
        elif found.tail:
            lines.append("  torn, but later segments follow: the server refuses to start on it")
        else:
            lines.append("  the server refuses to start on it")
        nonzero = follows - found_zeros(self.segment, where)
        lines.append(
            f"  what follows: {follows} bytes to the end of the segment ({nonzero} not zeros)"
        )
        if self.after:
            names = ", ".join(p.name for p in self.after)
            lines.append(f"  and {len(self.after)} later segment(s): {names}")
        return lines


def segments(path: Path) -> list[Path]:
    """The log segments of the data directory ``path``, oldest first."""
    named = [
        (int(m.group(1), 16), e.name) for e in os.scandir(path) if (m := _SEGMENT.match(e.name))
    ]
    return [path / name for _, name in sorted(named)]


def examine(path: Path) -> tuple[Damage | None, int]:
    """The first damage of the log in ``path`` (None: the log is whole) and the number
    of whole records before it."""
    found = segments(path)
    records = 0
    for index, segment in enumerate(found):
        read = scan(segment.read_bytes(), RECORD_LIMIT)
        records += len(read.records)
        if read.damage is not None:
            last = index == len(found) - 1
            return Damage(segment, read, last, found[index + 1 :]), records
    return None, records


def cut(path: Path, damage: Damage) -> Path:
    """Truncate the log at ``damage`` and move the segments after it aside.

    A copy of the damaged segment as it was, the later segments and a note go to a
    new ``path/repair-<UTC time>/`` first, which is returned.
    """
    kept = path / time.strftime("repair-%Y%m%dT%H%M%SZ", time.gmtime())
    suffix = 0
    while kept.exists():
        suffix += 1
        kept = kept.with_name(f"{kept.name.split('.')[0]}.{suffix}")
    kept.mkdir()
    shutil.copy2(damage.segment, kept / damage.segment.name)
    note = [*damage.explain(), f"cut: {damage.segment.name} truncated to {damage.scan.end} bytes"]
    (kept / "README").write_text("\n".join(note) + "\n")
    _fsync(kept)
    for later in damage.after:
        os.replace(later, kept / later.name)
    _fsync(kept)
    with damage.segment.open("r+b") as file:
        file.truncate(damage.scan.end)
        file.flush()
        os.fsync(file.fileno())
    _fsync(path)
    return kept


def found_zeros(segment: Path, offset: int) -> int:
    """How many bytes of ``segment`` from ``offset`` on are zeros."""
    return segment.read_bytes().count(0, offset)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
