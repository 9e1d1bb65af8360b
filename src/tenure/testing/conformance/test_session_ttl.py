"""Sessions with a ttl: alive while the application renews them (``client.session(node, ttl=)``).

The deadline is the client's, so these run on real time on every backend: a ttl
short enough to pass within the test, renewals well within it.
"""

from __future__ import annotations

import asyncio
import math

import pytest

import tenure
from tenure.errors import InvalidArgumentError, SessionClosedError, SessionExpiredError

from .support import eventually, owners, spawn, wait_for_waiters, within

#: A ttl that runs out within a test (the deadline is this process's own clock), and
#: renewals ten times as often, so a slow turn of a loaded machine's loop is no loss.
TTL = 1.0


async def test_a_session_not_renewed_within_its_ttl_is_lost_and_its_holds_go_to_others(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node, ttl=TTL)
    other = await client2.session(node)
    lock = await session.mutex("job").lock()
    waiting = spawn(other.mutex("job").lock())
    await wait_for_waiters(other, "job", 1)

    reason = await within(session.lost, "the end of a session nobody renewed")

    assert isinstance(reason, SessionExpiredError)
    assert f"session {session.id} was not renewed within its ttl" in str(reason)
    assert session.lost_reason is reason
    assert isinstance(lock.lost_reason, SessionExpiredError)
    await within(waiting, "the waiter's grant")
    assert await owners(other, "job") == [other.id]
    with pytest.raises(SessionExpiredError):
        await session.renew()

    async def closed_in_the_store() -> bool:
        return (await client.describe_node(node)).sessions == 1

    await eventually(closed_in_the_store, "the store forgets the session its ttl ended")


async def test_renewals_keep_a_session_past_its_ttl_until_they_stop(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node, ttl=TTL)
    other = await client2.session(node)
    lock = await session.mutex("job").lock()

    loop = asyncio.get_running_loop()
    until = loop.time() + 2 * TTL  # two ttls, each renewed ten times over
    while loop.time() < until:
        await session.renew()
        await asyncio.sleep(TTL / 10)

    assert session.lost_reason is None
    assert lock.held
    assert await owners(other, "job") == [session.id]

    ended = await within(session.lost, "the end after the last renewal")
    assert isinstance(ended, SessionExpiredError)

    async def free() -> bool:  # closed in the store as soon as it answers
        return await owners(other, "job") == []

    await eventually(free, "the lock freed by the session's close")


async def test_a_loss_of_the_ttl_cancels_the_sessions_block(
    client: tenure.Client, node: str
) -> None:
    with pytest.raises(SessionExpiredError):
        async with client.session(node, ttl=TTL) as session:
            await within(asyncio.Event().wait(), "the block's cancellation")
    assert isinstance(session.lost_reason, SessionExpiredError)


async def test_the_ttl_is_checked_at_the_call_and_said_by_the_session(
    client: tenure.Client, node: str
) -> None:
    for bad in (0, -1.0, math.inf, math.nan, "5", True, 86_400.5):
        with pytest.raises(InvalidArgumentError, match="ttl"):
            client.session(node, ttl=bad)  # type: ignore[arg-type]
    assert (await client.describe_node(node)).sessions == 0

    async with client.session(node, ttl=30) as session:
        assert session.ttl == 30.0
        await session.renew()
    with pytest.raises(SessionClosedError):
        await session.renew()

    async with client.session(node) as plain:  # no ttl: nothing to renew
        assert plain.ttl is None
        await plain.renew()
        assert not plain.closed
