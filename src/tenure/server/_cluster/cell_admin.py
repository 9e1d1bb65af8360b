"""What ``tenure cells`` reads and writes of a service's directory (docs/cluster.md,
"Cells"): its cells, where each node lives, the moves under way, and a move begun and
waited for.

The command speaks to the directory's etcd (the ``--cluster`` URL its members were
started with), not to a member: a move is the directory's record first
(:mod:`.moves`), which the cells' leaders carry out, so the command needs no member
up to begin one, and run again it waits for the same move.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import unquote

from aetcd.rpc import rpc_pb2

from tenure._core.rendezvous import hash64
from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import prefix_end
from tenure.errors import PreconditionFailedError
from tenure.server import _faces
from tenure.server._cluster.directory import DirectoryKeys
from tenure.server._cluster.keys import ClusterDataError, ServerRecord, decode_member
from tenure.server._cluster.moves import (
    MoveCopy,
    Place,
    begin_move,
    decode_place,
    read_copy,
    read_place,
)

__all__ = [
    "DirectoryCell",
    "MoveOutcome",
    "ServiceView",
    "move_node",
    "read_service",
    "rebalancing",
]

#: How often a waiting ``tenure cells move`` reads the node's place again, in seconds.
POLL_EVERY: Final = 0.1


@dataclass
class DirectoryCell:
    """One cell as the directory has it: its number, its members' records, the nodes
    placed on it."""

    name: str
    number: int | None = None
    members: list[ServerRecord] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)


@dataclass
class ServiceView:
    """A service's directory, read at once: its cells, every place, every move's copy."""

    cells: dict[str, DirectoryCell]
    places: dict[str, Place]
    copies: dict[str, MoveCopy]

    def cell(self, name: str) -> DirectoryCell:
        """The cell ``name`` (an empty one if the directory has nothing of it)."""
        return self.cells.setdefault(name, DirectoryCell(name))


async def read_service(conn: EtcdClient, keys: DirectoryKeys) -> ServiceView:
    """The directory under ``keys``, as of one revision of etcd.

    Raises:
        UnavailableError: etcd did not answer.
        ClusterDataError: a value cannot be read.
    """
    root = keys.root
    reply = await conn.range(rpc_pb2.RangeRequest(key=root, range_end=prefix_end(root)))
    view = ServiceView({}, {}, {})
    for kv in reply.kvs:
        key, value = bytes(kv.key)[len(root) :], bytes(kv.value)
        kind, _, rest = key.partition(b"/")
        if kind == b"nodes":
            node = unquote(rest.decode())
            place = view.places[node] = decode_place(value, node)
            view.cell(place.cell).nodes.append(node)
        elif kind == b"moves":
            node = unquote(rest.decode())
            view.copies[node] = read_copy(value, node)
        elif kind == b"members":
            cell = unquote(rest.split(b"/", 1)[0].decode())
            try:
                view.cell(cell).members.append(decode_member(value))
            except ClusterDataError:
                continue  # (someone else's key: it names no member)
        elif kind == b"cells":
            view.cell(unquote(rest.decode())).number = int(value)
    return view


@dataclass(frozen=True)
class MoveOutcome:
    """How a move ended: ``moved`` (the node lives on the target now), else why not."""

    node: str
    source: str
    target: str
    moved: bool
    epoch: int
    error: str = ""


async def move_node(
    conn: EtcdClient,
    keys: DirectoryKeys,
    node: str,
    target: str,
    timeout: float,
    progress: Callable[[str], None] = lambda line: None,
) -> MoveOutcome:
    """Begin node ``node``'s move to cell ``target`` (or find it begun) and wait until
    it ends, at most ``timeout`` seconds; ``progress`` is told each step seen.

    Raises:
        NotFoundError: no cell serves the node.
        PreconditionFailedError: it is moving elsewhere, ``target`` has no member up,
            or it is a node a face keeps of its own (dflockd's: the face is served
            where cell ``default``'s leader is, its nodes together).
        TimeoutError: the move has not ended within ``timeout`` (it goes on: the
            command run again waits for it).
        UnavailableError: etcd did not answer.
    """
    if node in _faces.all_kept_nodes():
        raise PreconditionFailedError(
            f"node {node!r} is a face's own (its state, served on cell default with the "
            'face\'s other nodes, docs/cluster.md "The faces"): it does not move'
        )
    view = await read_service(conn, keys)
    place, cell = view.places.get(node), view.cells.get(target)
    begun = place is not None and target in (place.to, place.cell)  # (run again: waits)
    if not begun and (cell is None or not cell.members):
        raise PreconditionFailedError(
            f"cell {target!r} has no member up (a cell of the service is one whose members "
            "run tenure serve --cell with its name)"
        )
    source, epoch = await begin_move(conn, keys.node(node), keys.move(node), node, target)
    if source != target:
        progress(f"moving node {node!r} from cell {source!r} to cell {target!r} (epoch {epoch})")
    deadline = time.monotonic() + timeout
    copied = False
    while True:
        place, _ = await read_place(conn, keys.node(node), node)
        if place.cell == target:
            return MoveOutcome(node, source, target, True, place.epoch)
        if not place.to:
            copy = await _copy(conn, keys, node)
            error = copy.error if copy is not None else "the move was called off"
            return MoveOutcome(node, source, target, False, place.epoch, error)
        if not copied and await _copy(conn, keys, node) is not None:
            copied = True
            progress(f"cell {source!r} froze node {node!r} and put its copy")
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"node {node!r} is still moving to cell {target!r} after {timeout:g} s "
                "(is each cell's leader up?): the move goes on; run the command again to "
                "wait for it"
            )
        await asyncio.sleep(POLL_EVERY)


def rebalancing(view: ServiceView) -> list[tuple[str, str, str]]:
    """The moves that put each node where a client would create it now (rendezvous
    hashing of its name over the cells that have members, as ``tenure://`` clients
    place new nodes): (node, from, to), in the nodes' order; none for a node that
    moves already, nor for a face's own (:func:`move_node`).

    Raises:
        PreconditionFailedError: no cell has members.
    """
    cells = sorted(name for name, cell in view.cells.items() if cell.members)
    if not cells:
        raise PreconditionFailedError("no cell of the service has a member up")
    moves = []
    kept = _faces.all_kept_nodes()  # (a face's own nodes stay: move_node)
    for node in sorted(set(view.places) - kept):
        place = view.places[node]
        home = max(cells, key=lambda cell: hash64(cell, node))
        if not place.to and place.cell != home:
            moves.append((node, place.cell, home))
    return moves


async def _copy(conn: EtcdClient, keys: DirectoryKeys, node: str) -> MoveCopy | None:
    reply = await conn.range(rpc_pb2.RangeRequest(key=keys.move(node)))
    return read_copy(bytes(reply.kvs[0].value), node) if reply.kvs else None
