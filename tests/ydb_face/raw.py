"""Raw YDB calls for the protocol tests: unary node calls, numbered session requests,
and the end of a stream (what it said last, and its gRPC status).

The conftest's :class:`~tests.ydb_face.conftest.RawStream` sends and reads exact
messages; :class:`Session` adds the ``req_id`` bookkeeping and the exact answer each
request must get next; :class:`SdkStyleStream` writes and reads a stream as YDB's
SDKs do, for streams the server may end before it reads them. Every wait is bounded
by ``WAIT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import grpc
import pytest

from tenure.compat.ydb import _protos as pb
from tests.server.wire import WAIT
from tests.ydb_face.conftest import DATABASE, RawStream, YdbServer, start_server, unique

_COORDINATION = "/Ydb.Coordination.V1.CoordinationService"

#: YDB's status codes, by name (``Status.SUCCESS``...).
Status: Any = pb.Status

#: Flags of servers whose streams a test may leave unread for a while: the server
#: pings a stream every third of its session's timeout, at most every minute, and
#: ends one that did not answer. (The pings are tested on servers of their own.)
QUIET = ("--ydb-ping-interval", "60")
#: The session timeout of :func:`open_session` (pings every 20 s on QUIET servers).
SESSION_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module", name="server")
def quiet_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[YdbServer]:
    """The module's server, with QUIET pings (import it into a module to use it there)."""
    running = start_server(tmp_path_factory.mktemp("ydb-quiet") / "data", *QUIET)
    try:
        yield running
    finally:
        running.process.kill()


async def unary(
    target: YdbServer | int,
    method: str,
    request: Any,
    reply: Any,
    metadata: Any = (),
    credentials: grpc.ChannelCredentials | None = None,
) -> Any:
    """Call ``method`` (``/Service/Method``) once on its own channel; the reply message."""
    port = target if isinstance(target, int) else target.ydb_port
    address = f"127.0.0.1:{port}"
    channel = (
        grpc.aio.insecure_channel(address)
        if credentials is None
        else grpc.aio.secure_channel(address, credentials)
    )
    async with channel:
        call = channel.unary_unary(
            method,
            request_serializer=type(request).SerializeToString,
            response_deserializer=reply.FromString,
        )
        return await call(request, metadata=metadata, timeout=WAIT)


async def node_call(target: YdbServer | int, name: str, path: str, metadata: Any = ()) -> Any:
    """``CreateNode``/``DropNode``/``DescribeNode`` on ``path``: the reply's operation."""
    request = getattr(pb.coordination, f"{name}NodeRequest")(path=path)
    reply = getattr(pb.coordination, f"{name}NodeResponse")
    return (await unary(target, f"{_COORDINATION}/{name}Node", request, reply, metadata)).operation


async def new_node(target: YdbServer | int, metadata: Any = ()) -> str:
    """A new coordination node's path (created with CreateNode, which must succeed)."""
    path = f"{DATABASE}/{unique()}"
    operation = await node_call(target, "Create", path, metadata)
    assert operation.status == Status.SUCCESS, operation
    return path


def kind(response: Any) -> str:
    """Which ``SessionResponse`` a message is (``"failure"``, ``"pong"``...)."""
    return str(response.WhichOneof("response"))


@dataclass
class Ending:
    """How a stream ended: the messages after the last one read, and its gRPC status."""

    messages: list[Any]
    code: grpc.StatusCode
    details: str

    @property
    def failure(self) -> Any:
        """The ``Failure`` the stream ended with (AssertionError if it sent none)."""
        kinds = [kind(m) for m in self.messages]
        assert kinds[-1:] == ["failure"], kinds
        return self.messages[-1].failure


async def ending(stream: RawStream, *, answer_pings: bool = True) -> Ending:
    """Read ``stream`` to its end (answering the server's pings unless told not to)."""
    messages: list[Any] = []
    async with asyncio.timeout(WAIT):
        while True:
            try:
                response = await stream.call.read()
            except grpc.aio.AioRpcError:  # (read raises a status other than OK)
                break
            if response is grpc.aio.EOF:
                break
            if kind(response) == "ping" and answer_pings:
                await stream.send(pong={"opaque": response.ping.opaque})
                continue
            messages.append(response)
        code = await stream.call.code()
        details = await stream.call.details()
    return Ending(messages, code, details or "")


async def call_status(call: Any) -> tuple[list[Any], grpc.StatusCode, str]:
    """Read a stream call to its end: what it sent, its gRPC status and the status's text."""
    messages: list[Any] = []
    async with asyncio.timeout(WAIT):
        while True:
            try:
                message = await call.read()
            except grpc.aio.AioRpcError:
                break
            if message is grpc.aio.EOF:
                break
            messages.append(message)
        return messages, await call.code(), await call.details() or ""


async def failure_of(stream: RawStream) -> Any:
    """The ``Failure`` that ends ``stream`` (which then ends with gRPC status OK)."""
    end = await ending(stream)
    assert end.code == grpc.StatusCode.OK, end
    assert len(end.messages) == 1, end.messages
    return end.failure


#: The status grpc.aio reports, in place of the server's, for a call one of whose writes
#: failed because the server had ended the call (grpc/grpc#36066).
CROSSED_WRITE: Final = (grpc.StatusCode.INTERNAL, "Internal error from Core")


class SdkStyleStream:
    """A raw stream written and read as YDB's SDKs do theirs, for a stream the server
    may end before it reads it (a refusal: one ``Failure``, then the end, status OK).

    The client sends its SessionStart without waiting for anything, so that write may
    cross the server's end of the call. grpc.aio then fails the write with an INTERNAL
    of its own ("Failed execute_batch", grpc/grpc#36066), sets it as the call's
    status, and ``call.read()`` of a call with a status reads nothing more, though
    the server's Failure is there. YDB's SDKs write through a request iterator, which
    drops a write that fails (the reads tell how the call ended), and read by
    iterating over the call, which gives every message the server sent: so does this.
    """

    def __init__(self, stream: RawStream) -> None:
        self.call = stream.call
        self._stream = stream
        self._answers: AsyncIterator[Any] = aiter(stream.call)
        self.crossed = False  # a write found the call ended (the reads say how)

    async def send(self, **request: Any) -> None:
        """Send ``SessionRequest(**request)``, unless the call has ended."""
        try:
            await self._stream.send(**request)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            self.crossed = True

    async def next(self) -> Any:
        """The next message but pings (this stream lives for a round trip or two)."""
        async with asyncio.timeout(WAIT):
            async for response in self._answers:
                if kind(response) != "ping":
                    return response
        raise AssertionError("the server ended the stream")

    async def end(self) -> Ending:
        """Read the stream to its end: the messages left but pings, and its status."""
        messages: list[Any] = []
        async with asyncio.timeout(WAIT):
            with contextlib.suppress(grpc.aio.AioRpcError):  # (its status is read below)
                async for response in self._answers:
                    if kind(response) != "ping":
                        messages.append(response)
            code, details = await self.call.code(), await self.call.details()
        return Ending(messages, code, details or "")

    def status_hidden(self, end: Ending) -> bool:
        """Whether ``end`` (from :meth:`end`) has grpc.aio's status for a write of this
        stream that crossed the end of the call, in place of the server's."""
        return self.crossed and (end.code, end.details) == CROSSED_WRITE


@dataclass
class Session:
    """A started raw stream with numbered requests (``req_id`` from 1 on)."""

    stream: RawStream
    session_id: int
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    async def send(self, request: str, **fields: Any) -> int:
        """Send a semaphore request (``request``: its ``SessionRequest`` field); its req_id."""
        req_id = next(self._ids)
        await self.stream.send(**{request: {"req_id": req_id, **fields}})
        return req_id

    async def next(self, expected: str, req_id: int) -> Any:
        """The next message, which must be ``expected`` for ``req_id``; its body."""
        response = await self.stream.next()
        assert kind(response) == expected, response
        body = getattr(response, expected)
        assert body.req_id == req_id, response
        return body

    async def result(self, request: str, **fields: Any) -> Any:
        """Send a request, then its ``*_result`` as the next message."""
        req_id = await self.send(request, **fields)
        return await self.next(f"{request}_result", req_id)

    async def ok(self, request: str, **fields: Any) -> Any:
        """Like :meth:`result`, and the result must be SUCCESS."""
        body = await self.result(request, **fields)
        assert body.status == Status.SUCCESS, body
        return body


async def open_session(
    raw: Any, path: str, target: YdbServer | None = None, metadata: Any = (), **start: Any
) -> Session:
    """A raw stream on ``target`` (default: the module server) with a session started
    (its timeout SESSION_TIMEOUT_MS unless given)."""
    start.setdefault("timeout_millis", SESSION_TIMEOUT_MS)
    stream: RawStream = await raw(target, metadata=metadata)
    started = await stream.start(path, **start)
    assert started.session_id != 0
    return Session(stream, started.session_id)


async def sessions(server: YdbServer, raw: Any, count: int) -> list[Session]:
    """``count`` sessions, each on its own stream, in one new node."""
    path = await new_node(server)
    return [await open_session(raw, path) for _ in range(count)]


async def nothing_pending(session: Session) -> None:
    """Nothing more was sent to ``session`` so far: a ping's pong is the next message."""
    await session.stream.send(ping={"opaque": 77})
    response = await session.stream.next()
    assert kind(response) == "pong", response
    assert response.pong.opaque == 77
