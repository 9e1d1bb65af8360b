"""dflockd's face on every member of a service of two cells, ``default`` and ``b``, two
members each, over one real etcd (docs/cluster.md, "The faces"; issue 61): the real
``dflockd-client`` reaches any member (a standby, another cell's leader or standby)
and is served by cell ``default``'s leader, through one relay hop (the relaying member
passes the client's address on); one lock's holders queue in one order whichever
member they came through, and its fencing tokens rise; a forged relay preamble is
closed unanswered; ``tenure cells move`` leaves the face's nodes where they are."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from functools import partial

import pytest
from dflockd_client import AsyncDistributedLock, fence_from_token
from dflockd_client import _async as async_proto

from tenure.compat.dflockd.holds import LOCK_NODE
from tenure.server._net.relay import MARK
from tests.cli.support import run_tenure
from tests.cluster.cells import Service, cell_nodes, running_service
from tests.cluster.harness import ClusterServer, until
from tests.etcd.cluster import EtcdCluster

pytestmark = pytest.mark.timeout(180)

WAIT = 30.0


@pytest.fixture(scope="module")
def service(
    tmp_path_factory: pytest.TempPathFactory, etcd_member: EtcdCluster
) -> Iterator[Service]:
    root = tmp_path_factory.mktemp("relay")
    with running_service(root, etcd_member.endpoints, ("default", "b"), size=2) as made:
        yield made


def _every_member(service: Service) -> list[tuple[str, ClusterServer]]:
    """Each member, named by its cell and role: the default cell's leader first."""
    found = []
    for name, cell in service.cells.items():
        leader = cell.leader()
        found.append((f"{name} leader", leader))
        found += [(f"{name} standby", standby) for standby in cell.standbys()]
    return found


def _lock(server: ClusterServer, key: str) -> AsyncDistributedLock:
    return AsyncDistributedLock(
        key, servers=[(server.host, server.port)], connect_timeout_s=WAIT, acquire_timeout_s=20
    )


async def _waiting(server: ClusterServer, key: str) -> bool:
    """Whether one client waits for ``key``, as the stats asked through ``server`` say."""
    conn = await async_proto.open_conn(
        server.host, server.port, ssl_context=None, connect_timeout_s=WAIT
    )
    try:
        found = [lock for lock in (await async_proto.stats(conn))["locks"] if lock["key"] == key]
    finally:
        await conn.close()
    return bool(found) and found[0]["waiters"] == 1


async def _served(server: ClusterServer) -> bool:
    """Whether a dflockd client of ``server`` is served (a lock taken and given back)."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(b"l\nplaced-probe\n5 5\n")
        line = await asyncio.wait_for(reader.readline(), WAIT)
        if not line.startswith(b"ok "):
            return False  # (b"": closed, no leader known to this member yet)
        writer.write(f"r\nplaced-probe\n{line.split()[1].decode()}\n".encode())
        return await asyncio.wait_for(reader.readline(), WAIT) == b"ok\n"
    finally:
        writer.close()


async def _placed(service: Service) -> None:
    """Until cell default's leader placed the face's nodes and every member knows where
    to relay (each reads the members' records once a second)."""
    for name, server in _every_member(service):
        await until(partial(_served, server), f"{name} serves dflockd")


async def test_every_member_serves_one_lock_in_one_queue(service: Service) -> None:
    await _placed(service)
    members = _every_member(service)
    assert len(members) == 4
    key = "relayed-job"
    fences: list[int] = []
    # Each member in turn: its client takes the lock, and the next member's client
    # queues behind it until it is released (one lock, wherever they came in).
    for (name, server), (next_name, next_server) in zip(
        members, members[1:] + members[:1], strict=True
    ):
        holder = _lock(server, key)
        assert await holder.acquire(), name
        assert holder.token is not None
        fences.append(fence_from_token(holder.token))
        waiter = _lock(next_server, key)
        queued = asyncio.ensure_future(waiter.acquire())
        # Queued in the one lock's queue (asked through yet another member, the stats
        # are the serving leader's):
        await until(lambda: _waiting(members[2][1], key), f"{next_name}'s client queued")
        assert not queued.done(), f"{next_name} was granted a lock {name} holds"
        await holder.release()
        assert await asyncio.wait_for(queued, WAIT), next_name
        assert waiter.token is not None
        assert fence_from_token(waiter.token) > fences[-1]
        await waiter.release()
        await holder.aclose()
        await waiter.aclose()
    assert fences == sorted(set(fences))
    # The face's state is cell default's, and nowhere else.
    assert LOCK_NODE in await cell_nodes(service.cells["default"])
    assert LOCK_NODE not in await cell_nodes(service.cells["b"])


async def test_the_serving_leader_sees_the_client_not_the_relay(service: Service) -> None:
    await _placed(service)
    relaying = service.cells["b"].standbys()[0]
    reader, writer = await asyncio.open_connection(relaying.host, relaying.port)
    try:
        writer.write(b"l\nwho-is-it\n10 30\n")
        line = await asyncio.wait_for(reader.readline(), WAIT)
        assert line.startswith(b"ok "), line
        mine = writer.get_extra_info("sockname")
    finally:
        writer.close()
    leader = service.cells["default"].leader()

    def opened_for_me() -> bool:
        for text in leader.output().splitlines():
            if text.startswith("{") and '"connection_opened"' in text:
                record = json.loads(text)
                if record["peer"] == str(tuple(mine)) and record["protocol"] == "dflockd":
                    return True
        return False

    async def seen() -> bool:
        return opened_for_me()

    await until(seen, "the leader logs the client's own address")
    relayed = [
        json.loads(text)
        for text in relaying.output().splitlines()
        if text.startswith("{") and '"relayed_to"' in text
    ]
    assert any(record["relayed_to"] == leader.address for record in relayed), relayed


async def test_a_forged_relay_preamble_is_closed_unanswered(service: Service) -> None:
    leader = service.cells["default"].leader()
    reader, writer = await asyncio.open_connection(leader.host, leader.port)
    try:
        writer.write(MARK + b"\x01\x05forge" + b"\x00" * 16 + b"l\nforged\n10 30\n")
        assert await asyncio.wait_for(reader.read(100), WAIT) == b""  # closed, nothing said
    finally:
        writer.close()
    # ... and the leader serves on.
    ok_reader, ok_writer = await asyncio.open_connection(leader.host, leader.port)
    try:
        ok_writer.write(b"l\nafter-forgery\n10 30\n")
        assert (await asyncio.wait_for(ok_reader.readline(), WAIT)).startswith(b"ok ")
    finally:
        ok_writer.close()


def test_the_faces_nodes_do_not_move(service: Service) -> None:
    url = service.cells["default"].etcd_url
    moved = run_tenure("cells", "move", LOCK_NODE, "--to", "b", "--cluster", url)
    assert moved.returncode != 0
    assert "does not move" in moved.stderr, moved.stderr
    # (Rendezvous hashing over default and b would send "dflockd" to b: it stays.)
    plan = run_tenure("cells", "rebalance", "--dry-run", "--cluster", url)
    assert plan.returncode == 0, plan.stderr
    assert f"node {LOCK_NODE!r}" not in plan.stdout, plan.stdout
