"""A cut in the middle: YDB's Python SDK (sync and asyncio) behind a TCP proxy that resets.

Discovery leads the SDK to the proxy (the server advertises the proxy's address,
``--ydb-advertise``, on the same port number); a second client goes straight to the
server and watches. When the proxy resets the connection, the SDK opens a new one
and re-attaches its session: the session id is kept, a held semaphore stays held
(the watcher sees it) and is released normally, and an acquire that was waiting is
sent again and keeps its place in the queue; a grant whose answer was lost in
flight is answered again (the session owns it: granted at once, still once).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import ydb
from ydb.aio.coordination import CoordinationClient as AioCoordinationClient
from ydb.aio.driver import Driver as AioDriver
from ydb.coordination import CoordinationClient

from tests.netproxy import NetProxy
from tests.server.wire import WAIT
from tests.ydb_face.conftest import DATABASE, YdbServer, unique
from tests.ydb_face.sdkkit import (
    BOUNDED,
    PROXY_HOST,
    ThreadedProxy,
    Threads,
    advertised_proxy,
    apoll,
    awaiting,
    owners_of,
    poll,
    threaded_proxy,
    waiting,
)


@pytest.fixture
def threads() -> Iterator[Threads]:
    """Threads joined at the end of the test (their failures raised)."""
    made = Threads()
    yield made
    made.join()


# -- the sync SDK -------------------------------------------------------------------------


@dataclass
class SyncCut:
    """A server behind a proxy: ``cut`` (an SDK client) reaches it through the proxy,
    ``direct`` straight; ``path`` is a node on it."""

    proxy: ThreadedProxy
    cut: CoordinationClient
    direct: CoordinationClient
    path: str


@pytest.fixture
def sync_cut(serve: Callable[..., YdbServer]) -> Iterator[SyncCut]:
    """A :class:`SyncCut` on a server of the test's own (the sync SDK)."""
    with threaded_proxy() as proxy, contextlib.ExitStack() as stack:
        # Discovery leads the SDK to the proxy; ``direct`` skips discovery.
        running = serve("--ydb-advertise", PROXY_HOST, ydb_port=proxy.port)
        proxy.proxy.upstream_port = running.ydb_port
        # (The sync Driver drops its keyword arguments: disable_discovery goes in a config.)
        config = ydb.DriverConfig(running.endpoint, DATABASE, disable_discovery=True)
        direct = ydb.Driver(driver_config=config)
        stack.callback(direct.stop)
        direct.wait(timeout=WAIT, fail_fast=True)
        path = f"{DATABASE}/{unique()}"
        CoordinationClient(direct).create_node(path, settings=BOUNDED)
        assert proxy.total_connections == 0  # ``direct`` does not go through it
        cut = ydb.Driver(endpoint=f"grpc://{PROXY_HOST}:{proxy.port}", database=DATABASE)
        stack.callback(cut.stop)
        cut.wait(timeout=WAIT, fail_fast=True)
        yield SyncCut(proxy, CoordinationClient(cut), CoordinationClient(direct), path)


def test_sync_cut_stream_reconnects_to_the_same_session(sync_cut: SyncCut) -> None:
    proxy, path = sync_cut.proxy, sync_cut.path
    with sync_cut.cut.session(path) as session, sync_cut.direct.session(path) as watcher:
        lock = session.semaphore("held")
        lock.acquire(timeout=WAIT)
        held = owners_of(watcher.semaphore("held").describe(timeout=WAIT))
        assert len(held) == 1
        before = proxy.total_connections
        proxy.drop()
        # The SDK sends the describe once it has a stream again.
        assert owners_of(lock.describe(timeout=WAIT)) == held
        assert proxy.total_connections > before  # a new connection carried it
        assert owners_of(watcher.semaphore("held").describe(timeout=WAIT)) == held
        lock.release(timeout=WAIT)
        assert watcher.semaphore("held").describe(timeout=WAIT).owners == []


def test_sync_waiter_cut_off_keeps_its_place_in_the_queue(
    sync_cut: SyncCut, threads: Threads
) -> None:
    proxy, path = sync_cut.proxy, sync_cut.path
    order: list[str] = []

    def take(semaphore: Any, who: str) -> None:
        semaphore.acquire(timeout=2 * WAIT)
        order.append(who)  # before the release: the next grant follows it
        semaphore.release(timeout=WAIT)

    with (
        sync_cut.direct.session(path) as first,
        sync_cut.cut.session(path) as second,
        sync_cut.direct.session(path) as third,
    ):
        lock = first.semaphore("queue")
        lock.acquire(timeout=WAIT)
        cut_off = second.semaphore("queue")
        threads.start(lambda: take(cut_off, "cut off"))
        poll(lambda: waiting(lock, 1), "the cut-off session waits")
        threads.start(lambda: take(third.semaphore("queue"), "direct"))
        poll(lambda: waiting(lock, 2), "the direct session waits behind it")
        before = proxy.total_connections
        proxy.drop()
        # The SDK sends its unanswered acquire again on its new stream, before this
        # describe: the server keeps the waiter where it was (YDB's rule).
        assert len(cut_off.describe(timeout=WAIT).waiters) == 2
        assert proxy.total_connections > before
        assert order == []
        lock.release(timeout=WAIT)
        threads.join()
    assert order == ["cut off", "direct"]


def test_sync_grant_lost_in_flight_is_answered_again(sync_cut: SyncCut, threads: Threads) -> None:
    proxy, path = sync_cut.proxy, sync_cut.path
    granted = threading.Event()
    with sync_cut.direct.session(path) as first, sync_cut.cut.session(path) as second:
        lock = first.semaphore("lost")
        lock.acquire(timeout=WAIT)
        mine = second.semaphore("lost")

        def take() -> None:
            mine.acquire(timeout=2 * WAIT)
            granted.set()

        threads.start(take)
        poll(lambda: waiting(lock, 1), "the cut-off session waits")
        proxy.on_loop(proxy.proxy.lose_downstream)  # the grant's answer will go nowhere
        lock.release(timeout=WAIT)
        held = poll(lambda: owners_of(lock.describe(timeout=WAIT)) or None, "the grant")
        assert not granted.is_set()
        proxy.on_loop(proxy.proxy.drop, lambda: proxy.proxy.lose_downstream(False))
        # The SDK asks again on its new stream: the session owns it, so it is granted
        # at once, and still once (one owner, count 1).
        assert granted.wait(WAIT)
        assert owners_of(mine.describe(timeout=WAIT)) == held
        assert [count for _, count in held] == [1]
        mine.release(timeout=WAIT)
        assert lock.describe(timeout=WAIT).owners == []


# -- the asyncio SDK ----------------------------------------------------------------------


@dataclass
class AioCut:
    """A server behind a proxy: ``cut`` (an SDK client) reaches it through the proxy,
    ``direct`` straight; ``path`` is a node on it."""

    proxy: NetProxy
    cut: AioCoordinationClient
    direct: AioCoordinationClient
    path: str


@pytest.fixture
async def aio_cut(serve: Callable[..., YdbServer]) -> AsyncIterator[AioCut]:
    """A :class:`AioCut` on a server of the test's own (the asyncio SDK)."""
    async with advertised_proxy() as proxy, contextlib.AsyncExitStack() as stack:
        # Discovery leads the SDK to the proxy; ``direct`` skips discovery.
        running = serve("--ydb-advertise", PROXY_HOST, ydb_port=proxy.port)
        proxy.upstream_port = running.ydb_port
        async with asyncio.timeout(WAIT):
            direct = AioDriver(endpoint=running.endpoint, database=DATABASE, disable_discovery=True)
            stack.push_async_callback(direct.stop)
            await direct.wait(timeout=WAIT, fail_fast=True)
            path = f"{DATABASE}/{unique()}"
            await AioCoordinationClient(direct).create_node(path)
            assert proxy.total_connections == 0  # ``direct`` does not go through it
            cut = AioDriver(endpoint=f"grpc://{PROXY_HOST}:{proxy.port}", database=DATABASE)
            stack.push_async_callback(cut.stop)
            await cut.wait(timeout=WAIT, fail_fast=True)
        yield AioCut(proxy, AioCoordinationClient(cut), AioCoordinationClient(direct), path)


async def test_aio_cut_stream_reconnects_to_the_same_session(aio_cut: AioCut) -> None:
    proxy, path = aio_cut.proxy, aio_cut.path
    async with (
        asyncio.timeout(2 * WAIT),
        aio_cut.cut.session(path) as session,
        aio_cut.direct.session(path) as watcher,
    ):
        lock = session.semaphore("held")
        await lock.acquire()
        held = owners_of(await watcher.semaphore("held").describe())
        assert len(held) == 1
        before = proxy.total_connections
        proxy.drop()
        # The SDK sends the describe once it has a stream again.
        assert owners_of(await lock.describe()) == held
        assert proxy.total_connections > before  # a new connection carried it
        assert owners_of(await watcher.semaphore("held").describe()) == held
        await lock.release()
        assert (await watcher.semaphore("held").describe()).owners == []


async def test_aio_waiter_cut_off_keeps_its_place_in_the_queue(aio_cut: AioCut) -> None:
    proxy, path = aio_cut.proxy, aio_cut.path
    order: list[str] = []

    async def take(semaphore: Any, who: str) -> None:
        await semaphore.acquire()
        order.append(who)  # before the release: the next grant follows it
        await semaphore.release()

    async with (
        asyncio.timeout(2 * WAIT),
        aio_cut.direct.session(path) as first,
        aio_cut.cut.session(path) as second,
        aio_cut.direct.session(path) as third,
    ):
        lock = first.semaphore("queue")
        await lock.acquire()
        cut_off = second.semaphore("queue")
        takers = [asyncio.ensure_future(take(cut_off, "cut off"))]
        await apoll(lambda: awaiting(lock, 1), "the cut-off session waits")
        takers.append(asyncio.ensure_future(take(third.semaphore("queue"), "direct")))
        await apoll(lambda: awaiting(lock, 2), "the direct session waits behind it")
        before = proxy.total_connections
        proxy.drop()
        # The SDK sends its unanswered acquire again on its new stream, before this
        # describe: the server keeps the waiter where it was (YDB's rule).
        assert len((await cut_off.describe()).waiters) == 2
        assert proxy.total_connections > before
        assert order == []
        await lock.release()
        await asyncio.gather(*takers)
    assert order == ["cut off", "direct"]


async def test_aio_grant_lost_in_flight_is_answered_again(aio_cut: AioCut) -> None:
    proxy, path = aio_cut.proxy, aio_cut.path
    async with (
        asyncio.timeout(2 * WAIT),
        aio_cut.direct.session(path) as first,
        aio_cut.cut.session(path) as second,
    ):
        lock = first.semaphore("lost")
        await lock.acquire()
        mine = second.semaphore("lost")
        taking = asyncio.ensure_future(mine.acquire())
        await apoll(functools.partial(awaiting, lock, 1), "the cut-off session waits")
        proxy.lose_downstream()  # the grant's answer will go nowhere
        await lock.release()

        async def granted() -> list[tuple[int, int]] | None:
            return owners_of(await lock.describe()) or None

        held = await apoll(granted, "the grant")
        assert not taking.done()
        proxy.drop()
        proxy.lose_downstream(False)  # (no await since the drop: no new connection yet)
        # The SDK asks again on its new stream: the session owns it, so it is granted
        # at once, and still once (one owner, count 1).
        await taking
        assert owners_of(await mine.describe()) == held
        assert [count for _, count in held] == [1]
        await mine.release()
        assert (await lock.describe()).owners == []


async def test_aio_an_update_whose_answer_was_lost_is_not_applied_again_after_another(
    aio_cut: AioCut,
) -> None:
    # The SDK sends its unanswered update again on its new stream, after the other
    # session's update: answered as the first time, not applied again
    # (tenure.compat.ydb.resent; tools/faults/findings.md).
    proxy, path = aio_cut.proxy, aio_cut.path
    async with (
        asyncio.timeout(2 * WAIT),
        aio_cut.cut.session(path) as session,
        aio_cut.direct.session(path) as other,
    ):
        mine, theirs = session.semaphore("data"), other.semaphore("data")
        await theirs.acquire()  # (the SDK's acquire makes the semaphore)
        await theirs.release()
        await mine.update(b"mine-1")
        proxy.lose_downstream()  # the next update's answer will go nowhere
        updating = asyncio.ensure_future(mine.update(b"mine-2"))

        async def applied() -> bool | None:
            return (await theirs.describe()).data == b"mine-2" or None

        await apoll(applied, "the update applied")
        await theirs.update(b"theirs")
        assert not updating.done()
        proxy.drop()
        proxy.lose_downstream(False)
        await updating  # answered on the new stream
        assert (await theirs.describe()).data == b"theirs"
        assert (await mine.describe()).data == b"theirs"
