"""Each leader's part in a node's move (tenure.server._cluster.mover), two cells' movers
over a real etcd's directory and engines in this process (a host with no journal: a
step is durable at once): a move ends with the node on the target alone, its tokens
above the mark; a copy the target refuses (its max_nodes) calls the move off and the
source serves the node again; a copy past the entry bound is refused by the source;
a move of a node the source does not hold is called off; a cell's number is taken once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial

import pytest

from tenure._core import CreateNode, DescribeNode, Engine
from tenure._core.node_moves import SESSION_ID_BLOCK, reserve_session_block
from tenure._etcd.client import EtcdClient, EtcdClientOptions
from tenure._etcd.streams import KeepAlive, WatchHub
from tenure._runtime.clock import LoopClock
from tenure._runtime.host import Host
from tenure.server._cluster.cell_admin import move_node, read_service
from tenure.server._cluster.directory import DirectoryKeys, ServiceDirectory
from tenure.server._cluster.keys import ServerRecord
from tenure.server._cluster.mover import COPY_OVERHEAD, NodeMover
from tests.cluster.harness import until
from tests.core.support import acquire, open_session
from tests.etcd.cluster import EtcdCluster


@dataclass
class Cell:
    """One cell's leader, as far as a move goes: its directory, engine and mover."""

    directory: ServiceDirectory
    host: Host
    mover: NodeMover


@dataclass
class Service:
    """Cells ``a`` and ``b`` of one service, their movers running."""

    conn: EtcdClient
    keys: DirectoryKeys
    cells: dict[str, Cell]


@pytest.fixture
async def service(etcd_member: EtcdCluster) -> AsyncIterator[Service]:
    conn = EtcdClient(EtcdClientOptions(endpoints=tuple(etcd_member.endpoints)))
    hub, keepalive = WatchHub(conn), KeepAlive(conn)
    keys = DirectoryKeys.of("tenure/", f"m{uuid.uuid4().hex[:10]}")
    cells: dict[str, Cell] = {}
    tasks: list[asyncio.Task[None]] = []
    for name, max_nodes in (("a", 100), ("b", 1)):
        directory = ServiceDirectory(conn, hub, keepalive, keys, name, ttl=5)
        record = ServerRecord(f"{name}1", f"{name}1:1", "leader")
        tasks += directory.start(partial(_same, record))
        engine = Engine(max_nodes=max_nodes)
        # (As each cell's first leader does at its takeover: its block of session ids.)
        reserve_session_block(engine, await directory.cell_number())
        host = Host(engine, LoopClock())
        mover = NodeMover(directory, host, max_entry=64 * 1024)
        cells[name] = Cell(directory, host, mover)
        tasks.append(asyncio.ensure_future(mover.run()))
    try:
        yield Service(conn, keys, cells)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for cell in cells.values():
            await cell.directory.resign()
        await keepalive.close()
        await hub.close()
        await conn.close()


def _same(record: ServerRecord) -> ServerRecord:
    return record


async def placed(service: Service, cell: str, node: str) -> None:
    """Make ``node`` on ``cell``'s engine, placed there in the directory."""
    mine = service.cells[cell]
    error, _ = await mine.directory.claim(node)
    assert error is None
    mine.host.execute(CreateNode(node))


async def members_known(service: Service) -> None:
    """Until the directory lists both cells' members (a move's target must have one)."""

    async def listed() -> bool:
        view = await read_service(service.conn, service.keys)
        return all(view.cells.get(c) and view.cells[c].members for c in ("a", "b"))

    await until(listed, "the cells' members listed in the directory")


async def _thawed(engine: Engine) -> bool:
    return not engine.moving


async def test_a_move_ends_with_the_node_on_the_target_alone(service: Service) -> None:
    await members_known(service)
    a, b = service.cells["a"].host.engine, service.cells["b"].host.engine
    await placed(service, "a", "n")
    holder = open_session(a, "n", now=a.now)
    mark = acquire(a, holder, "m", ephemeral=True, now=a.now).token
    assert mark is not None
    outcome = await move_node(service.conn, service.keys, "n", "b", timeout=30)
    assert (outcome.moved, outcome.source, outcome.epoch) == (True, "a", 2)
    assert "n" not in a.nodes
    assert not a.moving
    assert not b.moving
    assert b.apply(DescribeNode("n"), b.now).name == "n"
    assert b.last_token >= mark
    view = await read_service(service.conn, service.keys)
    assert (view.places["n"].cell, view.places["n"].to) == ("b", "")
    assert "n" not in view.copies
    assert view.cells["b"].number is not None


async def test_a_copy_the_target_refuses_calls_the_move_off(service: Service) -> None:
    await members_known(service)
    await placed(service, "b", "full")  # (b's one node: its max_nodes)
    await placed(service, "a", "n")
    outcome = await move_node(service.conn, service.keys, "n", "b", timeout=30)
    assert not outcome.moved
    assert "refused it" in outcome.error
    assert "max_nodes" in outcome.error
    a = service.cells["a"].host.engine
    await until(partial(_thawed, a), "the source thaws it as it sees the move called off")
    assert a.apply(DescribeNode("n"), a.now).name == "n"
    view = await read_service(service.conn, service.keys)
    assert (view.places["n"].cell, view.places["n"].to) == ("a", "")


async def test_a_copy_past_a_log_entry_is_refused_by_the_source(service: Service) -> None:
    await members_known(service)
    await placed(service, "a", "big")
    a = service.cells["a"].host.engine
    session = open_session(a, "big", now=a.now)
    for index in range(80):  # (about 80 KiB of data: past 64 KiB less the overhead)
        acquire(a, session, f"s{index}", ephemeral=True, data=b"x" * 1024, now=a.now)
    outcome = await move_node(service.conn, service.keys, "big", "b", timeout=30)
    assert not outcome.moved
    assert f"--cluster-max-entry less {COPY_OVERHEAD}" in outcome.error
    await until(partial(_thawed, a), "the source thaws it")


async def test_a_move_of_a_node_its_cell_does_not_hold_is_called_off(service: Service) -> None:
    await members_known(service)
    error, _ = await service.cells["a"].directory.claim("ghost")  # (placed, never made)
    assert error is None
    outcome = await move_node(service.conn, service.keys, "ghost", "b", timeout=30)
    assert not outcome.moved
    assert "cell 'a' does not hold node 'ghost'" in outcome.error


async def test_a_cells_number_is_taken_once(service: Service) -> None:
    a, b = service.cells["a"].directory, service.cells["b"].directory
    numbers = await asyncio.gather(a.cell_number(), b.cell_number(), a.cell_number())
    assert numbers[0] == numbers[2]
    assert numbers[0] != numbers[1]
    assert min(numbers) >= 1
    engines = [cell.host.engine for cell in service.cells.values()]
    assert sorted(e.last_session_id // SESSION_ID_BLOCK for e in engines) == sorted(numbers[:2])
