"""A service of several cells, as a ``tenure://`` client sees it (protocol version 12).

``tenure serve --cluster etcd://HOSTS/NAME --cell CELL`` runs cells: each a cluster
(a leader and standbys), all one service, each node served by one cell as the
service's directory says (docs/cluster.md, "Cells"). A client given any members'
doors connects as to any cluster; its Welcome names the member's cell. When the
service has more than one cell (its ClusterStatus lists them, at the first
connection or once a member answers ``WRONG_CELL``), the client keeps one
:class:`~tenure.backends._remote_session.Shard` per cell, connected to that cell's
members (their advertised addresses, as the directory records them), and sends each
node's requests to the cell that serves it:

* a node whose cell a member named (a ``WRONG_CELL`` answer: the cell and the epoch
  of the node's place) goes there, until a newer epoch says otherwise;
* any other node goes to the cell rendezvous hashing of its name over the cells'
  names picks: where a node is created, so nodes spread over the cells, and where a
  node made so is found with no detour;
* a request a member answers ``WRONG_CELL`` is sent again to the cell it names, at
  most :data:`MAX_HOPS` times (the answer said where the node lives, and the request
  was not applied).

The first connection's doors are narrowed to its own cell's members, so that after a
failover it reconnects within its cell, where its sessions live.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from tenure._core.rendezvous import hash64
from tenure._protocol.cluster import ClusterStatus, ClusterView
from tenure.backends._doors import Door
from tenure.backends._link import LinkOptions
from tenure.backends._shard import Shard
from tenure.backends._standby_reads import StandbyReads
from tenure.errors import PermissionDeniedError, UnavailableError, WrongCellError

__all__ = ["MAX_HOPS", "Cells", "service_cells"]

R = TypeVar("R")

#: How many ``WRONG_CELL`` answers one call follows (a node moved twice meanwhile, at
#: most): past them it raises the last.
MAX_HOPS: Final = 3


async def service_cells(shard: Shard) -> ClusterView | None:
    """The service's cells as ``shard``'s member knows them (None: a server of no
    cell, one that speaks no version 12, or none that could be asked: a token without
    read access, the member unreachable)."""
    welcome = shard.link.welcome
    if welcome is None or not welcome.cell:
        return None
    try:
        view = await shard.call(ClusterStatus(), resend=True)
    except (PermissionDeniedError, UnavailableError):  # (a token without read access; down)
        return None
    return view if view.cells else None


class Cells:
    """One shard per cell, and which cell serves each node (module docstring)."""

    def __init__(self, first: Shard, view: ClusterView, options: LinkOptions) -> None:
        """``first``: the shard connected already, of ``view.cell``; ``view``: its
        ClusterStatus; ``options``: every shard's link options."""
        self.options = options
        self.doors = first.link.doors
        self.shards: dict[str, Shard] = {view.cell: first}
        #: Each node a member placed, and the epoch of that place.
        self.places: dict[str, tuple[str, int]] = {}
        #: Each cell's standbys, for the reads that may be stale (made when asked).
        self.reads: dict[str, StandbyReads] = {}
        self._view = view
        self._learning: asyncio.Future[None] | None = None
        own = self._members(view, view.cell)
        if own:  # (after a failover: within its cell, where its sessions live)
            first.link.doors = self.doors.of(own)

    @property
    def cells(self) -> list[str]:
        """The cells known, by name."""
        return sorted(self.shards)

    def shard_for(self, node: str) -> Shard:
        """The shard of the cell that serves ``node``, as far as this client knows."""
        placed = self.places.get(node)
        if placed is not None and placed[0] in self.shards:
            return self.shards[placed[0]]
        cell = max(self.shards, key=lambda name: hash64(name, node))
        return self.shards[cell]

    def cell_of(self, shard: Shard) -> str:
        """The cell ``shard`` is of."""
        for cell, mine in self.shards.items():
            if mine is shard:
                return cell
        raise KeyError("not a shard of this service")

    async def on_node(self, node: str, send: Callable[[Shard], Awaitable[R]]) -> tuple[Shard, R]:
        """``send(shard)`` to the cell that serves ``node``, again where each
        ``WRONG_CELL`` answer points (at most :data:`MAX_HOPS` times); that shard and
        what it answered.

        Raises:
            WrongCellError: the last answer, past the hops, or naming a cell of no
                member known.
        """
        hops = 0
        while True:
            shard = self.shard_for(node)
            try:
                return shard, await send(shard)
            except WrongCellError as error:
                hops += 1
                if hops > MAX_HOPS:
                    raise
                await self.follow(node, error)

    async def follow(self, node: str, error: WrongCellError) -> None:
        """A member said ``error``: ``node`` lives on its cell (opened if new).

        Raises:
            WrongCellError: ``error``, when that cell has no member known.
        """
        cell, epoch = error.cell, error.epoch
        known = self.places.get(node)
        if known is None or epoch >= known[1]:
            self.places[node] = (cell, epoch)
        if cell not in self.shards:
            await self.learn()
        if cell not in self.shards:
            raise error

    async def learn(self) -> None:
        """Ask the service's cells again (one asking at a time) and open a shard for
        each new one."""
        if self._learning is None:
            self._learning = asyncio.ensure_future(self._learn())
        learning = self._learning
        try:
            await asyncio.shield(learning)
        finally:
            if learning.done() and self._learning is learning:
                self._learning = None

    async def _learn(self) -> None:
        opened: list[Shard] = []
        for shard in list(self.shards.values()):
            view = await service_cells(shard)
            if view is not None:
                self._view = view
                break
        for cell in self.cells_in(self._view):
            if cell in self.shards:
                continue
            members = self._members(self._view, cell)
            if not members:
                continue
            shard = Shard(self.doors.of(members), self.options)
            shard.link.open_in_background()  # (a cell down: the others serve meanwhile)
            self.shards[cell] = shard
            opened.append(shard)
        # Each new cell's connection, given the time of one (a cell down is left to
        # connect in the background: its nodes' calls wait for it, within their bound).
        wait_until = asyncio.get_running_loop().time() + self.options.connect_timeout
        await asyncio.gather(
            *(shard.link.wait_ready(wait_until) for shard in opened), return_exceptions=True
        )

    @staticmethod
    def cells_in(view: ClusterView) -> list[str]:
        """The cells ``view`` lists that have members."""
        return [cell.name for cell in view.cells if cell.members]

    def _members(self, view: ClusterView, cell: str) -> list[Door]:
        """The doors of ``cell``'s members (their advertised addresses, reached as the
        URL's doors are)."""
        doors: list[Door] = []
        for listed in view.cells:
            if listed.name != cell:
                continue
            for member in listed.members:
                door = self.doors.endpoint_of(member.address)
                if door is not None and door not in doors:
                    doors.append(door)
        return doors

    def standby_reads(self, shard: Shard) -> StandbyReads:
        """The standbys of ``shard``'s cell, for the reads that may be stale (its doors,
        and the standbys its ClusterStatus names: made when first asked)."""
        cell = self.cell_of(shard)
        reads = self.reads.get(cell)
        if reads is None:
            doors = shard.link.doors.doors
            reads = self.reads[cell] = StandbyReads(doors, self.options, shard.link)
        return reads

    async def aclose(self) -> None:
        """Close the standby reads' connections (the shards are the backend's to close)."""
        await asyncio.gather(*(reads.aclose() for reads in self.reads.values()))
