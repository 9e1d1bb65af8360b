"""A ``tenure://`` URL of several doors against scripted cluster members (in-process).

The members (tests/backends/fake_cluster.py) speak the real codec and serve on one
shared engine, as a cluster's members share one state: these tests check how the
client picks its server (standbys, hints, old versions, failover) and that its
sessions come through a change of leader. Real clusters are tests/server's.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import tenure
from tenure import Capability
from tenure._protocol.cluster import ClusterStatus
from tenure._protocol.messages import LEADER, STANDALONE, STANDBY
from tenure.backends._base import prefix_watch, rate_reservations
from tenure.backends._link import FOLLOW_PAUSE
from tenure.backends.remote import TenureBackend, cluster_status
from tenure.errors import InvalidArgumentError, UnavailableError, UnsupportedError
from tests.api.support import eventually, owners, within
from tests.backends.fake_cluster import FakeCluster, FakeMember
from tests.ports import free_port

pytestmark = pytest.mark.timeout(30)

Start = Callable[..., Awaitable[FakeMember]]


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    state = FakeCluster()
    try:
        yield state
    finally:
        state.close()


@pytest.fixture
async def start(cluster: FakeCluster) -> AsyncIterator[Start]:
    """``await start(name, role=..., leader=..., versions=..., state=...)``: a running member."""
    members: list[FakeMember] = []

    async def make(name: str, *, state: FakeCluster | None = None, **kwargs: Any) -> FakeMember:
        member = await FakeMember(name, state or cluster, **kwargs).start()
        members.append(member)
        return member

    try:
        yield make
    finally:
        for member in members:
            await member.close()


def url_of(*members: FakeMember | str, query: str = "") -> str:
    doors = ",".join(m if isinstance(m, str) else m.address for m in members)
    return f"tenure://{doors}" + (f"?{query}" if query else "")


def backend(client: tenure.Client) -> TenureBackend:
    assert isinstance(client.backend, TenureBackend)
    return client.backend


async def test_a_client_given_a_standby_first_ends_on_the_leader(start: Start) -> None:
    leader = await start("t2")
    standby = await start("t1", role=STANDBY)
    standby.leader = leader.address
    async with tenure.connect(url_of(standby, leader)) as client:
        await client.create_node("n")
        [shard] = backend(client).shards
        assert str(shard.link.endpoint) == leader.address
        assert shard.link.welcome is not None
        assert shard.link.welcome.role == LEADER
        assert shard.link.epoch == 1  # the standby's handshake was never the link's connection
    assert standby.hellos == [13]
    assert standby.requests == []
    assert leader.requests[:1] == ["CreateNode"]


async def test_the_leader_a_standby_names_is_followed_outside_the_doors(start: Start) -> None:
    hidden = await start("t3")  # the URL does not list it
    first = await start("t1", role=STANDBY, leader=hidden.address)
    second = await start("t2", role=STANDBY, leader=hidden.address)
    async with tenure.connect(url_of(first, second)) as client:
        await client.create_node("n")
        assert str(backend(client).shards[0].link.endpoint) == hidden.address
    assert (first.hellos, second.hellos) == ([13], [])  # the hint went first, past t2


async def test_standbys_naming_each_other_cost_one_connection_each(start: Start) -> None:
    one = await start("t1", role=STANDBY)
    two = await start("t2", role=STANDBY, leader=one.address)
    one.leader = two.address
    with pytest.raises(UnavailableError) as raised:
        await within(tenure.connect(url_of(one, two)))
    assert (one.hellos, two.hellos) == ([13], [13])
    assert str(raised.value) == (
        f"cannot connect to any of {one.address},{two.address}: "
        f"{one.address}: a standby, naming the leader {two.address}; "
        f"{two.address}: a standby, naming the leader {one.address}"
    )


async def test_a_hint_to_another_standby_is_not_followed_further(start: Start) -> None:
    # t1 names x (not a door), a standby naming y, a standby naming t1: one hop per
    # door tried, so y is never asked, and no chain of hints is a loop.
    one = await start("t1", role=STANDBY)
    x = await start("x", role=STANDBY)
    y = await start("y", role=STANDBY, leader=one.address)
    one.leader, x.leader = x.address, y.address
    with pytest.raises(UnavailableError, match="a standby"):
        await within(tenure.connect(url_of(one, free_address())))
    assert (one.hellos, x.hellos, y.hellos) == ([13], [13], [])


async def test_open_fails_naming_every_door_and_why(start: Start) -> None:
    nowhere = free_address()
    lost = await start("t2", role=STANDBY)  # knows no leader
    with pytest.raises(UnavailableError) as raised:
        await within(tenure.connect(url_of(nowhere, lost)))
    message = str(raised.value)
    assert message.startswith(f"cannot connect to any of {nowhere},{lost.address}: ")
    assert f"{nowhere}: connection refused (nothing listens there)" in message
    assert f"{lost.address}: a standby, which knows no leader now" in message


async def test_standalone_servers_are_not_one_service(start: Start) -> None:
    a = await start("a", role=STANDALONE, state=FakeCluster(b"a" * 16))
    b = await start("b", role=STANDALONE, state=FakeCluster(b"b" * 16))
    with pytest.raises(InvalidArgumentError, match=r"standalone server.*\?sharded=true"):
        await within(tenure.connect(url_of(a, b)))
    assert a.requests == b.requests == []


async def test_a_refusal_of_an_older_hello_names_the_leader_too(start: Start) -> None:
    # A server that refuses versions 7 to 3 and, as a standby, an older Hello NOT_LEADER.
    leader = await start("t2")
    standby = await start("t1", role=STANDBY, leader=leader.address, versions=(1, 2))
    async with tenure.connect(url_of(standby)) as client:
        await client.create_node("n")
        assert str(backend(client).shards[0].link.endpoint) == leader.address
    assert standby.hellos == [13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2]
    assert leader.hellos == [13]  # each server its own version


@pytest.mark.parametrize(
    ("versions", "hellos"),
    [
        ((1,), [13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]),
        ((1, 2), [13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2]),
        ((1, 2, 3), [13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3]),
        ((1, 2, 3, 4), [13, 12, 11, 10, 9, 8, 7, 6, 5, 4]),
        ((1, 2, 3, 4, 5), [13, 12, 11, 10, 9, 8, 7, 6, 5]),
    ],
)
async def test_an_older_server_is_spoken_to_in_its_version(
    start: Start, versions: tuple[int, ...], hellos: list[int]
) -> None:
    old = await start("old", role=STANDALONE, versions=versions)
    async with tenure.connect(url_of(old)) as client:
        await client.create_node("n")
        version = hellos[-1]
        session = await client.session("n")
        await session.semaphore("config").create(1, b"v1")
        await session.semaphore("api").create(1, b"limiter 1.0 1.0 0.0")
        # What the server lacks, its sessions lack: the ability is refused, never sent.
        with pytest.raises(UnsupportedError, match="the capability prefix_watch"):
            await prefix_watch(session._backend_session()).watch_prefix(
                "config/", data=True, owners=True, waiters=False
            )
        with pytest.raises(UnsupportedError, match=r"lacks Capability\.PREFIX_WATCH"):
            async with client.cache("n", prefix="config/"):
                pass
        # What the server's version lacks is not declared (require= refuses it).
        assert {Capability.PREFIX_WATCH, Capability.CLAIMS}.isdisjoint(client.capabilities)
        assert (Capability.ALL_OR_NONE in client.capabilities) == (version >= 5)
        # Claims (version 6): refused whole, never sent; a node's max_claims too.
        with pytest.raises(UnsupportedError, match="the capability claims"):
            await session.claim("nightly", at_least=1.0, at_most=2.0)
        with pytest.raises(UnsupportedError, match=r"lacks Capability\.CLAIMS"):
            await client.release_claim("n", "nightly", "a" * 32)
        with pytest.raises(UnsupportedError, match="no node setting max_claims"):
            await client.create_node("m", max_claims=5)
        assert "ClaimName" not in old.requests
        assert "ReleaseClaim" not in old.requests
        if version < 5:
            with pytest.raises(UnsupportedError, match="the capability rate_reservation"):
                await rate_reservations(session._backend_session()).reserve_units("api", 1, None)
        if version == 4:
            # Without the ability, the limiter is reserved over the core (a read and a
            # compare-and-set, which version 4 has), on this client's clock.
            assert await session.rate_limiter("api", 1.0, 1).try_acquire()
            assert not await session.rate_limiter("api", 1.0, 1).try_acquire()
            assert "ReserveUnits" not in old.requests
        if version < 4:
            with pytest.raises(UnsupportedError, match="SwapSemaphoreData"):
                await session.rate_limiter("api", 1.0, 1).try_acquire()
            with pytest.raises(UnsupportedError, match=f"version {version}, which has no"):
                await session.semaphore("config").compare_and_set(b"v1", b"v2")
            with pytest.raises(UnsupportedError, match="SwapSemaphoreData"):
                await session.counter("hits").add(1)
        if version < 3:
            with pytest.raises(UnsupportedError, match=f"version {version}, which has no"):
                await backend(client).shards[0].link.call(ClusterStatus())
        assert (await session.semaphore("config").describe()).data == b"v1"
    assert old.hellos == hellos


async def test_a_version_6_server_is_sent_no_hand_off(start: Start) -> None:
    old = await start("old", role=STANDALONE, versions=(1, 2, 3, 4, 5, 6))
    async with tenure.connect(url_of(old)) as client:
        assert Capability.HANDOFF not in client.capabilities
        assert Capability.CLAIMS in client.capabilities  # (version 6's, kept)
        await client.create_node("n")
        async with client.session("n") as session:
            lock = await session.mutex("job").lock()
            with pytest.raises(UnsupportedError, match="the capability handoff"):
                await lock.handoff()
            with pytest.raises(UnsupportedError, match="the capability handoff"):
                await session.adopt("h1.x")
            assert lock.held
    assert old.hellos == [13, 12, 11, 10, 9, 8, 7, 6]
    assert "OfferHold" not in old.requests
    assert "AdoptHold" not in old.requests
    with pytest.raises(UnsupportedError, match="handoff"):
        await tenure.connect(url_of(old), require=[Capability.HANDOFF])


async def test_a_version_5_server_is_sent_no_task_and_detects_no_deadlock(start: Start) -> None:
    old = await start("old", role=STANDALONE, versions=(1, 2, 3, 4, 5))
    async with tenure.connect(url_of(old)) as client:
        assert tenure.Capability.DEADLOCK_DETECTION not in client.capabilities
        await client.create_node("n")
        async with client.session("n") as session:
            # Sent as version 5 lays it out (a task field would break its codec).
            lock = await session.mutex("job").lock()
            await lock.release()
    assert old.hellos == [13, 12, 11, 10, 9, 8, 7, 6, 5]
    with pytest.raises(UnsupportedError, match="deadlock_detection"):
        await tenure.connect(url_of(old), require=[tenure.Capability.DEADLOCK_DETECTION])


async def test_a_version_6_server_is_sent_no_max_hold_and_the_client_refuses_it(
    start: Start,
) -> None:
    old = await start("old", role=STANDALONE, versions=(1, 2, 3, 4, 5, 6))
    async with tenure.connect(url_of(old)) as client:
        assert tenure.Capability.MAX_HOLD not in client.capabilities
        assert tenure.Capability.CLAIMS in client.capabilities  # (version 6's)
        await client.create_node("n")
        with pytest.raises(UnsupportedError, match="no node setting max_hold"):
            await client.create_node("m", max_hold=5.0)
        async with client.session("n") as session:
            sent = old.requests.count("Acquire")
            with pytest.raises(UnsupportedError, match="the capability max_hold"):
                await session.mutex("job", max_hold=5.0).lock()
            with pytest.raises(UnsupportedError, match="the capability max_hold"):
                await session.acquire("job", ephemeral=True, max_hold=5.0)
            assert old.requests.count("Acquire") == sent  # refused before it was sent
            lock = await session.mutex("job").lock()  # (without: as version 6 lays it out)
            await lock.release()
    assert old.hellos == [13, 12, 11, 10, 9, 8, 7, 6]
    with pytest.raises(UnsupportedError, match="max_hold"):
        await tenure.connect(url_of(old), require=[tenure.Capability.MAX_HOLD])


async def test_a_version_9_server_is_sent_no_long_hold_and_the_client_refuses_it(
    start: Start,
) -> None:
    old = await start("old", role=STANDALONE, versions=(1, 2, 3, 4, 5, 6, 7, 8, 9))
    async with tenure.connect(url_of(old)) as client:
        assert tenure.Capability.LONG_HOLDS not in client.capabilities
        assert tenure.Capability.NAME_STATS in client.capabilities  # (version 9's)
        await client.create_node("n", max_hold=5.0)  # (version 7's: still sent)
        with pytest.raises(
            UnsupportedError, match="version 9, which has no node setting long_hold"
        ):
            await client.create_node("m", long_hold=0.0)
        for value in (300.0, None):  # (None too: that server knows no such name)
            with pytest.raises(UnsupportedError, match="no node setting long_hold"):
                await client.alter_node("n", long_hold=value)
        assert old.requests.count("CreateNode") == 1  # refused before it was sent
        assert "AlterNode" not in old.requests
        described = await client.alter_node("n", max_waiters=7)  # (without it: sent)
        assert (described.config.max_waiters, described.config.long_hold) == (7, None)
    assert old.hellos == [13, 12, 11, 10, 9]
    with pytest.raises(UnsupportedError, match="long_holds"):
        await tenure.connect(url_of(old), require=[tenure.Capability.LONG_HOLDS])


async def test_a_session_keeps_its_lock_through_a_step_down(
    start: Start, cluster: FakeCluster
) -> None:
    first = await start("t1")
    second = await start("t2", role=STANDBY, leader=first.address)
    async with tenure.connect(url_of(first, second)) as client:
        await client.create_node("n")
        session = await client.session("n", recovery_window=30.0)
        lock = await session.mutex("job").lock()
        link = backend(client).shards[0].link
        second.role = LEADER
        first.step_down(second.address)

        async def moved() -> bool:
            return link.connected and str(link.endpoint) == second.address

        await eventually(moved, "the client on the new leader")
        assert link.epoch == 2
        assert lock.held
        assert lock.lost_reason is None
        assert await owners(session, "job") == [session.id]
        assert cluster.owners[session.id].member is second  # re-attached there
        async with client.session("n") as other:
            assert await other.mutex("job").try_lock() is None  # still held
        assert second.requests.count("AttachSession") == 1
    assert first.hellos == [13]  # the hint went first: the old leader was not tried again


async def test_a_vanished_leader_is_replaced_through_the_doors(
    start: Start, cluster: FakeCluster
) -> None:
    first = await start("t1")
    second = await start("t2", role=STANDBY, leader=first.address)
    async with tenure.connect(url_of(first, second)) as client:
        await client.create_node("n")
        session = await client.session("n", recovery_window=30.0)
        lock = await session.mutex("job").lock()
        link = backend(client).shards[0].link
        second.role, second.leader = LEADER, None
        await first.close()  # a crash: no GoingAway, nothing listens there any more

        async def moved() -> bool:
            return link.connected and str(link.endpoint) == second.address

        await eventually(moved, "the client on the new leader")
        assert lock.held
        assert await owners(session, "job") == [session.id]
        assert cluster.owners[session.id].member is second


async def test_a_request_refused_not_leader_is_sent_again_on_the_leader(start: Start) -> None:
    first = await start("t1")
    second = await start("t2", role=STANDBY, leader=first.address)
    async with tenure.connect(url_of(first, second)) as client:
        await client.create_node("n")
        # t1 stops leading without a word; its next answer says where the leader is.
        first.role, first.leader = STANDBY, second.address
        second.role, second.leader = LEADER, None
        assert (await within(client.describe_node("n"))).name == "n"
        assert str(backend(client).shards[0].link.endpoint) == second.address
    assert first.requests[-1] == "DescribeNode"
    assert second.requests[-1] == "DescribeNode"


async def test_sharded_servers_are_independent_and_hashed(start: Start) -> None:
    a = await start("a", role=STANDALONE, state=FakeCluster(b"a" * 16))
    b = await start("b", role=STANDALONE, state=FakeCluster(b"b" * 16))
    # (64: the chance that rendezvous hashing puts them all on one of two servers is
    # 2**-63; with 16 it was 2**-15, and CI drew such a pair of ports once.)
    names = [f"node-{i}" for i in range(64)]
    async with (
        tenure.connect(url_of(a, b, query="sharded=true")) as one,
        tenure.connect(url_of(b, a), sharded=True) as two,
    ):
        assert len(backend(one).shards) == 2
        for name in names:
            await one.create_node(name)
        placed = {name: str(backend(one).shard_for(name).link.endpoint) for name in names}
        assert set(placed.values()) == {a.address, b.address}, "64 nodes all on one server"
        for name in names:
            assert str(backend(two).shard_for(name).link.endpoint) == placed[name]
            assert (await two.describe_node(name)).name == name
    assert a.requests.count("CreateNode") + b.requests.count("CreateNode") == 64


@pytest.mark.parametrize("value", ["true", "1", "yes", "TRUE", "false", "0", "no"])
async def test_the_sharded_option_takes_true_and_false_words(start: Start, value: str) -> None:
    a = await start("a", role=STANDALONE)
    async with tenure.connect(url_of(a, query=f"sharded={value}")) as client:
        assert len(backend(client).shards) == 1


@pytest.mark.parametrize("value", ["maybe", "", "2"])
async def test_an_unknown_sharded_value_is_refused_naming_the_option(value: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"sharded must be true or false.*{value!r}"):
        await tenure.connect(f"tenure://127.0.0.1:1,127.0.0.1:2?sharded={value}")


def free_address() -> str:
    return f"127.0.0.1:{free_port()}"


async def test_cluster_status_asks_every_door_standbys_included(start: Start) -> None:
    leader = await start("t2")
    standby = await start("t1", role=STANDBY, leader=leader.address)
    standby.lag = 3
    standby.peers = leader.peers = [standby, leader]
    alone = await start("alone", role=STANDALONE, state=FakeCluster(b"a" * 16))
    old = await start("old", role=STANDALONE, versions=(1, 2))
    nowhere = free_address()
    doors = await within(
        cluster_status(url_of(standby, leader, alone, old, nowhere), {"token": "t"})
    )
    assert [door.door for door in doors] == [
        standby.address,
        leader.address,
        alone.address,
        old.address,
        nowhere,
    ]
    asked, led, single, older, down = doors
    assert (asked.role, led.role, single.role, older.role, down.role) == (
        STANDBY,
        LEADER,
        STANDALONE,
        STANDALONE,
        None,
    )
    assert asked.view is not None
    assert asked.view.answered_by == "t1"
    assert led.view is not None
    assert led.view.leader == "t2"
    assert [(m.name, m.applied) for m in asked.view.members] == [("t1", 97), ("t2", 100)]
    assert isinstance(single.error, UnsupportedError)
    assert "not part of a cluster" in str(single.error)
    assert isinstance(older.error, UnsupportedError)
    assert "protocol version 2, which has no ClusterStatus" in str(older.error)
    assert isinstance(down.error, UnavailableError)
    assert "connection refused" in str(down.error)
    assert standby.requests == leader.requests == alone.requests == ["ClusterStatus"]
    assert old.requests == []  # never sent to a server that cannot read it
    assert standby.tokens == ["t"]


async def test_a_silent_leader_is_left_for_the_one_a_standby_names_before_its_patience(
    start: Start, cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A leader that answers nothing (SIGSTOP) closes nothing: once a Ping waited a ping
    interval, the client asks the other doors and leaves for the leader they name."""
    first = await start("t1")
    second = await start("t2", role=STANDBY, leader=first.address)
    third = await start("t3", role=STANDBY, leader=first.address)
    caplog.set_level(logging.INFO, logger="tenure.client")
    async with tenure.connect(url_of(first, second, third), connect_timeout=30) as client:
        await client.create_node("n")
        session = await client.session("n", recovery_window=2.0)  # a Ping every 0.5 s
        lock = await session.mutex("job").lock()
        link = backend(client).shards[0].link
        first.silent = True
        second.role, second.leader = LEADER, None
        third.leader = second.address

        async def moved() -> bool:
            return link.connected and str(link.endpoint) == second.address

        await eventually(moved, "the client on the new leader")
        assert lock.held
        assert cluster.owners[session.id].member is second
    said = [record.getMessage() for record in caplog.records]
    assert any("answers no Ping" in line for line in said), said
    assert not any("no Pong from" in line for line in said), said  # (not the patience)


async def test_a_silent_leader_is_kept_while_no_other_door_names_another(
    start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    """Asking the other doors moves nothing while they name the silent leader itself."""
    first = await start("t1")
    second = await start("t2", role=STANDBY, leader=first.address)
    caplog.set_level(logging.INFO, logger="tenure.client")
    async with tenure.connect(url_of(first, second)) as client:
        await client.create_node("n")
        await client.session("n", recovery_window=2.0)
        link = backend(client).shards[0].link
        hellos = len(second.hellos)
        first.silent = True

        async def asked_twice() -> bool:
            return len(second.hellos) >= hellos + 2

        await eventually(asked_twice, "the standby asked about the leader twice")
        first.silent = False  # (its Pongs dropped meanwhile: the patience may still end it)
        assert not any("answers no Ping" in r.getMessage() for r in caplog.records)
        assert str(link.endpoint) == first.address


async def test_reconnects_stay_frequent_while_standbys_answer_and_no_leader_does(
    start: Start,
) -> None:
    """A leader killed: its standby names it until the election; the pause between two
    attempts stops growing at FOLLOW_PAUSE while standbys answer (not the backoff's 2 s)."""
    first = await start("t1")
    second = await start("t2", role=STANDBY, leader=first.address)
    async with tenure.connect(url_of(first, second)) as client:
        await client.create_node("n")
        session = await client.session("n", recovery_window=30.0)
        link = backend(client).shards[0].link
        await first.close()  # a crash; the standby still names it
        hellos = len(second.hellos)

        async def many_attempts() -> bool:  # past the attempt whose backoff would be 0.8 s
            return len(second.hellos) >= hellos + 7

        await eventually(many_attempts, "seven attempts through the standby")
        assert 0 < link.pause <= FOLLOW_PAUSE
        second.role, second.leader = LEADER, None

        async def moved() -> bool:
            return link.connected and str(link.endpoint) == second.address

        await eventually(moved, "the client on the new leader")
        assert not session.closed
