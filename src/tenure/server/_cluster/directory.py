"""The service's directory in etcd: which cell serves each node, and every cell's members.

A service is one or more cells (docs/cluster.md, "Cells"); each cell is a cluster as
:mod:`tenure.server._cluster` runs it (a leader and standbys over a log in etcd), and
serves the nodes the directory places on it. The directory lives in the etcd of
``--cluster`` (a cell's log may live in another: ``--cell-etcd``), under
``S = <prefix>s/<name>/``::

    S nodes/<node>            the node's place: [cell, epoch, to] (msgpack); put
                              first by the cell whose leader created the node (a
                              claim: put only if absent), deleted by it when the
                              node is dropped; ``to`` names the cell a move under
                              way takes it to ("": none)
    S moves/<node>            a move's copy of the node (:mod:`.moves`)
    S members/<cell>/<member> a member's record (as ``P members/<name>``), on a lease
                              of this etcd: what a client learns the cells' doors from
    S cells/<cell>            the cell's number: its sessions' ids are of that block
                              (:data:`~tenure._core.node_moves.SESSION_ID_BLOCK`)
    S numbers/<n>             the cell that took number ``n`` (each taken once)
    S secret                  what the members of every cell sign the preambles of
                              the face connections they relay with (32 bytes, made
                              once: :mod:`tenure.server._net.relay`)

A place's epoch is 1 when the node is first placed; a move to another cell raises it,
so that a client that knew an older place knows it is out of date.

:class:`ServiceDirectory` is one member's view of it: every place, read once and then kept
by a watch (a node's requests are checked against memory, not etcd), the claims and
releases of this cell's leader, and the members of every cell, written and read
every :data:`PUBLISH_EVERY` seconds (its record on a lease of its own in this etcd).
Nothing here may end while the member runs: what etcd cannot answer now is tried
again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

from aetcd.rpc import rpc_pb2

from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import (
    compare_create,
    compare_mod,
    delete,
    get,
    prefix_end,
    put,
    range_request,
)
from tenure._etcd.streams import KeepAlive, Watcher, WatchHub
from tenure.errors import TenureError, UnavailableError, WrongCellError
from tenure.server._cluster.keys import (
    DEFAULT_CELL,
    ClusterDataError,
    ServerRecord,
    decode_member,
    encode,
)
from tenure.server._cluster.lease import MemberLease
from tenure.server._cluster.moves import MoveCopy, Place, decode_place, encode_place, read_copy
from tenure.server._cluster.store import SECRET_BYTES, made_once
from tenure.server._role import LEADER

log = logging.getLogger("tenure.cluster")

__all__ = ["DirectoryKeys", "Place", "ServiceDirectory"]

#: How often a member writes its record in the directory and reads every cell's.
PUBLISH_EVERY: Final = 1.0
#: Claims of nodes this cell holds but the directory lacks, sent at once (at a takeover).
REGISTER_AT_ONCE: Final = 32
#: The cells a service may have (their sessions' id blocks within 53 bits).
MAX_CELLS: Final = 8192
_PUT: Final = 0  # mvccpb.Event.PUT


@dataclass(frozen=True, slots=True)
class DirectoryKeys:
    """The directory's keys (module docstring)."""

    root: bytes  # S

    @classmethod
    def of(cls, prefix: str, service: str) -> DirectoryKeys:
        """The directory of service ``service`` (the ``--cluster`` URL's name) under
        ``prefix``."""
        return cls(f"{prefix}s/{quote(service, safe='')}/".encode())

    @property
    def nodes(self) -> bytes:
        """The prefix of every node's place."""
        return self.root + b"nodes/"

    def node(self, name: str) -> bytes:
        """The key of node ``name``'s place."""
        return self.nodes + quote(name, safe="").encode()

    def node_of(self, key: bytes) -> str:
        """The node a place's key is of."""
        return unquote(key[len(self.nodes) :].decode())

    @property
    def moves(self) -> bytes:
        """The prefix of every move's copy."""
        return self.root + b"moves/"

    def move(self, name: str) -> bytes:
        """The key of node ``name``'s move's copy."""
        return self.moves + quote(name, safe="").encode()

    def cell_number(self, cell: str) -> bytes:
        """The key of cell ``cell``'s number."""
        return self.root + b"cells/" + quote(cell, safe="").encode()

    def number(self, number: int) -> bytes:
        """The key of the cell that took number ``number``."""
        return self.root + f"numbers/{number}".encode()

    @property
    def secret(self) -> bytes:
        """The key of the service's secret (what relays sign with)."""
        return self.root + b"secret"

    @property
    def members(self) -> bytes:
        """The prefix of every cell's member records."""
        return self.root + b"members/"

    def member(self, cell: str, name: str) -> bytes:
        """The key of member ``name``'s record in cell ``cell``."""
        return self.members + f"{quote(cell, safe='')}/{quote(name, safe='')}".encode()


class ServiceDirectory:
    """One member's view of the directory, and its cell's part in it (module docstring).

    It is the :class:`~tenure.server._role.Places` the member's servers ask.
    """

    def __init__(
        self,
        conn: EtcdClient,
        hub: WatchHub,
        keepalive: KeepAlive,
        keys: DirectoryKeys,
        cell: str,
        ttl: int,
    ) -> None:
        """``conn``, ``hub``, ``keepalive``: the directory's etcd (the ``--cluster``
        URL's); ``cell``: this member's; ``ttl``: its record's lease, in seconds."""
        self.conn = conn
        self.hub = hub
        self.keepalive = keepalive
        self.keys = keys
        self.cell = cell
        self.ttl = ttl
        #: Every node's place, as last read (kept by a watch once :attr:`ready`).
        self.places: dict[str, Place] = {}
        #: Each move under way's copy of its node (and a refused one's error), by node.
        self.copies: dict[str, MoveCopy] = {}
        #: Set once every place was read.
        self.ready = asyncio.Event()
        #: Set whenever a place or a move changed (the movers clear it: :mod:`.mover`).
        self.changed = asyncio.Event()
        #: Every cell's members' records, by cell, as last read.
        self.cells: dict[str, list[ServerRecord]] = {}
        self._lease: MemberLease | None = None

    def start(self, record: Callable[[], ServerRecord]) -> list[asyncio.Task[None]]:
        """Start following the places, and writing ``record()`` (this member's record as
        it is now) and reading everyone's; the caller cancels the tasks at the end."""
        return [
            asyncio.ensure_future(self._follow()),
            asyncio.ensure_future(self._publish(record)),
        ]

    async def secret(self) -> bytes:
        """The service's secret, which every cell's members sign the face connections
        they relay with: made by the first member to ask.

        Raises:
            ClusterDataError: the key holds something else.
        """
        return await made_once(self.conn, self.keys.secret, SECRET_BYTES, "service secret")

    # -- what a server asks (tenure.server._role.Places) -------------------------------------

    def elsewhere(self, node: str) -> WrongCellError | None:
        """The error that sends ``node``'s requests to the cell the directory places it
        on, if that is another cell (None: this cell's, or placed nowhere)."""
        place = self.places.get(node)
        if place is None or place.cell == self.cell:
            return None
        return WrongCellError.pointing_to(node, place.cell, place.epoch)

    def cell_of(self, node: str) -> str | None:
        """The cell the directory places ``node`` on (None: none yet)."""
        place = self.places.get(node)
        return None if place is None else place.cell

    def leader_of(self, cell: str) -> str | None:
        """The main address of ``cell``'s leader, as its members' records said when last
        read (None: none known; each record is read again every second)."""
        for record in self.cells.get(cell, ()):
            if record.role == LEADER and record.address:
                return record.address
        return None

    async def claim(self, node: str) -> tuple[WrongCellError | None, bool]:
        """Place ``node`` on this cell unless it is placed already; the error that sends
        its requests elsewhere (None: this cell serves it), and whether this claim
        placed it (a node whose creation then fails is released again).

        Raises:
            UnavailableError: etcd did not answer.
        """
        key = self.keys.node(node)
        mine = Place(self.cell)
        reply = await self.conn.txn(
            [compare_create(key, 0)], [put(key, encode_place(mine))], [get(key)]
        )
        if reply.succeeded:
            self.places[node] = mine
            return None, True
        # (A Txn is one revision: its compare failed, so its get finds the key.)
        place = decode_place(bytes(reply.responses[0].response_range.kvs[0].value), node)
        self.places[node] = place
        if place.cell == self.cell:
            return None, False
        return WrongCellError.pointing_to(node, place.cell, place.epoch), False

    async def release(self, node: str) -> None:
        """Remove ``node``'s place if it is this cell's (the node was dropped here, or
        its creation failed).

        Raises:
            UnavailableError: etcd did not answer.
        """
        key = self.keys.node(node)
        reply = await self.conn.range(rpc_pb2.RangeRequest(key=key))
        if not reply.kvs or decode_place(bytes(reply.kvs[0].value), node).cell != self.cell:
            return
        released = await self.conn.txn(
            [compare_mod(key, int(reply.kvs[0].mod_revision))], [delete(key)]
        )
        if released.succeeded:
            self.places.pop(node, None)

    async def register(self, nodes: Iterable[str]) -> list[str]:
        """Claim for this cell every node of ``nodes`` (the nodes its state holds) that
        the directory does not place yet, :data:`REGISTER_AT_ONCE` at a time; the nodes
        the directory places on another cell (served by two cells: the directory wins).

        Raises:
            UnavailableError: etcd did not answer.
        """
        await self.ready.wait()
        missing = [node for node in nodes if node not in self.places]
        conflicts = [node for node in nodes if self.elsewhere(node) is not None]
        for start in range(0, len(missing), REGISTER_AT_ONCE):
            batch = missing[start : start + REGISTER_AT_ONCE]
            answers = await asyncio.gather(*(self.claim(node) for node in batch))
            conflicts += [
                node for node, (error, _) in zip(batch, answers, strict=True) if error is not None
            ]
        return conflicts

    # -- the tasks -------------------------------------------------------------------------

    async def _follow(self) -> None:
        """Read every place and move, then keep them by a watch (read again when events
        may have been lost)."""
        keys = self.keys
        start, end = keys.moves, prefix_end(keys.nodes)  # (moves/ and nodes/: adjacent)
        watcher: Watcher | None = None
        while True:
            if watcher is None:
                try:
                    reply = await self.conn.range(rpc_pb2.RangeRequest(key=start, range_end=end))
                except UnavailableError as error:
                    log.warning("reading the directory: %s", error)
                    await asyncio.sleep(0.5)
                    continue
                self.places, self.copies = {}, {}
                for kv in reply.kvs:
                    self._took(bytes(kv.key), bytes(kv.value))
                self.ready.set()
                self.changed.set()
                revision = int(reply.header.revision)
                watcher = self.hub.watch(start, end, revision + 1)
            await watcher.wait()
            events, reset = watcher.drain()
            if reset:
                watcher.cancel()
                watcher = None
                continue
            for event in events:
                self._took(
                    bytes(event.kv.key), bytes(event.kv.value) if event.type == _PUT else None
                )
            self.changed.set()

    def _took(self, key: bytes, value: bytes | None) -> None:
        """Keep what the directory says of ``key`` now (None: deleted)."""
        keys = self.keys
        if key.startswith(keys.nodes):
            node = keys.node_of(key)
            if value is None:
                self.places.pop(node, None)
            else:
                self.places[node] = decode_place(value, node)
        elif key.startswith(keys.moves):
            node = unquote(key[len(keys.moves) :].decode())
            if value is None:
                self.copies.pop(node, None)
            else:
                self.copies[node] = read_copy(value, node)

    async def cell_number(self) -> int:
        """This cell's number in the service (0: the default cell's), taken in the
        directory the first time it is asked (module docstring).

        Raises:
            UnavailableError: etcd did not answer.
            ClusterDataError: the service has no number left (:data:`MAX_CELLS`).
        """
        if self.cell == DEFAULT_CELL:
            return 0
        keys = self.keys
        mine = keys.cell_number(self.cell)
        taken = await self.conn.range(range_request(keys.root + b"numbers/", count_only=True))
        number = int(taken.count) + 1
        while number < MAX_CELLS:
            reply = await self.conn.txn(
                [compare_create(mine, 0), compare_create(keys.number(number), 0)],
                [put(mine, str(number).encode()), put(keys.number(number), self.cell.encode())],
                [get(mine)],
            )
            if reply.succeeded:
                return number
            found = reply.responses[0].response_range.kvs
            if found:
                return int(bytes(found[0].value))
            number += 1
        raise ClusterDataError(f"the service has no cell number left (at most {MAX_CELLS} cells)")

    async def _publish(self, record: Callable[[], ServerRecord]) -> None:
        """Every :data:`PUBLISH_EVERY` seconds: this member's record, on its lease in
        the directory's etcd (granted again if it ended), and every cell's records."""
        while True:
            try:
                lease = await self._held_lease()
                me = record()
                value = encode(me)
                await self.conn.txn([], [put(self.keys.member(self.cell, me.name), value, lease)])
                self.cells = await self._read_cells()
            except TenureError as error:  # (etcd away, a lease that just ended: next time)
                log.debug("writing this member's record in the directory: %s", error)
            await asyncio.sleep(PUBLISH_EVERY)

    async def _held_lease(self) -> int:
        """The lease this member's directory record lives on (a new one if it ended)."""
        lease = self._lease
        if (
            lease is None
            or lease.lost.is_set()
            or lease.deadline() < asyncio.get_running_loop().time()
        ):
            if lease is not None:
                self.keepalive.remove(lease.lease_id, lease)
            sent = asyncio.get_running_loop().time()
            reply = await self.conn.lease_call(
                "LeaseGrant", rpc_pb2.LeaseGrantRequest(TTL=self.ttl)
            )
            lease = self._lease = MemberLease(int(reply.ID), self.ttl, sent)
            self.keepalive.add(lease)
        return lease.lease_id

    async def _read_cells(self) -> dict[str, list[ServerRecord]]:
        keys = self.keys
        reply = await self.conn.range(range_request(keys.members))
        cells: dict[str, list[ServerRecord]] = {}
        for kv in reply.kvs:
            cell = unquote(bytes(kv.key)[len(keys.members) :].split(b"/", 1)[0].decode())
            try:
                cells.setdefault(cell, []).append(decode_member(bytes(kv.value)))
            except ClusterDataError:
                continue  # (someone else's key: it names no member)
        return cells

    async def resign(self) -> None:
        """Revoke this member's directory lease (its record goes at once): at the end."""
        lease, self._lease = self._lease, None
        if lease is None:
            return
        self.keepalive.remove(lease.lease_id, lease)
        try:
            await self.conn.lease_call("LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=lease.lease_id))
        except TenureError as error:
            log.debug("revoking the directory lease: %s", error)
