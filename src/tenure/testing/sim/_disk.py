"""The simulated disk under ``--fsync always``: an fsync that takes simulated time, and a
power loss that keeps only what was synced, and a torn part of the rest.

:class:`SimDisk` is the server's :class:`~tenure.server._commit_seams.BatchWriter` in
place of the writer thread of ``--fsync always`` (a thread is not simulated): each
turn's records are written to the journal's segment at once (the page cache), and
reported durable when their fsync ends, a drawn latency later (in order: one fsync
after another, as the writer thread's). The server answers nobody before that, as
with the thread.

:meth:`SimDisk.lose_power` is what a power loss leaves of the segment: everything up
to the end of the last fsync that ended, and of what was written after it, a prefix
cut at a drawn byte (torn: the record there is cut short, the ones after it gone).
The server's recovery must then drop the torn tail, and lose nothing it had
acknowledged. (A snapshot, and a new segment's header, are fsynced by the data
directory itself before anything is written after them.)
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Final

from tenure.server import DataDir

__all__ = ["FSYNC_LATENCY", "SimDisk"]

#: Seconds an fsync takes, drawn between the two.
FSYNC_LATENCY: Final = (0.0002, 0.004)


class SimDisk:
    """The simulated ``--fsync always`` writer of one server process (module docstring)."""

    #: Nothing waits to be written: a turn is written when handed over.
    pending: int = 0
    #: (Never refuses.)
    max_pending: int | None = None
    #: (What it made durable may leave for ever: a data directory holds no lease.)
    valid_until: Callable[[], float] | None = None

    def __init__(self, data_dir: DataDir, rng: random.Random) -> None:
        self.data_dir = data_dir
        self.rng = rng
        self._durable: Callable[[int, float | None], None] = lambda batch, seconds: None
        self._handed = 0
        self._last_end = 0.0  # when the last fsync asked for ends
        self._segment: Path | None = None  # the segment of the offsets below
        #: Where the segment's bytes are synced to.
        self.synced = 0

    def start(
        self,
        durable: Callable[[int, float | None], None],
        failed: Callable[[str, BaseException], None],
    ) -> None:
        """Report durable batches to ``durable`` (it never fails)."""
        self._durable = durable

    def write(self, data: bytes, lone: bool) -> int:
        """Write ``data`` now; its batch is durable when its fsync ends (module docstring)."""
        if not data:
            return self._handed
        self._follow_segment()
        self.data_dir.write(data)
        self._handed += 1
        loop = asyncio.get_running_loop()
        seconds = self.rng.uniform(*FSYNC_LATENCY)
        self._last_end = max(loop.time(), self._last_end) + seconds
        end = self.data_dir.end
        loop.call_at(self._last_end, self._synced, self._handed, self._segment, end, seconds)
        return self._handed

    def _synced(self, batch: int, segment: Path | None, end: int, seconds: float) -> None:
        if segment == self._segment:
            self.synced = max(self.synced, end)
        self._durable(batch, seconds)

    def _follow_segment(self) -> None:
        """A new segment (a snapshot began it) starts synced to its end so far."""
        segment = self.data_dir.segment
        if segment != self._segment:
            self._segment, self.synced = segment, self.data_dir.end

    def drain(self) -> None:
        """Make everything written durable now (an fsync on the loop)."""
        self.data_dir.sync()
        self._follow_segment()
        self.synced = self.data_dir.end
        self._durable(self._handed, None)

    def stop(self, *, discard: bool = False) -> None:
        """Nothing runs apart from the loop: nothing to stop."""

    def lose_power(self) -> tuple[int, int]:
        """Cut the segment as a power loss leaves it (module docstring); the bytes kept
        past the last fsync, and those lost."""
        self._follow_segment()
        end = self.data_dir.end
        if end <= self.synced:
            return 0, 0
        cut = self.rng.randint(self.synced, end)
        with open(self.data_dir.segment, "r+b") as file:
            file.truncate(cut)
            os.fsync(file.fileno())
        return cut - self.synced, end - cut
