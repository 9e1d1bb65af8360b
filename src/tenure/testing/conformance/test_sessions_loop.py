"""``client.sessions()``: a new session after each loss, until one is closed on purpose."""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.errors import SessionExpiredError

from .harness import Expire
from .support import eventually, settle, spawn, within


async def test_a_new_session_follows_an_expired_one(
    client: tenure.Client, node: str, expire: Expire
) -> None:
    loop = client.sessions(node, recovery_window=15.0, description="worker")
    first = await within(anext(loop))
    assert loop.current is first
    assert loop.last_loss is None
    assert (first.recovery_window, first.description) == (15.0, "worker")

    following = spawn(anext(loop))
    await settle()
    assert not following.done()  # it waits for the current session to end

    await expire(first)

    second = await within(following)
    assert second.id != first.id
    assert not second.closed
    assert (second.recovery_window, second.description) == (15.0, "worker")
    assert loop.current is second
    assert isinstance(first.lost_reason, SessionExpiredError)
    await loop.aclose()
    assert second.closed


async def test_the_loop_stops_when_its_session_is_closed_on_purpose(
    client: tenure.Client, node: str
) -> None:
    loop = client.sessions(node)
    session = await within(anext(loop))

    await session.close()

    with pytest.raises(StopAsyncIteration):
        await within(anext(loop))
    with pytest.raises(StopAsyncIteration):  # and stays stopped
        await within(anext(loop))
    assert (await client.describe_node(node)).sessions == 0


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_async_for_recovers_work_across_expiries(
    client: tenure.Client, node: str, expire: Expire
) -> None:
    """The loop of the README: start again in a new session after each loss."""
    seen: list[tenure.Session] = []
    tokens: list[int] = []

    async def worker() -> None:
        async for session in client.sessions(node, recovery_window=15.0):
            seen.append(session)
            try:
                async with session.mutex("job") as lock:
                    tokens.append(lock.token)
                    if len(seen) < 3:
                        await asyncio.Event().wait()  # until the session is lost
            except SessionExpiredError:
                continue
            await session.close()  # done: ends the loop

    task = spawn(worker())
    for round_ in range(2):

        async def working(round_: int = round_) -> bool:
            return len(tokens) > round_

        await eventually(working, f"work in session #{round_ + 1}")
        await expire(seen[round_])

    await within(task)
    assert len(seen) == 3
    assert len({s.id for s in seen}) == 3
    assert tokens == sorted(tokens)
    assert [type(s.lost_reason) for s in seen[:2]] == [SessionExpiredError] * 2
    assert seen[2].closed
    assert seen[2].lost_reason is None


async def test_closing_the_client_ends_the_loop(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    loop = client2.sessions(node)
    session = await within(anext(loop))
    following = spawn(anext(loop))
    await settle()

    await client2.aclose()

    with pytest.raises(StopAsyncIteration):
        await within(following)
    assert session.closed
    assert (await client.describe_node(node)).sessions == 0


async def test_leaving_the_loop_in_async_with_closes_the_last_session(
    client: tenure.Client, node: str
) -> None:
    async with client.sessions(node) as sessions:
        async for session in sessions:
            lock = await session.mutex("job").lock()
            break
    assert session.closed
    assert session.lost_reason is None  # closed on purpose, not lost
    assert not lock.held
    assert (await client.describe_node(node)).sessions == 0
