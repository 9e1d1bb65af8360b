"""The etcd harness itself, against real etcd: members serve, elect, crash, restart."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.etcd import fixtures
from tests.etcd.client import etcd_client
from tests.etcd.cluster import EtcdCluster, EtcdMember, live_pids


def is_etcd(pid: int) -> bool:
    """Whether ``pid`` is an etcd process now (a reaped PID is gone, or someone else's)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"etcd")
    except OSError:
        return False


async def read(member: EtcdMember, key: bytes) -> bytes | None:
    """``key`` read through ``member`` (a linearizable read: it needs a quorum)."""
    async with etcd_client(member.endpoint) as client:
        return await client.get(key)


async def write(member: EtcdMember, key: bytes, value: bytes) -> None:
    """``key`` put through ``member``, acknowledged (committed by a quorum)."""
    async with etcd_client(member.endpoint) as client:
        await client.put(key, value)


async def test_a_single_member_serves_put_and_get(etcd_member: EtcdCluster) -> None:
    (member,) = etcd_member.members
    assert etcd_member.endpoints == [member.endpoint]
    assert member.endpoint.startswith("127.0.0.1:")
    assert etcd_member.url() == f"etcd://{member.endpoint}"
    assert etcd_member.url(prefix="/p/") == f"etcd://{member.endpoint}?prefix=/p/"
    async with etcd_client(member.endpoint) as client:
        revision = await client.put(b"/harness/single", b"one")
        assert revision > 0
        assert await client.get(b"/harness/single") == b"one"
        assert await client.get(b"/harness/absent") is None
        status = await client.status()
        assert int(status.header.member_id) == int(status.leader) == member.id
    assert await etcd_member.aleader() is member


async def test_three_members_elect_a_leader_and_a_new_one_when_it_is_killed(
    etcd_cluster: EtcdCluster,
) -> None:
    cluster = etcd_cluster
    assert len(cluster.members) == 3
    assert len(set(cluster.endpoints)) == 3
    assert cluster.url() == "etcd://" + ",".join(cluster.endpoints)
    assert len({member.id for member in cluster.members}) == 3
    old = await cluster.aleader()
    follower = next(member for member in cluster.members if member is not old)
    await write(follower, b"/harness/before", b"kept")  # forwarded to the leader
    pid = old.pid
    assert pid is not None
    cluster.kill(old)
    assert not old.running
    assert not is_etcd(pid)
    new = await cluster.aleader(excluding=[old])
    assert new is not old
    assert new.running
    for member in cluster.members:
        if member.running:
            assert await read(member, b"/harness/before") == b"kept"
    await write(new, b"/harness/after", b"new leader")
    await cluster.astart(old)  # same ports, same data: it catches up
    assert old.running
    assert await read(old, b"/harness/after") == b"new leader"
    assert await cluster.aleader() in cluster.members


async def test_a_stopped_member_rejoins_on_its_data(etcd_cluster: EtcdCluster) -> None:
    cluster = etcd_cluster
    leader = await cluster.aleader()
    await cluster.astop(leader)  # SIGTERM: an orderly exit, leadership handed over
    assert leader.pid is None
    await write(cluster.members[(cluster.members.index(leader) + 1) % 3], b"/harness/k", b"v")
    await cluster.astart(leader)
    assert await read(leader, b"/harness/k") == b"v"


async def test_stop_all_and_start_all_keep_acknowledged_data(etcd_cluster: EtcdCluster) -> None:
    cluster = etcd_cluster
    keys = [f"/harness/acked/{number}".encode() for number in range(20)]
    for number, key in enumerate(keys):
        await write(cluster.members[number % 3], key, b"%d" % number)
    before = cluster.pids
    await cluster.astop_all()
    assert cluster.pids == set()
    assert not any(is_etcd(pid) for pid in before)
    await cluster.astart_all()
    assert cluster.pids.isdisjoint(before)
    for number, key in enumerate(keys):
        assert await read(cluster.members[(number + 1) % 3], key) == b"%d" % number


def test_close_leaves_no_etcd_process_and_no_directory() -> None:
    fixtures.require_etcd()
    cluster = EtcdCluster(3).open()
    pids = cluster.pids
    assert len(pids) == 3
    assert all(is_etcd(pid) for pid in pids)
    assert pids <= live_pids()
    cluster.kill(cluster.members[0])  # closing copes with members already down
    cluster.close()
    cluster.close()  # idempotent
    assert not any(is_etcd(pid) for pid in pids)
    assert pids.isdisjoint(live_pids())
    assert not cluster.root.exists()


def test_a_port_taken_before_the_start_gives_new_ports() -> None:
    fixtures.require_etcd()
    cluster = EtcdCluster(1)
    taken = cluster.members[0].client_port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))  # bound, not listening: etcd cannot bind it
        try:
            cluster.open()
            assert cluster.members[0].client_port != taken
            assert "address already in use" in cluster.members[0].output()
        finally:
            cluster.close()


def test_a_missing_etcd_skips_here_and_fails_in_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TENURE_ETCD", str(tmp_path / "no-etcd"))
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="etcd is not installed"):
        fixtures.require_etcd()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="a missing etcd is a failure"):
        fixtures.require_etcd()
