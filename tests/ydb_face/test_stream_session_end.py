"""How session streams end: pings, SessionStop, detach and expiry, the server stopping,
the node dropped, the session killed.

Raw ``CoordinationService/Session`` streams against a real server, checking YDB's
exact messages. Where ours differs on purpose it is tested as ours: any message
answers a server ping (YDB wants a pong with the ping's opaque; its own Python SDK
answers with a ping). A re-attach keeps the timeout the session started with,
where YDB takes the new one: the engine's attach has no timeout (a known gap, not
a choice; YDB's SDKs send the same timeout on every attach).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest

import tenure
from tests.server.wire import WAIT
from tests.ydb_face.conftest import DATABASE, YdbServer
from tests.ydb_face.raw import (
    QUIET,
    Status,
    ending,
    failure_of,
    kind,
    new_node,
    node_call,
    open_session,
    quiet_server,  # noqa: F401  (the module's server)
)

pytestmark = pytest.mark.timeout(60)

Raw = Callable[..., Any]


async def test_a_client_ping_gets_a_pong_with_the_same_opaque(server: YdbServer, raw: Raw) -> None:
    session = await open_session(raw, await new_node(server))
    for opaque in (1, 2**64 - 1, 0):
        await session.stream.send(ping={"opaque": opaque})
        response = await session.stream.next()
        assert kind(response) == "pong"
        assert response.pong.opaque == opaque


async def server_pings(session: Any, count: int) -> list[int]:
    """The opaques of the server's next ``count`` pings (each answered with a pong)."""
    opaques: list[int] = []
    while len(opaques) < count:
        response = await session.stream.next(skip_pings=False)
        assert kind(response) == "ping", response
        opaques.append(response.ping.opaque)
        await session.stream.send(pong={"opaque": response.ping.opaque})
    return opaques


async def test_server_pings_come_at_the_session_timeout_over_three(
    serve: Callable[..., YdbServer], raw: Raw
) -> None:
    # --ydb-ping-interval is a minute: only a third of the session's timeout brings pings.
    slow = serve("--ydb-ping-interval", "60")
    session = await open_session(raw, await new_node(slow), slow, timeout_millis=1500)
    opaques = await server_pings(session, 3)
    assert all(opaque != 0 for opaque in opaques)
    assert len(set(opaques)) == 3


async def test_server_pings_come_at_most_every_ping_interval(
    serve: Callable[..., YdbServer], raw: Raw
) -> None:
    # A 30 minute session is pinged at --ydb-ping-interval (here, 0.5 s).
    fast = serve("--ydb-ping-interval", "0.5")
    session = await open_session(raw, await new_node(fast), fast, timeout_millis=1_800_000)
    assert len(await server_pings(session, 2)) == 2


async def test_a_silent_client_gets_ping_timeout(server: YdbServer, raw: Raw) -> None:
    path = await new_node(server)
    session = await open_session(raw, path, timeout_millis=300)
    end = await ending(session.stream, answer_pings=False)
    assert end.code == grpc.StatusCode.OK
    assert [kind(m) for m in end.messages] == ["ping", "failure"]
    assert end.failure.status == Status.TIMEOUT
    assert end.failure.issues[0].message == "Ping timeout"


async def test_session_stop_answers_stopped_ends_the_stream_and_the_session(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    session = await open_session(raw, path)
    await session.ok("create_semaphore", name="held", limit=1)
    assert (await session.ok("acquire_semaphore", name="held", count=1)).acquired
    await session.stream.send(session_stop={})
    end = await ending(session.stream)
    assert end.code == grpc.StatusCode.OK
    assert [kind(m) for m in end.messages] == ["session_stopped"]
    assert end.messages[0].session_stopped.session_id == session.session_id
    gone = await raw()
    await gone.send(session_start={"path": path, "session_id": session.session_id})
    assert (await failure_of(gone)).status == Status.SESSION_EXPIRED
    other = await open_session(raw, path)  # what it held was released
    assert (await other.ok("acquire_semaphore", name="held", count=1, timeout_millis=0)).acquired


async def test_session_stop_answers_none_of_the_queued_acquires(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    holder, waiter = await open_session(raw, path), await open_session(raw, path)
    await holder.ok("create_semaphore", name="s", limit=1)
    assert (await holder.ok("acquire_semaphore", name="s", count=1)).acquired
    queued = await waiter.send("acquire_semaphore", name="s", count=1, timeout_millis=60_000)
    await waiter.next("acquire_semaphore_pending", queued)
    await waiter.stream.send(session_stop={})
    end = await ending(waiter.stream)
    assert [kind(m) for m in end.messages] == ["session_stopped"]
    described = await holder.ok("describe_semaphore", name="s", include_waiters=True)
    assert list(described.semaphore_description.waiters) == []


async def test_a_detached_session_re_attaches_within_its_timeout(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    first = await open_session(raw, path, timeout_millis=30_000)
    await first.ok("create_semaphore", name="held", limit=1)
    assert (await first.ok("acquire_semaphore", name="held", count=1)).acquired
    first.stream.call.cancel()  # the client vanished: the session waits for it
    back = await open_session(raw, path, session_id=first.session_id, seq_no=1, timeout_millis=300)
    # Ours keeps the timeout the session started with (YDB's attach takes the new one).
    assert back.session_id == first.session_id
    again = await back.ok("acquire_semaphore", name="held", count=1, timeout_millis=0)
    assert again.acquired  # it still holds it


async def test_a_detached_session_past_its_timeout_is_expired(server: YdbServer, raw: Raw) -> None:
    path = await new_node(server)
    first = await open_session(raw, path, timeout_millis=300)
    first.stream.call.cancel()
    # A re-attach that comes before the expiry detaches it again when cancelled: so
    # the loop ends with the expiry whatever the machine's speed (bounded by WAIT).
    deadline = time.monotonic() + WAIT
    while True:
        assert time.monotonic() < deadline, "the detached session never expired"
        await asyncio.sleep(0.4)
        stream = await raw()
        await stream.send(session_start={"path": path, "session_id": first.session_id})
        response = await stream.next()
        if kind(response) == "failure":
            assert response.failure.status == Status.SESSION_EXPIRED
            assert response.failure.issues[0].message == "Session does not exist"
            break
        assert kind(response) == "session_started", response
        stream.call.cancel()


async def test_a_stopping_server_ends_streams_unavailable_and_sessions_outlive_it(
    serve: Callable[..., YdbServer], raw: Raw
) -> None:
    first = serve(*QUIET)
    path = await new_node(first)
    session = await open_session(raw, path, first, timeout_millis=30_000)
    await session.ok("create_semaphore", name="s", limit=1)
    assert (await session.ok("acquire_semaphore", name="s", count=1)).acquired
    assert first.process.signal(signal.SIGTERM) == 0
    failure = await failure_of(session.stream)
    assert failure.status == Status.UNAVAILABLE
    again = serve(*QUIET, ydb_port=first.ydb_port)
    back = await open_session(raw, path, again, session_id=session.session_id)
    held = await back.ok("acquire_semaphore", name="s", count=1, timeout_millis=0)
    assert held.acquired


async def test_a_node_dropped_under_a_live_stream_ends_it_unavailable(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    session = await open_session(raw, path)
    await session.ok("create_semaphore", name="s", limit=1)
    operation = await node_call(server, "Drop", path)
    assert operation.status == Status.SUCCESS
    failure = await failure_of(session.stream)
    assert failure.status == Status.UNAVAILABLE
    late = await raw()
    await late.send(session_start={"path": path, "timeout_millis": 5000})
    assert (await failure_of(late)).status == Status.NOT_FOUND


async def test_a_session_killed_through_tenure_ends_its_stream_session_expired(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    session = await open_session(raw, path)
    async with tenure.connect(server.url) as client:
        await client.kill_session(path.removeprefix(f"{DATABASE}/"), session.session_id)
    failure = await failure_of(session.stream)
    assert failure.status == Status.SESSION_EXPIRED
    assert failure.issues[0].message == "Session has expired"


async def test_a_session_timeout_of_0_expires_as_its_stream_ends(
    server: YdbServer, raw: Raw
) -> None:
    path = await new_node(server)
    session = await open_session(raw, path, timeout_millis=0)
    session.stream.call.cancel()
    # Ours keeps 0 as 1 ms (the engine's shortest); the session is gone at once.
    deadline = time.monotonic() + WAIT
    while True:
        assert time.monotonic() < deadline, "the session never expired"
        stream = await raw()
        await stream.send(session_start={"path": path, "session_id": session.session_id})
        response = await stream.next()
        if kind(response) == "failure":
            assert response.failure.status == Status.SESSION_EXPIRED
            break
        assert kind(response) == "session_started", response
        assert response.session_started.timeout_millis == 1
        stream.call.cancel()
        await asyncio.sleep(0.05)


async def test_a_pong_sent_while_the_server_was_stopped_is_no_ping_timeout(
    serve: Callable[..., YdbServer], raw: Raw
) -> None:
    # Issue 37 (docs/guarantees.md 6e): the server stopped (SIGSTOP) right after its
    # ping, for longer than the ping interval; the client answered at once, into the
    # socket. Its next look must come after it reads that answer: the interval is
    # counted in time the server could hear. (Before: the ping timer fired first, and
    # the stream ended "Ping timeout".)
    interval = 1.0
    fast = serve("--ydb-ping-interval", str(interval))
    session = await open_session(raw, await new_node(fast), fast, timeout_millis=1_800_000)
    ping = await session.stream.next(skip_pings=False)
    assert kind(ping) == "ping", ping
    fast.process.proc.send_signal(signal.SIGSTOP)
    try:
        await session.stream.send(pong={"opaque": ping.ping.opaque})
        await asyncio.sleep(2.5 * interval)  # (the stop under test)
    finally:
        fast.process.proc.send_signal(signal.SIGCONT)
    # The stream lives on: the next ping comes, and a request is answered.
    again = await session.stream.next(skip_pings=False)
    assert kind(again) == "ping", again
    await session.stream.send(pong={"opaque": again.ping.opaque})
    assert (await session.ok("create_semaphore", name="after", limit=1)) is not None
