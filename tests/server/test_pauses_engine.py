"""The engine's deadlines forgive the server's own pauses (issue 37, docs/guarantees.md 6e).

A detached session whose client reconnected while the server was stopped, a lease
renewed meanwhile, an acquire whose lock was released meanwhile: each frame waited
in a socket the server could not read, and each deadline passed on the loop's
clock during the stop. The engine runs on heard time (server/_net/pauses.py
HeardClock), so none of them is judged before those frames are read. Raw protocol
clients against a real ``tenure serve`` stopped with SIGSTOP; every wait is
bounded, nothing is timed: the stops are made longer than the deadlines.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import tenure
from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireFailed,
    AcquireStatus,
    AttachSession,
    CreateNode,
    CreateSession,
    Granted,
    LeaseLost,
    Release,
    Renew,
    SessionInfo,
)
from tenure._protocol import GoingAway, Hello, Reply, Request, Welcome
from tenure._protocol.frames import encode_frame
from tenure._protocol.messages import encode_message
from tenure.errors import ErrorCode, SessionExpiredError
from tenure.testing.conformance.support import owners, spawn, wait_for_waiters

from .wire import WAIT, Clients, ServerProcess, WireClient

pytestmark = pytest.mark.timeout(90)

DEADLINE = 1.0  # seconds: the window, lease TTL or acquire timeout under test
STALL = 2.5 * DEADLINE  # how long the server is stopped: longer than the deadline


@contextmanager
def stopped(server: ServerProcess) -> Iterator[None]:
    """The server stopped (SIGSTOP) for the block and at least :data:`STALL` seconds."""
    server.proc.send_signal(signal.SIGSTOP)
    began = time.monotonic()
    try:
        yield
    finally:
        left = STALL - (time.monotonic() - began)
        if left > 0:
            time.sleep(left)  # (the stall under test: nothing else runs meanwhile)
        server.proc.send_signal(signal.SIGCONT)


async def holding(
    holder: WireClient,
    waiter: WireClient,
    *,
    window: float = 30.0,
    lease_ttl: float | None = None,
    wait: float | None = None,
) -> int:
    """``holder`` holds lock m of node n (its session's ``window``, its grant's
    ``lease_ttl``); ``waiter`` queues for it (timeout ``wait``). The holder's session id."""
    await waiter.call(CreateNode("n"))
    kept = int((await holder.call(CreateSession("n", b"k1", timeout=window))).session_id)
    got = await holder.call(Acquire(kept, "m", MAX_COUNT, 1, ephemeral=True, lease_ttl=lease_ttl))
    assert got.status is AcquireStatus.GRANTED
    waiting = int((await waiter.call(CreateSession("n", b"k2", timeout=30.0))).session_id)
    queued = await waiter.call(Acquire(waiting, "m", MAX_COUNT, 2, ephemeral=True, timeout=wait))
    assert queued.status is AcquireStatus.QUEUED
    return kept


async def nothing_granted(waiter: WireClient) -> None:
    """A ping round trip: anything pushed to ``waiter`` before it is read by then."""
    await waiter.ping(10_000)
    assert not any(isinstance(effect, Granted) for effect in waiter.pushes), waiter.pushes


async def test_a_detached_session_whose_client_reconnects_during_a_stop_is_kept(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data") as server:
        holder = await wire.connect(server.port)
        waiter = await wire.connect(server.port)
        kept = await holding(holder, waiter, window=DEADLINE)
        await holder.close()
        # Detached now, by the server (its window runs from here):
        await asyncio.to_thread(server.wait_log, "sessions detached")

        with stopped(server):
            # The client reconnects at once: the kernel accepts the connection, and
            # its Hello and AttachSession wait in the socket while the window passes.
            back = await wire.connect(server.port, hello=False)
            back.writer.write(back.codec.send(Hello(client_name="test")))
            attach = Request(1, AttachSession(kept, b"k1", 2))
            # (Framed by hand: the codec sends no request before Welcome. It is
            # told of the request once Welcome is read, below.)
            back.writer.write(encode_frame(encode_message(attach)))
            await back.writer.drain()

        assert isinstance(await back.next_event(), Welcome)
        back.codec.send(attach)  # (the bytes already went: only the codec's record)
        answer = await back.answer(1)
        assert isinstance(answer, Reply), answer  # (before: SESSION_EXPIRED)
        assert isinstance(answer.value, SessionInfo)
        assert answer.value.seq_no == 2
        await nothing_granted(waiter)  # the lock stayed the reconnected holder's


async def test_a_lease_renewed_during_a_stop_is_kept_and_survives_a_restart(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data") as server:
        holder = await wire.connect(server.port)
        waiter = await wire.connect(server.port)
        kept = await holding(holder, waiter, lease_ttl=DEADLINE)

        renewals = []
        with stopped(server):
            began = time.monotonic()
            while time.monotonic() - began < STALL:  # renewing four times a TTL
                renewals.append(holder.send(Renew(kept, "m")))
                await holder.writer.drain()
                await asyncio.sleep(DEADLINE / 4)

        for request_id in renewals:
            answer = await holder.answer(request_id)
            assert isinstance(answer, Reply), answer  # (before: the lease was lost first)
        assert not any(isinstance(effect, LeaseLost) for effect in holder.pushes), holder.pushes
        await nothing_granted(waiter)
        assert not any(isinstance(event, GoingAway) for event in holder.events)
        assert server.signal(signal.SIGTERM) == 0

    # The journal's times (heard time) replay: the restarted server still has the
    # holder's session and its grant (the session detached by the restart).
    with ServerProcess(tmp_path / "data") as again:
        back = await wire.connect(again.port)
        assert (await back.call(AttachSession(kept, b"k1", 3))).seq_no == 3
        renewed = await back.call(Renew(kept, "m"))
        assert renewed == DEADLINE


async def test_an_acquire_whose_lock_was_released_during_a_stop_is_granted(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data") as server:
        holder = await wire.connect(server.port)
        waiter = await wire.connect(server.port)
        kept = await holding(holder, waiter, wait=DEADLINE)

        with stopped(server):
            released = holder.send(Release(kept, "m"))  # in time, but unheard until the end
            await holder.writer.drain()

        assert isinstance(await holder.answer(released), Reply)
        push = await waiter.next_push()
        assert isinstance(push, Granted), push  # (before: AcquireFailed, timed out)
        assert push.request_id == 2


async def test_an_acquire_still_times_out_in_heard_time(tmp_path: Path, wire: Clients) -> None:
    """What the stop does not forgive: the lock is never released, so the acquire ends
    TIMEOUT after its timeout in heard time (a stop postpones it, never cancels it)."""
    with ServerProcess(tmp_path / "data") as server:
        holder = await wire.connect(server.port)
        waiter = await wire.connect(server.port)
        await holding(holder, waiter, wait=DEADLINE)
        with stopped(server):
            pass
        push = await waiter.next_push()
        assert isinstance(push, AcquireFailed), push
        assert push.request_id == 2
        assert push.code is ErrorCode.TIMEOUT, push


async def test_the_tenure_client_still_gives_up_first_and_its_lock_goes_on(
    tmp_path: Path,
) -> None:
    """The client's own rule (6a) is kept: it cannot tell a stopped server from a
    partition, so a stop longer than its window costs it its session on its side, even
    though the server forgave; once the server answers, the client closes the session
    there, so the lock is never kept for a client that gave it up: the waiter gets it."""
    with ServerProcess(tmp_path / "data") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with tenure.connect(url) as holding_client, tenure.connect(url) as waiting_client:
            await holding_client.create_node("n")
            holder = await holding_client.session("n", recovery_window=DEADLINE)
            waiter = await waiting_client.session("n")
            lock = await holder.mutex("job").lock()
            waiting = spawn(waiter.mutex("job").lock())
            await wait_for_waiters(waiter, "job", 1)

            with stopped(server):
                pass

            async with asyncio.timeout(WAIT):
                taken = await waiting
            assert taken.held
            assert taken.token > lock.token
            assert isinstance(holder.lost_reason, SessionExpiredError)
            assert not lock.held
            assert await owners(waiter, "job") == [waiter.id]
            # The holder's application may start again, with a new session.
            again = await holding_client.session("n", recovery_window=30.0)
            assert again.id != holder.id


async def test_a_detached_session_still_expires_with_no_connection_open(
    tmp_path: Path, wire: Clients
) -> None:
    """Idle time is not deafness: with no connection open the server still tells a
    stall from idle time (its host keeps the heartbeat running), so a detached
    session's window ends when it should. (Without the heartbeat each look would
    take the idle time before it for a stall, and a window of 3 s would end only
    after about 20 s, past the bounded wait.)"""
    with ServerProcess(tmp_path / "data") as server:
        holder = await wire.connect(server.port)
        await holder.call(CreateNode("n"))
        kept = int((await holder.call(CreateSession("n", b"k1", timeout=3.0))).session_id)
        got = await holder.call(Acquire(kept, "m", MAX_COUNT, 1, ephemeral=True))
        assert got.status is AcquireStatus.GRANTED
        await holder.close()  # no connection is left open
        await asyncio.to_thread(server.wait_log, '"msg": "session expired"')
        back = await wire.connect(server.port)
        gone = await back.fail(AttachSession(kept, b"k1", 2))
        assert gone.code is ErrorCode.SESSION_EXPIRED
