"""A member's relay of a face's connections to the member that serves them (issue 61).

In a cluster, a face of another lock service whose state lives in nodes of its own
(dflockd's: its entry's ``nodes``) is served by one member: the leader of the cell the
service's directory places those nodes on (cell ``default``'s leader claims them,
docs/cluster.md, "The faces"). A client may reach any member, though: a standby, or
a member of another cell. :func:`route` says where its connection goes, and a member
that does not serve it relays it (:func:`relay`): it opens a connection to the
serving leader's main address, writes a :func:`preamble`, and copies each side's
bytes to the other until the leader's side ends. The client's protocol passes as it
is: its auth line, its requests and their answers are the leader's to read and write.

**The preamble**: :data:`MARK` (a byte that starts neither a native frame, whose
length starts with a zero byte, nor a request of a line protocol), a version, the
client's address, and an HMAC-SHA256 of them under the secret every member of the
service shares. The leader checks it, takes the client's address from it (its log,
its audit and its throttle of failed logins see the client, not the relaying member;
``--max-connections-per-address`` counts a connection when it is accepted, before its
first byte, so each member caps the clients it accepts itself), and serves the
connection itself or closes it: it never relays a relayed connection again. One hop
only, so two members whose views of who leads are stale cannot bounce
a connection between them; a connection that finds no leader is closed, and its
client reconnects, as when a leader steps down.

What a relay does not do: TLS. A member whose main port speaks TLS relays nothing
(its face's clients reach the leader through a balancer, as before this release).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from tenure.server._config.cluster_settings import DEFAULT_CELL

__all__ = [
    "HERE",
    "MARK",
    "RelayError",
    "Relayed",
    "RoutedPlaces",
    "RoutedRole",
    "preamble",
    "read_preamble",
    "relay",
    "route",
]

#: The first byte of a relayed connection (module docstring).
MARK: Final = b"\x01"
#: The preamble's layout version.
VERSION: Final = 1
#: The bytes of the preamble's HMAC kept (of SHA-256's 32).
MAC_BYTES: Final = 16
#: The longest client address a preamble carries, in bytes (longer: cut).
MAX_PEER: Final = 255
#: How much one read of a relayed connection takes.
READ_SIZE: Final = 65536
#: What :func:`route` answers for a connection this server serves itself.
HERE: Final = ""


class RoutedPlaces(Protocol):
    """What :func:`route` reads of the service's directory (a
    :class:`~tenure.server._role.Places`)."""

    @property
    def cell(self) -> str:
        """This member's cell."""
        ...

    def cell_of(self, node: str) -> str | None:
        """The cell the directory places ``node`` on (None: none yet)."""
        ...

    def leader_of(self, cell: str) -> str | None:
        """The main address of ``cell``'s leader (None: none known)."""
        ...


class RoutedRole(Protocol):
    """What :func:`route` reads of the server's role (a :class:`~tenure.server._role.Role`)."""

    @property
    def leading(self) -> bool:
        """Whether this server leads its cell."""
        ...

    @property
    def places(self) -> RoutedPlaces | None:
        """The service's directory (None: none)."""
        ...

    def leader(self, face: str = "native") -> str | None:
        """This cell's leader's address (None: none known)."""
        ...


class RelayError(Exception):
    """A relayed connection's preamble is not one a member of this service wrote."""


def _mac(secret: bytes, body: bytes) -> bytes:
    return hmac.new(secret, b"tenure-relay " + body, hashlib.sha256).digest()[:MAC_BYTES]


def preamble(secret: bytes, peer: str) -> bytes:
    """What a relay writes first: :data:`MARK`, the layout, ``peer`` and their HMAC."""
    raw = peer.encode()[:MAX_PEER]
    body = bytes((VERSION, len(raw))) + raw
    return MARK + body + _mac(secret, body)


async def read_preamble(reader: asyncio.StreamReader, secret: bytes) -> str:
    """Read a preamble (its :data:`MARK` included) and check it: the client's address.

    Raises:
        RelayError: not a preamble of this layout, or not signed with ``secret``.
        asyncio.IncompleteReadError: the connection ended within it.
    """
    head = await reader.readexactly(3)
    if head[:1] != MARK or head[1] != VERSION:
        raise RelayError(f"not a relay preamble of version {VERSION}")
    raw = await reader.readexactly(head[2])
    mac = await reader.readexactly(MAC_BYTES)
    if not hmac.compare_digest(mac, _mac(secret, head[1:] + raw)):
        raise RelayError("a relay preamble not signed with this service's secret")
    return raw.decode(errors="replace")


def route(role: RoutedRole, nodes: Sequence[str]) -> str | None:
    """Where a connection of a face that keeps ``nodes`` goes: :data:`HERE`, the main
    address of the member to relay it to, or None (no leader known now: closed).

    The face is served by the leader of the cell its first node is placed on, or of
    cell ``default`` while it is placed nowhere (that cell's leader places it when it
    takes over). Without a directory (a lone server, a cluster of one cell run by the
    simulation), by this cell's leader.
    """
    places = role.places
    home = places.cell_of(nodes[0]) if places is not None and nodes else None
    if places is not None and home is None:
        home = DEFAULT_CELL
    if places is None or home == places.cell:
        return HERE if role.leading else role.leader()
    assert home is not None  # (placed, or cell default)
    return places.leader_of(home)


@dataclass(eq=False)
class Relayed:
    """A relayed client connection, as the server's outboxes see one (a
    :class:`~tenure.server._net.writers.Connection`): closed with the others at a
    stop or a step down, never written to by them."""

    writer: asyncio.StreamWriter
    peer: str
    outbox: list[bytes] = field(default_factory=list)
    closing: bool = False


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


async def _copy(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, *, half_close: bool
) -> None:
    while data := await source.read(READ_SIZE):
        sink.write(data)
        await sink.drain()  # (a side that does not read slows the other: no buffer grows)
    if half_close and sink.can_write_eof():
        sink.write_eof()


async def relay(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    target: str,
    first: bytes,
    timeout: float,
) -> None:
    """Connect to ``target`` (``HOST:PORT``) within ``timeout`` seconds, write ``first``
    (the :func:`preamble`), then copy both ways until ``target``'s side ends. The
    client's end of its stream reaches ``target`` as an end of stream (its answers
    still come back); ``target``'s end, or a broken side, ends the relay.

    Raises:
        OSError: ``target`` cannot be reached, or a side broke.
        TimeoutError: ``target`` did not accept within ``timeout``.
    """
    host, port = _split(target)
    async with asyncio.timeout(timeout):
        up_reader, up_writer = await asyncio.open_connection(host, port, limit=READ_SIZE)
    to_target = asyncio.ensure_future(_copy(reader, up_writer, half_close=True))
    to_client = asyncio.ensure_future(_copy(up_reader, writer, half_close=False))
    try:
        up_writer.write(first)
        done, _ = await asyncio.wait({to_target, to_client}, return_when=asyncio.FIRST_COMPLETED)
        if to_client not in done and to_target.exception() is None:
            await to_client  # (the client is done sending: what the target owes it still comes)
        for task in done:
            task.result()  # (a broken side: raised)
    finally:
        for task in (to_target, to_client):
            task.cancel()
        await asyncio.gather(to_target, to_client, return_exceptions=True)
        up_writer.close()
