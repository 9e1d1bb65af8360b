"""Rate limiters: a shared bucket, reserved on the store's clock, FIFO, bounded.

A backend with RATE_RESERVATION reserves in the store; one without is reserved
over the core (``tenure.client._rates_over_core``, on the clients' clocks): every
test here runs on whichever path the backend takes (``test_rate_reservation.py``
holds the two paths to the same answers on every backend that has both).

The bound is checked from the history of grant times the store reported (``at``,
its clock): over any interval of them, the units granted sum to at most
``burst + rate * length``. Nothing here is timed against this machine's clock
beyond generous ceilings (the machine may be slow; a store's answers never early).
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

import tenure
from tenure import lowlevel
from tenure._core.commands import RateReservation
from tenure.backends import RateReservations
from tenure.client._rates_over_core import reserve_over_core
from tenure.errors import (
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)

#: Float error of grant times near 1.75e9 UNIX seconds (about 2.4e-7 s), times the rate.
_SLACK = 1e-3


async def reserve_units(
    session: tenure.Session, name: str, count: float, max_wait: float | None
) -> RateReservation:
    """A reservation by the path the session's backend takes (the ability, or the core)."""
    backend = lowlevel.backend_session(session)
    if isinstance(backend, RateReservations):
        return await backend.reserve_units(name, count, max_wait)
    return await reserve_over_core(backend, name, count, max_wait)


def check_bound(grants: list[tuple[float, float]], rate: float, burst: float) -> None:
    """Every interval [a, b] between grant times holds at most burst + rate * (b - a) units."""
    grants = sorted(grants)
    for i in range(len(grants)):
        units = 0.0
        for j in range(i, len(grants)):
            units += grants[j][1]
            limit = burst + rate * (grants[j][0] - grants[i][0]) + _SLACK
            assert units <= limit, (
                f"{units} units granted in [{grants[i][0]:.6f}, {grants[j][0]:.6f}], "
                f"more than burst {burst} + rate {rate} x {grants[j][0] - grants[i][0]:.6f} s"
            )


async def test_a_burst_goes_at_once_then_units_go_at_the_rate_in_turn(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    # The burst is spent, for every process: on a limiter whose unit comes back only
    # after 10 s, so that the next try is refused however slow the machine (the guard
    # below only names what the check needs).
    spent = one.rate_limiter("partner-api-spent", rate=0.1, burst=3)
    began = time.monotonic()
    assert [await spent.try_acquire() for _ in range(3)] == [True] * 3
    refused = not await two.rate_limiter("partner-api-spent", rate=0.1, burst=3).try_acquire()
    assert refused or time.monotonic() - began >= 10.0, "the burst was spent, for every process"
    limiter = one.rate_limiter("partner-api", rate=4.0, burst=3)
    assert [await limiter.try_acquire() for _ in range(3)] == [True] * 3
    other = two.rate_limiter("partner-api", rate=4.0, burst=3)
    first = await other.acquire(1, timeout=5)
    second = await limiter.acquire(1, timeout=5)
    # Each in turn, one unit per 1/4 s of the store's clock after the one before. (A
    # request that reaches the store after its unit was due finds a unit saved up and
    # goes at once: at 20 a second, a loaded machine's 3 ms late arrival made the gap
    # 47 ms. A quarter of a second leaves that much room.)
    assert second - first == pytest.approx(0.25, abs=_SLACK)
    # The data shows the bucket: what an operator's describe shows.
    data = (await one.semaphore("partner-api").describe()).data
    assert data.startswith(b"limiter 4.0 3.0 ")


async def test_a_wait_past_the_timeout_fails_at_once_and_reserves_nothing(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    limiter = session.rate_limiter("slow", rate=0.5, burst=1)
    start = await limiter.acquire()
    before = (await session.semaphore("slow").describe()).data
    with pytest.raises(TimeoutError, match="could go only in"):
        await asyncio.wait_for(limiter.acquire(1, timeout=0.5), 1.5)  # it needs 2 s
    assert not await limiter.try_acquire()
    assert (await session.semaphore("slow").describe()).data == before  # nothing taken
    reply = await reserve_units(session, "slow", 1, None)
    assert reply.granted  # the next unit's turn is still 2 s after the first
    assert reply.at - start == pytest.approx(2.0, abs=_SLACK)


async def test_many_sessions_stay_within_burst_plus_rate_times_any_interval(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    rate, burst = 40.0, 5.0
    sessions = [await c.session(node) for c in (client, client2, client, client2)]
    grants: list[tuple[float, float]] = []
    rng = random.Random(29)

    async def worker(session: tenure.Session, seed: int) -> None:
        limiter = session.rate_limiter("shared", rate=rate, burst=burst)
        mine = random.Random(seed)
        for _ in range(8):  # bounded: 4 x 8 acquires of 1 to 3 units, about 1.5 s
            units = mine.choice((1, 1, 2, 3))
            if mine.random() < 0.2:
                if await limiter.try_acquire(units):
                    grants.append((float("nan"), units))  # (time unknown: see below)
                continue
            grants.append((await limiter.acquire(units, timeout=30), units))

    await asyncio.wait_for(asyncio.gather(*(worker(s, rng.randrange(2**32)) for s in sessions)), 60)
    timed = [g for g in grants if g[0] == g[0]]
    assert len(timed) >= 16
    check_bound(timed, rate, burst)
    # With the untimed ones too: all units between the first and last grant times.
    total = sum(units for _, units in grants)
    span = max(t for t, _ in timed) - min(t for t, _ in timed)
    assert total <= burst + rate * span + 3 + _SLACK  # (a try may come just after the last)


async def test_a_cancelled_wait_keeps_its_turn_spent(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    limiter = session.rate_limiter("spent", rate=2.0, burst=1)
    first = await limiter.acquire()
    waiting = asyncio.ensure_future(limiter.acquire(1, timeout=10))
    await asyncio.sleep(0.1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    reply = await reserve_units(session, "spent", 1, None)
    assert reply.at - first == pytest.approx(1.0, abs=_SLACK)  # after the cancelled one


async def test_configuration_is_the_limiters_and_changes_for_everyone(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    await one.rate_limiter("api", rate=10.0, burst=2).acquire()
    other = two.rate_limiter("api", rate=100.0, burst=2)
    with pytest.raises(PreconditionFailedError, match=r"rate 10/s and burst 2, not 100/s"):
        await other.try_acquire()
    await other.reconfigure(100.0, 50)
    assert (other.rate, other.burst) == (100.0, 50.0)
    assert await two.rate_limiter("api", rate=100.0, burst=50).try_acquire(40)
    with pytest.raises(PreconditionFailedError, match="rate 100/s and burst 50"):
        await one.rate_limiter("api", rate=10.0, burst=2).acquire()


async def test_bad_requests_are_refused_with_clear_errors(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    limiter = session.rate_limiter("api", rate=5.0, burst=3)
    with pytest.raises(LimitExceededError, match="exceed the burst 3"):
        await limiter.acquire(4)
    for units in (0, -1, float("nan"), "1"):
        with pytest.raises(InvalidArgumentError, match="units"):
            await limiter.acquire(units)  # type: ignore[arg-type]
    for rate, burst in ((0, 1), (1, -1), (float("inf"), 1), (1, float("nan"))):
        with pytest.raises(InvalidArgumentError):
            session.rate_limiter("x", rate=rate, burst=burst)
    with pytest.raises(InvalidArgumentError, match="timeout"):
        await limiter.acquire(1, timeout=-1)
    # A semaphore that is not a rate limiter, and one that does not exist.
    await session.semaphore("plain").create(1, b"42")
    with pytest.raises(PreconditionFailedError, match="not a rate limiter"):
        await session.rate_limiter("plain", rate=1.0, burst=1).try_acquire()
    with pytest.raises(NotFoundError):
        await reserve_units(session, "missing", 1, None)
