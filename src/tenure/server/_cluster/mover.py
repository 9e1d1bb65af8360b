"""A cell's leader's part in the moves of nodes between cells (docs/cluster.md, "Cells").

What a move is, and how the directory records it, is :mod:`.moves`'s. A leader does
what is left of each move that touches its cell, as the directory and its own state
say it (every step is a record in its log first: :mod:`tenure._core.node_moves`), so
that a leader that takes over, or comes back after etcd was cut off, finishes what
its predecessor began:

=====================================  =================================================
the directory says                     this cell's leader
=====================================  =================================================
place here, ``to`` set; not frozen     freezes the node (its clients are told to leave)
place here, ``to`` set; frozen         puts the node's copy (as of its freezing)
copy for here; no such node            takes the copy in, frozen (refused: the move is)
place elsewhere, ``to`` here; frozen   places the node here, at the next epoch
place here, no ``to``; frozen          thaws it: the move failed, or the node arrived
place elsewhere, not ``to`` here;      forgets it: another cell serves it now
frozen
=====================================  =================================================

It looks again whenever a place or a move changes in the directory (and a look that
failed, etcd away, :data:`LOOK_AGAIN` seconds later): a service whose nodes do not
move costs its leaders no work and no timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final

import msgspec

from tenure._core.node_moves import export_node
from tenure._runtime.host import Host
from tenure.errors import TenureError, UnavailableError
from tenure.server._cluster.directory import ServiceDirectory
from tenure.server._cluster.moves import MoveCopy, Place, finish_move, put_copy, refuse_move
from tenure.server._durability.records import (
    DROP_MOVED_RECORD,
    FREEZE_RECORD,
    IMPORT_RECORD,
    THAW_RECORD,
    apply_move,
    move_record,
)

log = logging.getLogger("tenure.cluster")

__all__ = ["COPY_OVERHEAD", "LOOK_AGAIN", "NodeMover"]

#: How soon a leader looks again at the moves that touch its cell after a look failed
#: (etcd away, its log failed), in seconds, unless the directory changes first.
LOOK_AGAIN: Final = 1.0
#: What a copy's record in a log adds to the copy, at most, in bytes: a copy must fit
#: in one log entry (``--cluster-max-entry``) with it.
COPY_OVERHEAD: Final = 1024


class NodeMover:
    """A leader's moves (module docstring): run while it leads."""

    def __init__(self, directory: ServiceDirectory, host: Host, max_entry: int) -> None:
        """``host``: the leader's (its engine, and the log of its steps); ``max_entry``:
        the largest entry its log takes (``--cluster-max-entry``), which bounds a copy."""
        self.directory = directory
        self.host = host
        self.max_copy = max_entry - COPY_OVERHEAD
        self._copied: set[str] = set()  # the nodes whose copy this leader has put

    async def run(self) -> None:
        """Do what is left of every move that touches this cell, until cancelled."""
        directory = self.directory
        await directory.ready.wait()
        while True:
            directory.changed.clear()
            try:
                await self.look()
            except TenureError as error:  # (etcd away, a step refused: look again soon)
                log.warning("moving nodes between cells: %s", error)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(LOOK_AGAIN):
                        await directory.changed.wait()
                continue
            await directory.changed.wait()

    async def look(self) -> None:
        """One look at every move that touches this cell (module docstring).

        Raises:
            TenureError: etcd did not answer, or this leader's log failed.
        """
        directory, engine = self.directory, self.host.engine
        me = directory.cell
        for node, (_, _) in list(engine.moving.items()):
            place = directory.places.get(node)
            if place is not None:
                await self._frozen(node, place)
        for node, place in list(directory.places.items()):
            if place.cell == me and place.to and node not in engine.moving:
                await self._leaving(node, place)
        for node, copy in list(directory.copies.items()):
            if copy.target == me and copy.copy and node not in engine.moving:
                await self._arriving(node, copy)

    async def _frozen(self, node: str, place: Place) -> None:
        """A node frozen here, and placed as ``place``."""
        directory = self.directory
        me = directory.cell
        if place.cell == me and not place.to:
            await self._step(THAW_RECORD, node)
            log.info("node %r is served here again (thawed)", node)
        elif place.cell == me:
            if node not in self._copied:
                await self._put_copy(node, place)
        elif place.to == me:
            copy = directory.copies.get(node)
            if copy is not None and copy.copy and copy.target == me:
                await self._finish(node, copy)
        else:
            await self._step(DROP_MOVED_RECORD, node)
            self._copied.discard(node)
            log.info("node %r moved to cell %r: forgotten here", node, place.cell)

    async def _leaving(self, node: str, place: Place) -> None:
        """A move from this cell begun, its node not frozen yet."""
        if node in self.host.engine.nodes:
            await self._step(FREEZE_RECORD, node, place.to)
            log.info("node %r frozen for its move to cell %r", node, place.to)
            await self._put_copy(node, place)
        else:
            why = f"cell {place.cell!r} does not hold node {node!r}"
            await self._refuse(node, MoveCopy(place.cell, place.to, place.epoch), why)

    async def _put_copy(self, node: str, place: Place) -> None:
        copy = msgspec.msgpack.encode(export_node(self.host.engine, node))
        move = MoveCopy(place.cell, place.to, place.epoch, copy)
        if len(copy) > self.max_copy:
            why = (
                f"node {node!r}'s copy is {len(copy)} bytes, more than a log entry takes "
                f"(--cluster-max-entry less {COPY_OVERHEAD}: {self.max_copy})"
            )
            await self._refuse(node, move, why)
            return
        keys = self.directory.keys
        await put_copy(self.directory.conn, keys.move(node), move)
        self._copied.add(node)

    async def _arriving(self, node: str, copy: MoveCopy) -> None:
        """A copy for this cell, not taken in yet."""
        if node in self.host.engine.nodes:
            why = f"cell {copy.target!r} has a node {node!r} already"
            await self._refuse(node, copy, why)
            return
        if len(copy.copy) > self.max_copy:
            await self._refuse(node, copy, f"the copy is larger than {self.max_copy} bytes")
            return
        plain = msgspec.msgpack.decode(copy.copy)
        try:
            await self._step(IMPORT_RECORD, plain, copy.source)
        except TenureError as error:
            await self._refuse(node, copy, f"cell {copy.target!r} refused it: {error}")
            return
        log.info(
            "node %r taken in from cell %r (frozen until it is placed here)", node, copy.source
        )
        await self._finish(node, copy)

    async def _finish(self, node: str, copy: MoveCopy) -> None:
        """Place ``node``, taken in frozen, here; then thaw it (its place is known
        here: this leader's own Txn said it)."""
        directory = self.directory
        keys = directory.keys
        if await finish_move(directory.conn, keys.node(node), keys.move(node), node, copy):
            log.info("node %r moved here from cell %r", node, copy.source)
            directory.places[node] = Place(copy.target, copy.epoch + 1)
            await self._step(THAW_RECORD, node)
            log.info("node %r is served here (thawed)", node)

    async def _refuse(self, node: str, copy: MoveCopy, why: str) -> None:
        keys = self.directory.keys
        await refuse_move(self.directory.conn, keys.node(node), keys.move(node), node, copy, why)
        log.warning("the move of node %r to cell %r failed: %s", node, copy.target, why)

    async def _step(self, kind: int, subject: object, cell: str = "") -> None:
        """Apply a step of a move to the engine, logged, and wait until it is durable.

        Raises:
            TenureError: the engine refused it (nothing changed), or the log failed.
        """
        host = self.host
        host.change(
            lambda engine, now: apply_move(engine, kind, now, subject, cell),
            lambda now: move_record(kind, now, subject, cell),
        )
        await host.committed()
        if host.dead:  # (not in the log: nothing may follow from it, a copy least of all)
            raise UnavailableError("this leader's log failed: its successor moves on")
