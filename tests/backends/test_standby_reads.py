"""The client's reads from standbys (tenure.backends._standby_reads), its rules held
with stand-in links: each read allows no more than the time since the client last
heard from the leader, asks for at least the newest index read, goes round the doors
that do not lead, leaves one that failed alone, and falls back on the leader."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

import tenure
from tenure._core import ListNodes
from tenure._core.commands import NodePage
from tenure._protocol import PROTOCOL_VERSION, Reply, Welcome
from tenure.backends._doors import Door
from tenure.backends._link import LinkOptions
from tenure.backends._standby_reads import StandbyReads
from tenure.errors import InvalidArgumentError, NotLeaderError, UnavailableError

PAGE = NodePage(("n",))


class StandIn:
    """A link that answers as told, and keeps what it was asked."""

    def __init__(self, name: str, answers: list[Any] | None = None) -> None:
        self.endpoint = name
        self.connected = True
        self.heard_at = -math.inf
        self.asked: list[tuple[float, int]] = []
        self.called = 0
        self.answers = answers if answers is not None else []
        self.welcome = Welcome(version=PROTOCOL_VERSION)
        self.options = LinkOptions()

    async def wait_ready(self, wait_until: float | None = None) -> None:
        pass

    async def request_whole(self, command: Any, fields: dict[str, Any]) -> Reply:
        self.asked.append((fields["max_staleness"], fields["min_index"]))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return Reply(1, PAGE, index=answer)

    async def fallback(self) -> Any:
        """The leader's answer (the read sent as the service's link sends any)."""
        self.called += 1
        return PAGE

    async def aclose(self) -> None:
        self.connected = False


def _reads(leader: StandIn, *standbys: StandIn) -> StandbyReads:
    doors = [Door("leader", 1), *(Door(s.endpoint, 1) for s in standbys)]
    reads = StandbyReads(doors, LinkOptions(), leader)  # type: ignore[arg-type]
    leader.endpoint = str(doors[0])
    for door, standby in zip(doors[1:], standbys, strict=True):
        reads._links[str(door)] = standby  # type: ignore[assignment]
    return reads


async def test_a_read_allows_no_more_than_the_time_since_the_leader_was_heard() -> None:
    leader, standby = StandIn("leader"), StandIn("s1", [5, 6])
    reads = _reads(leader, standby)
    assert await reads.read(ListNodes(), 60.0, leader.fallback) == PAGE
    assert standby.asked == [(60.0, 0)]  # (nothing heard yet: the client's own bound)
    leader.heard_at = asyncio.get_running_loop().time() - 10.0  # told something 10 s ago
    await reads.read(ListNodes(), 60.0, leader.fallback)
    allowed, min_index = standby.asked[1]
    assert 10.0 <= allowed < 60.0  # (the 10 s and what passed since: never the 60)
    assert min_index == 5  # (never older than the first answer)
    assert reads.min_index == 6
    assert leader.called == 0


async def test_the_doors_that_do_not_lead_are_asked_in_turn() -> None:
    leader, one, two = StandIn("leader"), StandIn("s1", [1, 2]), StandIn("s2", [3, 4])
    reads = _reads(leader, one, two)
    for _ in range(4):
        await reads.read(ListNodes(), 1.0, leader.fallback)
    assert (len(one.asked), len(two.asked), leader.called) == (2, 2, 0)
    assert reads.answered == {"s1:1": 2, "s2:1": 2}


@pytest.mark.parametrize(
    "failure",
    [UnavailableError("could not confirm"), NotLeaderError.pointing_to(None, "stepped")],
    ids=["unavailable", "not-leader"],
)
async def test_a_door_that_cannot_answer_is_left_alone_and_the_leader_answers_last(
    failure: Exception,
) -> None:
    leader, one, two = StandIn("leader"), StandIn("s1", [failure]), StandIn("s2", [failure])
    reads = _reads(leader, one, two)
    assert await reads.read(ListNodes(), 1.0, leader.fallback) == PAGE
    assert (len(one.asked), len(two.asked), leader.called) == (1, 1, 1)
    await reads.read(
        ListNodes(), 1.0, leader.fallback
    )  # (both left alone for a while: the leader's)
    assert (len(one.asked), len(two.asked), leader.called) == (1, 1, 2)
    assert reads.answered == {"": 2}


async def test_a_server_of_an_older_version_is_not_asked_again_for_a_while() -> None:
    leader, old = StandIn("leader"), StandIn("s1", [9])
    old.welcome = Welcome(version=10)  # (no reads from standbys: it would answer as a leader)
    reads = _reads(leader, old)
    assert await reads.read(ListNodes(), 1.0, leader.fallback) == PAGE
    assert (old.asked, leader.called) == ([], 1)
    assert reads.min_index == 0


async def test_a_backend_without_replicas_answers_a_stale_read_fresh() -> None:
    async with tenure.connect("memory://") as client:
        await client.create_node("n")
        assert await client.list_nodes(max_staleness=1.0) == ["n"]
        assert (await client.describe_node("n", max_staleness=0.0)).name == "n"
        for bad in (-1.0, 3601.0, math.inf, "1"):
            with pytest.raises(InvalidArgumentError, match="max_staleness"):
                await client.list_nodes(max_staleness=bad)  # type: ignore[arg-type]


async def test_reads_that_ask_at_once_open_one_connection_to_a_door() -> None:
    leader, one = StandIn("leader"), StandIn("s1", [1, 2, 3])
    reads = StandbyReads([Door("leader", 1), Door("s1", 1)], LinkOptions(), leader)  # type: ignore[arg-type]
    leader.endpoint = "leader:1"
    opened: list[Door] = []

    async def opening(door: Door) -> Any:
        opened.append(door)
        await asyncio.sleep(0)  # (the others ask meanwhile)
        reads._links[str(door)] = one  # type: ignore[assignment]
        return one

    reads._open = opening  # type: ignore[method-assign]
    pages = await asyncio.gather(*(reads.read(ListNodes(), 1.0, leader.fallback) for _ in range(3)))
    assert pages == [PAGE] * 3
    assert opened == [Door("s1", 1)]
    assert len(one.asked) == 3
