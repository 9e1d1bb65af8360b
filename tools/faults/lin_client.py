"""The ``linearizable`` scenario's pauses of a worker process: its event loop blocked.

The clients themselves are :class:`tenure.testing.workload.LinClient` (shared with the
simulation, :mod:`tenure.testing.sim`); a worker gives them :class:`LoopPauses`, which
make the whole process stand still as a GC pause or swap would.
"""

from __future__ import annotations

import random
import time

from tenure.testing.workload import LinConfig
from tools.faults.history import Recorder, now


class LoopPauses:
    """A worker's pauses: its event loop blocked past the window, at most every
    :attr:`LinConfig.pause_every` seconds (0: never), while a client holds a lock."""

    def __init__(self, config: LinConfig, recorder: Recorder) -> None:
        self.every = config.pause_every
        self.length = config.window
        self.rec = recorder
        self.label = f"w{config.index}"
        self.last = now()

    async def maybe(self, rng: random.Random, holder: str) -> None:
        """Block the whole loop (every client of the worker) if a pause is due (a
        coroutine only for the protocol's sake: it blocks, it does not wait)."""
        if self.every <= 0 or now() - self.last < self.every:
            return
        seconds = self.length + rng.uniform(0.5, 1.5)
        self.rec.note(self.label, "pause", holder=holder, seconds=seconds)
        time.sleep(seconds)  # noqa: ASYNC251 (blocking on purpose: the process stands still)
        self.last = now()
