"""The dashboard's rates: grants made and sessions ended by expiry, per second.

:class:`RateMeter` turns the server's own counters (:func:`counters`) into rates per
second over the last :data:`RATE_WINDOW` seconds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Final

from prometheus_client.metrics_core import Metric

__all__ = ["MAX_RATE_SAMPLES", "RATE_SAMPLE_INTERVAL", "RATE_WINDOW", "RateMeter", "counters"]

#: The rates shown are averages over this many seconds.
RATE_WINDOW: Final = 10.0
#: How often the counters are sampled for the rates, in seconds.
RATE_SAMPLE_INTERVAL: Final = 1.0
#: Samples a :class:`RateMeter` keeps at most (old ones drop out before: a window's worth).
MAX_RATE_SAMPLES: Final = 1024


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


class RateMeter:
    """Rates per second of counters sampled every :data:`RATE_SAMPLE_INTERVAL` (by the
    dashboard's sampler, from the server's start), averaged over :data:`RATE_WINDOW`."""

    def __init__(self, window: float = RATE_WINDOW) -> None:
        self.window = window
        self._samples: deque[tuple[float, float, float]] = deque(maxlen=MAX_RATE_SAMPLES)

    def sample(self, at: float, grants: float, expired: float) -> None:
        """Record the counters at monotonic time ``at`` (forgetting samples that no
        longer count: one at or before the window's start is kept, so that the
        rates span the whole window once they can)."""
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
