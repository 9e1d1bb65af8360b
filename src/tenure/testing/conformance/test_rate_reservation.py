"""The rate reservation ability against the core's path: the same answers.

A backend with RATE_RESERVATION reserves a rate limiter's units in the store, on
its clock; one without is reserved over the core (``tenure.client._rates_over_core``:
a read and a compare-and-set of the bucket, on the client's clock). On a backend
that has the ability, both paths run on one draw of reservations, the core's at the
instant the store's answer says it reserved at: every answer, the bucket left after
each, and the errors must agree. A module of its own, not the rate limiter's: a
backend without the ability has rate limiters all the same (``test_rate_limiter.py``
runs there over the core), and docs/recipes.md's table says so.
"""

from __future__ import annotations

import asyncio
import random
from functools import partial

import pytest

import tenure
from tenure import lowlevel
from tenure._core.rates import parse_bucket
from tenure.backends import Capability, RateReservations
from tenure.client._rates_over_core import reserve_over_core
from tenure.errors import LimitExceededError, NotFoundError, PreconditionFailedError


@pytest.mark.requires(Capability.RATE_RESERVATION)
async def test_the_ability_and_the_core_give_the_same_answers(
    client: tenure.Client, node: str
) -> None:
    # One draw of reservations, applied to two limiters alike: "a" through the
    # store's reserve_units, then "b" over the core at the instant the store's answer
    # says it reserved at (at - wait: the store's clock, whatever the store's).
    # Every answer, and the bucket left after each, must agree.
    session = await client.session(node)
    backend = lowlevel.backend_session(session)
    assert isinstance(backend, RateReservations)
    rate, burst = 40.0, 5.0
    for name in ("a", "b"):
        await session.semaphore(name).create(1, f"limiter {rate} {burst} 0.0".encode())
    rng = random.Random(49)
    for step in range(60):
        count = rng.choice((0.5, 1.0, 1.0, 2.0, 5.0))
        max_wait = rng.choice((None, 0.0, 0.0, 0.05, 0.2))
        store = await backend.reserve_units("a", count, max_wait)
        instant = store.at - store.wait  # (the store's now, when it reserved)
        core = await reserve_over_core(backend, "b", count, max_wait, partial(float, instant))
        assert store.granted == core.granted, (step, store, core)
        assert store.wait == pytest.approx(core.wait, abs=1e-5), (step, store, core)
        assert store.at == pytest.approx(core.at, abs=1e-5), (step, store, core)
        tat_a = parse_bucket("a", (await session.semaphore("a").describe()).data).tat
        tat_b = parse_bucket("b", (await session.semaphore("b").describe()).data).tat
        assert tat_a == pytest.approx(tat_b, abs=1e-5), step
        await asyncio.sleep(rng.choice((0.0, 0.0, 0.01, 0.05)))
    # Errors alike: past the burst, no bucket, no semaphore.
    await session.semaphore("plain").create(1, b"42")
    for name, count, error in (
        ("a", burst + 1, LimitExceededError),
        ("plain", 1.0, PreconditionFailedError),
        ("missing", 1.0, NotFoundError),
    ):
        with pytest.raises(error):
            await backend.reserve_units(name, count, None)
        with pytest.raises(error):
            await reserve_over_core(backend, name, count, None)
