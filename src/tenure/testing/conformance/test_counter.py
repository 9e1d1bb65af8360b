"""Counters, and the compare-and-set of a semaphore's data they are made of."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

import tenure
from tenure.errors import (
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)

from .support import within


async def test_compare_and_set_replaces_the_data_only_if_it_is_expected(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    config = one.semaphore("config")
    await config.create(1, b"v1")
    assert await two.semaphore("config").compare_and_set(b"v1", b"v2")
    assert not await config.compare_and_set(b"v1", b"mine")  # v2 now: nothing changes
    assert (await config.describe()).data == b"v2"
    assert await config.compare_and_set(b"v2", b"")
    assert (await two.semaphore("config").describe()).data == b""
    with pytest.raises(NotFoundError):
        await one.semaphore("missing").compare_and_set(b"", b"x")


async def test_a_watch_on_data_sees_a_compare_and_set(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    await one.semaphore("config").create(1, b"v1")
    states = two.semaphore("config").watch(data=True)
    async with contextlib.aclosing(states):
        assert (await within(anext(states))).data == b"v1"
        assert await one.semaphore("config").compare_and_set(b"v1", b"v2")
        assert (await within(anext(states))).data == b"v2"


async def test_a_counter_starts_at_zero_and_adds(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    jobs = one.counter("jobs-done")
    assert await jobs.get() == 0
    assert await jobs.add() == 1
    assert await two.counter("jobs-done").add(41) == 42
    assert await jobs.add(-50) == -8
    assert await two.counter("jobs-done").get() == -8
    # The value is the semaphore's data, in decimal: what an operator's describe shows.
    assert (await one.semaphore("jobs-done").describe()).data == b"-8"


async def test_compare_and_set_of_a_counter(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    assert await one.counter("epoch").compare_and_set(0, 5)  # never written: it was 0
    assert not await two.counter("epoch").compare_and_set(0, 7)
    assert await two.counter("epoch").compare_and_set(5, 7)
    assert await one.counter("epoch").get() == 7


async def test_adds_from_many_sessions_are_none_lost(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    sessions = [await c.session(node) for c in (client, client2, client, client2)]

    async def adds(session: tenure.Session) -> list[int]:
        return [await session.counter("hits").add(1) for _ in range(10)]

    seen = await within(asyncio.gather(*(adds(s) for s in sessions)))
    values = sorted(v for each in seen for v in each)
    assert values == list(range(1, 41))  # each add saw its own new value: none counted twice
    assert await sessions[0].counter("hits").get() == 40


async def test_a_counter_refuses_what_it_cannot_hold(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    await session.semaphore("notes").create(1, b"not a number")
    with pytest.raises(PreconditionFailedError, match="not a counter"):
        await session.counter("notes").add(1)
    big = session.counter("big")
    assert await big.add(2**63 - 1) == 2**63 - 1
    with pytest.raises(LimitExceededError):
        await big.add(1)
    assert await big.get() == 2**63 - 1  # nothing changed
    with pytest.raises(InvalidArgumentError):
        await big.add(2**63)
    with pytest.raises(InvalidArgumentError):
        await big.add(1.5)  # type: ignore[arg-type]
