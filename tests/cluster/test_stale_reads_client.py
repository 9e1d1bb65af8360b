"""A client's reads from standbys (``max_staleness``), against a real three-member
cluster over a real etcd: the reads go to the standbys (those the URL lists, and
those the cluster names: a URL of one door is enough), see what the client wrote,
pass over a door that does not answer, and a bad value is refused; a session's
describe of a semaphore (a mutex's, a readers-writer lock's, the sync face's too)
goes to a standby and sees the session's own writes."""

from __future__ import annotations

import uuid

import pytest

import tenure
import tenure.sync
from tenure.backends._standby_reads import StandbyReads
from tenure.backends.remote import TenureBackend
from tenure.errors import InvalidArgumentError
from tests.cluster.harness import TenureCluster, until
from tests.server.wire import free_port


@pytest.fixture(scope="module")
def cluster(steady_cluster: TenureCluster) -> TenureCluster:
    """One cluster for the module: no test here kills, stops or pauses a member."""
    return steady_cluster


def _backend(client: tenure.Client) -> TenureBackend:
    backend = client.backend
    assert isinstance(backend, TenureBackend)
    return backend


def _reads(client: tenure.Client) -> StandbyReads:
    reads = _backend(client).standby_reads
    assert reads is not None
    return reads


async def _every_member_listed(cluster: TenureCluster) -> None:
    """Wait until the leader's ClusterStatus names every member (each member reads the
    others' records once a second: a cluster just started names itself alone)."""

    async def listed() -> bool:
        view = await cluster.status(cluster.leader())
        return {m.address for m in view.members} == {s.address for s in cluster.servers}

    await until(listed, "the leader names every member")


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


async def test_a_url_of_one_door_reads_from_the_standbys_the_cluster_names(
    cluster: TenureCluster,
) -> None:
    await _every_member_listed(cluster)
    leader = cluster.leader().address
    async with tenure.connect(f"tenure://{leader}?max_staleness=5") as client:
        reads = _reads(client)
        for _ in range(4):
            await client.list_nodes()
        standbys = {s.address for s in cluster.standbys()}
        assert {str(door) for door in reads.learnt} == standbys  # (never the leader)
        assert set(reads.answered) == standbys  # (both in turn)
        assert sum(reads.answered.values()) == 4


async def test_no_staleness_leaves_every_read_to_the_leader(cluster: TenureCluster) -> None:
    async with tenure.connect(cluster.url()) as client:
        reads = _reads(client)  # (its connections are opened only when a read allows)
        await client.list_nodes()
        node = f"fresh-{uuid.uuid4().hex[:8]}"
        await client.create_node(node)
        async with client.session(node) as session:
            await session.semaphore("s").create(1)
            await session.semaphore("s").describe()
            await session.mutex("m").describe(max_staleness=None)
        assert reads.answered == {}
        assert reads.learnt == []  # (the cluster not even asked)


async def test_a_sessions_describe_goes_to_a_standby_and_sees_its_own_update(
    cluster: TenureCluster,
) -> None:
    await _every_member_listed(cluster)
    node = f"describe-{uuid.uuid4().hex[:8]}"
    leader = cluster.leader().address
    async with tenure.connect(f"tenure://{leader}") as client:  # (one door: the leader's)
        reads = _reads(client)
        await client.create_node(node)
        async with client.session(node) as session:
            semaphore = session.semaphore("s")
            await semaphore.create(3, b"0")
            for n in range(1, 5):
                await semaphore.update(str(n).encode())
                # Written a moment ago: the read allows no more than that moment.
                found = await semaphore.describe(max_staleness=30.0)
                assert found.data == str(n).encode()
            async with semaphore.acquire(2) as lease:
                found = await semaphore.describe(owners=True, max_staleness=30.0)
                assert [(o.session_id, o.count) for o in found.owners] == [(session.id, 2)]
                assert found.owners[0].token == lease.token
            async with session.mutex("m") as lock:
                held = await session.mutex("m").describe(max_staleness=30.0)
                assert held.owner is not None
                assert held.owner.token == lock.token
            async with session.rwlock("rw").read():
                assert len((await session.rwlock("rw").describe(max_staleness=30.0)).readers) == 1
            standbys = {s.address for s in cluster.standbys()}
            assert set(reads.answered) == standbys, reads.answered  # (never the leader)
            assert sum(reads.answered.values()) == 7
            # A release not answered yet (leaving a block does not wait for it) is
            # behind on a standby: that describe is the leader's, and sees it.
            async with session.mutex("m"):
                pass
            free = await session.mutex("m").describe(max_staleness=30.0)
            assert not free.held
            assert reads.answered[""] == 1
            with pytest.raises(InvalidArgumentError, match="max_staleness"):
                await semaphore.describe(max_staleness=-1)
        assert reads.min_index > 0


def test_the_sync_faces_describe_goes_to_a_standby(cluster: TenureCluster) -> None:
    node = f"sync-{uuid.uuid4().hex[:8]}"
    with tenure.sync.connect(cluster.url()) as client:
        client.create_node(node)
        with client.session(node) as session:
            semaphore = session.semaphore("s")
            semaphore.create(1, b"a")
            semaphore.update(b"b")
            assert semaphore.describe(max_staleness=30.0).data == b"b"
            assert session.rwlock("rw").describe(max_staleness=30.0).writer is None
            with session.mutex("m") as lock:
                held = session.mutex("m").describe(max_staleness=30.0)
                assert held.owner is not None
                assert held.owner.token == lock.token
        reads = _reads(client.async_client)
        standbys = {s.address for s in cluster.standbys()}
        assert set(reads.answered) <= standbys
        assert sum(reads.answered.values()) == 3


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
