"""A cluster whose leader loses etcd, and one whose log is snapshotted and trimmed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import tenure
from tests.cluster.harness import TenureCluster
from tests.etcd.cluster import EtcdCluster
from tests.etcd.fixtures import require_etcd
from tests.netproxy import NetProxy

WINDOW = 20.0


@pytest.fixture
async def proxied(
    tmp_path: Path, etcd_member: EtcdCluster
) -> AsyncIterator[tuple[TenureCluster, list[NetProxy]]]:
    """Three members, each reaching etcd through a proxy of its own."""
    host, port = etcd_member.endpoints[0].rsplit(":", 1)
    proxies = [NetProxy(host, int(port)) for _ in range(3)]
    for proxy in proxies:
        await proxy.start()
    cluster = TenureCluster(tmp_path / "cluster", etcd_member.endpoints)
    for server, proxy in zip(cluster.servers, proxies, strict=True):
        server.cluster = f"etcd://127.0.0.1:{proxy.port}/{cluster.name}"
    try:
        await asyncio.to_thread(cluster.open)
        yield cluster, proxies
    finally:
        cluster.close()
        for proxy in proxies:
            await proxy.aclose()


async def test_a_leader_cut_off_from_etcd_steps_down_and_its_clients_move_on(
    proxied: tuple[TenureCluster, list[NetProxy]],
) -> None:
    cluster, proxies = proxied
    async with tenure.connect(cluster.url()) as client:
        await client.create_node("app", exist_ok=True)
        async with client.session("app", recovery_window=WINDOW) as session:
            held = await session.mutex("job").lock()
            old = cluster.leader()
            cut = proxies[cluster.servers.index(old)]
            cut.stall()  # a partition: nothing reaches etcd, nothing comes back
            try:
                new = await asyncio.to_thread(cluster.leader, excluding=old)
                # The old leader stopped serving before its lease could end: the client
                # went to the new one, where its session and its hold are.
                assert held.lost_reason is None
                async with session.mutex("after") as lock:
                    assert lock.token > held.token
                assert '"cluster_stepped_down"' in old.output(this_start=True)
            finally:
                cut.resume()
            await held.release()
    # Healed, the old leader follows the new one: a standby, not ready.
    assert not old.ready()
    assert cluster.leader() is new


async def test_a_long_log_is_snapshotted_trimmed_and_a_new_member_starts_from_the_snapshot(
    tmp_path: Path, etcd_member: EtcdCluster
) -> None:
    extra = ("--cluster-snapshot-every", "40")
    with TenureCluster(tmp_path / "cluster", etcd_member.endpoints, extra=extra) as cluster:
        async with tenure.connect(cluster.url()) as client:
            await client.create_node("app", exist_ok=True)
            async with client.session("app", recovery_window=WINDOW) as session:
                pool = session.semaphore("pool")
                await pool.create(limit=5, data=b"v0", exist_ok=True)
                tokens = []
                for round_ in range(150):
                    async with session.mutex(f"m{round_ % 7}") as lock:
                        tokens.append(lock.token)
                await pool.update(b"v1")
                leader = cluster.leader()
                for _ in range(200):  # the snapshot is written apart: wait for it
                    if '"snapshot_written"' in leader.output(this_start=True):
                        break
                    await asyncio.sleep(0.05)
                assert '"snapshot_written"' in leader.output(this_start=True)
                # A standby started afresh loads the snapshot, not the whole log...
                standby = cluster.standbys()[0]
                await asyncio.to_thread(standby.kill)
                await asyncio.to_thread(standby.start)
                loaded = [
                    json.loads(line)
                    for line in standby.output(this_start=True).splitlines()
                    if '"cluster_loaded"' in line
                ]
                assert loaded
                assert loaded[-1]["snapshot"] > 0
                # ...and takes over with the same state.
                for other in cluster.standbys():
                    if other is not standby:
                        await asyncio.to_thread(other.kill)
                await asyncio.to_thread(leader.kill)
                assert await asyncio.to_thread(cluster.leader) is standby
                described = await pool.describe()
                assert described.data == b"v1"
                async with session.mutex("m0") as lock:
                    assert lock.token > max(tokens)


async def test_members_stop_on_sigterm_with_etcd_gone(tmp_path: Path) -> None:
    """A member waits for etcd while it is away, but a SIGTERM still ends it, soon and
    cleanly: its streams to etcd end, whatever they were doing."""
    require_etcd()
    with EtcdCluster(1, root=tmp_path / "etcd") as etcd:
        cluster = TenureCluster(tmp_path / "cluster", etcd.endpoints)
        with cluster:
            cluster.leader()
            etcd.kill(etcd.members[0])
            await asyncio.sleep(1.0)  # every member's streams break and retry meanwhile
            for server in cluster.servers:
                assert await asyncio.to_thread(server.stop) == 0, server.output()[-2000:]
