"""A client's reads from standbys (``max_staleness``), against a real three-member
cluster over a real etcd: the reads go to the standbys, see what the client wrote,
pass over a door that does not answer, and a bad value is refused."""

from __future__ import annotations

import uuid

import pytest

import tenure
from tenure.backends.remote import TenureBackend
from tenure.errors import InvalidArgumentError
from tests.cluster.harness import TenureCluster
from tests.server.wire import free_port


@pytest.fixture(scope="module")
def cluster(steady_cluster: TenureCluster) -> TenureCluster:
    """One cluster for the module: no test here kills, stops or pauses a member."""
    return steady_cluster


def _backend(client: tenure.Client) -> TenureBackend:
    backend = client.backend
    assert isinstance(backend, TenureBackend)
    return backend


async def test_the_reads_go_to_the_standbys_and_see_what_the_client_wrote(
    cluster: TenureCluster,
) -> None:
    node = f"reads-{uuid.uuid4().hex[:8]}"
    async with tenure.connect(cluster.url(), max_staleness=30.0) as client:
        reads = _backend(client).standby_reads
        assert reads is not None
        await client.create_node(node)  # (the leader's)
        # Written a moment ago: each read allows no more than that moment, so each
        # standby answers only once its state holds it.
        assert node in await client.list_nodes()
        assert (await client.describe_node(node)).name == node
        async with client.session(node) as session, session.mutex("m"):
            assert [s.name for s in await client.list_semaphores(node)] == ["m"]
            assert len(await client.list_sessions(node)) == 1
            report = await client.why(node, "m")
            assert [holder.session_id for holder in report.holders] == [session.id]
        standbys = {s.address for s in cluster.standbys()}
        assert set(reads.answered) == standbys  # (both asked in turn, never the leader)
        assert sum(reads.answered.values()) == 5
        assert reads.min_index > 0


async def test_a_door_that_does_not_answer_is_passed_over(cluster: TenureCluster) -> None:
    dead = f"127.0.0.1:{free_port()}"
    url = f"{cluster.url()},{dead}?max_staleness=5"
    async with tenure.connect(url) as client:
        reads = _backend(client).standby_reads
        assert reads is not None
        for _ in range(4):
            await client.list_nodes()
        assert dead not in reads.answered
        assert sum(reads.answered.values()) == 4
        assert "" not in reads.answered  # (the standbys answered, not the leader)


async def test_one_door_or_no_staleness_leaves_every_read_to_the_leader(
    cluster: TenureCluster,
) -> None:
    leader = cluster.leader().address
    async with tenure.connect(f"tenure://{leader}?max_staleness=5") as client:
        assert _backend(client).standby_reads is None
        await client.list_nodes()
    async with tenure.connect(cluster.url()) as client:
        reads = _backend(client).standby_reads
        assert reads is not None  # (its connections are opened only when a read allows)
        await client.list_nodes()
        assert reads.answered == {}


async def test_a_read_given_max_staleness_goes_to_a_standby_alone(cluster: TenureCluster) -> None:
    node = f"per-call-{uuid.uuid4().hex[:8]}"
    async with tenure.connect(cluster.url()) as client:
        reads = _backend(client).standby_reads
        assert reads is not None
        await client.create_node(node)
        assert node in await client.list_nodes(max_staleness=10.0)
        assert (await client.describe_node(node, max_staleness=0)).name == node
        assert await client.list_semaphores(node, max_staleness=1.0) == []
        assert await client.list_sessions(node, max_staleness=1.0) == []
        assert (await client.top(node, max_staleness=1.0)).names == ()
        assert sum(reads.answered.values()) == 5
        assert "" not in reads.answered
        await client.list_nodes()  # (none given: the leader's)
        assert sum(reads.answered.values()) == 5
        with pytest.raises(InvalidArgumentError, match="max_staleness"):
            await client.list_nodes(max_staleness=-1)


@pytest.mark.parametrize("bad", ["-1", "soon", "1e9"])
async def test_a_bad_max_staleness_is_refused(cluster: TenureCluster, bad: str) -> None:
    with pytest.raises(InvalidArgumentError, match="max_staleness"):
        await tenure.connect(f"{cluster.url()}?max_staleness={bad}")
