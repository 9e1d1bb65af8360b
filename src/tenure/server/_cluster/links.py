"""A member's links to etcd: its cell's (the log, the election) and the service's (the
directory), one etcd or two.

``--cluster etcd://HOSTS/NAME`` names the service and the etcd its directory lives in;
``--cell CELL`` the member's cell, whose keys live in that etcd too, unless
``--cell-etcd etcd://HOSTS`` gives the cell an etcd of its own (docs/cluster.md,
"Cells"). :class:`CellLinks` opens what the member needs either way: one connection,
watch stream and keepalive stream per etcd, the cell's :class:`ClusterStore` and the
service's :class:`ServiceDirectory`; and it registers in the directory the nodes a new
leader's state holds (:meth:`CellLinks.register`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from tenure._core import Engine
from tenure._core.node_moves import SESSION_ID_BLOCK, reserve_session_block
from tenure._etcd.client import EtcdClient
from tenure._etcd.streams import KeepAlive, WatchHub
from tenure.errors import UnavailableError
from tenure.server import _faces
from tenure.server._cluster.directory import DirectoryKeys, ServiceDirectory
from tenure.server._cluster.keys import ClusterKeys
from tenure.server._cluster.store import ClusterStore
from tenure.server._config.cluster_url import ClusterUrl, parse_cell_etcd
from tenure.server._config.serve_config import ServeConfig
from tenure.server._durability.records import SESSION_BLOCK_RECORD, move_record, resume_record
from tenure.server._durability.storage import framed

log = logging.getLogger("tenure.cluster")

__all__ = ["CellLinks", "cell_keys"]

#: The longest pause between two tries of a registration etcd did not answer, in seconds.
MAX_PAUSE = 2.0


def cell_keys(url: ClusterUrl, cell: str, cell_etcd: str) -> tuple[ClusterUrl, ClusterKeys]:
    """Where cell ``cell`` of the service ``url`` names keeps its log: the etcd (``url``,
    or ``cell_etcd`` if given) and the keys there.

    Raises:
        ValueError: ``cell_etcd`` cannot be used.
    """
    cell_url = parse_cell_etcd(cell_etcd, url) if cell_etcd else url
    return cell_url, ClusterKeys.of_cell(cell_url.prefix, url.name, cell)


class CellLinks:
    """See the module docstring."""

    def __init__(self, config: ServeConfig, url: ClusterUrl) -> None:
        """``url``: ``--cluster``'s, parsed."""
        cell_url, keys = cell_keys(url, config.cell, config.cell_etcd)
        self.conn = EtcdClient(cell_url.connection)
        self.hub = WatchHub(self.conn)
        self.keepalive = KeepAlive(self.conn)
        self.store = ClusterStore(self.conn, keys)
        #: The directory's etcd's own links (None: the cell's etcd is the directory's).
        self._own: tuple[EtcdClient, WatchHub, KeepAlive] | None = None
        if config.cell_etcd:
            conn = EtcdClient(url.connection)
            hub, keepalive = WatchHub(conn), KeepAlive(conn)
            self._own = (conn, hub, keepalive)
        else:
            conn, hub, keepalive = self.conn, self.hub, self.keepalive
        #: The nodes this member's faces keep of their own (placed as its state's are).
        self.face_nodes = _faces.kept_nodes(config)
        directory_keys = DirectoryKeys.of(url.prefix, url.name)
        self.directory = ServiceDirectory(
            conn, hub, keepalive, directory_keys, config.cell, config.cluster_lease_ttl
        )

    async def authenticate(self) -> None:
        """Authenticate to each etcd (where it asks a user and password).

        Raises:
            UnavailableError: an etcd did not answer.
        """
        await self.conn.authenticate()
        if self._own is not None:
            await self._own[0].authenticate()

    async def register(self, nodes: Iterable[str]) -> None:
        """Place on this cell, in the directory, each of ``nodes`` (a new leader's state's
        nodes) and of the nodes its faces keep, that no cell is placed on yet, until
        etcd answered; a node the directory
        places on another cell is logged (two cells' states hold it: the directory's
        cell serves it; this one answers its requests with the way there)."""
        names = list(dict.fromkeys([*nodes, *self.face_nodes]))
        pause = 0.1
        while True:
            try:
                conflicts = await self.directory.register(names)
                break
            except UnavailableError as error:
                log.warning("registering this cell's nodes in the directory: %s", error)
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE)
        for node in conflicts:
            log.error(
                "node %r is in this cell's state, but the directory places it on another "
                "cell, which serves it",
                node,
            )

    async def takeover(self, engine: Engine, now: float) -> bytes:
        """The records of a new leader's takeover (``engine`` resumed at ``now``): its
        resume, and, the first time a cell other than the default leads, the block of
        session ids the directory numbers it (applied to ``engine`` here), so that a
        node's sessions keep their ids on every cell it moves to.

        Raises:
            UnavailableError: the directory's etcd did not answer.
            ClusterDataError: the service has no cell number left.
        """
        records = framed(resume_record(now))
        if engine.last_session_id < SESSION_ID_BLOCK:  # (no block yet: the first term)
            number = await self.directory.cell_number()
            if number:
                reserve_session_block(engine, number)
                records += framed(move_record(SESSION_BLOCK_RECORD, now, number))
        return records

    async def close(self) -> None:
        """Let go of the directory's lease, then close every stream and connection."""
        await self.directory.resign()
        if self._own is not None:
            conn, hub, keepalive = self._own
            await keepalive.close()
            await hub.close()
            await conn.close()
        await self.keepalive.close()
        await self.hub.close()
        await self.conn.close()
