"""YDB's clients against a cluster: discovery names the leader, standbys send them on.

Three ``tenure serve --cluster`` members over the run's etcd, each with a YDB face on
a port of its own (kept across restarts). Every member's discovery names the
leader's YDB endpoint; a standby ends every coordination call with gRPC
UNAVAILABLE, which makes YDB's Python SDK drop it and discover again (docs/ydb.md,
"In a cluster"). The SDK is YDB's own (``ydb``), sync and asyncio; every wait is
bounded, and what must become true is polled with a deadline, never slept for.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import ydb
from ydb.aio.coordination import CoordinationClient as AioCoordinationClient
from ydb.aio.driver import Driver as AioDriver
from ydb.coordination import CoordinationClient

from tenure._protocol.cluster import ClusterView
from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.directory import NO_LEADER, Directory
from tenure.compat.ydb.settings import YdbSettings
from tenure.compat.ydb.tickets import Tickets
from tenure.server.plug import ServeConfig
from tests.cluster.harness import WAIT, ClusterServer, TenureCluster, until
from tests.etcd.cluster import EtcdCluster
from tests.ydb_face.conftest import DATABASE
from tests.ydb_face.raw import node_call, unary

LIST_ENDPOINTS = "/Ydb.Discovery.V1.DiscoveryService/ListEndpoints"
SESSION = "/Ydb.Coordination.V1.CoordinationService/Session"
#: Settings that bound one of the SDK's unary calls by WAIT.
BOUNDED = ydb.BaseRequestSettings().with_timeout(WAIT)


@pytest.fixture
def cluster(tmp_path: Path, etcd_member: EtcdCluster) -> Iterator[TenureCluster]:
    """The conftest's cluster (three members over the run's etcd), each member with a
    YDB face on a port of its own."""
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints, ydb=True) as servers:
        yield servers


def fresh_path() -> str:
    """A node's YDB path no other test uses."""
    return f"{DATABASE}/n-{uuid.uuid4().hex[:10]}"


async def discovery(server: ClusterServer) -> Any:
    """``ListEndpoints`` of the database, asked of ``server``: its operation."""
    request = pb.discovery.ListEndpointsRequest(database=DATABASE)
    reply = await unary(
        server.ydb_port, LIST_ENDPOINTS, request, pb.discovery.ListEndpointsResponse
    )
    return reply.operation


async def discovered(server: ClusterServer) -> Any | None:
    """The one endpoint ``server``'s discovery names (None while it answers UNAVAILABLE:
    it knows of no leader yet)."""
    operation = await discovery(server)
    if operation.status == pb.Status.UNAVAILABLE:
        return None
    assert operation.status == pb.Status.SUCCESS, operation
    result = pb.discovery.ListEndpointsResult()
    operation.result.Unpack(result)
    (endpoint,) = result.endpoints
    return endpoint


async def names(server: ClusterServer, leader: ClusterServer) -> bool | None:
    """True once ``server``'s discovery names ``leader``'s YDB endpoint (None before)."""
    endpoint = await discovered(server)
    if endpoint is None:
        return None
    return f"{endpoint.address}:{endpoint.port}" == leader.ydb_address or None


def session_stream(channel: grpc.aio.Channel) -> Any:
    """A raw ``CoordinationService/Session`` call on ``channel`` (bounded by WAIT)."""
    return channel.stream_stream(
        SESSION,
        request_serializer=pb.coordination.SessionRequest.SerializeToString,
        response_deserializer=pb.coordination.SessionResponse.FromString,
    )(timeout=WAIT)


async def start_session(stream: Any, path: str, timeout_millis: int = 5000) -> Any:
    """Send SessionStart on a raw ``stream``; the first answer."""
    start = {"path": path, "timeout_millis": timeout_millis}
    await stream.write(pb.coordination.SessionRequest(session_start=start))
    return await stream.read()


async def session_on(server: ClusterServer, path: str) -> Any:
    """Start a session on ``path`` through a raw stream to ``server``; the first answer."""
    async with grpc.aio.insecure_channel(server.ydb_address) as channel:
        return await start_session(session_stream(channel), path)


async def refusal(server: ClusterServer, call: str, path: str) -> grpc.aio.AioRpcError:
    """How ``server`` ends ``call`` (a node call's name, or ``Session``) on ``path``:
    the gRPC error it raises (the test fails if it is answered)."""
    attempt = (
        session_on(server, path) if call == "Session" else node_call(server.ydb_port, call, path)
    )
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        await attempt
    return ended.value


async def until_it_ends(stream: Any) -> None:
    """Read a raw Session ``stream`` (answering the server's pings) until it ends: it
    must end with an error status (AioRpcError), not OK."""
    async with asyncio.timeout(WAIT):
        while True:
            response = await stream.read()
            assert response is not grpc.aio.EOF, "the stream ended with OK"
            if response.WhichOneof("response") == "ping":
                ping = {"opaque": response.ping.opaque}
                await stream.write(pb.coordination.SessionRequest(pong=ping))


class FakeRole:
    """A :class:`~tenure.server.plug.Role` as a test sets it."""

    def __init__(self, name: str, leader: str | None) -> None:
        self.name = name
        self.leading = name == "leader"
        self._leader = leader
        self.freshness = None  # (answers no stale read)
        self.places = None  # (one cell: every node its own)

    def leader(self, face: str = "native") -> str | None:
        """The leader's YDB endpoint as set (None: unknown)."""
        return self._leader if face == "ydb" else None

    def status(self) -> ClusterView | None:
        """Not asked here."""
        return None


async def list_endpoints(directory: Directory) -> Any:
    """What ``directory`` answers ListEndpoints for the database: its operation."""
    request = pb.discovery.ListEndpointsRequest(database=DATABASE)
    return (await directory.list_endpoints(request, None)).operation


@pytest.mark.parametrize(
    ("name", "leader", "draining"),
    [("standby", None, False), ("leader", "127.0.0.1:2136", True)],
)
async def test_discovery_without_a_leader_known_is_unavailable_and_calls_are_sent_on(
    name: str, leader: str | None, draining: bool
) -> None:
    # (in process: a standby before any election; a leader stepping down)
    role = FakeRole(name, leader)
    tickets = Tickets(None, b"k" * 32, 60)
    directory = Directory(
        ServeConfig(faces={"ydb": YdbSettings(port=2136)}),
        tickets,
        lambda: 2136,
        role,
        lambda: draining,
    )
    operation = await list_endpoints(directory)
    assert operation.status == pb.Status.UNAVAILABLE
    assert [issue.message for issue in operation.issues] == [NO_LEADER]
    assert directory.elsewhere() is not None


async def test_a_server_outside_a_cluster_is_its_own_endpoint_and_serves() -> None:
    tickets = Tickets(None, b"k" * 32, 60)
    for role in (None, FakeRole("", None)):  # (name "": standalone)
        directory = Directory(
            ServeConfig(faces={"ydb": YdbSettings(port=2136)}), tickets, lambda: 2136, role
        )
        operation = await list_endpoints(directory)
        assert operation.status == pb.Status.SUCCESS
        result = pb.discovery.ListEndpointsResult()
        operation.result.Unpack(result)
        (endpoint,) = result.endpoints
        assert (endpoint.port, endpoint.node_id) == (2136, 1)
        assert directory.elsewhere() is None


async def test_discovery_on_every_member_names_the_leaders_ydb_endpoint(
    cluster: TenureCluster,
) -> None:
    leader = await asyncio.to_thread(cluster.leader)
    node_ids = set()
    for server in cluster.servers:
        await until(functools.partial(names, server, leader), f"{server.index} names the leader")
        endpoint = await discovered(server)
        assert endpoint is not None
        assert (endpoint.address, endpoint.port, endpoint.ssl) == (
            "127.0.0.1",
            leader.ydb_port,
            False,
        )
        assert list(endpoint.service) == ["discovery", "coordination"]
        node_ids.add(endpoint.node_id)
    assert len(node_ids) == 1  # one node: the leader
    assert 0 not in node_ids


def test_the_sdk_pointed_at_a_standby_reaches_the_leader_and_takes_a_semaphore(
    cluster: TenureCluster,
) -> None:
    leader = cluster.leader()
    standby = cluster.standbys()[0]
    asyncio.run(until(lambda: names(standby, leader), "the standby names the leader"))
    driver = ydb.Driver(endpoint=standby.ydb_endpoint, database=DATABASE)
    try:
        driver.wait(timeout=WAIT)
        client = CoordinationClient(driver)
        path = fresh_path()
        client.create_node(path, settings=BOUNDED)
        with client.session(path) as session:
            semaphore = session.semaphore("job")
            semaphore.acquire(timeout=WAIT)
            assert len(semaphore.describe(timeout=WAIT).owners) == 1
            semaphore.release(timeout=WAIT)
    finally:
        driver.stop()
    # Served by the leader: the standby refuses every coordination call (below), and
    # its face asked nothing of its host, which would have refused it (NOT_LEADER).
    assert "NOT_LEADER" not in standby.output(this_start=True)
    assert "failed unexpectedly" not in standby.output(this_start=True)


async def test_the_sdk_follows_a_leader_killed_to_the_next_one(cluster: TenureCluster) -> None:
    old = await asyncio.to_thread(cluster.leader)
    entry = cluster.standbys()[0]  # the SDK's endpoint: a member that stays up
    await until(functools.partial(names, entry, old), "the entry names the leader")
    driver = AioDriver(endpoint=entry.ydb_endpoint, database=DATABASE)
    try:
        async with asyncio.timeout(WAIT):
            await driver.wait(timeout=WAIT)
            client = AioCoordinationClient(driver)
            path = fresh_path()
            await client.create_node(path)
            async with client.session(path) as session, session.semaphore("job"):
                pass  # taken and given back: the SDK holds nothing when the leader dies

        await asyncio.to_thread(old.kill)
        new = await asyncio.to_thread(cluster.leader, excluding=old)
        await until(functools.partial(names, entry, new), "the entry names the new leader")

        # The SDK's one connection was to the dead leader: its first call there fails
        # UNAVAILABLE, it drops it, discovers again through the entry, and goes on.
        async with asyncio.timeout(WAIT), client.session(path) as session:
            semaphore = session.semaphore("job")
            await semaphore.acquire()
            assert len((await semaphore.describe()).owners) == 1
            await semaphore.release()
        assert not old.running
        assert new.ready()
    finally:
        await driver.stop()


async def test_a_semaphore_held_through_the_leader_killed_stays_held_by_the_same_session(
    cluster: TenureCluster,
) -> None:
    old = await asyncio.to_thread(cluster.leader)
    entry = cluster.standbys()[0]
    await until(functools.partial(names, entry, old), "the entry names the leader")
    driver = AioDriver(endpoint=entry.ydb_endpoint, database=DATABASE)
    try:
        await driver.wait(timeout=WAIT)
        client = AioCoordinationClient(driver)
        path = fresh_path()
        async with asyncio.timeout(WAIT):
            await client.create_node(path)
        async with client.session(path) as session:
            lock = session.semaphore("job")
            async with asyncio.timeout(WAIT):
                await lock.acquire()
                held = [(owner.session_id, owner.count) for owner in (await lock.describe()).owners]
            assert len(held) == 1

            await asyncio.to_thread(old.kill)
            new = await asyncio.to_thread(cluster.leader, excluding=old)
            await until(functools.partial(names, entry, new), "the entry names the new leader")

            # The SDK re-attaches its session on the new leader: still the owner.
            async with asyncio.timeout(WAIT):
                described = await lock.describe()
                assert [(o.session_id, o.count) for o in described.owners] == held
                await lock.release()
                assert (await lock.describe()).owners == []
    finally:
        await driver.stop()


#: The coordination calls: the node calls by name, and the Session stream.
COORDINATION_CALLS = ("Create", "Alter", "Drop", "Describe", "Session")


async def test_a_standby_ends_every_coordination_call_unavailable_naming_the_leader(
    cluster: TenureCluster,
) -> None:
    leader = await asyncio.to_thread(cluster.leader)
    path = fresh_path()
    for standby in cluster.standbys():
        await until(functools.partial(names, standby, leader), f"{standby.index} names the leader")
        for call in COORDINATION_CALLS:
            error = await refusal(standby, call, path)
            assert error.code() == grpc.StatusCode.UNAVAILABLE, (call, error)
            assert error.details() == (
                f"this server is a standby; the leader's YDB endpoint is {leader.ydb_address}"
            ), call
    # The leader serves the same calls.
    assert (await node_call(leader.ydb_port, "Create", path)).status == pb.Status.SUCCESS
    started = await session_on(leader, path)
    assert started.WhichOneof("response") == "session_started", started


async def test_a_session_stream_on_a_leader_that_steps_down_ends_unavailable(
    cluster: TenureCluster,
) -> None:
    leader = await asyncio.to_thread(cluster.leader)
    path = fresh_path()
    assert (await node_call(leader.ydb_port, "Create", path)).status == pb.Status.SUCCESS
    async with grpc.aio.insecure_channel(leader.ydb_address) as channel:
        stream = session_stream(channel)
        first = await start_session(stream, path, timeout_millis=30_000)
        assert first.WhichOneof("response") == "session_started", first
        stopping = asyncio.ensure_future(asyncio.to_thread(leader.stop))  # SIGTERM: steps down
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await until_it_ends(stream)
        assert await stopping == 0
    assert ended.value.code() == grpc.StatusCode.UNAVAILABLE, ended.value
    assert "stopped serving" in str(ended.value.details())
