"""The sync rate limiter: ``session.rate_limiter("partner-api", 50, 100).acquire()``."""

from __future__ import annotations

from tenure import client as aio
from tenure.sync._leases import LeaseSession
from tenure.sync._recipe import SyncRecipe


class RateLimiter(SyncRecipe[LeaseSession, aio.RateLimiter]):
    """Units per second shared by every process (see :class:`tenure.RateLimiter`)."""

    @property
    def rate(self) -> float:
        """Units per second."""
        return self._recipe.rate

    @property
    def burst(self) -> float:
        """The most units at once."""
        return self._recipe.burst

    def acquire(self, units: float = 1, timeout: float | None = None) -> float:
        """Take ``units``, waiting for their turn (the wait is in the calling thread, a
        Ctrl-C ends it); when they went (the store's clock, UNIX seconds).
        TimeoutError at once if they could not go within ``timeout``."""
        return self.session.portal.call(self._recipe.acquire, units, timeout)

    def try_acquire(self, units: float = 1) -> bool:
        """Take ``units`` if they may go now; whether they were taken."""
        return self.session.portal.call(self._recipe.try_acquire, units)

    def reconfigure(self, rate: float, burst: float) -> None:
        """Give the limiter a new rate and burst, for every process."""
        self.session.portal.call(self._recipe.reconfigure, rate, burst)
