"""A cut in the middle: YDB's Python SDK (sync and asyncio) behind a TCP proxy that resets.

Discovery leads the SDK to the proxy (the server advertises the proxy's address,
``--ydb-advertise``, on the same port number); a second client goes straight to the
server and watches. When the proxy resets the connection, the SDK opens a new one
and re-attaches its session: the session id is kept, a held semaphore stays held
(the watcher sees it) and is released normally, and an acquire that was waiting is
sent again and keeps its place in the queue.
"""

from __future__ import annotations

import asyncio
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
    with threaded_proxy() as proxy:
        # Discovery leads the SDK to the proxy; ``direct`` skips discovery.
        running = serve("--ydb-advertise", PROXY_HOST, ydb_port=proxy.port)
        proxy.proxy.upstream_port = running.ydb_port
        cut = ydb.Driver(endpoint=f"grpc://{PROXY_HOST}:{proxy.port}", database=DATABASE)
        direct = ydb.Driver(endpoint=running.endpoint, database=DATABASE, disable_discovery=True)
        try:
            cut.wait(timeout=WAIT, fail_fast=True)
            direct.wait(timeout=WAIT, fail_fast=True)
            path = f"{DATABASE}/{unique()}"
            CoordinationClient(direct).create_node(path, settings=BOUNDED)
            yield SyncCut(proxy, CoordinationClient(cut), CoordinationClient(direct), path)
        finally:
            cut.stop()
            direct.stop()


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
    async with advertised_proxy() as proxy:
        # Discovery leads the SDK to the proxy; ``direct`` skips discovery.
        running = serve("--ydb-advertise", PROXY_HOST, ydb_port=proxy.port)
        proxy.upstream_port = running.ydb_port
        cut = AioDriver(endpoint=f"grpc://{PROXY_HOST}:{proxy.port}", database=DATABASE)
        direct = AioDriver(endpoint=running.endpoint, database=DATABASE, disable_discovery=True)
        try:
            async with asyncio.timeout(WAIT):
                await cut.wait(timeout=WAIT, fail_fast=True)
                await direct.wait(timeout=WAIT, fail_fast=True)
                path = f"{DATABASE}/{unique()}"
                await AioCoordinationClient(direct).create_node(path)
            yield AioCut(proxy, AioCoordinationClient(cut), AioCoordinationClient(direct), path)
        finally:
            await cut.stop()
            await direct.stop()


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
