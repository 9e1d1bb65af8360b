"""The most contended names: ``client.top(node)`` where the store keeps statistics per
name (Capability.NAME_STATS), and a clear refusal where it does not.

A name is kept from its first queued request; its waits, grants and holds count from
then, over the last 60 or 300 seconds.
"""

from __future__ import annotations

import pytest

import tenure
from tenure.errors import InvalidArgumentError, NotFoundError, UnsupportedError

from .harness import unique
from .support import spawn, wait_for_waiters, within


@pytest.mark.requires(tenure.Capability.NAME_STATS)
async def test_a_waited_on_name_is_listed_with_its_waits_and_grants(
    client: tenure.Client, node: str
) -> None:
    name, quiet = unique("top"), unique("top-quiet")
    async with (
        client.session(node, description="holder") as holder,
        client.session(node, description="waiter") as waiter,
    ):
        async with holder.mutex(quiet):
            pass  # (never waited on: not contention, not kept)
        async with holder.mutex(name):
            granted = spawn(waiter.mutex(name).lock())
            await wait_for_waiters(holder, name, 1)
            report = await within(client.top(node, sort="queue", limit=10_000))
            (now,) = [stat for stat in report.names if stat.name == name]
            assert (now.node, now.queue, now.holders, now.queued) == (node, 1, 1, 1)
            assert now.longest_hold is not None
            assert now.longest_hold >= 0
        lease = await within(granted)
        await lease.release()
        report = await within(client.top(node, limit=10_000))
        (stat,) = [stat for stat in report.names if stat.name == name]
        assert (stat.grants, stat.queue, stat.holders) == (1, 0, 0)
        assert (stat.timeouts, stat.losses) == (0, 0)
        assert stat.wait_seconds >= 0  # (0 where the store's clock stood still: a fake one)
        assert stat.wait_p50 is not None
        assert stat.hold_p50 is not None
        assert quiet not in {stat.name for stat in report.names}
        assert report.window == 60.0
        assert report.sort == "wait"
        assert 1 <= report.kept <= report.capacity
        everywhere = await within(client.top(limit=10_000))
        assert (node, name) in {(s.node, s.name) for s in everywhere.names}


@pytest.mark.requires(tenure.Capability.NAME_STATS)
async def test_bad_input_is_refused(client: tenure.Client, node: str) -> None:
    with pytest.raises(NotFoundError):
        await client.top(unique("no-such-node"))
    with pytest.raises(InvalidArgumentError):
        await client.top(node, window=30)
    with pytest.raises(InvalidArgumentError):
        await client.top(node, sort="names")
    with pytest.raises(InvalidArgumentError):
        await client.top(node, limit=0)


async def test_a_store_without_statistics_says_so(client: tenure.Client, node: str) -> None:
    if tenure.Capability.NAME_STATS in client.capabilities:
        assert isinstance(await client.top(node), tenure.TopReport)
        return
    with pytest.raises(UnsupportedError, match=r"Capability\.NAME_STATS"):
        await client.top(node)
