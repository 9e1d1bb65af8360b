"""The dashboard's rates: grants made and sessions ended by expiry, per second.

:class:`RateMeter` turns the server's own counters (:func:`counters`) into rates per
second over the last :data:`RATE_WINDOW` seconds, and keeps a short history: the
grants, waits (grants that waited more than :data:`WAITED_AFTER` seconds:
:func:`waited`) and expiries of each sampling interval, per second, for the last
:data:`HISTORY` intervals (the page draws them).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Final

from prometheus_client.metrics_core import Metric

__all__ = [
    "HISTORY",
    "MAX_RATE_SAMPLES",
    "RATE_SAMPLE_INTERVAL",
    "RATE_WINDOW",
    "WAITED_AFTER",
    "RateMeter",
    "counters",
    "waited",
]

#: The rates shown are averages over this many seconds.
RATE_WINDOW: Final = 10.0
#: How often the counters are sampled for the rates, in seconds.
RATE_SAMPLE_INTERVAL: Final = 1.0
#: Samples a :class:`RateMeter` keeps at most (old ones drop out before: a window's worth).
MAX_RATE_SAMPLES: Final = 1024
#: Sampling intervals the history keeps (a minute at one a second).
HISTORY: Final = 60
#: A grant that came later than this after its acquire waited (the grant-wait
#: histogram's first bucket bound: what it can tell apart from "at once").
WAITED_AFTER: Final = 0.001


def counters(families: Iterable[Metric]) -> tuple[float, float]:
    """(grants made, sessions ended by expiry) so far, from the server's own metrics
    (:meth:`tenure.server._http.metrics.ServerMetrics.collect`)."""
    grants = expired = 0.0
    for family in families:
        for sample in family.samples:
            if sample.name == "tenure_grant_wait_seconds_count":
                grants = sample.value
            elif (
                sample.name == "tenure_sessions_ended_total"
                and sample.labels.get("reason") == "session_expired"
            ):
                expired = sample.value
    return grants, expired


def waited(families: Iterable[Metric]) -> float:
    """Grants made after a wait (more than :data:`WAITED_AFTER` seconds) so far: the
    grant-wait histogram's count less its first bucket."""
    count = at_once = 0.0
    for family in families:
        for sample in family.samples:
            if sample.name == "tenure_grant_wait_seconds_count":
                count = sample.value
            elif sample.name == "tenure_grant_wait_seconds_bucket" and sample.labels.get("le") in (
                str(WAITED_AFTER),
                repr(WAITED_AFTER),
            ):
                at_once = sample.value
    return count - at_once


class RateMeter:
    """Rates per second of counters sampled every :data:`RATE_SAMPLE_INTERVAL` (by the
    dashboard's sampler, from the server's start), averaged over :data:`RATE_WINDOW`."""

    def __init__(self, window: float = RATE_WINDOW) -> None:
        self.window = window
        self._samples: deque[tuple[float, float, float]] = deque(maxlen=MAX_RATE_SAMPLES)
        #: Per interval: (grants, waits, expiries) per second, oldest first.
        self._history: deque[tuple[float, float, float]] = deque(maxlen=HISTORY)
        self._last: tuple[float, float, float, float] | None = None

    def sample(self, at: float, grants: float, expired: float, waits: float = 0.0) -> None:
        """Record the counters at monotonic time ``at`` (forgetting samples that no
        longer count: one at or before the window's start is kept, so that the
        rates span the whole window once they can); ``waits``: :func:`waited`."""
        last = self._last
        if last is not None and at > last[0]:
            span = at - last[0]
            self._history.append(
                ((grants - last[1]) / span, (waits - last[3]) / span, (expired - last[2]) / span)
            )
        self._last = (at, grants, expired, waits)
        samples = self._samples
        samples.append((at, grants, expired))
        while len(samples) > 1 and samples[1][0] <= at - self.window:
            samples.popleft()

    def rates(self) -> tuple[float, float]:
        """(grants, expiries) per second from the oldest sample kept to the newest
        (0 before there are two)."""
        if len(self._samples) < 2:
            return 0.0, 0.0
        first_at, first_grants, first_expired = self._samples[0]
        at, grants, expired = self._samples[-1]
        span = at - first_at
        if span <= 0:
            return 0.0, 0.0
        return (grants - first_grants) / span, (expired - first_expired) / span

    def history(self) -> dict[str, list[float]]:
        """The last :data:`HISTORY` intervals' grants, waits and expiries per second,
        oldest first (rounded to hundredths: what the page draws)."""
        rows = list(self._history)
        return {
            name: [round(row[i], 2) for row in rows]
            for i, name in enumerate(("grants", "waits", "expiries"))
        }
