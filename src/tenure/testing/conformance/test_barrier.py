"""Cyclic barriers: parties go together, not before; a party that leaves is not counted."""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.errors import InvalidArgumentError, NotFoundError, SessionExpiredError

from .harness import Expire
from .support import settle, spawn, within


async def _arrivals(session: tenure.Session, name: str, count: int) -> None:
    """Until ``count`` parties hold their arrival (the barrier's owners)."""

    async def there() -> bool:
        try:
            state = await session.semaphore(name).describe(owners=True)
        except NotFoundError:  # not made yet
            return False
        return len(state.owners) >= count

    for _ in range(500):
        if await there():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{count} arrivals at {name!r} not seen")


async def test_parties_go_together_and_the_next_round_begins(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    sessions = [await c.session(node) for c in (client, client2, client, client2)]
    for round_ in (1, 2):
        early = [spawn(s.barrier("stage-2", 4).wait()) for s in sessions[:3]]
        await _arrivals(sessions[0], "stage-2", 3)
        await settle()
        assert not any(task.done() for task in early)
        await within(sessions[3].barrier("stage-2", 4).wait(timeout=30))
        await within(asyncio.gather(*early))
        assert await sessions[1].barrier("stage-2", 4).rounds() == round_


async def test_a_party_that_times_out_is_not_counted(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two, three = (
        await client.session(node),
        await client2.session(node),
        await client.session(node),
    )
    with pytest.raises(TimeoutError):
        await within(one.barrier("gate", 2).wait(timeout=0.05))
    waiting = spawn(two.barrier("gate", 2).wait())
    await _arrivals(one, "gate", 1)
    await settle()
    assert not waiting.done()  # the one that gave up is not there any more
    await within(three.barrier("gate", 2).wait())
    await within(waiting)
    assert await one.barrier("gate", 2).rounds() == 1


async def test_a_party_whose_session_is_lost_is_not_counted(
    client: tenure.Client, client2: tenure.Client, node: str, expire: Expire
) -> None:
    lost = await client.session(node, recovery_window=15.0)
    doomed = spawn(lost.barrier("gate", 2).wait())
    other = await client2.session(node)
    await _arrivals(other, "gate", 1)
    await expire(lost)
    with pytest.raises(SessionExpiredError):
        await within(doomed)
    waiting = spawn(other.barrier("gate", 2).wait())
    await _arrivals(other, "gate", 1)
    await settle()
    assert not waiting.done()
    late = await client2.session(node)
    await within(late.barrier("gate", 2).wait())
    await within(waiting)


async def test_rounds_of_many_parties_all_pass(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    sessions = [await c.session(node) for c in (client, client2, client)]

    async def party(session: tenure.Session) -> None:
        for _ in range(4):
            await session.barrier("rounds", 3).wait(timeout=60)

    await within(asyncio.gather(*(party(s) for s in sessions)))
    assert await sessions[0].barrier("rounds", 3).rounds() == 4


async def test_a_barrier_needs_a_party(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    with pytest.raises(InvalidArgumentError):
        session.barrier("gate", 0)
    await within(session.barrier("alone", 1).wait())  # one party: goes at once
