"""Leader election: campaign, proclaim, resign, leader(), observe, failover."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

import tenure
from tenure.errors import LeaderChangedError, SessionExpiredError
from tenure.testing import FakeClock

from .harness import Expire
from .support import settle, spawn, wait_for_waiters, within


async def test_nobody_leads_an_election_nobody_ran_for(client: tenure.Client, node: str) -> None:
    session = await client.session(node)

    assert await session.election("primary").leader() is None


async def test_campaign_makes_the_first_candidate_leader(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    a = await client.session(node)
    b = await client2.session(node)

    async with a.election("primary").campaign(b"host-a:8080") as leadership:
        assert isinstance(leadership, tenure.Leadership)
        mine = await a.election("primary").leader()
        theirs = await b.election("primary").leader()

    assert mine == tenure.LeaderState(b"host-a:8080", True, a.id, leadership.token)
    assert theirs == tenure.LeaderState(b"host-a:8080", False, a.id, leadership.token)
    assert theirs.has_leader
    await leadership.resign()  # until the block's end has resigned (applied)
    assert await b.election("primary").leader() is None


async def test_proclaim_changes_the_data_and_keeps_the_token(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    a = await client.session(node)
    b = await client2.session(node)
    leadership = await a.election("primary").campaign(b"host-a:8080")
    token = leadership.token

    await leadership.proclaim(b"host-a:9090")

    assert leadership.token == token
    assert leadership.data == b"host-a:9090"
    leader = await b.election("primary").leader()
    assert leader is not None
    assert (leader.data, leader.token, leader.session_id) == (b"host-a:9090", token, a.id)
    await leadership.resign()


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_resign_hands_over_to_the_next_candidate(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    a = await client.session(node)
    b = await client2.session(node)
    first = await a.election("primary").campaign(b"a")
    campaigning = spawn(b.election("primary").campaign(b"b"))
    await wait_for_waiters(a, "primary", 1)
    assert not campaigning.done()

    await first.resign()

    second = await within(campaigning)
    assert second.token > first.token
    assert not first.held
    assert first.lost_reason is None  # resigning is not losing
    leader = await a.election("primary").leader()
    assert leader is not None
    assert (leader.data, leader.session_id, leader.is_me) == (b"b", b.id, False)
    with pytest.raises(LeaderChangedError):
        await first.proclaim(b"too late")
    await second.resign()
    assert await a.election("primary").leader() is None


async def test_campaign_timeout_is_decided_by_the_backend_clock(
    client: tenure.Client, client2: tenure.Client, node: str, clock: FakeClock
) -> None:
    a = await client.session(node)
    b = await client2.session(node)
    await a.election("primary").campaign(b"a")
    campaigning = spawn(b.election("primary").campaign(b"b", timeout=10.0))
    await wait_for_waiters(a, "primary", 1)

    await clock.advance(10.5)

    with pytest.raises(TimeoutError):
        await within(campaigning)


@pytest.mark.requires(tenure.Capability.WATCH)
async def test_observe_yields_the_leader_at_once_then_each_change(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    a = await client.session(node)
    b = await client2.session(node)
    watcher = await client2.session(node)

    async with contextlib.aclosing(watcher.election("primary").observe()) as states:
        state = await within(anext(states))
        assert not state.has_leader
        assert (state.data, state.is_me, state.token) == (b"", False, None)

        first = await a.election("primary").campaign(b"host-a")
        state = await within(anext(states))
        assert (state.data, state.session_id, state.is_me) == (b"host-a", a.id, False)
        assert state.token == first.token

        await first.proclaim(b"host-a:2")
        state = await within(anext(states))
        assert (state.data, state.token) == (b"host-a:2", first.token)

        campaigning = spawn(b.election("primary").campaign(b"host-b"))
        await wait_for_waiters(a, "primary", 1)
        await first.resign()
        second = await within(campaigning)
        state = await within(anext(states))
        assert (state.data, state.session_id, state.token) == (b"host-b", b.id, second.token)


@pytest.mark.requires(tenure.Capability.WATCH)
async def test_observe_knows_whether_the_leader_is_me(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    a = await client.session(node)
    b = await client2.session(node)
    leadership = await a.election("primary").campaign(b"a")

    async with (
        contextlib.aclosing(a.election("primary").observe()) as seen_by_a,
        contextlib.aclosing(b.election("primary").observe()) as seen_by_b,
    ):
        assert (await within(anext(seen_by_a))).is_me
        assert not (await within(anext(seen_by_b))).is_me

        campaigning = spawn(b.election("primary").campaign(b"b"))
        await wait_for_waiters(a, "primary", 1)
        await leadership.resign()
        await within(campaigning)

        by_a = await within(anext(seen_by_a))
        by_b = await within(anext(seen_by_b))
        assert (by_a.data, by_a.is_me) == (b"b", False)
        assert (by_b.data, by_b.is_me) == (b"b", True)


@pytest.mark.requires(tenure.Capability.WATCH)
async def test_observe_does_not_yield_for_a_new_candidate(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    a = await client.session(node)
    b = await client2.session(node)
    leadership = await a.election("primary").campaign(b"a")

    async with contextlib.aclosing(a.election("primary").observe()) as states:
        await within(anext(states))
        pending = spawn(anext(states))
        campaigning = spawn(b.election("primary").campaign(b"b"))
        await wait_for_waiters(a, "primary", 1)
        await settle()
        assert not pending.done()  # a queued candidate is not a change of leader

        await leadership.proclaim(b"a2")
        assert (await within(pending)).data == b"a2"
        campaigning.cancel()
        await asyncio.gather(campaigning, return_exceptions=True)


async def test_failover_when_the_leaders_session_expires(
    client: tenure.Client, client2: tenure.Client, node: str, expire: Expire
) -> None:
    a = await client.session(node, recovery_window=15.0)
    b = await client2.session(node)
    leading = asyncio.Event()

    async def lead() -> None:
        async with a.election("primary").campaign(b"host-a") as leadership:
            assert leadership.held
            leading.set()
            await asyncio.Event().wait()

    old_leader = spawn(lead())
    await within(leading.wait())
    campaigning = spawn(b.election("primary").campaign(b"host-b"))
    await wait_for_waiters(b, "primary", 1)

    await expire(a)

    with pytest.raises(SessionExpiredError):
        await within(old_leader)
    new = await within(campaigning)
    leader = await b.election("primary").leader()
    assert leader == tenure.LeaderState(b"host-b", True, b.id, new.token)
