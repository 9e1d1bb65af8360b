"""Scenarios the backends' own tests play alike on their stores (each test then reads
its store its own way): claims racing past max_claims, and a prefix cache cut off
from its backend while its prefix changes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import tenure
from tenure.errors import LimitExceededError
from tenure.testing.conformance.support import within
from tests.netproxy import NetProxy


@asynccontextmanager
async def claimed_past_max_claims(url: str) -> AsyncIterator[tenure.Client]:
    """Claims of twelve names from three clients at once, on a node ``n`` of
    max_claims 5: exactly five are made, seven refused over the limit (the store
    counts them under a lock). Yields one of the clients, the five claims live."""
    async with (
        tenure.connect(url) as one,
        tenure.connect(url) as two,
        tenure.connect(url) as three,
    ):
        await one.create_node("n", max_claims=5)
        sessions = [await c.session("n") for c in (one, two, three)]

        async def claim(i: int) -> str:
            try:
                got = await sessions[i % 3].claim(f"slot-{i}", at_least=0.0, at_most=600.0)
            except LimitExceededError as error:
                return "limit" if "max_claims (5)" in str(error) else str(error)
            return "claimed" if got is not None else "refused"

        outcomes = await asyncio.wait_for(asyncio.gather(*(claim(i) for i in range(12))), 60)
        assert sorted(outcomes) == ["claimed"] * 5 + ["limit"] * 7
        yield one


async def check_a_cut_off_cache_lists_again(
    writer_client: tenure.Client, client: tenure.Client, node: str, proxy: NetProxy
) -> None:
    """A cache of ``client``'s (whose connections all go through ``proxy``) over
    ``config/`` of ``node``: cut off while ``writer_client`` changes config/a and
    makes config/b (what the backend pushes meanwhile is lost), it lists the prefix
    again once the connections are back, and tells both."""
    writer = await writer_client.session(node)
    await writer.semaphore("config/a").create(1, b"1")
    async with client.cache(node, prefix="config/") as cache:
        changes = cache.changes()
        proxy.refuse()
        proxy.drop()  # every connection and stream of the cache's client breaks
        await writer.semaphore("config/a").update(b"2")  # pushed to nobody
        await writer.semaphore("config/b").create(1, b"b")
        proxy.refuse(False)
        told: dict[str, bytes | None] = {}
        while len(told) < 2:
            change = await within(anext(changes), "the cache listing again")
            told[change.name] = None if change.view is None else change.view.data
        assert told == {"config/a": b"2", "config/b": b"b"}
