"""Rate limiters: units per second shared by every process, on the store's clock.

The limiter ``name`` is the persistent semaphore ``name`` whose data is its bucket,
``limiter RATE BURST TAT`` (:mod:`tenure._core.rates`: GCRA). The first use creates
it with this object's ``rate`` and ``burst``; a later use that asks for others is
refused (:meth:`RateLimiter.reconfigure` changes them for everyone).

Each ``acquire`` is one reservation in the store, in one atomic step on the store's
clock (the tenure server's, Redis's, PostgreSQL's; on etcd, which has none, this
process's wall clock): the store answers when the units may go, and reservations go
in the order the store took them (FIFO). A reservation that would wait longer than
the timeout is not made, so ``acquire`` fails at once rather than after waiting.
The guarantee: over any interval of ``T`` seconds of the store's clock, the units
granted to everyone sum to at most ``burst + rate * T``.

A reservation is spent once made: an ``acquire`` cancelled during its wait, or whose
process dies, does not give its units back (the limit errs on the side of fewer).
"""

from __future__ import annotations

import asyncio

from tenure import lowlevel
from tenure._core.commands import RateReservation
from tenure._core.rates import Bucket, bucket_data, check_rate, check_units, parse_bucket
from tenure.backends._base import RateReservations
from tenure.client import _args
from tenure.client._rates_over_core import reserve_over_core
from tenure.client._recipe_session import NamedRecipe, RecipeSession
from tenure.client._semaphore import Semaphore
from tenure.errors import PreconditionFailedError


class RateLimiter(NamedRecipe):
    """A named rate limiter of the session's node (see the module docstring).

    ``await limiter.acquire(1, timeout=2)`` waits its turn; ``await
    limiter.try_acquire(5)`` takes the units only if they may go now.
    """

    def __init__(self, session: RecipeSession, name: str, rate: float, burst: float) -> None:
        super().__init__(session, name)
        rate, burst = check_rate(rate, burst)
        #: Units per second, and the most units at once (as the limiter has them).
        self.rate = rate
        self.burst = burst
        self._semaphore = Semaphore(session, self.name)
        self._checked = False

    def __repr__(self) -> str:
        return (
            f"<RateLimiter {self.name!r} {self.rate:g}/s burst {self.burst:g} "
            f"of session {self.session.id}>"
        )

    async def acquire(self, units: float = 1, timeout: float | None = None) -> float:
        """Take ``units``, waiting for their turn; when they went (the store's clock,
        UNIX seconds).

        ``timeout`` is the longest wait in seconds (None: no limit; 0: only now).

        Raises:
            TimeoutError: the units could not go within ``timeout`` (raised at once:
                nothing was reserved).
            LimitExceededError: ``units`` is more than the burst (it could never go).
            PreconditionFailedError: the limiter has another rate or burst, or the
                semaphore ``name`` is not a rate limiter.
        """
        units = check_units(units)
        wait = _args.timeout(timeout)
        reply = await self._reserve(units, wait)
        if not reply.granted:
            raise TimeoutError(
                f"{units:g} units of rate limiter {self.name!r} could go only in "
                f"{reply.wait:.3f} s, past the timeout {wait} s"
            )
        if reply.wait > 0:
            await asyncio.sleep(reply.wait)
        return reply.at

    async def try_acquire(self, units: float = 1) -> bool:
        """Take ``units`` if they may go now; whether they were taken (nothing else is)."""
        return (await self._reserve(check_units(units), 0.0)).granted

    async def reconfigure(self, rate: float, burst: float) -> None:
        """Give the limiter a new rate and burst, for every process (what was reserved
        stays reserved); this object takes them too."""
        rate, burst = check_rate(rate, burst)
        await self._create(rate, burst)
        while True:
            data = (await self._semaphore.describe()).data
            old = parse_bucket(self.name, data)
            if await self._semaphore.compare_and_set(
                data, bucket_data(Bucket(rate, burst, old.tat))
            ):
                self.rate, self.burst, self._checked = rate, burst, True
                return

    async def _reserve(self, units: float, max_wait: float | None) -> RateReservation:
        await self._make()
        backend = lowlevel.backend_session(self.session)
        if isinstance(backend, RateReservations):  # the store's own, on its clock
            return await backend.reserve_units(self.name, units, max_wait)
        return await reserve_over_core(backend, self.name, units, max_wait)

    async def _make(self) -> None:
        """Create the limiter if nobody did, then check that it is this one (once)."""
        if self._checked:
            return
        await self._create(self.rate, self.burst)
        found = parse_bucket(self.name, (await self._semaphore.describe()).data)
        if (found.rate, found.burst) != (self.rate, self.burst):
            raise PreconditionFailedError(
                f"rate limiter {self.name!r} has rate {found.rate:g}/s and burst "
                f"{found.burst:g}, not {self.rate:g}/s and {self.burst:g} "
                "(reconfigure() changes them for everyone)"
            )
        self._checked = True

    async def _create(self, rate: float, burst: float) -> None:
        """Create the limiter with ``rate`` and ``burst`` if nobody did."""
        await self._semaphore.create(1, bucket_data(Bucket(rate, burst, 0.0)), exist_ok=True)
