"""max_hold: a grant that ends a time of the store's clock after it was made, whatever
its session does.

Every test needs ``Capability.MAX_HOLD``. Times: on ``memory://`` the FakeClock moves
them (``later``); elsewhere they are short real times (a second or two) that the
test waits out by awaiting what the store does at their end (the holder's loss, a
waiter's grant), within :data:`BOUND`, never by a sleep that must be long enough.
"""

from __future__ import annotations

import asyncio
import math

import pytest

import tenure
from tenure import lowlevel
from tenure.backends import Capability
from tenure.backends._base import abilities_of, lease_renewal, session_recovery
from tenure.errors import InvalidArgumentError, LeaseLostError, UnsupportedError
from tenure.testing import FakeClock

from .support import hold_in_block, spawn, wait_for_waiters, within

#: Every test but the last needs the capability (the last runs everywhere: refused or kept).
bounded = pytest.mark.requires(Capability.MAX_HOLD)

#: The longest a max_hold's end may take to show on a backend of real time: its
#: times here are at most 2 s, on a machine that may be slow.
BOUND = 30.0


async def later(clock: FakeClock | None, seconds: float) -> None:
    """Let ``seconds`` pass on a FakeClock (on real time, the caller waits for the store)."""
    if clock is not None:
        await clock.advance(seconds)


async def patiently(awaitable: asyncio.Future[tenure.Lock] | asyncio.Task[None]) -> None:
    """Await ``awaitable`` for at most :data:`BOUND` seconds of real time."""
    async with asyncio.timeout(BOUND):
        await awaitable


@bounded
async def test_the_lease_ends_at_max_hold_although_its_session_lives_on(
    client: tenure.Client, client2: tenure.Client, node: str, state_clock: FakeClock | None
) -> None:
    one, two = await client.session(node), await client2.session(node)
    lock = await one.mutex("job", max_hold=1.0).lock()
    waiting = spawn(two.mutex("job").lock())
    await wait_for_waiters(two, "job", 1)
    assert lock.held
    await later(state_clock, 1.0)
    async with asyncio.timeout(BOUND):
        reason = await lock.lost
    assert isinstance(reason, LeaseLostError)
    assert "max_hold" in str(reason)
    assert not lock.held
    assert one.lost_reason is None  # the session lives on: only the lease ended
    assert not one.closed
    taken = await within(waiting)
    assert taken.token > lock.token
    await lock.release()  # ended already: nothing to do, no error
    assert taken.held


@bounded
async def test_work_under_async_with_is_cancelled_with_the_loss(
    client: tenure.Client, client2: tenure.Client, node: str, state_clock: FakeClock | None
) -> None:
    one, two = await client.session(node), await client2.session(node)
    task, body, lock = await hold_in_block(one.acquire("job", ephemeral=True, max_hold=1.0))
    await later(state_clock, 1.0)
    with pytest.raises(LeaseLostError):
        await patiently(task)
    assert not body.finished
    assert isinstance(lock.lost_reason, LeaseLostError)
    taken = await within(two.acquire("job", ephemeral=True, timeout=BOUND))
    assert taken.token > lock.token


@bounded
async def test_a_release_before_max_hold_is_a_release_and_bounds_no_later_grant(
    client: tenure.Client, client2: tenure.Client, node: str, state_clock: FakeClock | None
) -> None:
    one, two = await client.session(node), await client2.session(node)
    lock = await one.mutex("job", max_hold=1.0).lock()
    await lock.release()
    assert lock.lost_reason is None
    after = await two.mutex("job").lock(timeout=0)  # free at once
    assert after.token > lock.token
    # Past the first grant's bound, the later grant (with none) is still held.
    await later(state_clock, 2.0)
    if state_clock is None:
        await asyncio.sleep(1.5)  # (real time: the first grant's end, had it applied)
    assert after.held
    assert (await two.mutex("job").describe()).owner is not None
    await after.release()


@bounded
async def test_a_rwlock_bounds_its_readers_and_its_writer(
    client: tenure.Client, client2: tenure.Client, node: str, state_clock: FakeClock | None
) -> None:
    one, two = await client.session(node), await client2.session(node)
    bounded = one.rwlock("catalog", max_hold=1.0)
    assert bounded.max_hold == 1.0
    reader = await bounded.read()
    also = await two.rwlock("catalog").read()  # unbounded: it stays
    writer = spawn(two.rwlock("catalog", max_hold=1.0).write())
    await wait_for_waiters(two, "catalog", 1)
    await later(state_clock, 1.0)
    async with asyncio.timeout(BOUND):
        assert isinstance(await reader.lost, LeaseLostError)
    assert also.held
    await also.release()
    written = await within(writer)
    assert written.token > reader.token
    await later(state_clock, 1.0)
    async with asyncio.timeout(BOUND):
        assert isinstance(await written.lost, LeaseLostError)


@bounded
async def test_the_nodes_max_hold_bounds_every_grant(
    client: tenure.Client, client2: tenure.Client, node: str, state_clock: FakeClock | None
) -> None:
    described = await client.alter_node(node, max_hold=1.0)
    assert described.config.max_hold == 1.0
    one, two = await client.session(node), await client2.session(node)
    lock = await one.mutex("job").lock()  # no max_hold of its own: the node's
    sem_lease = await one.acquire("other", ephemeral=True, max_hold=60.0)  # only shortens
    waiting = spawn(two.mutex("job").lock())
    await later(state_clock, 1.0)
    async with asyncio.timeout(BOUND):
        assert isinstance(await lock.lost, LeaseLostError)
        assert isinstance(await sem_lease.lost, LeaseLostError)
    assert (await within(waiting)).token > lock.token
    cleared = await client.alter_node(node, max_hold=None)
    assert cleared.config.max_hold is None


@bounded
async def test_a_shorter_max_hold_than_the_nodes_wins(
    client: tenure.Client, node: str, clock: FakeClock
) -> None:
    await client.alter_node(node, max_hold=10.0)
    session = await client.session(node)
    short = await session.acquire("a", ephemeral=True, max_hold=2.0)
    default = await session.acquire("b", ephemeral=True)
    await clock.advance(2.0)
    assert isinstance(await within(short.lost), LeaseLostError)
    assert default.held
    await clock.advance(8.0)
    assert isinstance(await within(default.lost), LeaseLostError)


@bounded
async def test_a_node_made_with_max_hold_keeps_it(client: tenure.Client, node_name: str) -> None:
    name = node_name + "-bounded"
    await client.create_node(name, max_hold=30.5)
    try:
        assert (await client.describe_node(name)).config.max_hold == 30.5
    finally:
        await client.drop_node(name, force=True)


@bounded
@pytest.mark.parametrize(
    "bad", [0, 0.0, -1.0, math.nan, math.inf, -math.inf, 366 * 24 * 3600.0 + 1, "5", True]
)
async def test_a_bad_max_hold_is_refused_at_once_naming_it(
    client: tenure.Client, node: str, bad: object
) -> None:
    session = await client.session(node)
    with pytest.raises(InvalidArgumentError, match="max_hold") as refused:
        session.acquire("job", ephemeral=True, max_hold=bad)  # type: ignore[call-overload]
    assert isinstance(refused.value, ValueError)
    with pytest.raises(InvalidArgumentError, match="max_hold"):
        session.mutex("job", max_hold=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="max_hold"):
        session.rwlock("job", max_hold=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="max_hold"):
        await client.alter_node(node, max_hold=bad)
    assert (await client.describe_node(node)).config.max_hold is None


@bounded
@pytest.mark.requires(Capability.LEASE_TTL, Capability.SESSION_RECOVERY)
async def test_renewals_do_not_take_a_lease_past_its_max_hold(
    client: tenure.Client, node: str, clock: FakeClock
) -> None:
    """A lease with a TTL is renewed (here by hand, as its keeper would) up to its
    max_hold's end, never past it; a TTL shorter than max_hold still ends it first."""
    await client.alter_node(node, default_lease=10.0)
    session = await client.session(node)
    lease = await session.acquire("job", ephemeral=True, max_hold=3.0)
    backend = lowlevel.backend_session(session)
    (held,) = [h for h in await session_recovery(backend).holds() if h.name == "job"]
    await clock.advance(2.0)
    assert await lease_renewal(backend).renew("job", held.grant) == 10.0  # the TTL in force
    await clock.advance(1.0)
    reason = await within(lease.lost)
    assert isinstance(reason, LeaseLostError)
    assert "max_hold" in str(reason)
    # max_hold longer than the TTL: the TTL, not renewed in time (its keeper renews
    # on real time, a third of the TTL from now), ends it first.
    await client.alter_node(node, default_lease=1.0)
    longer = await session.acquire("other", ephemeral=True, max_hold=30.0)
    await clock.advance(1.0)
    reason = await within(longer.lost)
    assert isinstance(reason, LeaseLostError)
    assert "max_hold" not in str(reason)


@bounded
@pytest.mark.requires(Capability.LEASE_TTL)
async def test_a_lease_its_keeper_renews_still_ends_at_max_hold(
    client: tenure.Client, client2: tenure.Client, node: str, state_clock: FakeClock | None
) -> None:
    """On real time: the keeper renews a 1 s lease every third of a second, and the
    store ends it at its max_hold all the same (renewed for ever, were it not capped)."""
    if state_clock is not None:
        pytest.skip(
            "the kit cannot run a lease keeper on real time against memory://'s FakeClock "
            "(test_renewals_do_not_take_a_lease_past_its_max_hold is this test there)"
        )
    await client.alter_node(node, default_lease=1.0)
    one, two = await client.session(node), await client2.session(node)
    lock = await one.mutex("job", max_hold=2.0).lock()
    waiting = spawn(two.mutex("job").lock())
    async with asyncio.timeout(BOUND):
        reason = await lock.lost
    assert isinstance(reason, LeaseLostError)
    assert "max_hold" in str(reason)  # not "expired without renewal": it was renewed
    assert (await within(waiting)).token > lock.token


@bounded
async def test_a_waiter_asked_with_max_hold_is_bounded_from_its_grant(
    client: tenure.Client, client2: tenure.Client, node: str, clock: FakeClock
) -> None:
    one, two = await client.session(node), await client2.session(node)
    first = await one.mutex("job").lock()
    waiting = spawn(two.mutex("job", max_hold=5.0).lock())
    await wait_for_waiters(two, "job", 1)
    await clock.advance(4.0)  # (waiting is not holding: its bound has not started)
    await first.release()
    second = await within(waiting)
    await clock.advance(4.0)
    assert second.held
    await clock.advance(1.0)
    assert isinstance(await within(second.lost), LeaseLostError)


@bounded
@pytest.mark.requires(Capability.SESSION_RECOVERY)
async def test_a_resumed_sessions_bounded_hold_still_ends_at_max_hold(
    client: tenure.Client, client2: tenure.Client, node: str, state_clock: FakeClock | None
) -> None:
    """The end is the store's, kept with the hold: the client that takes the session
    back (another process, as it were) is told of it."""
    old = await client.session(node)
    lock = await old.mutex("job", max_hold=1.5).lock()
    new = await client2.session(node, resume=old.ticket())
    [resumed] = new.leases("job")
    assert resumed.token == lock.token
    await client.aclose()  # the process that crashed: only the new one is left to hear
    await later(state_clock, 1.5)
    async with asyncio.timeout(BOUND):
        reason = await resumed.lost
    assert isinstance(reason, LeaseLostError)
    assert new.lost_reason is None


async def test_max_hold_is_refused_before_anything_is_held_or_kept_never_ignored(
    client: tenure.Client, node: str, state_clock: FakeClock | None
) -> None:
    """On every backend: a backend whose sessions cannot bound a grant (``etcd://``)
    refuses max_hold, an acquire's and a node's, with UnsupportedError naming it,
    before anything is held or queued; one that takes it keeps it (a third party's
    may take it without declaring MAX_HOLD). Never taken and then ignored."""
    session = await client.session(node)
    if Capability.MAX_HOLD in abilities_of(lowlevel.backend_session(session)):
        lease = await session.acquire("job", ephemeral=True, max_hold=1.0)
        await later(state_clock, 1.0)
        async with asyncio.timeout(BOUND):
            reason = await lease.lost
        assert isinstance(reason, LeaseLostError)
        assert "max_hold" in str(reason)
        return
    with pytest.raises(UnsupportedError, match="max_hold"):
        await session.acquire("job", ephemeral=True, max_hold=1.0)
    with pytest.raises(UnsupportedError, match="max_hold"):
        await session.mutex("job", max_hold=1.0).lock()
    with pytest.raises(UnsupportedError, match="max_hold"):
        await client.alter_node(node, max_hold=1.0)
    with pytest.raises(UnsupportedError, match="max_hold"):
        await client.create_node(node + "-bounded", max_hold=1.0)
    assert (await client.describe_node(node)).config.max_hold is None
    lock = await session.mutex("job").lock(timeout=0)  # nothing was left held or queued
    await lock.release()
