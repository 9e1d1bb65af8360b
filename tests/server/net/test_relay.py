"""The relay of a face's connections (tenure.server._net.relay), in this process: the
preamble (signed, checked, its address carried), where a connection goes
(:func:`route`, over a role and a directory as given), and the copy both ways over
real loopback sockets (a client's end of stream passed on, its answers still
coming back; the far side's end ending the relay)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from tenure.server._net.relay import (
    HERE,
    MARK,
    RelayError,
    preamble,
    read_preamble,
    relay,
    route,
)

SECRET = b"s" * 32


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


async def test_a_preamble_carries_the_clients_address_signed() -> None:
    first = preamble(SECRET, "('10.0.0.7', 40112)")
    assert first[:1] == MARK
    reader = _reader(first + b"l\njob\n10 60\n")
    assert await read_preamble(reader, SECRET) == "('10.0.0.7', 40112)"
    assert await reader.read() == b"l\njob\n10 60\n"  # (the client's bytes, untouched)


@pytest.mark.parametrize(
    ("forged", "said"),
    [
        (preamble(b"another service's secret", "x"), "not signed"),
        (MARK + b"\x02\x01x" + b"\x00" * 16, "version"),
        (b"l\njob\n10 60\n", "not a relay preamble"),
    ],
)
async def test_a_preamble_not_of_this_service_is_refused(forged: bytes, said: str) -> None:
    with pytest.raises(RelayError, match=said):
        await read_preamble(_reader(forged), SECRET)


async def test_a_preamble_cut_short_is_an_incomplete_read() -> None:
    with pytest.raises(asyncio.IncompleteReadError):
        await read_preamble(_reader(preamble(SECRET, "peer")[:-3]), SECRET)


def test_a_long_address_is_cut_to_what_a_preamble_holds() -> None:
    first = preamble(SECRET, "h" * 1000)
    assert len(first) == 1 + 2 + 255 + 16


# -- where a connection goes -----------------------------------------------------------


@dataclass
class Places:
    """A directory as given: each node's cell, each cell's leader."""

    cell: str
    placed: dict[str, str] = field(default_factory=dict)
    leaders: dict[str, str] = field(default_factory=dict)

    def cell_of(self, node: str) -> str | None:
        return self.placed.get(node)

    def leader_of(self, cell: str) -> str | None:
        return self.leaders.get(cell)


@dataclass
class Role:
    """A role as given: leading or not, its cell's leader, its directory."""

    leading: bool
    own_leader: str | None = None
    places: Places | None = None

    def leader(self, face: str = "native") -> str | None:
        return self.own_leader


NODES = ("dflockd", "dflockd-semaphores")


def test_without_a_directory_the_leader_serves_and_a_standby_sends_there() -> None:
    assert route(Role(leading=True), NODES) == HERE  # (a lone server, too)
    assert route(Role(leading=False, own_leader="10.0.0.1:6388"), NODES) == "10.0.0.1:6388"
    assert route(Role(leading=False), NODES) is None  # (no leader known: closed)


def test_the_cell_the_node_is_placed_on_serves_it() -> None:
    placed = {"dflockd": "b"}
    leaders = {"b": "10.0.1.1:6388", "default": "10.0.0.1:6388"}
    on_b = Places("b", placed, leaders)
    on_default = Places("default", placed, leaders)
    assert route(Role(True, places=on_b), NODES) == HERE
    assert route(Role(False, "10.0.1.1:6388", on_b), NODES) == "10.0.1.1:6388"
    # Another cell's members, its leader too, send it to b's leader:
    assert route(Role(True, places=on_default), NODES) == "10.0.1.1:6388"
    assert route(Role(False, "10.0.0.1:6388", on_default), NODES) == "10.0.1.1:6388"


def test_a_node_placed_nowhere_yet_is_cell_defaults() -> None:
    leaders = {"default": "10.0.0.1:6388"}
    assert route(Role(True, places=Places("default", {}, leaders)), NODES) == HERE
    assert route(Role(True, places=Places("b", {}, leaders)), NODES) == "10.0.0.1:6388"
    # No leader of the cell known (its records not read yet): closed.
    assert route(Role(True, places=Places("b", {}, {})), NODES) is None


# -- the copy both ways ----------------------------------------------------------------


@dataclass
class Far:
    """A loopback server that reads a preamble, answers each line with ``ok LINE``, and
    says ``bye`` at the client's end of stream."""

    port: int = 0
    peers: list[str] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.peers.append(await read_preamble(reader, SECRET))
        while line := await reader.readline():
            self.lines.append(line)
            writer.write(b"ok " + line)
            await writer.drain()
        writer.write(b"bye\n")
        writer.close()


@pytest.fixture
async def far() -> AsyncIterator[Far]:
    made = Far()
    server = await asyncio.start_server(made.serve, "127.0.0.1", 0, limit=1 << 20)
    made.port = server.sockets[0].getsockname()[1]
    async with server:
        yield made


async def _relayed(
    far: Far,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, asyncio.Task[None]]:
    """A client connected to a loopback relay of ``far``: its streams, and the relay."""
    started: asyncio.Future[asyncio.Task[None]] = asyncio.get_running_loop().create_future()

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = preamble(SECRET, "the client")
        task = asyncio.ensure_future(relay(reader, writer, f"127.0.0.1:{far.port}", first, 5))
        started.set_result(task)
        try:
            await task
        finally:
            writer.close()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    task = await asyncio.wait_for(started, 5)
    server.close()
    return reader, writer, task


async def test_the_relay_copies_both_ways_and_passes_the_clients_end_on(far: Far) -> None:
    reader, writer, task = await _relayed(far)
    writer.write(b"one\n")
    assert await asyncio.wait_for(reader.readline(), 5) == b"ok one\n"
    big = b"x" * 200_000 + b"\n"  # (more than one read, both ways: the drains)
    writer.write(big)
    assert await asyncio.wait_for(reader.readexactly(len(big) + 3), 5) == b"ok " + big
    writer.write_eof()  # the client is done sending: the far side still answers
    assert await asyncio.wait_for(reader.read(), 5) == b"bye\n"
    await asyncio.wait_for(task, 5)
    assert far.peers == ["the client"]
    assert far.lines == [b"one\n", big]
    writer.close()


async def test_the_far_sides_end_ends_the_relay() -> None:
    async def closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_preamble(reader, SECRET)
        writer.close()  # (a leader stepping down drops its face's connections)

    server = await asyncio.start_server(closing, "127.0.0.1", 0)
    async with server:
        reader, writer, task = await _relayed(Far(port=server.sockets[0].getsockname()[1]))
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, nothing said
        await asyncio.wait_for(task, 5)
        writer.close()


async def test_a_target_that_does_not_listen_is_an_os_error() -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    with pytest.raises(OSError, match=r"Connect call failed|refused"):
        await relay(_reader(b""), None, f"127.0.0.1:{port}", b"", 5)  # type: ignore[arg-type]
