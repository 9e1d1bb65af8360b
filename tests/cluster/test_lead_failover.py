"""The leader runner through a failover of a ``tenure serve --cluster`` (a real one over
the run's etcd): the leader member killed, the runner's session re-attaches to the next
one within its recovery window, so its term and its ``work`` go on (no loss), a
candidate waiting behind it keeps its place, and the handover that follows happens on
the new leader with a greater token.
"""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tests.cluster.harness import TenureCluster, until

WINDOW = 20.0


class Runner:
    """One runner's terms: their leaderships, and an event that lets the current work return."""

    def __init__(self) -> None:
        self.terms: list[tenure.Leadership] = []
        self.cancelled: list[tenure.Leadership] = []
        self.done = asyncio.Event()

    async def work(self, leadership: tenure.Leadership) -> None:
        self.terms.append(leadership)
        try:
            await self.done.wait()
        except asyncio.CancelledError:
            self.cancelled.append(leadership)
            raise
        self.done.clear()


async def test_the_runner_leads_on_through_a_failover_and_hands_over_after_it(
    cluster: TenureCluster,
) -> None:
    url = cluster.url()
    async with tenure.connect(url) as one, tenure.connect(url) as two:
        await one.create_node("app", exist_ok=True)
        a, b = Runner(), Runner()
        running_a = asyncio.create_task(
            one.lead("app", "scheduler", a.work, data=b"a", recovery_window=WINDOW)
        )
        await until(lambda: _true(bool(a.terms)), "a leading")
        running_b = asyncio.create_task(
            two.lead("app", "scheduler", b.work, data=b"b", recovery_window=WINDOW)
        )
        observer = await two.session("app", recovery_window=WINDOW)

        async def b_waits() -> bool:
            description = await observer.semaphore("scheduler").describe(waiters=True)
            return len(description.waiters) == 1

        await until(b_waits, "b waiting")

        old = cluster.leader()
        await asyncio.to_thread(old.kill)
        await asyncio.to_thread(cluster.leader, excluding=old)

        # The term goes on: same leadership, not lost, its work not cancelled.
        [first] = a.terms
        assert first.held
        assert first.lost_reason is None
        assert a.cancelled == []
        await first.proclaim(b"a, after the failover")  # on the new leader
        leader = await until(lambda: observer.election("scheduler").leader(), "a leader")
        assert (leader.data, leader.token) == (b"a, after the failover", first.token)
        assert b.terms == []

        a.done.set()  # a's work returns: it resigns, b (still queued) leads

        await until(lambda: _true(bool(b.terms)), "b leading")
        assert b.terms[0].token > first.token
        await until(lambda: b_waits(), "a queued again behind b")
        for running in (running_a, running_b):
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
        await observer.close()


async def _true(value: bool) -> bool:
    return value
