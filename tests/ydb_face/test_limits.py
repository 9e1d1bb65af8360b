"""``--max-connections-per-address`` on the YDB port (issue 28).

gRPC has no cap per client address, so with one set the server accepts on
``--ydb-port`` itself and relays each connection it lets in to gRPC on a loopback
port (:mod:`tenure.server._net.front`); gRPC's calls then name the client behind
the relay.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from tenure.server._net.front import Front
from tenure.server._net.listen import Admission
from tests.server.wire import WAIT
from tests.ydb_face.conftest import start_server
from tests.ydb_face.raw import QUIET, Status, new_node, node_call

pytestmark = pytest.mark.timeout(60)

#: Another loopback address (Linux routes all of 127/8 to lo): another peer.
OTHER = "127.0.0.2"


async def tcp(
    port: int, source: str = "127.0.0.1"
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)), WAIT
    )


async def closed_by_server(reader: asyncio.StreamReader, within: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), within) == b""
    except ConnectionError:
        return True
    except TimeoutError:
        return False


async def test_the_ydb_port_caps_connections_per_address(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", *QUIET, "--max-connections-per-address", "2")
    try:
        port = server.ydb_port
        held = [await tcp(port) for _ in range(2)]
        await asyncio.sleep(0.2)  # (accepted)
        reader, writer = await tcp(port)
        assert await closed_by_server(reader, WAIT)  # the third: closed at once
        writer.close()
        server.process.wait_log("too many connections from one address; refusing")
        for reader, _ in held:
            assert not await closed_by_server(reader, 0.2)
        other_reader, other = await tcp(port, OTHER)  # another address is let in
        assert not await closed_by_server(other_reader, 0.3)
        other.close()
        for _, writer in held:
            writer.close()
        # The connections let in are gRPC's as ever (relayed, TLS or not, untouched).
        deadline = asyncio.get_running_loop().time() + WAIT
        while True:  # (until the server has seen the two close)
            with contextlib.suppress(Exception):
                path = await new_node(server)
                break
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        assert (await node_call(server, "Describe", path)).status == Status.SUCCESS
    finally:
        server.process.kill()


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A stand-in for gRPC: echoes, first the peer it sees, as gRPC names it."""
    host, port = writer.get_extra_info("peername")[:2]
    writer.write(f"ipv4:{host}:{port}\n".encode())
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


async def test_the_relay_names_the_client_behind_each_connection() -> None:
    backend = await asyncio.start_server(echo, "127.0.0.1", 0)
    refused: list[str] = []

    def refuse(sock: object, host: str) -> None:
        refused.append(host)
        sock.close()  # type: ignore[attr-defined]

    admission = Admission(max_handshaking=1024, per_address=1)
    front = Front(admission, backend.sockets[0].getsockname()[1], refuse)
    port = front.start("127.0.0.1", 0)
    try:
        reader, writer = await tcp(port, OTHER)
        seen = (await asyncio.wait_for(reader.readline(), WAIT)).decode().strip()
        client_port = writer.get_extra_info("sockname")[1]
        assert front.peer(seen) == f"ipv4:{OTHER}:{client_port}"  # not the relay's
        assert front.peer("ipv4:127.0.0.1:1") == "ipv4:127.0.0.1:1"  # none relayed
        writer.write(b"x" * 200_000)  # the bytes, both ways
        got = await asyncio.wait_for(reader.readexactly(200_000), WAIT)
        assert got == b"x" * 200_000
        assert admission.per_address[OTHER] == 1
        second, second_writer = await tcp(port, OTHER)
        assert await closed_by_server(second, WAIT)
        assert refused == [OTHER]
        second_writer.close()
        writer.close()
        deadline = asyncio.get_running_loop().time() + WAIT
        while admission.per_address[OTHER]:  # released once both sides are closed
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.02)
        assert front.peer(seen) == seen
    finally:
        front.close()
        backend.close()
