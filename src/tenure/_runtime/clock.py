"""Clocks that drive the engine's timers: the event loop's, or a fake one for tests.

The engine never reads time; its host asks a :class:`Clock` for ``now()`` and asks
it to call back at the engine's next deadline. Swapping the clock for
:class:`tenure.testing.FakeClock` lets a test expire sessions without sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, runtime_checkable


class TimerHandle(Protocol):
    """Something that can cancel a scheduled callback."""

    def cancel(self) -> None:
        """Stop the callback from running, if it has not run yet."""


@runtime_checkable
class Clock(Protocol):
    """A monotonic clock with one-shot timers."""

    def now(self) -> float:
        """Seconds on a monotonic scale."""

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once, at ``when`` or soon after."""


class LoopClock:
    """The running event loop's monotonic clock (the clock of real deployments)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()

    def now(self) -> float:
        """The loop's time."""
        return self._loop.time()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Schedule on the loop."""
        return self._loop.call_at(when, callback)
