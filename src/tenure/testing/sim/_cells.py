"""A service of two cells over the simulated etcd, its node moved between them (issue 61).

:class:`SimCells` is a :class:`~tenure.testing.sim._cluster.SimCluster` of
:data:`CELLS` cells, :data:`~tenure.testing.sim._cluster.SIZE` members each (hosts
``t0`` to ``t2`` of cell ``a``, ``t3`` to ``t5`` of cell ``b``), one service
(``--cluster etcd://etcd:2379/sim --cell a|b``, as ``tenure serve`` runs it). The
workload's clients are given its members' doors and find the node's cell as any
client does; the workload's node is made on the cell its name hashes to.

Its own fault, ``move``, moves that node to the other cell as ``tenure cells move``
does (:func:`~tenure.server._cluster.cell_admin.move_node`), from a process on host
:data:`MOVER_HOST`, while the other faults go on: a move cut by them (a leader
killed, paused or cut off from etcd, the mover's wait over) is left to the cells'
leaders to finish. Its end is judged (:meth:`SimCells.placement`): after the run's
quiet end, no move may be under way, and the node must be on one cell alone, the one
the directory places it on.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Final

from tenure._etcd.client import EtcdClient
from tenure.errors import TenureError
from tenure.server._cluster.cell_admin import move_node, read_service
from tenure.server._cluster.directory import DirectoryKeys
from tenure.testing.sim._cluster import SimCluster

if TYPE_CHECKING:
    from tenure.testing.sim._loop import SimLoop
    from tenure.testing.sim._workload import SimNotes

__all__ = ["CELLS", "MOVER_HOST", "SimCells"]

#: The service's cells.
CELLS: Final = ("a", "b")
#: The host the moves are asked from (``tenure cells move``'s).
MOVER_HOST: Final = "mover"
#: How long one move is waited for, in simulated seconds (its ``--timeout``).
MOVE_WAIT: Final = 20.0


class SimCells(SimCluster):
    """Two cells of one service (module docstring); ``notes`` is told of each move."""

    kind = "cells"

    def __init__(self, loop: SimLoop, rng: random.Random, notes: SimNotes) -> None:
        super().__init__(loop, rng, CELLS)
        self.notes = notes
        self._moving = False
        self._moves = 0  # (the mover's processes started)

    def leads_every_cell(self) -> bool:
        """Whether every cell has a member that believes it leads."""
        leading = {member.config.cell for member in self.members if member.leads}
        return leading == set(CELLS)

    def move(self, node: str) -> None:
        """Move ``node`` to the other cell, in the background (one move at a time)."""
        if self._moving:
            return
        if self._moves:  # (the last move's process has ended: its host free for this one)
            self.loop.crash(MOVER_HOST)
        self._moving = True
        self._moves += 1
        process = self.loop.processes.new(MOVER_HOST)
        self.loop.processes.spawn(process, self._move(node))

    async def _move(self, node: str) -> None:
        url = self.url()
        conn = EtcdClient(url.connection)
        try:
            keys = DirectoryKeys.of(url.prefix, url.name)
            place = (await read_service(conn, keys)).places.get(node)
            if place is None:
                return
            target = place.to or next(cell for cell in CELLS if cell != place.cell)
            outcome = await move_node(conn, keys, node, target, MOVE_WAIT)
            self.notes.note(MOVER_HOST, "move", to=target, moved=outcome.moved, why=outcome.error)
        except (TenureError, TimeoutError) as error:  # (cut short: the leaders finish it)
            self.notes.note(MOVER_HOST, "move", to="", moved=False, why=str(error))
        finally:
            await conn.close()
            self._moving = False

    async def placement(self, node: str) -> list[str]:
        """What is wrong with where ``node`` is, at the run's quiet end (module
        docstring): each a violation's words."""
        url = self.url()
        conn = EtcdClient(url.connection)
        try:
            view = await read_service(conn, DirectoryKeys.of(url.prefix, url.name))
        except TenureError as error:
            return [f"cells: the directory could not be read at the end: {error}"]
        finally:
            await conn.close()
        place = view.places.get(node)
        if place is None:
            return [f"cells: node {node!r} is placed on no cell"]
        found = []
        if place.to:
            found.append(f"cells: node {node!r}'s move to {place.to!r} has not ended")
        for member in self.members:
            if not member.leads or member.member is None or member.member.server is None:
                continue
            engine = member.member.server.host.engine
            cell = member.config.cell
            if cell == place.cell and node not in engine.nodes:
                found.append(f"cells: node {node!r} is placed on {cell!r}, whose leader lacks it")
            elif cell != place.cell and node in engine.nodes:
                found.append(f"cells: node {node!r} is on {cell!r} too, placed on {place.cell!r}")
            elif node in engine.moving:
                found.append(f"cells: node {node!r} is still frozen on {cell!r}")
        return found
