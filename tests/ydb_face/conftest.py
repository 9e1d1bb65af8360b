"""Fixtures of the YDB tests: a real ``tenure serve --ydb-port``, YDB's SDK, raw streams.

``server`` is one server per module (``--fsync off``) for tests that only need fresh
node names; ``serve(*flags)`` starts a server of the test's own (flags, restarts).
``driver``/``aio_driver`` are the YDB SDK's drivers on the module server, ``raw``
opens raw ``CoordinationService/Session`` streams (YDB's generated stubs over
grpc.aio, :class:`RawStream`). Every wait is bounded by ``WAIT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import ydb
from ydb.aio.driver import Driver as AioDriver

from tenure.compat.ydb import _protos as pb
from tests.server.wire import WAIT, ServerProcess, free_port

_serial = itertools.count(1)
_run = uuid.uuid4().hex[:6]

#: The database the servers answer for (the default of --ydb-database).
DATABASE = "/local"


def unique(prefix: str = "n") -> str:
    """A node (or semaphore) name no other test of the run uses."""
    return f"{prefix}-{_run}-{next(_serial)}"


@dataclass
class YdbServer:
    """A running server: its process, and its native and YDB ports."""

    process: ServerProcess
    ydb_port: int

    @property
    def endpoint(self) -> str:
        """The YDB endpoint to give ``ydb.Driver``."""
        return f"grpc://127.0.0.1:{self.ydb_port}"

    @property
    def url(self) -> str:
        """The ``tenure://`` URL of the same server."""
        return f"tenure://127.0.0.1:{self.process.port}"


def start_server(data_dir: Path, *flags: str, ydb_port: int | None = None) -> YdbServer:
    """A server listening (``--ydb-port``: free unless given); the caller kills it."""
    port = ydb_port or free_port()
    process = ServerProcess(data_dir, "--fsync", "off", "--ydb-port", str(port), *flags)
    try:
        process.wait_listening()
    except BaseException:
        process.kill()
        raise
    return YdbServer(process, port)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[YdbServer]:
    """One server for the module, started with the module's ``SERVER_FLAGS`` (if any)."""
    flags: tuple[str, ...] = getattr(request.module, "SERVER_FLAGS", ())
    running = start_server(tmp_path_factory.mktemp("ydb") / "data", *flags)
    try:
        yield running
    finally:
        running.process.kill()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., YdbServer]]:
    """Start servers of the test's own (``serve(*flags, data_dir=..., ydb_port=...)``)."""
    started: list[YdbServer] = []

    def start(*flags: str, data_dir: Path | None = None, ydb_port: int | None = None) -> YdbServer:
        running = start_server(data_dir or tmp_path / "data", *flags, ydb_port=ydb_port)
        started.append(running)
        return running

    try:
        yield start
    finally:
        for running in started:
            running.process.kill()


@pytest.fixture
def driver(server: YdbServer) -> Iterator[ydb.Driver]:
    """The YDB SDK's sync driver on the module server."""
    made = ydb.Driver(endpoint=server.endpoint, database=DATABASE)
    try:
        made.wait(timeout=WAIT, fail_fast=True)
        yield made
    finally:
        made.stop()


@pytest.fixture
async def aio_driver(server: YdbServer) -> AsyncIterator[AioDriver]:
    """The YDB SDK's asyncio driver on the module server."""
    made = AioDriver(endpoint=server.endpoint, database=DATABASE)
    try:
        await made.wait(timeout=WAIT, fail_fast=True)
        yield made
    finally:
        await made.stop()


class RawStream:
    """One raw ``Session`` stream: exact ``SessionRequest`` out, ``SessionResponse`` back."""

    def __init__(self, call: Any) -> None:
        self.call = call

    async def send(self, **request: Any) -> None:
        """Send ``SessionRequest(**request)``."""
        await self.call.write(pb.coordination.SessionRequest(**request))

    async def next(self, *, skip_pings: bool = True) -> Any:
        """The next response (server pings are answered and skipped unless asked)."""
        async with asyncio.timeout(WAIT):
            while True:
                response = await self.call.read()
                assert response is not grpc.aio.EOF, "the server ended the stream"
                if skip_pings and response.WhichOneof("response") == "ping":
                    await self.send(pong={"opaque": response.ping.opaque})
                    continue
                return response

    async def start(self, path: str, **start: Any) -> Any:
        """Send SessionStart (``timeout_millis`` 5000 unless given); its SessionStarted."""
        start.setdefault("timeout_millis", 5000)
        await self.send(session_start={"path": path, **start})
        response = await self.next()
        assert response.WhichOneof("response") == "session_started", response
        return response.session_started


@pytest.fixture
async def raw(server: YdbServer) -> AsyncIterator[Callable[..., Any]]:
    """Open raw Session streams on the module server (``await raw(metadata=...)``)."""
    channels: list[grpc.aio.Channel] = []

    async def open_stream(target: YdbServer | None = None, metadata: Any = ()) -> RawStream:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{(target or server).ydb_port}")
        channels.append(channel)
        call = channel.stream_stream(
            "/Ydb.Coordination.V1.CoordinationService/Session",
            request_serializer=pb.coordination.SessionRequest.SerializeToString,
            response_deserializer=pb.coordination.SessionResponse.FromString,
        )(metadata=metadata)
        return RawStream(call)

    try:
        yield open_stream
    finally:
        for channel in channels:
            with contextlib.suppress(Exception):
                await channel.close()
