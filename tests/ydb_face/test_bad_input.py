"""Bad input on the YDB port: each call ends with a gRPC error status (or a Failure),
and the server goes on serving the next client.

Bytes are sent raw (a channel whose serializers pass bytes through), so the server
sees exactly what a broken or foreign client would send.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from tenure.compat.ydb import _protos as pb
from tests.server.wire import WAIT
from tests.ydb_face.conftest import YdbServer
from tests.ydb_face.raw import (
    CROSSED_WRITE,
    QUIET,
    SdkStyleStream,
    Status,
    call_status,
    failure_of,
    kind,
    new_node,
    open_session,
    quiet_server,  # noqa: F401  (the module's server)
    unary,
)

pytestmark = pytest.mark.timeout(60)

Raw = Callable[..., Any]

SESSION = "/Ydb.Coordination.V1.CoordinationService/Session"


async def still_serves(server: YdbServer, raw: Raw) -> None:
    """Another client starts a session and acquires a semaphore."""
    session = await open_session(raw, await new_node(server), server)
    acquired = await session.ok("acquire_semaphore", name="s", count=1, ephemeral=True)
    assert acquired.acquired


async def raw_bytes_stream(
    server: YdbServer, *messages: bytes
) -> tuple[list[Any], grpc.StatusCode, str]:
    """Send ``messages`` as they are on a Session stream; its answers, status and details."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.ydb_port}") as channel:
        call = channel.stream_stream(SESSION)()  # no serializers: bytes in, bytes out
        for message in messages:
            await call.write(message)
        answers, code, details = await call_status(call)
        return [pb.coordination.SessionResponse.FromString(a) for a in answers], code, details


@pytest.mark.parametrize(
    "message",
    [
        b"\xff\xff\xff\xff not protobuf",
        # Its path would be a ping (field 1) whose bytes are no PingPong.
        pb.coordination.CreateNodeRequest(path="/local/x").SerializeToString(),
    ],
)
async def test_a_first_message_that_is_not_a_session_request_is_invalid_argument(
    server: YdbServer, raw: Raw, message: bytes
) -> None:
    answers, code, details = await raw_bytes_stream(server, message)
    assert answers == []
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "a message on the Session stream is not a Ydb.Coordination.SessionRequest"
    await still_serves(server, raw)


async def test_a_later_message_that_is_not_a_session_request_is_bad_request(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    start = pb.coordination.SessionRequest(session_start={"path": path, "timeout_millis": 5000})
    answers, code, _ = await raw_bytes_stream(server, start.SerializeToString(), b"\xff\xff")
    assert [kind(a) for a in answers] == ["session_started", "failure"]
    assert answers[1].failure.status == Status.BAD_REQUEST
    assert code == grpc.StatusCode.OK
    await still_serves(server, raw)


async def test_a_unary_call_with_undecodable_bytes_is_invalid_argument(
    server: YdbServer, raw: Raw
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.ydb_port}") as channel:
        create = channel.unary_unary("/Ydb.Coordination.V1.CoordinationService/CreateNode")
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await create(b"\xff\xff\xff", timeout=WAIT)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == "the request is not a Ydb.Coordination.CreateNodeRequest"
    await still_serves(server, raw)


@pytest.mark.parametrize(
    "method",
    [
        "/Ydb.Coordination.V1.CoordinationService/NoSuchMethod",
        "/Ydb.Table.V1.TableService/CreateSession",
        "/Ydb.RateLimiter.V1.RateLimiterService/NoSuchMethod",
        "/nonsense/",
    ],
)
async def test_an_unknown_method_or_service_is_unimplemented(
    server: YdbServer, raw: Raw, method: str
) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.ydb_port}") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await channel.unary_unary(method)(b"", timeout=WAIT)
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
    await still_serves(server, raw)


async def test_a_stream_without_session_start_ends_deadline_exceeded(
    serve: Callable[..., YdbServer], raw: Raw
) -> None:
    quick = serve("--handshake-timeout", "0.3", *QUIET)
    silent = await raw(quick)
    answers, code, details = await call_status(silent.call)
    assert answers == []
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "SessionStart" in details
    await still_serves(quick, raw)


@pytest.mark.parametrize(
    "first",
    [{"ping": {"opaque": 1}}, {"acquire_semaphore": {"name": "s", "count": 1}}, {}],
)
async def test_a_first_message_other_than_session_start_is_invalid_argument(
    server: YdbServer, raw: Raw, first: dict[str, Any]
) -> None:
    stream = await raw()
    await stream.send(**first)
    answers, code, details = await call_status(stream.call)
    assert answers == []  # no Failure message: a gRPC status
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "First message must be a SessionStart"
    await still_serves(server, raw)


async def test_streams_over_max_connections_get_overloaded(
    serve: Callable[..., YdbServer], raw: Raw
) -> None:
    small = serve("--max-connections", "2", *QUIET)
    path = await new_node(small)
    first = await open_session(raw, path, small)
    second = await open_session(raw, path, small)
    third = await raw(small)
    failure = await failure_of(third)
    assert failure.status == Status.OVERLOADED
    assert "max_connections" in failure.issues[0].message
    await first.stream.send(session_stop={})
    stopped = await first.stream.next()
    assert kind(stopped) == "session_stopped"
    assert (await call_status(first.stream.call))[1] == grpc.StatusCode.OK
    # A stream ended frees its place: the server forgets it before it ends the call.
    await open_session(raw, path, small)
    assert (await second.ok("create_semaphore", name="s", limit=1)).status == Status.SUCCESS


async def test_discovery_of_another_database_is_scheme_error(server: YdbServer, raw: Raw) -> None:
    method = "/Ydb.Discovery.V1.DiscoveryService/ListEndpoints"
    for database, status in (("/elsewhere", Status.SCHEME_ERROR), ("/local", Status.SUCCESS)):
        request = pb.discovery.ListEndpointsRequest(database=database)
        reply = await unary(server, method, request, pb.discovery.ListEndpointsResponse)
        assert reply.operation.status == status, database
    await still_serves(server, raw)


async def test_a_client_that_does_not_read_is_dropped_past_max_unread(
    serve: Callable[..., YdbServer], raw: Raw
) -> None:
    small = serve("--max-unread", str(2**20), *QUIET)
    path = await new_node(small)
    session = await open_session(raw, path, small)
    await session.ok("create_semaphore", name="s", limit=1, data=b"x" * 60_000)
    # 400 answers of 60 kB each: far over the 1 MiB it may leave unread (and over
    # what gRPC's flow control windows hold), and never read while being sent.
    crossed = False  # a send found the call ended (a slow client, a fast server)
    for req_id in range(100, 500):
        if session.stream.call.done():  # dropped already
            break
        try:
            await session.stream.send(describe_semaphore={"req_id": req_id, "name": "s"})
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            crossed = True
            break
    # Nothing is read until the server says it dropped the stream: a client that read
    # once it had sent would take what a slow server (a loaded machine) writes after.
    for _ in range(int(WAIT / 0.01)):
        if "does not read its replies" in small.process.output():
            break
        await asyncio.sleep(0.01)
    assert "does not read its replies" in small.process.output()
    answers, code, details = await call_status(session.stream.call)
    # A send that crossed the server's end of the call makes grpc.aio report its own
    # INTERNAL in place of the server's status (grpc/grpc#36066; seen beside a CPU hog):
    # then the server's log above is what says why it ended the stream.
    if not (crossed and (code, details) == CROSSED_WRITE):
        assert (code, details) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "the client does not read its answers",
        )
    assert len(answers) < 400
    back = await open_session(raw, path, small, session_id=session.session_id)  # detached
    assert (await back.ok("acquire_semaphore", name="s", count=1)).acquired


async def test_streams_that_never_start_count_against_max_connections(
    serve: Callable[..., YdbServer], raw: Raw
) -> None:
    small = serve("--max-connections", "2", "--handshake-timeout", "30", *QUIET)
    path = await new_node(small)
    silent = [await raw(small), await raw(small)]  # open, and never a SessionStart
    for stream in silent:
        await stream.call.wait_for_connection()  # (its headers sent: the server has it)
    # Bounded retries: the server counts them once their calls reach it. A stream it
    # refuses, it ends at once, before reading it: the SessionStart may cross that end.
    for _attempt in range(50):
        third = SdkStyleStream(await raw(small))
        await third.send(session_start={"path": path, "timeout_millis": 5000})
        answer = await third.next()
        if kind(answer) == "failure":
            assert answer.failure.status == Status.OVERLOADED
            assert "max_connections" in answer.failure.issues[0].message
            refused = await third.end()
            assert refused.messages == []
            assert refused.code == grpc.StatusCode.OK or third.status_hidden(refused), refused
            break
        assert kind(answer) == "session_started", answer
        await third.send(session_stop={})
        stopped = await third.end()  # (the server forgets a stream before it ends it)
        assert [kind(m) for m in stopped.messages] == ["session_stopped"], stopped
        assert stopped.code == grpc.StatusCode.OK, stopped
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("streams waiting for their start were never counted")
    for stream in silent:  # a stream that ends before its start frees its place
        await stream.call.done_writing()
        async with asyncio.timeout(WAIT):
            assert await stream.call.code() == grpc.StatusCode.OK
    await still_serves(small, raw)


def _request_of_size(size: int) -> dict[str, Any]:
    """An ``acquire_semaphore`` whose whole ``SessionRequest`` is ``size`` bytes."""
    fields: dict[str, Any] = {"req_id": 1, "name": "big", "count": 1, "ephemeral": True}
    data = size
    while True:  # the varints of the lengths grow with the data: settle in a few rounds
        fields["data"] = b"d" * data
        got = pb.coordination.SessionRequest(acquire_semaphore=fields).ByteSize()
        if got == size:
            return fields
        data += size - got


@pytest.mark.parametrize("size", [2 * 1024 * 1024, 64 * 1024 * 1024 - 1], ids=["2MiB", "64MiB-1"])
async def test_a_request_as_big_as_ydb_sdks_send_gets_its_own_error_on_a_live_stream(
    server: YdbServer, raw: Raw, size: int
) -> None:
    # YDB's SDKs send messages up to 64 MiB: over the node's max_data_size (64 KiB),
    # such a request is refused alone; the session and its stream go on.
    session = await open_session(raw, await new_node(server), server)
    fields = _request_of_size(size)
    await session.stream.send(acquire_semaphore=fields)
    answer = await session.next("acquire_semaphore_result", 1)
    assert answer.status == Status.PRECONDITION_FAILED
    assert "max_data_size" in answer.issues[0].message
    del fields
    acquired = await session.ok("acquire_semaphore", name="small", count=1, ephemeral=True)
    assert acquired.acquired


async def test_a_message_over_ydb_max_message_size_ends_its_stream_only(
    serve: Callable[..., YdbServer], raw: Raw
) -> None:
    small = serve("--ydb-max-message-size", str(2**20), *QUIET)
    path = await new_node(small)
    session = await open_session(raw, path, small)
    await session.stream.send(acquire_semaphore=_request_of_size(2**20 + 1))
    _answers, code, _details = await call_status(session.stream.call)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    # The session lives on, detached: its client attaches it again.
    back = await open_session(raw, path, small, session_id=session.session_id)
    assert (await back.ok("acquire_semaphore", name="s", count=1, ephemeral=True)).acquired
    await still_serves(small, raw)
