"""Claims: a name taken once per slot, held at least and at most a time of the store's clock.

Every test needs ``Capability.CLAIMS``. Times: on ``memory://`` the FakeClock moves
them; elsewhere they are short real times (a few seconds: etcd rounds a claim's
times up to whole seconds, two at least), waited for by asking the store again until
it says so, within a bound (:data:`BOUND`), never by a sleep that must be long enough.
"""

from __future__ import annotations

import asyncio
import contextlib
import math

import pytest

import tenure
from tenure import lowlevel
from tenure._core.claims import parse_claim
from tenure.backends._base import claims
from tenure.errors import (
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)
from tenure.testing import FakeClock

from .support import describe, within

pytestmark = pytest.mark.requires(tenure.Capability.CLAIMS)

#: The longest a claim's end may take to show, on a backend of real time: its times
#: here are at most 3 s, and etcd ends a lease in its own next check (every 0.5 s),
#: on a machine that may be slow.
BOUND = 30.0


async def later(clock: FakeClock | None, seconds: float) -> None:
    """Let ``seconds`` pass on a FakeClock (on real time, the caller waits for the store)."""
    if clock is not None:
        await clock.advance(seconds)


async def claim_when_free(
    session: tenure.Session, name: str, at_least: float, at_most: float
) -> tenure.Claim:
    """Claim ``name`` as soon as the store says it is free (within :data:`BOUND`)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BOUND
    while True:
        got = await session.claim(name, at_least=at_least, at_most=at_most)
        if got is not None:
            return got
        if loop.time() > deadline:
            raise AssertionError(f"{name!r} was still claimed after {BOUND} s")
        await asyncio.sleep(0.05)


async def test_two_claimers_racing_for_each_slot_never_both_get_it(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    slots = [f"report/2026-01-{day:02d}" for day in range(1, 25)]

    async def claimer(session: tenure.Session) -> dict[str, tenure.Claim]:
        won: dict[str, tenure.Claim] = {}
        for slot in slots:
            got = await session.claim(slot, at_least=60, at_most=600)
            if got is not None:
                won[slot] = got
        return won

    first, second = await within(asyncio.gather(claimer(one), claimer(two)), "two claimers")
    assert set(first) | set(second) == set(slots)
    assert not set(first) & set(second), "a slot claimed twice"
    tokens = [c.token for c in [*first.values(), *second.values()]]
    assert len(set(tokens)) == len(slots)
    for slot, got in {**first, **second}.items():
        found = await describe(one, slot)
        assert found is not None
        record = parse_claim(slot, found.data)
        assert (record.id, record.token) == (got.id, got.token)


async def test_a_release_keeps_the_name_until_at_least_after_the_grant(
    client: tenure.Client, client2: tenure.Client, node: str, state_clock: FakeClock | None
) -> None:
    one, two = await client.session(node), await client2.session(node)
    claim = await one.claim("nightly", at_least=3.0, at_most=60.0, data=b"host-a")
    assert claim is not None
    assert (claim.name, claim.node, claim.at_least, claim.at_most) == ("nightly", node, 3.0, 60.0)
    assert claim.data == b"host-a"
    assert await claim.release()
    assert not await claim.release()  # released already
    assert await two.claim("nightly", at_least=3.0, at_most=60.0) is None  # at_least holds it
    found = await describe(two, "nightly")
    assert found is not None
    record = parse_claim("nightly", found.data)
    assert (record.id, record.released_at is not None, record.data) == (claim.id, True, b"host-a")
    await later(state_clock, 3.0)
    again = await claim_when_free(two, "nightly", 3.0, 60.0)
    assert again.token > claim.token
    assert again.id != claim.id


async def test_at_most_ends_a_live_holders_claim(
    client: tenure.Client, client2: tenure.Client, node: str, state_clock: FakeClock | None
) -> None:
    one, two = await client.session(node), await client2.session(node)
    claim = await one.claim("slow-job", at_least=1.0, at_most=2.0)
    assert claim is not None
    assert await two.claim("slow-job", at_least=1.0, at_most=2.0) is None
    await later(state_clock, 2.0)
    taken = await claim_when_free(two, "slow-job", 1.0, 2.0)
    assert not one.closed  # its holder lived on: the claim ended at at_most all the same
    assert taken.token > claim.token
    assert not await claim.release()  # it had ended


async def test_a_claim_outlives_its_session_and_anyone_may_release_it_by_id(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    async with client.session(node) as producer:
        claim = await producer.claim("task/17", at_least=0.0, at_most=600.0, data=b"task 17")
        assert claim is not None
    consumer = await client2.session(node)
    assert await consumer.claim("task/17", at_least=0.0, at_most=600.0) is None
    # The worker, with no session of its own, releases it by the id it was handed.
    assert await client2.release_claim(node, "task/17", claim.id)
    assert not await client2.release_claim(node, "task/17", claim.id)
    other = await consumer.claim("task/17", at_least=0.0, at_most=600.0)
    assert other is not None  # at_least 0: the release ended it at once


async def test_a_retried_claim_is_answered_with_the_claim_it_made(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    backend = claims(lowlevel.backend_session(one))
    claim_id = "0123456789abcdef" * 2
    first = await backend.claim("once", claim_id, 5.0, 60.0, b"d")
    again = await backend.claim("once", claim_id, 5.0, 60.0, b"d")
    assert first.id == again.id == claim_id
    assert (again.token, again.granted_at, again.data) == (first.token, first.granted_at, b"d")
    other = await claims(lowlevel.backend_session(two)).claim("once", "f" * 32, 5.0, 60.0, b"")
    assert (other.id, other.token) == (claim_id, first.token)  # refused: the live one's


async def test_releases_that_shorten_nothing_say_false(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    assert not await client2.release_claim(node, "never", "a" * 32)
    claim = await session.claim("job", at_least=1.0, at_most=60.0)
    assert claim is not None
    assert not await client2.release_claim(node, "job", "b" * 32)  # another's id
    assert not await client2.release_claim(node, "other", claim.id)  # another name
    with pytest.raises(NotFoundError):
        await client2.release_claim(node + "-missing", "job", claim.id)


async def test_the_semaphore_goes_when_the_claim_ends_and_a_watch_sees_it(
    client: tenure.Client, client2: tenure.Client, node: str, state_clock: FakeClock | None
) -> None:
    one, watcher = await client.session(node), await client2.session(node)
    claim = await one.claim("hourly", at_least=1.0, at_most=2.0)
    assert claim is not None
    found = await describe(watcher, "hourly")
    assert found is not None
    assert (found.limit, found.ephemeral, found.owners, found.waiters) == (1, False, (), ())
    async with contextlib.aclosing(watcher.semaphore("hourly").watch(data=True)) as states:
        first = await within(anext(states))
        assert first.exists
        await later(state_clock, 2.0)
        async with asyncio.timeout(BOUND):
            async for state in states:
                if not state.exists:
                    break
    with pytest.raises(NotFoundError):
        await watcher.semaphore("hourly").describe()


async def test_max_claims_bounds_the_live_claims_of_a_node(
    client: tenure.Client, node: str
) -> None:
    await client.alter_node(node, max_claims=2)
    session = await client.session(node)
    first = await session.claim("a", at_least=0.0, at_most=600.0)
    second = await session.claim("b", at_least=0.0, at_most=600.0)
    assert first is not None
    assert second is not None
    with pytest.raises(LimitExceededError, match="max_claims"):
        await session.claim("c", at_least=0.0, at_most=600.0)
    assert await session.claim("a", at_least=0.0, at_most=600.0) is None  # claimed: no error
    assert await second.release()  # at_least 0: it ends at once, and makes room
    assert await session.claim("c", at_least=0.0, at_most=600.0) is not None


async def test_a_claims_token_is_ordered_with_every_grant_of_the_node(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    before = await session.mutex("m1").lock()
    claim = await session.claim("slot", at_least=0.0, at_most=600.0)
    assert claim is not None
    after = await session.mutex("m2").lock()
    assert before.token < claim.token < after.token


async def test_only_a_free_name_or_an_ended_claims_semaphore_may_be_claimed(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    await session.semaphore("plain").create(1, b"config")
    with pytest.raises(PreconditionFailedError, match="not a claim"):
        await session.claim("plain", at_least=1.0, at_most=2.0)
    async with session.mutex("held"):
        with pytest.raises(PreconditionFailedError):
            await session.claim("held", at_least=1.0, at_most=2.0)
    assert (await session.semaphore("plain").describe()).data == b"config"  # untouched


#: Times refused before anything is sent, and what the error says.
BAD_TIMES = [
    (10.0, 5.0, "must not exceed at_most"),
    (-1.0, 5.0, "at_least"),
    (1.0, math.inf, "at_most"),
    (math.nan, 5.0, "at_least"),
    (0.0, 0.0, "at_most must be above 0"),
    (1.0, tenure.MAX_CLAIM_SECONDS * 2, "MAX_CLAIM_SECONDS"),
]


async def test_bad_times_are_refused_before_anything_is_sent(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    for at_least, at_most, message in BAD_TIMES:
        with pytest.raises(InvalidArgumentError, match=message):
            await session.claim("x", at_least=at_least, at_most=at_most)
    assert await describe(session, "x") is None


async def test_bad_names_ids_and_data_are_refused(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    with pytest.raises(InvalidArgumentError):
        await session.claim("", at_least=1.0, at_most=2.0)
    with pytest.raises(InvalidArgumentError):
        await session.claim("x", at_least=1.0, at_most=2.0, data=7)  # type: ignore[arg-type]
    for bad in ("", "A" * 32, "a" * 31, "not an id at all, not at all!!!!"):
        with pytest.raises(InvalidArgumentError, match="claim_id"):
            await client.release_claim(node, "x", bad)
    await client.alter_node(node, max_data_size=8)
    with pytest.raises(LimitExceededError, match="max_data_size"):
        await session.claim("x", at_least=1.0, at_most=2.0, data=b"123456789")
