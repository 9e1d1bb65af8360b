"""A client and a server connection wired back to back, with no socket (h11's ConnectionPair)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgpack

from tenure._protocol import (
    NEED_DATA,
    ClientConnection,
    ConnectionClosed,
    ConnectionEnd,
    Hello,
    Message,
    ServerConnection,
    Welcome,
)
from tenure._protocol.frames import encode_frame
from tenure._protocol.messages import decode_message, encode_message
from tenure._protocol.payloads import VALUE
from tenure._protocol.wire import ArrayOf, Field, Optional, Record, Union

Event = Message | ConnectionClosed


def drain(conn: ConnectionEnd[Any]) -> list[Event]:
    """Every event ``conn`` can produce from what it has received, until NEED_DATA.

    Bounded, so a connection that never says NEED_DATA fails the test instead of
    hanging it (ConnectionClosed is returned once here, though it repeats).
    """
    events: list[Event] = []
    for _ in range(100_000):
        event = conn.next_event()
        if event is NEED_DATA:
            return events
        assert not isinstance(event, type(NEED_DATA))
        events.append(event)
        if isinstance(event, ConnectionClosed):
            return events
    raise AssertionError("next_event never returned NEED_DATA")


def pack(value: object) -> bytes:
    """``value`` packed as msgpack as it is, valid or not (bytes as bin, str as str)."""
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def unpack(body: bytes) -> Any:
    """The plain msgpack value in ``body`` (arrays as lists)."""
    return msgpack.unpackb(body, raw=False)


def wire_of(message: Message) -> Any:
    """What ``message`` looks like on the wire, as plain msgpack values: ``[13, 7, None]``."""
    return unpack(encode_message(message))


def message_of(wire: object) -> Message:
    """The message a peer reads from the plain msgpack value ``wire`` (ProtocolError if none)."""
    return decode_message(pack(wire))


def raw_frame(message: Message) -> bytes:
    """The frame of ``message``, made without any connection's state machine."""
    return encode_frame(encode_message(message))


def frame_of(body: object) -> bytes:
    """A frame whose body is ``body`` packed as it is, valid or not."""
    return encode_frame(pack(body))


def body_of(frame: bytes) -> object:
    """The decoded body of one whole frame."""
    return unpack(frame[4:])


class ConnectionPair:
    """A client and a server connection; ``send`` carries bytes from one to the other."""

    def __init__(self, *, client_max: int | None = None, server_max: int | None = None) -> None:
        self.client = (
            ClientConnection()
            if client_max is None
            else ClientConnection(max_frame_size=client_max)
        )
        self.server = (
            ServerConnection()
            if server_max is None
            else ServerConnection(max_frame_size=server_max)
        )

    def peer(self, conn: ConnectionEnd[Any]) -> ConnectionEnd[Any]:
        """The other end of ``conn``."""
        return self.server if conn is self.client else self.client

    def send(
        self,
        sender: ConnectionEnd[Any],
        messages: Message | Iterable[Message],
        *,
        split: Callable[[bytes], Iterable[bytes]] | None = None,
    ) -> list[Event]:
        """Send ``messages`` from ``sender``; the events the peer produces from them.

        ``split`` cuts the bytes into the pieces the peer receives (default: one).
        """
        batch = [messages] if not isinstance(messages, Iterable) else list(messages)
        data = b"".join(sender.send(message) for message in batch)
        receiver = self.peer(sender)
        events: list[Event] = []
        for piece in split(data) if split is not None else [data]:
            receiver.receive_data(piece)
            events += drain(receiver)
        return events

    def handshake(self, hello: Hello | None = None, welcome: Welcome | None = None) -> None:
        """Hello and Welcome, checked to arrive as sent."""
        hello = hello if hello is not None else Hello(client_name="tests")
        welcome = welcome if welcome is not None else Welcome(server_name="tests")
        assert self.send(self.client, hello) == [hello]
        assert self.send(self.server, welcome) == [welcome]


def one_byte_at_a_time(data: bytes) -> list[bytes]:
    """Cut ``data`` into single bytes."""
    return [data[i : i + 1] for i in range(len(data))]


Path = tuple[Any, ...]


def field_sites(field: Field, wire: Any, path: Path = ()) -> Iterator[tuple[str, Path]]:
    """(field name, path in the wire value) of every field inside ``wire``, nested ones too."""
    if field is VALUE:
        field = VALUE.records
        if not isinstance(wire, list):
            return
    if isinstance(field, Optional):
        if wire is not None:
            yield from field_sites(field.inner, wire, path)
    elif isinstance(field, ArrayOf):
        for index, item in enumerate(wire):
            yield from field_sites(field.inner, item, (*path, index))
    elif isinstance(field, Union | Record):
        record, start = (field.by_tag[wire[0]], 1) if isinstance(field, Union) else (field, 0)
        # (A record that gained fields may have been sent without them: see wire.Record.)
        for offset, (name, inner) in enumerate(record.fields[: len(wire) - start], start):
            yield name, (*path, offset)
            yield from field_sites(inner, wire[offset], (*path, offset))
    elif isinstance(wire, dict):
        for key in wire:
            yield key, (*path, key)


def replace_at(wire: Any, path: Path, value: Any) -> Any:
    """A deep copy of ``wire`` with the item at ``path`` replaced by ``value``."""
    out = copy.deepcopy(wire)
    target = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return out
