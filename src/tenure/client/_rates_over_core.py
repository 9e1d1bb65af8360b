"""A rate limiter's reservation over the core: for a backend without RATE_RESERVATION.

The rule is :mod:`tenure._core.rates`' (GCRA), the same function the engine runs;
here it runs in the client, over two members of the core: read the limiter's data
(``describe_semaphore``), work out the reservation at ``now``, then write the new
bucket with a compare-and-set (``write_semaphore`` of a
:class:`~tenure.backends.SwapWrite`), reading again if another reservation came
first. Every reservation of a limiter is so one atomic step in the store's order,
as the store's own would be.

Whose clock: the client's wall clock (UNIX seconds), not the store's. That is
sound for a rate limiter, within a bound: a client whose clock runs ``d`` seconds
ahead of the others' can take up to ``rate * d`` units more at once, one behind
waits up to ``d`` longer; reservations still go in turn and the burst still holds
for clients that agree on the time. (``etcd://``, which has no clock a transaction
can read, reserved so in a copy of its own; it now takes this path.) A backend implements
:class:`~tenure.backends.RateReservations` to be stronger (the store's one clock)
and to save the read; the conformance kit's ``test_rate_limiter`` checks that both
paths give the same answers on one backend.

Claims are not built so: a claim must hold "at most one at a time" and end
``at_most`` after its grant whether or not any client lives, by one clock. Decided
by each client's clock, a client ahead by more than a claim's length would see it
ended and claim the name while its holder still holds it: exclusion itself breaks,
not a bound. A backend without CLAIMS refuses them (UnsupportedError).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tenure._core.commands import RateReservation
from tenure._core.rates import bucket_data, parse_bucket, reserve
from tenure.backends._base import CoreSession, SwapWrite

__all__ = ["reserve_over_core"]


async def reserve_over_core(
    session: CoreSession,
    name: str,
    count: float,
    max_wait: float | None,
    now: Callable[[], float] = time.time,
) -> RateReservation:
    """Reserve ``count`` units of the rate limiter ``name`` at ``now()`` (UNIX seconds),
    unless they would wait more than ``max_wait``: ``reserve_units``' answer, over the
    core (module docstring). NotFoundError if missing, PreconditionFailedError if its
    data is no bucket, LimitExceededError past the burst."""
    while True:
        found = await session.describe_semaphore(name, owners=False, waiters=False)
        reply, after = reserve(name, parse_bucket(name, found.data), count, max_wait, now())
        if after is None:
            return reply  # refused: nothing to write
        if await session.write_semaphore(name, SwapWrite(found.data, bucket_data(after))):
            return reply
        # Another reservation (or change) came first: reserve after it.
