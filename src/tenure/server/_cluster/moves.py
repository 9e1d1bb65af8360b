"""A node's move between cells, as the service's directory records it (docs/cluster.md,
"Cells").

A move is three writes to the directory (:mod:`.directory`), each a Txn that checks
the node's place is still what its writer read, so that two writers never both win:

1. **Begun** (:func:`begin_move`: ``tenure cells move``): the place gains ``to``, the
   target cell. From then the source's leader freezes the node (a record in its log:
   it takes no command) and puts its copy, as of the time it froze, under
   ``S moves/<node>`` (:func:`put_copy`).
2. **Taken** (:func:`finish_move`, by the target's leader once its log has the copy,
   frozen): the place becomes ``[target, epoch + 1]`` and the copy goes, in one Txn.
   The target then thaws the node and serves it; the source forgets it.
3. **Or refused** (:func:`refuse_move`, by the target's leader, whose engine refused
   the copy: a quota, ``max_nodes``): the place loses ``to``, and the copy is replaced
   by the reason. The source thaws the node and serves it again.

Until the place names the target, the target does not serve the node; once it does,
the source has frozen it for good. So one cell serves the node at any time, and a
move cut anywhere (either leader killed, etcd cut off, the mover gone) is finished by
the leaders that come next, each doing what the directory and its own log say is
left (:mod:`.mover`); ``tenure cells move`` run again only waits for it.
"""

from __future__ import annotations

from typing import Final

import msgspec
from aetcd.rpc import rpc_pb2

from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import compare_mod, delete, put
from tenure.errors import NotFoundError, PreconditionFailedError
from tenure.server._cluster.keys import ClusterDataError

__all__ = [
    "MoveCopy",
    "Place",
    "decode_place",
    "encode_place",
    "begin_move",
    "finish_move",
    "put_copy",
    "read_copy",
    "read_place",
    "refuse_move",
]


class Place(msgspec.Struct, array_like=True, frozen=True):
    """Where a node lives: the cell that serves it, the epoch of that place, and the
    cell a move under way takes it to ("": none)."""

    cell: str
    epoch: int = 1
    to: str = ""


class MoveCopy(msgspec.Struct, array_like=True, frozen=True):
    """A move's copy of its node: the cells it moves between, the epoch of its place
    before the move, the copy (``export_node``'s, as msgpack) and, once the target
    refused it, why (the copy then gone)."""

    source: str
    target: str
    epoch: int
    copy: bytes = b""
    error: str = ""


_decode_copy: Final = msgspec.msgpack.Decoder(MoveCopy).decode
_decode_place: Final = msgspec.msgpack.Decoder(Place).decode
_encode: Final = msgspec.msgpack.Encoder().encode


def encode_place(place: Place) -> bytes:
    """A place as stored."""
    return _encode(place)


def decode_place(value: bytes, node: str) -> Place:
    """A place as stored (one that cannot be read is the directory damaged)."""
    try:
        return _decode_place(value)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise ClusterDataError(f"the directory's place of node {node!r} cannot be read") from None


def read_copy(value: bytes, node: str) -> MoveCopy:
    """A move's copy as stored (one that cannot be read is the directory damaged)."""
    try:
        return _decode_copy(value)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise ClusterDataError(f"the directory's move of node {node!r} cannot be read") from None


async def read_place(conn: EtcdClient, key: bytes, node: str) -> tuple[Place, int]:
    """Node ``node``'s place (under ``key``) as etcd has it now, and its mod revision.

    Raises:
        NotFoundError: no cell serves the node.
        UnavailableError: etcd did not answer.
    """
    reply = await conn.range(rpc_pb2.RangeRequest(key=key))
    if not reply.kvs:
        raise NotFoundError(f"no cell serves node {node!r}")
    return decode_place(bytes(reply.kvs[0].value), node), int(reply.kvs[0].mod_revision)


async def begin_move(
    conn: EtcdClient, place_key: bytes, copy_key: bytes, node: str, target: str
) -> tuple[str, int]:
    """Begin node ``node``'s move to cell ``target`` (module docstring, 1); the source
    cell and the place's epoch. A move to ``target`` already begun is left as it is,
    and a node on ``target`` already is not moved (``target`` is its source then).

    Raises:
        NotFoundError: no cell serves the node.
        PreconditionFailedError: it is moving elsewhere.
        UnavailableError: etcd did not answer.
    """
    while True:
        place, revision = await read_place(conn, place_key, node)
        if place.to == target:
            return place.cell, place.epoch
        if place.to:
            raise PreconditionFailedError(
                f"node {node!r} is moving to cell {place.to!r} already: wait for that move"
            )
        if place.cell == target:
            return place.cell, place.epoch  # (there already: a move run again after its end)
        moving = Place(place.cell, place.epoch, target)
        # (A refused move's reason, left for whoever waited for it, goes with it.)
        begun = await conn.txn(
            [compare_mod(place_key, revision)],
            [put(place_key, encode_place(moving)), delete(copy_key)],
        )
        if begun.succeeded:
            return place.cell, place.epoch


async def put_copy(conn: EtcdClient, copy_key: bytes, copy: MoveCopy) -> None:
    """Put a move's copy (the source's leader; again after a takeover: the same node).

    Raises:
        UnavailableError: etcd did not answer.
    """
    await conn.txn([], [put(copy_key, _encode(copy))])


async def finish_move(
    conn: EtcdClient, place_key: bytes, copy_key: bytes, node: str, copy: MoveCopy
) -> bool:
    """Place node ``node`` on ``copy.target`` at the next epoch and drop the copy, if
    its place is still ``copy``'s move (module docstring, 2); whether it is now.

    Raises:
        UnavailableError: etcd did not answer.
    """
    place, revision = await read_place(conn, place_key, node)
    if place.cell == copy.target:
        return True  # (finished already: this leader's predecessor's Txn)
    if (place.cell, place.epoch, place.to) != (copy.source, copy.epoch, copy.target):
        return False
    taken = Place(copy.target, copy.epoch + 1)
    reply = await conn.txn(
        [compare_mod(place_key, revision)],
        [put(place_key, encode_place(taken)), delete(copy_key)],
    )
    return bool(reply.succeeded)


async def refuse_move(
    conn: EtcdClient, place_key: bytes, copy_key: bytes, node: str, copy: MoveCopy, why: str
) -> None:
    """Leave node ``node`` on ``copy.source``, its copy replaced by ``why`` (module
    docstring, 3), if its place is still ``copy``'s move.

    Raises:
        UnavailableError: etcd did not answer.
    """
    place, revision = await read_place(conn, place_key, node)
    if (place.cell, place.epoch, place.to) != (copy.source, copy.epoch, copy.target):
        return
    refused = MoveCopy(copy.source, copy.target, copy.epoch, error=why)
    await conn.txn(
        [compare_mod(place_key, revision)],
        [
            put(place_key, encode_place(Place(copy.source, copy.epoch))),
            put(copy_key, _encode(refused)),
        ],
    )
