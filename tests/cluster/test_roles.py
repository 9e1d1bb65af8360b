"""Who leads a cluster, and what a standby answers (real servers over a real etcd)."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import pytest

import tenure
import tenure.backends.remote
from tenure._core import CreateNode, NodeConfig
from tenure._protocol import Failure, Hello, Refused, Welcome
from tenure._protocol.cluster import ClusterView
from tenure.backends import Capability
from tenure.errors import ErrorCode, leader_named
from tests.cluster.harness import TenureCluster, until
from tests.server.wire import WireClient


@pytest.fixture(scope="module")
def cluster(steady_cluster: TenureCluster) -> TenureCluster:
    """One cluster for the module: no test here kills, stops or pauses a member."""
    return steady_cluster


async def _connect(port: int) -> WireClient:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    return WireClient(reader, writer)


async def test_one_member_leads_and_every_member_says_which(cluster: TenureCluster) -> None:
    leader = cluster.leader()

    async def everyone_knows() -> list[ClusterView] | None:
        # (a member reads the others' records once a second, and a standby applies the
        # takeover's entry as its watch brings it: each view is true, not all at once)
        views = [await cluster.status(server) for server in cluster.servers]
        settled = all(
            view.index >= 1
            and [m.name for m in view.members if m.role == "leader"] == [leader.address]
            and len(view.members) == 3
            for view in views
        )
        return views if settled else None

    views = await until(everyone_knows, "every member knows every member and the log")
    assert {view.leader for view in views} == {leader.address}
    assert {view.answered_by for view in views} == {s.address for s in cluster.servers}
    for view in views:
        roles = {member.name: member.role for member in view.members}
        assert roles[view.answered_by] == (
            "leader" if view.answered_by == leader.address else "standby"
        )
        assert view.term > 0
    assert [s.ready() for s in cluster.servers].count(True) == 1


async def test_a_standby_welcomes_saying_so_and_refuses_requests_naming_the_leader(
    cluster: TenureCluster,
) -> None:
    leader = cluster.leader()
    standby = cluster.standbys()[0]
    client = await _connect(standby.port)
    welcome = await client.hello()
    assert isinstance(welcome, Welcome)
    assert (welcome.role, welcome.leader) == ("standby", leader.address)
    failure = await client.fail(CreateNode("n", NodeConfig()))
    assert isinstance(failure, Failure)
    assert failure.code is ErrorCode.NOT_LEADER
    assert leader_named(failure.message) == leader.address
    client.writer.close()


async def test_an_older_client_is_refused_by_a_standby_naming_the_leader(
    cluster: TenureCluster,
) -> None:
    leader = cluster.leader()
    standby = cluster.standbys()[0]
    client = await _connect(standby.port)
    client.writer.write(client.codec.send(Hello(version=2, client_name="old")))
    refused = await client.next_event()
    assert isinstance(refused, Refused)
    assert refused.code is ErrorCode.NOT_LEADER
    assert leader_named(refused.message) == leader.address
    client.writer.close()
    await client.writer.wait_closed()


async def test_the_leader_welcomes_as_the_leader_and_serves(cluster: TenureCluster) -> None:
    leader = cluster.leader()
    client = await _connect(leader.port)
    welcome = await client.hello()
    assert isinstance(welcome, Welcome)
    assert welcome.role == "leader"
    assert await client.call(CreateNode("n", NodeConfig())) is None
    client.writer.close()


def test_readyz_says_standby_on_the_standbys(cluster: TenureCluster) -> None:
    cluster.leader()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for standby in cluster.standbys():
        with pytest.raises(urllib.error.HTTPError) as refused:
            opener.open(f"http://127.0.0.1:{standby.http_port}/readyz", timeout=5)
        assert refused.value.code == 503
        assert refused.value.read() == b"standby\n"


async def test_a_client_of_the_cluster_is_told_it_is_replicated(cluster: TenureCluster) -> None:
    async with tenure.connect(cluster.url(), require={Capability.REPLICATED}) as client:
        assert Capability.REPLICATED in client.capabilities
    standalone = tenure.backends.remote.CAPABILITIES
    assert Capability.REPLICATED not in standalone
