"""A virtual clock: time moves only when a test says so."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(order=True)
class _Timer:
    when: float
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A :class:`~tenure._runtime.clock.Clock` whose time only moves in :meth:`advance`.

    Pass it to ``tenure.connect("memory://", clock=clock)``; then session expiry,
    acquire timeouts, lease TTLs and lock-delays follow this clock, and a test can
    jump over a 30-second recovery window in no time::

        clock = tenure.testing.FakeClock()
        async with tenure.connect("memory://", clock=clock) as client:
            ...
            await clock.advance(31)
    """

    def __init__(self, start: float = 0.0, *, settle_steps: int = 50) -> None:
        self._now = float(start)
        self._timers: list[_Timer] = []
        self._seq = itertools.count()
        self.settle_steps = settle_steps

    def now(self) -> float:
        """The current virtual time."""
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> _Timer:
        """Run ``callback`` when virtual time reaches ``when``."""
        timer = _Timer(when, next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        return timer

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing due timers in order.

        Time stops at each timer's moment while it runs, and the event loop gets to
        run (``settle_steps`` passes) after each one, so that clients react to an
        expiry before later timers fire, as they would in real time.
        """
        if seconds < 0:
            raise ValueError("time cannot go backwards")
        target = self._now + seconds
        await self._settle()
        while self._timers and self._timers[0].when <= target:
            timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now = max(self._now, timer.when)
            timer.callback()
            await self._settle()
        self._now = target
        await self._settle()

    async def _settle(self) -> None:
        for _ in range(self.settle_steps):
            await asyncio.sleep(0)
