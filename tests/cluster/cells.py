"""A service of two cells, ``a`` and ``b``, three members each, over one real etcd: what
the cells' tests share (tests/cluster/test_cells.py, test_cell_moves.py,
test_cell_moves_workload.py)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

from tenure._core import ListNodes
from tests.cluster.harness import ClusterServer, TenureCluster, until
from tests.server.wire import WireClient


class Service:
    """Cells of one service: ``a`` and ``b`` (or ``names``), ``size`` members each."""

    def __init__(
        self,
        root: Path,
        endpoints: list[str],
        names: tuple[str, ...] = ("a", "b"),
        size: int = 3,
    ) -> None:
        name = f"s{uuid.uuid4().hex[:10]}"
        self.size = size
        self.cells = {
            cell: TenureCluster(
                root / cell, endpoints, name=name, extra=("--cell", cell), size=size
            )
            for cell in names
        }

    def start(self) -> None:
        """Start every member of both cells; return once each listens (the elections
        go on: :meth:`until_known`)."""
        servers = [server for cell in self.cells.values() for server in cell.servers]
        for server in servers:
            server.start(wait=False)
        for server in servers:
            server.wait_listening()

    def close(self) -> None:
        """Kill every member of both cells."""
        for cell in self.cells.values():
            cell.close()

    async def until_known(self) -> None:
        """Until every member of every cell knows every member of every cell (the
        directory's records, each member's written and read every second): a client
        learns the cells from whichever door it reaches first."""
        every = sorted((name, self.size) for name in self.cells)
        for cell in self.cells.values():
            for server in cell.servers:

                async def known(cell: TenureCluster = cell, server: ClusterServer = server) -> bool:
                    view = await cell.status(server)
                    return sorted((c.name, len(c.members)) for c in view.cells) == every

                await until(known, f"{server.address} of {cell.name} knows every cell")

    def url(self, *cells: str) -> str:
        """A client URL of the doors of ``cells`` (every cell's by default)."""
        chosen = cells or tuple(self.cells)
        doors = [s.address for cell in chosen for s in self.cells[cell].servers]
        return f"tenure://{','.join(doors)}"


@contextlib.contextmanager
def running_service(
    root: Path, endpoints: list[str], names: tuple[str, ...] = ("a", "b"), size: int = 3
) -> Iterator[Service]:
    """A service started under ``root`` over the etcd at ``endpoints``, each cell led
    and knowing the other's members; killed at the end."""
    made = Service(root, endpoints, names, size)
    try:
        made.start()
        asyncio.run(made.until_known())
        yield made
    finally:
        made.close()


async def cell_nodes(cluster: TenureCluster) -> set[str]:
    """The nodes a cell's own state holds (its leader's ListNodes, asked directly)."""
    leader = cluster.leader()
    reader, writer = await asyncio.open_connection(leader.host, leader.port)
    try:
        client = WireClient(reader, writer)
        await client.hello()
        page = await client.call(ListNodes("", 1000))
        return set(page.names)
    finally:
        writer.close()
