"""The real ``dflockd-client`` (PyPI, sync and async APIs) against ``tenure serve``."""

from __future__ import annotations

import asyncio
import signal
import ssl
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import pytest
from dflockd_client import (
    AlreadyQueuedError,
    AsyncDistributedLock,
    AsyncDistributedSemaphore,
    AuthError,
    DflockdTimeoutError,
    DrainingError,
    LeaseExpiredError,
    LimitMismatchError,
    MaxLocksError,
    MaxWaitersError,
    NotQueuedError,
    StatsResult,
    SyncConn,
    SyncDistributedLock,
    SyncDistributedSemaphore,
    fence_from_token,
    stable_hash_shard,
)
from dflockd_client import _async as async_proto
from dflockd_client import _sync as sync_proto

from tests.server.wire import WAIT, ServerProcess

from .conftest import DEFAULT_LEASE, SECRET, TOKEN, Pki, Serve, unique

pytestmark = pytest.mark.timeout(60)


def at(server: ServerProcess) -> list[tuple[str, int]]:
    """The ``servers`` argument naming ``server``."""
    return [("127.0.0.1", server.port)]


@contextmanager
def sync_conn(
    server: ServerProcess, ssl_context: ssl.SSLContext | None = None
) -> Iterator[SyncConn]:
    """A low-level connection of the client library, closed at the end."""
    conn = sync_proto.open_conn(
        "127.0.0.1", server.port, ssl_context=ssl_context, connect_timeout_s=WAIT
    )
    try:
        yield conn
    finally:
        conn.close()


def sync_stats(server: ServerProcess) -> StatsResult:
    with sync_conn(server) as conn:
        return sync_proto.stats(conn)


Kind = Literal["locks", "semaphores", "idle_locks", "idle_semaphores"]


def find(result: StatsResult, kind: Kind, key: str) -> dict[str, Any] | None:
    items = result[kind]
    found = [item for item in items if item["key"] == key]
    assert len(found) <= 1, found
    return found[0] if found else None


def wait_for(check: Callable[[], bool], what: str) -> None:
    """Poll ``check`` until true (bounded by WAIT), from a synchronous test."""
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def waiting(server: ServerProcess, key: str, count: int, kind: Kind = "locks") -> None:
    """Until ``count`` requests wait on ``key`` (seen in stats)."""

    def check() -> bool:
        found = find(sync_stats(server), kind, key)
        return (found["waiters"] if found else 0) == count

    wait_for(check, f"{count} waiting on {key}")


async def async_waiting(server: ServerProcess, key: str, count: int) -> None:
    deadline = time.monotonic() + WAIT
    while True:
        conn = await async_proto.open_conn(
            "127.0.0.1", server.port, ssl_context=None, connect_timeout_s=WAIT
        )
        try:
            found = find(await async_proto.stats(conn), "locks", key)
        finally:
            await conn.close()
        if (found["waiters"] if found else 0) == count:
            return
        assert time.monotonic() < deadline, f"never {count} waiting on {key}"
        await asyncio.sleep(0.05)


def lock(server: ServerProcess, key: str, **options: Any) -> SyncDistributedLock:
    return SyncDistributedLock(key, servers=at(server), connect_timeout_s=WAIT, **options)


def alock(server: ServerProcess, key: str, **options: Any) -> AsyncDistributedLock:
    return AsyncDistributedLock(key, servers=at(server), connect_timeout_s=WAIT, **options)


# -- sync ----------------------------------------------------------------------------------


def test_sync_lock_with_statement(server: ServerProcess) -> None:
    key = unique("sync")
    holder = lock(server, key, lease_ttl_s=20)
    with holder as held:
        assert held is holder
        assert holder.token is not None
        assert TOKEN.fullmatch(holder.token)
        assert holder.lease == 20
        found = find(sync_stats(server), "locks", key)
        assert found is not None
        assert found["waiters"] == 0
    assert holder.token is None
    assert find(sync_stats(server), "locks", key) is None  # released: idle now
    assert find(sync_stats(server), "idle_locks", key) is not None


def test_sync_mutual_exclusion(server: ServerProcess) -> None:
    key = unique("mutex")
    first = lock(server, key)
    second = lock(server, key, acquire_timeout_s=0)
    try:
        assert first.acquire()
        assert not second.acquire()  # the client turns the `timeout` answer into False
        with pytest.raises(TimeoutError), lock(server, key, acquire_timeout_s=0):
            pass
        with sync_conn(server) as conn, pytest.raises(DflockdTimeoutError):
            sync_proto.acquire(conn, key, 0)

        later = lock(server, key, acquire_timeout_s=10)
        with ThreadPoolExecutor(1) as pool:
            acquiring = pool.submit(later.acquire)
            waiting(server, key, 1)
            assert not acquiring.done()
            assert first.release()
            assert acquiring.result(timeout=WAIT)
        assert later.token is not None
        assert first.token is None
        assert later.release()
    finally:
        first.close()
        second.close()


def test_sync_acquire_timeout(server: ServerProcess) -> None:
    key = unique("tmo")
    with lock(server, key):
        late = lock(server, key, acquire_timeout_s=1)
        assert not late.acquire()
        assert late.token is None
    waiting(server, key, 0)  # the timed-out waiter left the queue


def test_sync_semaphore(server: ServerProcess) -> None:
    key = unique("sem")
    holders = [
        SyncDistributedSemaphore(key, limit=2, servers=at(server), lease_ttl_s=20) for _ in range(3)
    ]
    try:
        assert holders[0].acquire()
        assert holders[1].acquire()
        holders[2].acquire_timeout_s = 0
        assert not holders[2].acquire()
        found = find(sync_stats(server), "semaphores", key)
        assert found == {"key": key, "limit": 2, "holders": 2, "waiters": 0}
        other = SyncDistributedSemaphore(key, limit=3, servers=at(server))
        with pytest.raises(LimitMismatchError):
            other.acquire()
        assert holders[0].release()
        assert holders[2].acquire()
    finally:
        for holder in holders:
            holder.close()


def test_sync_two_phase(server: ServerProcess) -> None:
    key, free = unique("2p"), unique("2pfree")
    holder, queued = lock(server, key), lock(server, key, lease_ttl_s=15)
    fast = lock(server, free, lease_ttl_s=9)
    try:
        assert holder.acquire()
        assert queued.enqueue() == "queued"
        assert queued.token is None
        assert holder.token is not None
        first = fence_from_token(holder.token)
        assert holder.release()
        assert queued.wait(5)
        assert queued.token is not None
        assert queued.lease == 15
        assert fence_from_token(queued.token) > first
        assert fast.enqueue() == "acquired"
        assert fast.lease == 9
        assert fast.wait()
    finally:
        for each in (holder, queued, fast):
            each.release()


def test_sync_renewal_keeps_the_lock(server: ServerProcess) -> None:
    key = unique("renew")
    # The client renews every max(1 s, lease x ratio): a 2 s lease is the shortest
    # that it renews before the lease runs out.
    holder = lock(server, key, lease_ttl_s=2)
    try:
        assert holder.acquire()
        token = holder.token
        time.sleep(3.0)
        assert holder.token == token
        assert not lock(server, key, acquire_timeout_s=0).acquire()
        found = find(sync_stats(server), "locks", key)
        assert found is not None
        assert 0 < found["lease_expires_in_s"] <= 2
    finally:
        assert holder.release()


def test_sync_release_on_disconnect(server: ServerProcess) -> None:
    key = unique("drop")
    holder = lock(server, key, lease_ttl_s=60)
    assert holder.acquire()
    holder.close()  # closes the connection without a release
    other = lock(server, key, acquire_timeout_s=5)
    assert other.acquire()
    assert other.release()


def test_sync_errors_map_to_exceptions(serve: Serve) -> None:
    server = serve("--dflockd-max-locks", "3", "--dflockd-max-waiters", "1")
    holder, queued = lock(server, "k"), lock(server, "k")
    try:
        assert holder.acquire()
        assert queued.enqueue() == "queued"
        with pytest.raises(MaxWaitersError):
            lock(server, "k").acquire()
        with sync_conn(server) as conn:
            with pytest.raises(NotQueuedError):
                sync_proto.wait(conn, "k", 0)
            assert sync_proto.enqueue(conn, "k2")[0] == "acquired"
            with pytest.raises(AlreadyQueuedError):
                sync_proto.enqueue(conn, "k2")
            token, _ = sync_proto.acquire(conn, "k3", 0)
            with pytest.raises(MaxLocksError):
                sync_proto.acquire(conn, "k4", 0)
            with pytest.raises(MaxLocksError):
                sync_proto.sem_acquire(conn, "k4", 0, 2)
            sync_proto.release(conn, "k3", token)
            sync_proto.acquire(conn, "k3", 0)  # known keys still work
    finally:
        holder.close()
        queued.close()


def test_sync_lease_expired(server: ServerProcess) -> None:
    key = unique("expired")
    with sync_conn(server) as conn:
        status, token, lease = sync_proto.enqueue(conn, key, 1)
        assert (status, lease) == ("acquired", 1)
        assert token is not None

        def free() -> bool:
            with sync_conn(server) as other:
                try:
                    got, _ = sync_proto.acquire(other, key, 0)
                except DflockdTimeoutError:
                    return False
                sync_proto.release(other, key, got)
                return True

        wait_for(free, "the 1 s lease ran out")
        with pytest.raises(LeaseExpiredError):
            sync_proto.wait(conn, key, 5)


def test_sync_draining(serve: Serve) -> None:
    server = serve("--shutdown-grace", "5")
    with sync_conn(server) as conn:
        sync_proto.acquire(conn, "k", 0)
        server.proc.send_signal(signal.SIGTERM)
        server.wait_log('"msg": "shutting down"')
        with pytest.raises(DrainingError):
            sync_proto.acquire(conn, "k2", 0)
    assert server.proc.wait(timeout=WAIT) == 0


def test_sync_auth(serve: Serve, auth_file: Path) -> None:
    server = serve("--auth-file", str(auth_file))
    with lock(server, "k", auth_token=SECRET) as held:
        assert held.token is not None
    with pytest.raises(PermissionError):
        lock(server, "k", auth_token="wrong").acquire()
    with pytest.raises(AuthError):
        lock(server, "k").acquire()  # no handshake: the `l` itself gets error_auth
    with sync_conn(server) as conn:
        sync_proto.authenticate(conn, SECRET)
        assert find(sync_proto.stats(conn), "idle_locks", "k") is not None


def test_sync_tls(serve: Serve, pki: Pki) -> None:
    server = serve("--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    context = pki.client_context()
    with lock(server, "k", ssl_context=context, lease_ttl_s=10) as held:
        assert held.token is not None
        with sync_conn(server, context) as conn:
            assert find(sync_proto.stats(conn), "locks", "k") is not None
    sem = SyncDistributedSemaphore("s", limit=2, servers=at(server), ssl_context=context)
    with sem:
        assert sem.token is not None


def test_sharding_vectors() -> None:
    # spec §11: CRC-32 of the key, modulo the number of servers.
    vectors = {
        "my-key": (1, 2, 2),
        "a": (1, 0, 2),
        "lock-1": (1, 1, 0),
        "deploy-job": (0, 1, 4),
        "🔒": (0, 0, 4),
    }
    for key, expected in vectors.items():
        assert tuple(stable_hash_shard(key, n) for n in (2, 3, 5)) == expected, key


def test_sync_sharding_over_two_servers(serve: Serve) -> None:
    servers = [serve(), serve()]
    addresses = [("127.0.0.1", server.port) for server in servers]
    keys = ["my-key", "a", "lock-1", "deploy-job", "🔒"]
    locks = [SyncDistributedLock(key, servers=addresses, lease_ttl_s=20) for key in keys]
    try:
        for each in locks:
            assert each.acquire()
        held = [{item["key"] for item in sync_stats(server)["locks"]} for server in servers]
        assert held[0] == {"deploy-job", "🔒"}
        assert held[1] == {"my-key", "a", "lock-1"}
    finally:
        for each in locks:
            each.release()


def test_fences_increase_over_grants(server: ServerProcess) -> None:
    key = unique("fence")
    fences = []
    for _ in range(4):
        with lock(server, key) as held:
            assert held.token is not None
            fences.append(fence_from_token(held.token))
    assert fences == sorted(set(fences))


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_fences_increase_across_a_restart(
    serve: Serve, tmp_path: Path, stop: signal.Signals
) -> None:
    data = tmp_path / "kept"
    server = serve(data_dir=data)
    fences = []
    for _ in range(2):
        with lock(server, "k") as held:
            assert held.token is not None
            fences.append(fence_from_token(held.token))
    server.signal(stop)
    server.kill()
    server = serve(data_dir=data)
    with lock(server, "k") as held:
        assert held.token is not None
        fences.append(fence_from_token(held.token))
    assert fences == sorted(set(fences))


def test_sync_stats_shows_a_lock_and_a_semaphore(server: ServerProcess) -> None:
    key, sem_key = unique("stl"), unique("sts")
    held = lock(server, key, lease_ttl_s=30)
    sem = SyncDistributedSemaphore(sem_key, limit=3, servers=at(server), lease_ttl_s=30)
    try:
        assert held.acquire()
        assert sem.acquire()
        result = sync_stats(server)
        assert result["connections"] >= 3
        found = find(result, "locks", key)
        assert found is not None
        assert isinstance(found["owner_conn_id"], int)
        assert 0 < found["lease_expires_in_s"] <= 30
        assert found["waiters"] == 0
        assert find(result, "semaphores", sem_key) == {
            "key": sem_key,
            "limit": 3,
            "holders": 1,
            "waiters": 0,
        }
        assert find(result, "locks", sem_key) is None
        assert find(result, "semaphores", key) is None
    finally:
        held.release()
        sem.release()


# -- async -----------------------------------------------------------------------------------


async def test_async_lock_with_statement(server: ServerProcess) -> None:
    key = unique("async")
    holder = alock(server, key, lease_ttl_s=20)
    async with holder as held:
        assert held is holder
        assert holder.token is not None
        assert TOKEN.fullmatch(holder.token)
        assert holder.lease == 20
        other = alock(server, key, acquire_timeout_s=0)
        assert not await other.acquire()
        conn = await async_proto.open_conn(
            "127.0.0.1", server.port, ssl_context=None, connect_timeout_s=WAIT
        )
        try:
            with pytest.raises(DflockdTimeoutError):
                await async_proto.acquire(conn, key, 0)
            found = find(await async_proto.stats(conn), "locks", key)
            assert found is not None
        finally:
            await conn.close()
    assert holder.token is None
    again = alock(server, key, acquire_timeout_s=0)
    assert await again.acquire()
    assert await again.release()


async def test_async_fifo_order_of_waiters(server: ServerProcess) -> None:
    key = unique("fifo")
    holder = alock(server, key)
    assert await holder.acquire()
    waiters = [alock(server, key, acquire_timeout_s=10) for _ in range(3)]
    order: list[int] = []

    async def take(index: int) -> None:
        assert await waiters[index].acquire()
        order.append(index)

    tasks = []
    try:
        for index in range(3):
            tasks.append(asyncio.ensure_future(take(index)))
            await async_waiting(server, key, index + 1)
        assert await holder.release()
        for index in range(3):
            await asyncio.wait_for(tasks[index], WAIT)
            assert order == list(range(index + 1))
            assert await waiters[index].release()
    finally:
        for task in tasks:
            task.cancel()
        for each in (holder, *waiters):
            await each.aclose()


async def test_async_semaphore(server: ServerProcess) -> None:
    key = unique("asem")
    sems = [
        AsyncDistributedSemaphore(key, limit=2, servers=at(server), acquire_timeout_s=0)
        for _ in range(3)
    ]
    try:
        assert await sems[0].acquire()
        assert await sems[1].acquire()
        assert not await sems[2].acquire()
        with pytest.raises(LimitMismatchError):
            await AsyncDistributedSemaphore(key, limit=1, servers=at(server)).acquire()
        assert await sems[1].release()
        async with sems[2]:
            assert sems[2].token is not None
    finally:
        for sem in sems:
            await sem.aclose()


async def test_async_two_phase(server: ServerProcess) -> None:
    key = unique("a2p")
    holder, queued = alock(server, key), alock(server, key, lease_ttl_s=12)
    try:
        assert await holder.acquire()
        assert await queued.enqueue() == "queued"
        assert await holder.release()
        assert await queued.wait(5)
        assert queued.lease == 12
        sem = AsyncDistributedSemaphore(unique("a2ps"), limit=2, servers=at(server))
        assert await sem.enqueue() == "acquired"
        assert await sem.wait()
        assert sem.lease == DEFAULT_LEASE
        assert await sem.release()
    finally:
        await holder.aclose()
        await queued.release()


async def test_async_renewal_keeps_the_lock(server: ServerProcess) -> None:
    key = unique("arenew")
    holder = alock(server, key, lease_ttl_s=2)
    try:
        assert await holder.acquire()
        token = holder.token
        await asyncio.sleep(3.0)
        assert holder.token == token
        assert not await alock(server, key, acquire_timeout_s=0).acquire()
    finally:
        assert await holder.release()


async def test_async_release_on_disconnect(server: ServerProcess) -> None:
    key = unique("adrop")
    holder = alock(server, key, lease_ttl_s=60)
    assert await holder.acquire()
    await holder.aclose()  # no release sent
    other = alock(server, key, acquire_timeout_s=5)
    assert await other.acquire()
    assert await other.release()


async def test_async_auth_and_tls(serve: Serve, auth_file: Path, pki: Pki) -> None:
    server = serve(
        "--auth-file", str(auth_file), "--tls-cert", str(pki.cert), "--tls-key", str(pki.key)
    )
    context = pki.client_context()
    async with alock(server, "k", auth_token=SECRET, ssl_context=context) as held:
        assert held.token is not None
    with pytest.raises(PermissionError):
        await alock(server, "k", auth_token="wrong", ssl_context=context).acquire()
    with pytest.raises(AuthError):
        await alock(server, "k", ssl_context=context).acquire()


async def test_auth_refusals_always_raise_the_auth_errors(serve: Serve, auth_file: Path) -> None:
    server = serve("--auth-file", str(auth_file))
    # Many at once: a bug once lost the error_auth before the close, depending on the
    # order the server flushed its connections in (it varied little one at a time).
    locks = [alock(server, "k", auth_token=None if index % 2 else "wrong") for index in range(24)]
    raised = await asyncio.gather(*(each.acquire() for each in locks), return_exceptions=True)
    assert [type(error) for error in raised] == [PermissionError, AuthError] * 12
    with ThreadPoolExecutor(8) as pool:
        sync_locks = [lock(server, "k", auth_token=None if i % 2 else "wrong") for i in range(8)]
        futures = [pool.submit(each.acquire) for each in sync_locks]
        errors = [future.exception(timeout=WAIT) for future in futures]
    assert [type(error) for error in errors] == [PermissionError, AuthError] * 4


async def test_async_sharding_over_two_servers(serve: Serve) -> None:
    servers = [serve(), serve()]
    addresses = [("127.0.0.1", server.port) for server in servers]
    for key, index in (("deploy-job", 0), ("my-key", 1)):
        async with AsyncDistributedLock(key, servers=addresses) as held:
            assert held.token is not None
            held_on = [find(sync_stats(server), "locks", key) is not None for server in servers]
            assert held_on == [index == 0, index == 1], key
