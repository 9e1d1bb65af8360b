"""Pushes lost in flight: a client that re-attaches agrees with the server again.

The bug these hold down (issue 10): the server granted a waiting session and wrote
the Granted push; the connection died before the client read it; the client
re-attached; the server listed the session as the owner while its ``lock()`` waited
for ever, its pings keeping the session (and everyone queued behind it) alive.

Each test loses what the server sends at the worst moment: the proxy throws away
everything the server writes to the client (``lose_downstream``), the server acts
(grant, timeout, deletion, firing), and only then is the connection reset, with or
without a ``kill -9`` of the server in between. The client must learn all of it
from the session's state when it re-attaches.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import tenure
from tenure.backends.remote import TenureBackend
from tenure.client._opening import Opening
from tenure.errors import LeaseLostError
from tests.api.support import eventually, owners, spawn, wait_for_waiters, waiters, within
from tests.netproxy import NetProxy
from tests.server.wire import ServerProcess


def url_of(port: int) -> str:
    return f"tenure://127.0.0.1:{port}"


async def reconnected(client: tenure.Client, epoch: int) -> None:
    backend = client.backend
    assert isinstance(backend, TenureBackend)
    link = backend.shards[0].link

    async def done() -> bool:
        return link.epoch >= epoch and link.connected

    await eventually(done, f"connection number {epoch}")


class Server:
    """A durable server (``--fsync always``) behind a proxy, that can be killed and restarted."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.process = ServerProcess(data).__enter__()
        self.proxy = NetProxy("127.0.0.1", self.process.port)

    def crash_and_restart(self) -> None:
        """``kill -9``, then a new process on the same data directory."""
        self.process.kill()
        self.process = ServerProcess(self.data).__enter__()
        self.proxy.upstream_port = self.process.port

    def kill(self) -> None:
        self.process.kill()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    server = Server(tmp_path / "data")
    try:
        async with server.proxy:
            yield server
    finally:
        server.kill()


@pytest.fixture
async def client(server: Server) -> AsyncIterator[tenure.Client]:
    """A client through the proxy; node ``n`` exists."""
    async with tenure.connect(url_of(server.proxy.port)) as client:
        await client.create_node("n")
        yield client


async def cut_off(server: Server, client: tenure.Client, *, crash: bool) -> None:
    """Reset the connection (what the server wrote since ``lose_downstream`` is lost),
    after a ``kill -9`` and restart if ``crash``; wait for the client to be back."""
    if crash:
        server.crash_and_restart()
    server.proxy.drop()
    server.proxy.lose_downstream(False)
    await reconnected(client, 2)


def direct(server: Server) -> Opening[tenure.Client]:
    """A client of the server no fault reaches (``async with`` it)."""
    return tenure.connect(url_of(server.process.port))


@pytest.mark.parametrize("crash", [False, True], ids=["drop", "kill-9"])
async def test_a_grant_lost_in_flight_is_found_on_re_attach(
    server: Server, client: tenure.Client, crash: bool
) -> None:
    waiter = await client.session("n", recovery_window=30.0)
    async with direct(server) as other:
        holder = await other.session("n", recovery_window=30.0)
        first = await holder.mutex("job").lock()
        locking = spawn(waiter.mutex("job").lock())
        await wait_for_waiters(holder, "job", 1)

        server.proxy.lose_downstream()
        await first.release()  # the server grants the waiter; its Granted push is lost

        async def granted() -> bool:
            return await owners(holder, "job") == [waiter.id]

        await eventually(granted, "the grant on the server")
        await asyncio.sleep(0.2)  # the push is written, and thrown away
        assert not locking.done()
    await cut_off(server, client, crash=crash)

    lock = await within(locking, "the waiting lock() after the re-attach")
    assert lock.held
    assert lock.token > first.token
    async with direct(server) as observer:
        watcher = await observer.session("n")
        assert await owners(watcher, "job") == [waiter.id]
        await lock.release()
        assert await owners(watcher, "job") == []  # it was really ours to release


@pytest.mark.parametrize("crash", [False, True], ids=["drop", "kill-9"])
async def test_a_timeout_lost_in_flight_is_raised_on_re_attach(
    server: Server, client: tenure.Client, crash: bool
) -> None:
    waiter = await client.session("n", recovery_window=30.0)
    async with direct(server) as other:
        holder = await other.session("n", recovery_window=30.0)
        await holder.mutex("job").lock()
        server.proxy.lose_downstream()
        # The Acquire goes out; its QUEUED reply, then its AcquireFailed, are lost.
        locking = spawn(waiter.mutex("job").lock(timeout=0.5))
        await wait_for_waiters(holder, "job", 1)

        async def timed_out() -> bool:
            return await waiters(holder, "job") == []

        await eventually(timed_out, "the server's timeout")
        await asyncio.sleep(0.2)  # the push is written, and thrown away
        assert not locking.done()
    await cut_off(server, client, crash=crash)
    with pytest.raises(TimeoutError, match="timed out waiting for 'job'"):
        await within(locking, "the timed-out lock() after the re-attach")
    assert not waiter.closed


@pytest.mark.parametrize("crash", [False, True], ids=["drop", "kill-9"])
async def test_a_lease_lost_in_flight_is_lost_on_re_attach(
    server: Server, client: tenure.Client, crash: bool
) -> None:
    session = await client.session("n", recovery_window=30.0)
    pool = session.semaphore("pool")
    await pool.create(limit=2)
    lease = await pool.acquire(count=1)
    body_ended: list[BaseException] = []

    async def body() -> None:
        try:
            async with lease:
                await asyncio.sleep(60)
        except BaseException as error:
            body_ended.append(error)
            raise

    running = spawn(body())
    async with direct(server) as observer:
        other = await observer.session("n")
        server.proxy.lose_downstream()
        await other.semaphore("pool").delete(force=True)  # LeaseLost: thrown away
        await asyncio.sleep(0.2)
        assert lease.held  # the client cannot know yet
    await cut_off(server, client, crash=crash)

    with pytest.raises(LeaseLostError):
        await within(running, "the body cancelled by the loss")
    assert isinstance(lease.lost_reason, LeaseLostError)
    assert "deleted" in str(lease.lost_reason)
    assert isinstance(body_ended[0], LeaseLostError)
    assert not session.closed


@pytest.mark.parametrize("crash", [False, True], ids=["drop", "kill-9"])
async def test_a_watch_firing_lost_in_flight_shows_the_latest_state(
    server: Server, client: tenure.Client, crash: bool
) -> None:
    session = await client.session("n", recovery_window=30.0)
    await session.semaphore("cfg").create(limit=1, data=b"v1")
    stream = session.semaphore("cfg").watch(data=True)
    assert (await within(anext(stream))).data == b"v1"
    async with direct(server) as observer:
        writer = await observer.session("n")
        server.proxy.lose_downstream()
        await writer.semaphore("cfg").update(b"v2")  # WatchFired: thrown away
        await asyncio.sleep(0.2)
    await cut_off(server, client, crash=crash)
    assert (await within(anext(stream))).data == b"v2"
    await stream.aclose()


async def test_a_lock_cancelled_while_its_acquire_is_in_flight_leaves_no_hold(
    server: Server, client: tenure.Client
) -> None:
    session = await client.session("n", recovery_window=30.0)
    server.proxy.stall()
    locking = spawn(session.mutex("job").lock())
    await asyncio.sleep(0.05)  # the Acquire is written, held by the stalled proxy
    locking.cancel()  # the caller gives up before the answer
    server.proxy.resume()  # the server grants it: nobody will use that grant
    with pytest.raises(asyncio.CancelledError):
        await locking
    async with direct(server) as observer:
        other = await observer.session("n")
        taken = await within(other.mutex("job").lock(), "the lock the cancelled caller left")
        assert taken.held
