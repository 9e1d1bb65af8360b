"""The client's reads from standbys (tenure.backends._standby_reads), its rules held
with stand-in links: each read allows no more than the time since the client last
heard from the leader, asks for at least the newest index read, goes round the doors
that do not lead and the standbys the cluster names, leaves one that failed alone,
and falls back on the leader."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

import tenure
from tenure._core import ListNodes
from tenure._core.commands import NodePage
from tenure._protocol import PROTOCOL_VERSION, Reply, Welcome
from tenure._protocol.cluster import ClusterStatus, ClusterView, MemberView
from tenure.backends._doors import Door, Doors
from tenure.backends._link import LinkOptions
from tenure.backends._standby_reads import SHUN_SECONDS, StandbyReads
from tenure.backends.remote import TenureBackend
from tenure.errors import (
    InvalidArgumentError,
    NotFoundError,
    NotLeaderError,
    PermissionDeniedError,
    UnavailableError,
)
from tests.server.wire import ServerProcess

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
        role = "leader" if name == "leader" else "standby"  # (as each one's Welcome says)
        self.welcome = Welcome(version=PROTOCOL_VERSION, role=role)
        self.options = LinkOptions()
        self.doors = Doors([Door(name, 1)])
        #: What ClusterStatus answers (a view, or an error to raise), and how often asked.
        self.status: ClusterView | BaseException = ClusterView("c", "", 1, 1, "leader")
        self.statuses = 0

    async def call(self, command: Any, *, wait_until: float | None = None) -> Any:
        assert isinstance(command, ClusterStatus)  # (the one call a leader's link is sent)
        self.statuses += 1
        if isinstance(self.status, BaseException):
            raise self.status
        return self.status

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


async def test_a_standbys_error_is_its_answer() -> None:
    leader, one = StandIn("leader"), StandIn("s1", [NotFoundError("no such semaphore"), 2])
    reads = _reads(leader, one)
    with pytest.raises(NotFoundError):
        await reads.read(ListNodes(), 1.0, leader.fallback)
    await reads.read(ListNodes(), 1.0, leader.fallback)  # (not left alone for it)
    assert (reads.answered, leader.called) == ({"s1:1": 2}, 0)


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


@pytest.mark.parametrize("url", ["memory://", "dict://"])  # (dict://: a third party's)
async def test_a_session_without_replicas_describes_a_semaphore_fresh(url: str) -> None:
    async with tenure.connect(url) as client:
        await client.create_node("n")
        async with client.session("n") as session:
            semaphore = session.semaphore("s")
            await semaphore.create(2, b"0")
            await semaphore.update(b"1")
            found = await semaphore.describe(owners=True, max_staleness=5.0)
            assert (found.data, found.limit) == (b"1", 2)
            async with session.mutex("m") as lock:
                mutex = await session.mutex("m").describe(max_staleness=0.0)
                assert mutex.owner is not None
                assert mutex.owner.token == lock.token
            assert (await session.rwlock("rw").describe(max_staleness=1.0)).writer is None
            for bad in (-1.0, 3601.0, math.inf, "1"):
                with pytest.raises(InvalidArgumentError, match="max_staleness"):
                    await semaphore.describe(max_staleness=bad)  # type: ignore[arg-type]


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


def _view(*members: tuple[str, str]) -> ClusterView:
    """A ClusterStatus answer naming ``members`` (role, address)."""
    listed = tuple(MemberView(f"m{n}", role, at, 1) for n, (role, at) in enumerate(members))
    return ClusterView("c", "m0", 1, 1, "m0", listed)


class Opened:
    """Stand-in links opened by address (what :meth:`StandbyReads._open` would connect)."""

    def __init__(self, reads: StandbyReads, links: dict[str, StandIn]) -> None:
        self.links = links
        self.opened: list[str] = []
        reads._open = self.open  # type: ignore[method-assign]
        self.reads = reads

    async def open(self, door: Door) -> Any:
        self.opened.append(str(door))
        link = self.links[str(door)]
        self.reads._links[str(door)] = link  # type: ignore[assignment]
        return link


async def test_the_standbys_the_cluster_names_are_read_from_through_one_door() -> None:
    leader = StandIn("leader")
    leader.endpoint = "leader:1"
    leader.status = _view(("leader", "leader:1"), ("standby", "s1:1"), ("standby", "s2:1"))
    reads = StandbyReads([Door("leader", 1)], LinkOptions(), leader)  # type: ignore[arg-type]
    one, two = StandIn("s1", [1, 2]), StandIn("s2", [3, 4])
    opened = Opened(reads, {"s1:1": one, "s2:1": two})
    for _ in range(4):
        assert await reads.read(ListNodes(), 1.0, leader.fallback) == PAGE
    assert sorted(opened.opened) == ["s1:1", "s2:1"]  # (never the leader, a member too)
    assert reads.answered == {"s1:1": 2, "s2:1": 2}
    assert [str(door) for door in reads.learnt] == ["s1:1", "s2:1"]
    assert (leader.statuses, leader.called) == (1, 0)  # (asked once, when first used)


async def test_a_standby_both_listed_and_named_is_asked_as_one() -> None:
    leader, one = StandIn("leader"), StandIn("s1", [1, 2, 3])
    reads = _reads(leader, one)
    leader.status = _view(("leader", "leader:1"), ("standby", "s1:1"))
    for _ in range(3):
        await reads.read(ListNodes(), 1.0, leader.fallback)
    assert reads.answered == {"s1:1": 3}


async def test_the_cluster_is_asked_again_once_every_standby_known_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    clock = [loop.time()]
    monkeypatch.setattr(loop, "time", lambda: clock[0])
    leader = StandIn("leader")
    leader.endpoint = "leader:1"
    leader.status = _view(("leader", "leader:1"), ("standby", "s1:1"))
    reads = StandbyReads([Door("leader", 1)], LinkOptions(), leader)  # type: ignore[arg-type]
    failed = StandIn("s1", [UnavailableError("down"), UnavailableError("down")])
    new = StandIn("s3", [7])
    opened = Opened(reads, {"s1:1": failed, "s3:1": new})
    assert await reads.read(ListNodes(), 1.0, leader.fallback) == PAGE
    # Just asked: not again at once (the leader answers), however many reads fail.
    assert (leader.statuses, leader.called, opened.opened) == (1, 1, ["s1:1"])
    leader.status = _view(("leader", "leader:1"), ("standby", "s1:1"), ("standby", "s3:1"))
    clock[0] += SHUN_SECONDS  # (s1 may be asked again, and fails again; then s3, named now)
    assert await reads.read(ListNodes(), 1.0, leader.fallback) == PAGE
    assert (leader.statuses, leader.called) == (2, 1)
    assert reads.answered == {"": 1, "s3:1": 1}
    assert reads.min_index == 7


async def test_a_lone_server_is_not_asked_for_standbys() -> None:
    leader = StandIn("leader")
    leader.welcome = Welcome(version=PROTOCOL_VERSION)  # (no role: not of a cluster)
    reads = StandbyReads([Door("leader", 1)], LinkOptions(), leader)  # type: ignore[arg-type]
    assert await reads.read(ListNodes(), 1.0, leader.fallback) == PAGE
    assert (leader.statuses, leader.called, reads.answered) == (0, 1, {"": 1})


async def test_a_cluster_that_names_no_member_leaves_the_urls_doors() -> None:
    leader, one = StandIn("leader"), StandIn("s1", [1])
    leader.status = PermissionDeniedError("no read access")
    reads = _reads(leader, one)
    assert await reads.read(ListNodes(), 1.0, leader.fallback) == PAGE
    assert (reads.answered, reads.learnt, leader.statuses) == ({"s1:1": 1}, [], 1)


async def test_a_lone_servers_client_reads_from_it(tenure_server: ServerProcess) -> None:
    url = f"tenure://127.0.0.1:{tenure_server.port}?max_staleness=5"
    async with tenure.connect(url) as client:
        backend = client.backend
        assert isinstance(backend, TenureBackend)
        assert backend.standby_reads is not None
        await client.create_node("n")
        assert await client.list_nodes() == ["n"]
        async with client.session("n") as session:
            await session.semaphore("s").create(1, b"x")
            assert (await session.semaphore("s").describe(max_staleness=5)).data == b"x"
        assert backend.standby_reads.answered == {"": 2}  # (the server's own: no standby)
        assert backend.standby_reads.learnt == []


async def test_a_standby_that_took_the_lead_is_asked_no_more_and_the_leader_answers() -> None:
    """Its read connection followed it as it took the lead (a failover): a read naming a
    session would be refused there (the connection owns no session), so it is left
    alone, as a door that cannot answer is, and the leader's path answers (seen in the
    fault suite: PermissionDeniedError "session 13 is not attached to this connection")."""
    leader, promoted = StandIn("leader"), StandIn("s1", [1])
    promoted.welcome = Welcome(version=PROTOCOL_VERSION, role="leader")
    reads = _reads(leader, promoted)
    assert await reads.read(ListNodes(), 60.0, leader.fallback) == PAGE
    assert promoted.asked == []
    assert leader.called == 1


async def test_a_standby_taking_the_lead_as_a_read_goes_is_left_for_the_leader() -> None:
    class Promoted(StandIn):
        async def request_whole(self, command: Any, fields: dict[str, Any]) -> Reply:
            self.welcome = Welcome(version=PROTOCOL_VERSION, role="leader")  # (it led then)
            raise PermissionDeniedError("session 13 is not attached to this connection")

    leader, promoted = StandIn("leader"), Promoted("s1")
    reads = _reads(leader, promoted)
    assert await reads.read(ListNodes(), 60.0, leader.fallback) == PAGE
    assert leader.called == 1
    # A standby's own refusal (its welcome a standby's) stays the read's error:
    refusing = StandIn("s2", [PermissionDeniedError("session 13 is not one of token 't''s")])
    with pytest.raises(PermissionDeniedError, match="not one of token"):
        await _reads(StandIn("leader"), refusing).read(ListNodes(), 60.0, leader.fallback)
