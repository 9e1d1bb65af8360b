"""Each simulated host's own clock: one that drifts, one that jumps forward.

The loop keeps one simulated time (:meth:`SimLoop.now
<tenure.testing.sim._loop.SimLoop.now>`, what the network, the histories and the
nemesis go by). A host's processes read their host's clock instead
(:meth:`~tenure.testing.sim._loop.SimLoop.time` in their context): ``rate * now +
offset``, the identity until the nemesis changes it. Their timers are armed on their
clock: the loop turns a host's time into its own when a timer is set, and again for
the timers set when the host's clock changes, so that each fires when its host's
clock reads its time (a jump forward fires what it passed over at once).

What tenure promises holds within these: a client's monotonic clock and the
server's may run at rates 2% apart (docs/guarantees.md 6a: the server counts the
recovery window 2% long), and a client's clock that jumps forward is an early loss to
it. A clock that runs backward is outside every promise and is not simulated; so is a
server's that jumps forward with no time passing (the nemesis jumps clients' clocks
only: :mod:`tenure.testing.sim._nemesis`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

__all__ = ["EPOCH", "MAX_DRIFT", "Clocks", "HostClock"]

#: The UNIX time at the simulation's start, as the hosts' wall clocks read it.
EPOCH: Final = 1_800_000_000.0

#: How far from 1 a host clock's rate may be drawn: two hosts' rates then differ by
#: 1% at most, within the 2% the promise allows for rates and late timers together.
MAX_DRIFT: Final = 0.005


@dataclass(frozen=True, slots=True)
class HostClock:
    """``local = rate * now + offset``."""

    rate: float = 1.0
    offset: float = 0.0

    def local(self, now: float) -> float:
        """The host's time at simulated time ``now``."""
        return self.rate * now + self.offset

    def simulated(self, local: float) -> float:
        """The first simulated time at which the host's clock reads ``local`` or later
        (the division rounds: a timer fired at its result must find its time come, or
        it re-arms itself for the same instant for ever)."""
        now = (local - self.offset) / self.rate
        while self.local(now) < local:
            now = math.nextafter(now, math.inf)
        return now


class Clocks:
    """The hosts' clocks (module docstring); a host not named keeps simulated time."""

    def __init__(self) -> None:
        self.clocks: dict[str, HostClock] = {}

    def of(self, host: str | None) -> HostClock | None:
        """``host``'s clock, None if it keeps simulated time."""
        return None if host is None else self.clocks.get(host)

    def jump(self, host: str, seconds: float, now: float) -> None:
        """``host``'s clock jumps ``seconds`` forward (at simulated time ``now``)."""
        if seconds < 0:
            raise ValueError("a simulated clock never runs backward")
        clock = self.clocks.get(host, HostClock())
        self.clocks[host] = HostClock(clock.rate, clock.offset + seconds)

    def drift(self, host: str, rate: float, now: float) -> None:
        """``host``'s clock runs at ``rate`` from ``now`` on (it reads on from where it
        was: no jump)."""
        if not rate > 0:
            raise ValueError("a clock's rate is positive")
        clock = self.clocks.get(host, HostClock())
        local = clock.local(now)
        self.clocks[host] = HostClock(rate, local - rate * now)
