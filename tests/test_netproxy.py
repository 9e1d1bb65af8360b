"""The fault-injection proxy of tests/netproxy.py, against a small echo server."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator, Callable

import pytest

from tests.netproxy import NetProxy
from tests.server.wire import free_port

#: Bound of every wait that should succeed, in seconds.
WAIT = 10.0
#: How long a read that must get nothing waits (it can only fail on a broken proxy).
QUIET = 0.2

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Echo:
    """An echo server on 127.0.0.1; ``writers`` are its ends of the connections."""

    def __init__(self) -> None:
        self.port = 0
        self.accepted = 0
        self.open = 0  # connections not over yet
        self.received = bytearray()
        self.writers: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Echo:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._accepted, loop=loop),
            "127.0.0.1",
            0,
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.open += 1
        self.writers.append(writer)
        task = asyncio.get_running_loop().create_task(self._echo(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _echo(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                self.received += data
                writer.write(data)
                await writer.drain()
        except OSError:
            pass  # reset by the proxy
        finally:
            self.open -= 1
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(WAIT):
                    await writer.wait_closed()

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self.writers:
            writer.transport.abort()
        async with asyncio.timeout(WAIT):
            while self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()


class Sockets:
    """The client connections a test opened; all closed at its end."""

    def __init__(self) -> None:
        self.writers: list[asyncio.StreamWriter] = []

    async def open(self, port: int) -> Streams:
        async with asyncio.timeout(WAIT):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        self.writers.append(writer)
        return reader, writer

    async def close(self) -> None:
        for writer in self.writers:
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(WAIT):
                    await writer.wait_closed()


@pytest.fixture
async def sockets() -> AsyncIterator[Sockets]:
    opened = Sockets()
    try:
        yield opened
    finally:
        await opened.close()


async def round_trip(streams: Streams, data: bytes) -> None:
    reader, writer = streams
    writer.write(data)
    async with asyncio.timeout(WAIT):
        assert await reader.readexactly(len(data)) == data


async def nothing_arrives(reader: asyncio.StreamReader) -> None:
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(QUIET):
            await reader.read(1)


async def until_closed(reader: asyncio.StreamReader) -> tuple[bytes, str]:
    """Everything read until the stream ends, and how: ``"eof"`` or ``"reset"``."""
    data = bytearray()
    async with asyncio.timeout(WAIT):
        try:
            while chunk := await reader.read(65536):
                data += chunk
        except ConnectionResetError:
            return bytes(data), "reset"
    return bytes(data), "eof"


async def eventually(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(WAIT):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.005)


async def test_forwards_both_ways_and_half_closes(sockets: Sockets) -> None:
    async with Echo() as echo, NetProxy("127.0.0.1", echo.port) as proxy:
        assert proxy.host == "127.0.0.1"
        assert proxy.port not in (0, echo.port)
        client = await sockets.open(proxy.port)
        await round_trip(client, b"hello")
        big = bytes(range(256)) * 4096  # 1 MiB: many chunks, and backpressure
        await round_trip(client, big)
        assert (proxy.connections, proxy.total_connections, echo.accepted) == (1, 1, 1)
        client[1].write_eof()  # the echo server sees it, closes, and so do we
        assert await until_closed(client[0]) == (b"", "eof")
        await eventually(lambda: proxy.connections == 0)
        assert proxy.total_connections == 1
        assert echo.received == b"hello" + big


async def test_drop_resets_both_sides_and_keeps_listening(sockets: Sockets) -> None:
    async with Echo() as echo, NetProxy("127.0.0.1", echo.port) as proxy:
        first, second = await sockets.open(proxy.port), await sockets.open(proxy.port)
        await round_trip(first, b"one")
        await round_trip(second, b"two")
        proxy.drop()
        assert proxy.connections == 0
        for reader, _ in (first, second):
            data, how = await until_closed(reader)
            assert data == b""
            assert how in ("eof", "reset")
        await eventually(lambda: echo.open == 0)  # the server's ends were reset too
        again = await sockets.open(proxy.port)
        await round_trip(again, b"three")
        assert (proxy.connections, proxy.total_connections, echo.accepted) == (1, 3, 3)


async def test_stall_holds_bytes_both_ways_and_resume_delivers_them_in_order(
    sockets: Sockets,
) -> None:
    async with Echo() as echo, NetProxy("127.0.0.1", echo.port) as proxy:
        reader, writer = client = await sockets.open(proxy.port)
        await round_trip(client, b"a")
        proxy.stall()
        writer.write(b"1")
        writer.write(b"2")
        echo.writers[0].write(b"push")  # the other way: server to client
        await nothing_arrives(reader)
        assert echo.received == b"a"  # the client's bytes are held too
        assert proxy.connections == 1
        proxy.resume()
        async with asyncio.timeout(WAIT):
            # The server's push was held first, so it comes before the echo of "12".
            assert await reader.readexactly(6) == b"push12"
        assert echo.received == b"a12"
        await round_trip(client, b"after")


async def test_a_connection_accepted_while_stalled_waits_for_resume(sockets: Sockets) -> None:
    async with Echo() as echo, NetProxy("127.0.0.1", echo.port) as proxy:
        proxy.stall()
        reader, writer = await sockets.open(proxy.port)
        writer.write(b"early")
        await nothing_arrives(reader)
        assert (proxy.total_connections, proxy.connections, echo.accepted) == (1, 1, 0)
        proxy.resume()
        async with asyncio.timeout(WAIT):
            assert await reader.readexactly(5) == b"early"
        assert echo.accepted == 1


async def test_drop_while_stalled_loses_what_was_held(sockets: Sockets) -> None:
    async with Echo() as echo, NetProxy("127.0.0.1", echo.port) as proxy:
        reader, writer = client = await sockets.open(proxy.port)
        await round_trip(client, b"a")
        proxy.stall()
        writer.write(b"lost")
        proxy.drop()
        assert (await until_closed(reader))[0] == b""
        proxy.resume()
        await round_trip(await sockets.open(proxy.port), b"b")
        assert echo.received == b"ab"


async def test_lose_downstream_throws_away_what_upstream_sends(sockets: Sockets) -> None:
    async with Echo() as echo, NetProxy("127.0.0.1", echo.port) as proxy:
        reader, writer = client = await sockets.open(proxy.port)
        await round_trip(client, b"a")
        proxy.lose_downstream()
        writer.write(b"lost on the way back")
        await eventually(lambda: echo.received == b"alost on the way back")
        await nothing_arrives(reader)  # upstream sent it; nobody will ever read it
        proxy.lose_downstream(False)
        await round_trip(client, b"b")  # only what is sent from now on arrives


async def test_refuse_closes_new_connections_only(sockets: Sockets) -> None:
    async with Echo() as echo, NetProxy("127.0.0.1", echo.port) as proxy:
        before = await sockets.open(proxy.port)
        await round_trip(before, b"x")
        proxy.refuse()
        refused = await sockets.open(proxy.port)  # accepted by the OS, then reset
        data, how = await until_closed(refused[0])
        assert data == b""
        assert how in ("eof", "reset")
        await round_trip(before, b"still here")
        assert (proxy.total_connections, proxy.connections, echo.accepted) == (2, 1, 1)
        proxy.refuse(False)
        await round_trip(await sockets.open(proxy.port), b"welcome back")
        assert echo.accepted == 2


async def test_delay_holds_each_chunk_and_keeps_the_order(sockets: Sockets) -> None:
    async with Echo() as echo, NetProxy("127.0.0.1", echo.port) as proxy:
        reader, writer = client = await sockets.open(proxy.port)
        proxy.delay = 1.0
        writer.write(b"slow")
        await nothing_arrives(reader)  # it waits 1 s in each direction
        proxy.delay = 0.01
        sent = bytearray(b"slow")
        for number in range(40):
            if number == 20:
                proxy.delay = 0.0  # settable at any time; chunks in flight keep their order
            chunk = f"<{number}>".encode()
            writer.write(chunk)
            sent += chunk
            await asyncio.sleep(0.002)  # spread the writes over several chunks
        async with asyncio.timeout(WAIT):
            assert await reader.readexactly(len(sent)) == bytes(sent)
        assert echo.received == sent
        await round_trip(client, b"prompt")


async def test_upstream_port_retargets_new_connections(sockets: Sockets) -> None:
    async with Echo() as old, Echo() as new, NetProxy("127.0.0.1", old.port) as proxy:
        first = await sockets.open(proxy.port)
        await round_trip(first, b"to old")
        proxy.upstream_port = new.port
        second = await sockets.open(proxy.port)
        await round_trip(second, b"to new")
        await round_trip(first, b"old again")  # an open connection stays where it is
        assert (bytes(old.received), bytes(new.received)) == (b"to oldold again", b"to new")
        assert (old.accepted, new.accepted) == (1, 1)


async def test_unreachable_upstream_closes_the_client(sockets: Sockets) -> None:
    async with NetProxy("127.0.0.1", free_port()) as proxy:
        reader, _ = await sockets.open(proxy.port)
        data, how = await until_closed(reader)
        assert data == b""
        assert how in ("eof", "reset")
        await eventually(lambda: proxy.connections == 0)
        assert proxy.total_connections == 1


async def test_aclose_leaves_nothing_open(sockets: Sockets) -> None:
    async with Echo() as echo:
        proxy = NetProxy("127.0.0.1", echo.port)
        await proxy.start()
        busy = await sockets.open(proxy.port)
        await round_trip(busy, b"x")
        proxy.delay = 5.0
        busy[1].write(b"in flight")  # sleeping in the proxy when it closes
        await asyncio.sleep(QUIET)
        proxy.stall()
        stalled = await sockets.open(proxy.port)  # accepted, waiting for the resume
        await eventually(lambda: proxy.total_connections == 2)
        await proxy.aclose()
        await proxy.aclose()  # idempotent
        assert proxy.connections == 0
        for reader, _ in (busy, stalled):
            assert (await until_closed(reader))[0] == b""
        with pytest.raises(ConnectionRefusedError):
            await sockets.open(proxy.port)  # nobody listens any more
        await eventually(lambda: echo.open == 0)
    gc.collect()  # an unclosed transport would warn now, and warnings are errors
    assert asyncio.all_tasks() == {asyncio.current_task()}
