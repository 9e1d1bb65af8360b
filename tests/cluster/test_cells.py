"""A service of two cells, three members each, over one real etcd (docs/cluster.md,
"Cells"): nodes spread over the cells and each is served by its own; a client given
one cell's doors reaches every node; a member answers a node of the other cell
``WRONG_CELL`` naming it (an older client: ``UNAVAILABLE``); two creations of one
node through both cells make it on one; a dropped node's place is given back;
``tenure cluster status``, the dashboard and ``/metrics`` show both cells from any
member; one cell's failover leaves the other serving."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import tenure
from tenure._core import CreateNode, DescribeNode, DropNode
from tenure._protocol import Failure, Reply
from tenure.backends.remote import TenureBackend
from tenure.errors import ErrorCode, WrongCellError
from tests.cli.support import run_tenure
from tests.cluster.cells import Service, cell_nodes, running_service
from tests.cluster.harness import ClusterServer, until
from tests.etcd.cluster import EtcdCluster
from tests.server.http import get, scrape, value
from tests.server.wire import WireClient


@pytest.fixture(scope="module")
def service(
    tmp_path_factory: pytest.TempPathFactory, etcd_member: EtcdCluster
) -> Iterator[Service]:
    """One service for the module (the failover test runs last and restarts its member)."""
    with running_service(tmp_path_factory.mktemp("cells"), etcd_member.endpoints) as made:
        yield made


class Wire:
    """A raw protocol connection to ``server`` (``version``: the Hello's)."""

    def __init__(self, server: ClusterServer, version: int | None = None) -> None:
        self.server = server
        self.version = version

    async def __aenter__(self) -> WireClient:
        reader, writer = await asyncio.open_connection(self.server.host, self.server.port)
        self.client = WireClient(reader, writer)
        if self.version is None:
            await self.client.hello()
        else:
            await self.client.hello(version=self.version)
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        self.client.writer.close()


async def test_nodes_spread_over_the_cells_and_a_client_of_one_cells_doors_reaches_all(
    service: Service,
) -> None:
    names = [f"spread-{n}-{uuid.uuid4().hex[:6]}" for n in range(16)]
    async with tenure.connect(service.url("a")) as client:
        backend = client.backend
        assert isinstance(backend, TenureBackend)
        for name in names:
            await client.create_node(name)
        assert backend.cells is not None
        assert backend.cells.cells == ["a", "b"]
        listed = set(await client.list_nodes())
        assert set(names) <= listed
        on_a, on_b = await cell_nodes(service.cells["a"]), await cell_nodes(service.cells["b"])
        assert not on_a & on_b  # (each node on one cell)
        assert set(names) <= on_a | on_b
        assert on_a & set(names)  # (16 names: both cells get some)
        assert on_b & set(names)
        # A lock on a node of each cell, from this one client.
        for name in (min(on_a & set(names)), min(on_b & set(names))):
            async with client.session(name) as session, session.mutex("m") as held:
                assert held.token > 0
    # A client given only cell b's doors finds cell a's nodes too.
    async with tenure.connect(service.url("b")) as client:
        for name in names:
            assert (await client.describe_node(name)).name == name


async def test_a_member_answers_a_node_of_the_other_cell_wrong_cell(service: Service) -> None:
    name = f"elsewhere-{uuid.uuid4().hex[:8]}"
    b_leader = service.cells["b"].leader()
    async with Wire(b_leader) as wire:
        await wire.call(CreateNode(name))
    a_leader = service.cells["a"].leader()
    async with Wire(a_leader) as wire:
        failure = await wire.fail(DescribeNode(name))
        assert failure.code == ErrorCode.WRONG_CELL
        error = WrongCellError(failure.message)
        assert (error.cell, error.epoch) == ("b", 1)
        # Creating it there too is refused the same way: one cell serves it.
        failure = await wire.fail(CreateNode(name))
        assert failure.code == ErrorCode.WRONG_CELL
        # A node no cell serves is NOT_FOUND, as ever.
        missing = await wire.fail(DescribeNode(f"nowhere-{uuid.uuid4().hex[:8]}"))
        assert missing.code == ErrorCode.NOT_FOUND
    async with Wire(a_leader, version=11) as old:
        failure = await old.fail(DescribeNode(name))
        assert failure.code == ErrorCode.UNAVAILABLE
        assert "cell=b" in failure.message


async def test_two_creations_of_one_node_through_both_cells_make_it_on_one(
    service: Service,
) -> None:
    for _ in range(5):
        name = f"race-{uuid.uuid4().hex[:8]}"
        leaders = [service.cells[cell].leader() for cell in ("a", "b")]
        async with Wire(leaders[0]) as first, Wire(leaders[1]) as second:
            ids = [first.send(CreateNode(name)), second.send(CreateNode(name))]
            answers = [await first.answer(ids[0]), await second.answer(ids[1])]
        made = [answer for answer in answers if isinstance(answer, Reply)]
        refused = [answer for answer in answers if isinstance(answer, Failure)]
        assert len(made) == 1, answers
        assert len(refused) == 1, answers
        assert refused[0].code == ErrorCode.WRONG_CELL
        holders = [cell for cell in ("a", "b") if name in await cell_nodes(service.cells[cell])]
        assert len(holders) == 1


async def test_a_dropped_nodes_place_is_given_back(service: Service) -> None:
    name = f"dropped-{uuid.uuid4().hex[:8]}"
    a_leader, b_leader = service.cells["a"].leader(), service.cells["b"].leader()
    async with Wire(a_leader) as wire:
        await wire.call(CreateNode(name))
        await wire.call(DropNode(name))
    async with Wire(b_leader) as wire:

        async def made_on_b() -> bool:
            answer = await wire.answer(wire.send(CreateNode(name)))
            return isinstance(answer, Reply)

        # (the place is given back in the background, once the drop is in etcd)
        await until(made_on_b, "the node made on cell b after its drop on cell a")
    assert name in await cell_nodes(service.cells["b"])


async def cluster_status(url: str, *options: str) -> subprocess.CompletedProcess[str]:
    """``tenure cluster status OPTIONS --url URL``, as a user runs it (in a thread)."""
    return await asyncio.to_thread(run_tenure, "cluster", "status", *options, "--url", url)


async def test_cluster_status_shows_every_cell_its_leader_and_members(service: Service) -> None:
    leaders = {name: cell.leader().address for name, cell in service.cells.items()}
    members = {name: {s.address for s in cell.servers} for name, cell in service.cells.items()}

    # Every member's door: each cell from the answers of its own members (each member
    # reads the others' records once a second: until every member is named).
    async def every_member_named() -> tuple[list[str], list[list[str]]] | None:
        result = await cluster_status(service.url())
        assert result.returncode == 0, result.stdout + result.stderr
        lines = result.stdout.splitlines()
        tables = [[c.strip() for c in line.split("│")] for line in lines if "│" in line]
        named = {row[0] for row in tables if len(row) == 6}
        return (lines, tables) if all(m <= named for m in members.values()) else None

    lines, tables = await until(every_member_named, "cluster status names every member", 60)
    assert lines[0] == f"service {service.cells['a'].name!r}: 2 cells (a, b)"
    shown = {row[0]: row[1] for row in tables if len(row) == 6}  # member: role
    for cell in ("a", "b"):
        assert any(
            line.startswith(f"cell '{cell}': leader {leaders[cell]} (term ") for line in lines
        )
        assert members[cell] <= set(shown)
        assert shown[leaders[cell]] == "leader"
    doors = {row[0]: row[3] for row in tables if len(row) == 5}  # door: its member's cell
    assert doors == {door: cell for cell in ("a", "b") for door in members[cell]}

    # Cell a's doors alone, as JSON: cell b from its members' records in the directory
    # (each member writes its own once a second: until b's leader's says it leads, and
    # every member's record is there).
    async def both_cells() -> dict[str, Any] | None:
        result = await cluster_status(service.url("a"), "--json")
        document: dict[str, Any] = json.loads(result.stdout)
        listed = {cell["name"]: {m["name"] for m in cell["members"]} for cell in document["cells"]}
        whole = result.returncode == 0 and document["ok"] and listed == members
        return document if whole else None

    document = await until(both_cells, "cluster status shows both cells led")
    cells = {cell["name"]: cell for cell in document["cells"]}
    assert (cells["a"]["exact"], cells["b"]["exact"]) == (True, False)
    assert document["cell"] == "a"
    assert document["leader"] == leaders["a"]
    for cell in ("a", "b"):
        assert cells[cell]["leader"] == leaders[cell]
        assert {m["name"] for m in cells[cell]["members"]} == members[cell]


async def test_the_dashboard_and_metrics_of_any_member_show_both_cells(service: Service) -> None:
    leaders = {name: cell.leader().address for name, cell in service.cells.items()}
    members = {name: {s.address for s in cell.servers} for name, cell in service.cells.items()}
    for server in (service.cells["b"].standbys()[0], service.cells["a"].leader()):

        async def both_cells(server: ClusterServer = server) -> list[dict[str, Any]] | None:
            status, body = await get(server.http_port, "/dashboard/api/board")
            assert status == 200, body
            cells: list[dict[str, Any]] = json.loads(body)["view"]["cluster"]["cells"]
            led = [cell["leader"] for cell in cells]
            listed = [{m["name"] for m in cell["members"]} for cell in cells]
            # (another cell's members as the directory's records say, read every
            # second: a member's record, written when it started, may come a read late)
            both = led == [leaders["a"], leaders["b"]] and listed == [members["a"], members["b"]]
            return cells if both else None

        cells = await until(both_cells, f"the dashboard of {server.address} shows both cells")
        for cell, (name, of_cell) in zip(cells, service.cells.items(), strict=True):
            assert cell["name"] == name
            assert cell["self"] is (server in of_cell.servers)
        assert value(await scrape(server.http_port), "tenure_cluster_cells") == 2


async def test_one_cell_down_leaves_the_other_serving(service: Service) -> None:
    names = [f"down-{n}-{uuid.uuid4().hex[:6]}" for n in range(8)]
    async with tenure.connect(service.url()) as client:
        for name in names:
            await client.create_node(name)
        on_a = sorted(set(names) & await cell_nodes(service.cells["a"]))
        on_b = sorted(set(names) & await cell_nodes(service.cells["b"]))
        assert on_a
        assert on_b
        cell_a = service.cells["a"]
        for server in cell_a.servers:  # (every member of cell a: no leader there)
            server.kill()
        try:
            async with client.session(on_b[0]) as session, session.mutex("m") as held:
                assert held.token > 0
                assert (await client.describe_node(on_b[1 % len(on_b)])).name
        finally:
            cell_a.open()  # (its members again, on their ports; once one leads)
        # Cell a serves its nodes again, under a new leader, to the same client.
        async with client.session(on_a[0]) as session, session.mutex("m") as held:
            assert held.token > 0
