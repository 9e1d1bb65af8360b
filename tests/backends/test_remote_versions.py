"""A client of this version against a server of protocol version 1 (client-first upgrades).

(Older servers of version 2, and standbys refusing an older Hello, are
tests/backends/test_remote_cluster.py's.)

The "old server" here is a small asyncio server that speaks version 1 exactly as a
server of that version did: it refuses a Hello of another version with UNSUPPORTED,
and reads CreateSession in its four-field layout only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

import tenure
from tenure import Capability
from tenure._core import CloseSession, CreateSession, SessionInfo
from tenure._protocol.frames import FrameReader, encode_frame
from tenure._protocol.messages import (
    Failure,
    Ping,
    Pong,
    Refused,
    Reply,
    Request,
    Welcome,
    encode_message,
)
from tenure.errors import ErrorCode, UnsupportedError
from tests.protocol.helpers import message_of, unpack

pytestmark = pytest.mark.timeout(30)


class OldServer:
    """Speaks protocol version 1 only; keeps the raw requests it read."""

    def __init__(self) -> None:
        self.hellos: list[int] = []
        self.raw_commands: list[list[object]] = []
        self.server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameReader()
        try:
            for _ in range(1000):  # bounded: a test's connection sends a few frames
                data = await asyncio.wait_for(reader.read(65536), 10)
                if not data:
                    return
                frames.feed(data)
                while (body := frames.next_body()) is not None:
                    raw = unpack(body)
                    assert isinstance(raw, list)
                    if raw[0] == 1:  # Hello: [1, version, ...]
                        self.hellos.append(raw[1])
                        if raw[1] != 1:
                            why = (
                                f"protocol version {raw[1]} is not supported; this server speaks 1"
                            )
                            self.send(writer, Refused(ErrorCode.UNSUPPORTED, why))
                            writer.close()
                            return
                        self.send(writer, Welcome(version=1, instance_id=b"i" * 16))
                        continue
                    self.answer(writer, raw)
        finally:
            writer.close()

    def answer(self, writer: asyncio.StreamWriter, raw: list[object]) -> None:
        message = message_of(raw)
        if isinstance(message, Ping):
            self.send(writer, Pong(message.nonce))
            return
        assert isinstance(message, Request)
        command = raw[2]
        assert isinstance(command, list)
        self.raw_commands.append(command)
        if isinstance(message.command, CreateSession):
            self.send(writer, Reply(message.request_id, SessionInfo(7, 30.0, 1)))
        elif isinstance(message.command, CloseSession):
            self.send(writer, Reply(message.request_id, None))
        else:
            self.send(writer, Failure(message.request_id, ErrorCode.INTERNAL, "not in this test"))

    @staticmethod
    def send(writer: asyncio.StreamWriter, message: object) -> None:
        writer.write(encode_frame(encode_message(message)))  # type: ignore[arg-type]


@pytest_asyncio.fixture
async def old_server() -> AsyncIterator[OldServer]:
    old = OldServer()
    old.server = await asyncio.start_server(old.serve, "127.0.0.1", 0)
    try:
        yield old
    finally:
        old.server.close()
        await old.server.wait_closed()


async def test_a_client_speaks_version_1_to_an_old_server(old_server: OldServer) -> None:
    url = f"tenure://127.0.0.1:{old_server.port}"
    async with tenure.connect(url, client_name="new-client") as client:
        session = await client.session("n", description="worker")
        assert session.id == 7
        # Refused the newer ones, then the server's.
        assert old_server.hellos == [13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]
        [create] = [c for c in old_server.raw_commands if c[0] == 10]
        assert len(create) == 5  # [10, node, key, timeout, description]: no identity
        assert create[4] == "worker"
        with pytest.raises(UnsupportedError, match="protocol version 1"):
            await client.list_nodes()
        with pytest.raises(UnsupportedError, match="KillSession"):
            await client.kill_session("n", 7)
        with pytest.raises(UnsupportedError, match="the capability claims"):
            await session.claim("nightly", at_least=1.0, at_most=2.0)
        with pytest.raises(UnsupportedError, match=r"lacks Capability\.CLAIMS"):
            await client.release_claim("n", "nightly", "a" * 32)
        # What versions 5 and 6 added is not declared: require= refuses such a server.
        for added in (Capability.ALL_OR_NONE, Capability.CLAIMS, Capability.PREFIX_WATCH):
            assert added not in client.capabilities
        assert Capability.DEADLOCK_DETECTION not in client.capabilities
        assert {c[0] for c in old_server.raw_commands} <= {10, 13}  # nothing it cannot read
        await session.close()
