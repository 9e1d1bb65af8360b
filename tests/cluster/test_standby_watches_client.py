"""A client's watches that allow staleness (``Semaphore.watch(max_staleness=...)``),
against a real three-member cluster over a real etcd: the watch is armed on a
standby (never the leader), brings what another client writes, is armed again
elsewhere when its standby dies, and a bad value is refused; the sync face's too,
and a backend session's prefix watch (``StaleWatching.watch_prefix_stale``)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import tenure
import tenure.sync
from tenure import lowlevel
from tenure.backends import PrefixChange, StaleWatching
from tenure.backends._standby_reads import StandbyReads
from tenure.backends.remote import TenureBackend
from tenure.errors import InvalidArgumentError
from tests.cluster.harness import TenureCluster

#: The staleness the watches here allow, in seconds.
BOUND = 5.0


def _reads(client: tenure.Client) -> StandbyReads:
    backend = client.backend
    assert isinstance(backend, TenureBackend)
    reads = backend.standby_reads
    assert reads is not None
    return reads


async def _next(watch: object) -> tenure.SemaphoreDescription:
    """The watch's next state (bounded: a state that never comes fails the test)."""
    got = await asyncio.wait_for(anext(watch), 30)  # type: ignore[call-overload]
    assert isinstance(got, tenure.SemaphoreDescription)
    return got


async def test_a_watch_is_armed_on_a_standby_and_brings_another_clients_writes(
    steady_cluster: TenureCluster,
) -> None:
    node = f"watch-{uuid.uuid4().hex[:8]}"
    async with tenure.connect(steady_cluster.url()) as client:
        await client.create_node(node)
        async with client.session(node) as writer, client.session(node) as reader:
            await writer.semaphore("config").create(1, b"v0")
            watch = reader.semaphore("config").watch(data=True, max_staleness=BOUND)
            try:
                assert (await _next(watch)).data == b"v0"
                for data in (b"v1", b"v2"):
                    await writer.semaphore("config").update(data)
                    assert (await _next(watch)).data == data
            finally:
                await watch.aclose()
        answered = _reads(client).answered
        assert set(answered) <= {s.address for s in steady_cluster.standbys()}
        assert sum(answered.values()) == 1  # (one arm, on a standby; never the leader's)


async def test_a_watch_whose_standby_dies_is_armed_again_and_goes_on(
    cluster: TenureCluster,
) -> None:
    node = f"watch-{uuid.uuid4().hex[:8]}"
    async with tenure.connect(cluster.url()) as client:
        await client.create_node(node)
        async with client.session(node) as writer, client.session(node) as reader:
            await writer.semaphore("s").create(1, b"a")
            watch = reader.semaphore("s").watch(data=True, max_staleness=BOUND)
            try:
                assert (await _next(watch)).data == b"a"
                [armed_on] = _reads(client).answered
                [standby] = [s for s in cluster.servers if s.address == armed_on]
                standby.kill()
                # Armed again elsewhere (another standby, or the leader): the state
                # then first, and the next change after it.
                await writer.semaphore("s").update(b"b")
                seen = [(await _next(watch)).data]
                if seen[-1] != b"b":
                    seen.append((await _next(watch)).data)
                assert seen[-1] == b"b"
                await writer.semaphore("s").update(b"c")
                assert (await _next(watch)).data == b"c"
            finally:
                await watch.aclose()


async def test_a_bad_max_staleness_is_refused(steady_cluster: TenureCluster) -> None:
    node = f"watch-{uuid.uuid4().hex[:8]}"
    async with tenure.connect(steady_cluster.url()) as client:
        await client.create_node(node)
        async with client.session(node) as session:
            watch = session.semaphore("s").watch(data=True, max_staleness=-1.0)
            with pytest.raises(InvalidArgumentError, match="max_staleness"):
                await anext(watch)


def test_the_sync_faces_watch_goes_to_a_standby(steady_cluster: TenureCluster) -> None:
    node = f"watch-{uuid.uuid4().hex[:8]}"
    with tenure.sync.connect(steady_cluster.url()) as client:
        client.create_node(node)
        with client.session(node) as session:
            session.semaphore("s").create(1, b"x")
            with session.semaphore("s").watch(data=True, max_staleness=BOUND) as watch:
                assert next(watch).data == b"x"
                session.semaphore("s").update(b"y")
                assert next(watch).data == b"y"
        answered = _reads(client.async_client).answered
        assert set(answered) <= {s.address for s in steady_cluster.standbys()}
        assert sum(answered.values()) == 1


async def test_a_sessions_prefix_watch_is_armed_on_a_standby(
    steady_cluster: TenureCluster,
) -> None:
    node = f"watch-{uuid.uuid4().hex[:8]}"
    async with tenure.connect(steady_cluster.url()) as client:
        await client.create_node(node)
        async with client.session(node) as writer, client.session(node) as reader:
            backend = lowlevel.backend_session(reader)
            assert isinstance(backend, StaleWatching)
            stream = await backend.watch_prefix_stale(
                "a/", data=True, owners=False, waiters=False, max_staleness=BOUND
            )
            try:
                await writer.semaphore("a/x").create(1, b"one")
                await writer.semaphore("b").create(1, b"other")  # (not under the prefix)
                await writer.semaphore("a/x").update(b"two")
                seen: list[bytes] = []
                while seen[-1:] != [b"two"]:
                    news = await asyncio.wait_for(anext(stream), 30)
                    assert isinstance(news, PrefixChange), news
                    assert news.name == "a/x"
                    assert news.description is not None
                    seen.append(news.description.data)
                assert set(seen) <= {b"one", b"two"}  # (news of one name may coalesce)
            finally:
                await stream.aclose()
        answered = _reads(client).answered
        assert set(answered) <= {s.address for s in steady_cluster.standbys()}
        assert sum(answered.values()) == 1
