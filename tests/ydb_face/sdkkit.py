"""Helpers of the YDB SDK tests (sync and asyncio): bounded polls, a full node config,
and a fault-injecting proxy the SDK's discovery leads to.

The SDK's coordination calls block only as long as the server answers; what a test
waits for (a waiter to appear, an owner to go) is polled with a bounded loop of
describes, never slept for.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import ydb
from ydb.coordination import ConsistencyMode, NodeConfig, RateLimiterCountersMode

from tests.netproxy import NetProxy
from tests.ports import free_port
from tests.server.wire import WAIT

T = TypeVar("T")

#: Where the proxies listen: the SDK finds them by discovery, from a server started
#: with ``--ydb-advertise PROXY_HOST`` on the proxy's port number (it listens on
#: 127.0.0.1, the proxy on this other loopback address, with the same port number).
PROXY_HOST = "127.0.0.2"

#: Settings that bound one of the SDK's unary calls (the node calls) by WAIT.
BOUNDED = ydb.BaseRequestSettings().with_timeout(WAIT)

#: Between two polls of a describe, seconds (a poll is a round trip, not a timing claim).
POLL_PAUSE = 0.02

#: A node config with every field set to a value other than YDB's default.
FULL_CONFIG = NodeConfig(
    attach_consistency_mode=ConsistencyMode.RELAXED,
    rate_limiter_counters_mode=RateLimiterCountersMode.DETAILED,
    read_consistency_mode=ConsistencyMode.STRICT,
    self_check_period_millis=1500,
    session_grace_period_millis=7000,
)

#: An alter that sets only the grace period (the other fields are unset: kept).
GRACE_ONLY = NodeConfig(
    attach_consistency_mode=ConsistencyMode.UNSET,
    rate_limiter_counters_mode=RateLimiterCountersMode.UNSET,
    read_consistency_mode=ConsistencyMode.UNSET,
    self_check_period_millis=0,
    session_grace_period_millis=12000,
)

#: FULL_CONFIG after GRACE_ONLY: only the grace period changed.
FULL_AFTER_GRACE = NodeConfig(
    attach_consistency_mode=ConsistencyMode.RELAXED,
    rate_limiter_counters_mode=RateLimiterCountersMode.DETAILED,
    read_consistency_mode=ConsistencyMode.STRICT,
    self_check_period_millis=1500,
    session_grace_period_millis=12000,
)

#: Another full config (for a create over an existing node, which must not apply it).
OTHER_CONFIG = NodeConfig(
    attach_consistency_mode=ConsistencyMode.STRICT,
    rate_limiter_counters_mode=RateLimiterCountersMode.AGGREGATED,
    read_consistency_mode=ConsistencyMode.RELAXED,
    self_check_period_millis=2500,
    session_grace_period_millis=9000,
)


def poll(check: Callable[[], T | None], what: str) -> T:
    """``check()``'s first result that is not None, within WAIT (else AssertionError)."""
    deadline = time.monotonic() + WAIT
    while True:
        found = check()
        if found is not None:
            return found
        assert time.monotonic() < deadline, f"within {WAIT}s: {what}"
        time.sleep(POLL_PAUSE)


async def apoll(check: Callable[[], Awaitable[T | None]], what: str) -> T:
    """``await check()``'s first result that is not None, within WAIT."""
    deadline = time.monotonic() + WAIT
    while True:
        found = await check()
        if found is not None:
            return found
        assert time.monotonic() < deadline, f"within {WAIT}s: {what}"
        await asyncio.sleep(POLL_PAUSE)


def waiting(semaphore: Any, count: int) -> bool | None:
    """True once ``count`` sessions wait for a sync SDK ``semaphore`` (None before)."""
    return len(semaphore.describe(timeout=WAIT).waiters) == count or None


async def awaiting(semaphore: Any, count: int) -> bool | None:
    """True once ``count`` sessions wait for an asyncio SDK ``semaphore`` (None before)."""
    return len((await semaphore.describe()).waiters) == count or None


class Threads:
    """Worker threads whose failures fail the test (each joined within WAIT)."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self, work: Callable[[], None]) -> None:
        """Run ``work`` in a new thread."""

        def run() -> None:
            try:
                work()
            except BaseException as error:  # reported by join()
                self.errors.append(error)

        thread = threading.Thread(target=run, daemon=True)
        self.threads.append(thread)
        thread.start()

    def join(self) -> None:
        """Wait for every thread; raise the first failure."""
        for thread in self.threads:
            thread.join(2 * WAIT)
            assert not thread.is_alive(), "a worker thread is stuck"
        if self.errors:
            raise self.errors[0]


def owners_of(described: Any) -> list[tuple[int, int]]:
    """(session id, count) of each owner in an SDK ``DescribeLockResult``, sorted."""
    return sorted((owner.session_id, owner.count) for owner in described.owners)


def advertised_proxy() -> NetProxy:
    """A NetProxy (not started) that listens on PROXY_HOST; its upstream is set later.

    The server is then started on 127.0.0.1 with the proxy's port number (what it
    advertises): the number is one of this xdist worker's (:func:`tests.ports.free_port`),
    not any the OS hands out, which another worker's server could take on 127.0.0.1
    first (a run failed so: "port ... is in use")."""
    proxy = NetProxy("127.0.0.1", 0)
    proxy.host = PROXY_HOST
    proxy.port = free_port()
    return proxy


class ThreadedProxy:
    """A :class:`NetProxy` on an event loop of its own thread, for the sync SDK."""

    def __init__(self, loop: asyncio.AbstractEventLoop, proxy: NetProxy) -> None:
        self._loop = loop
        self.proxy = proxy

    @property
    def port(self) -> int:
        """The port the proxy listens on."""
        return int(self.proxy.port)

    @property
    def total_connections(self) -> int:
        """TCP connections the proxy has accepted so far."""
        return int(self.proxy.total_connections)

    def drop(self) -> None:
        """Reset every connection through the proxy now (new ones are accepted)."""
        self.on_loop(self.proxy.drop)

    def on_loop(self, *steps: Callable[[], object]) -> None:
        """Run ``steps`` on the proxy's loop, in one go (no connection comes in between)."""
        self._run(self._steps(steps))

    async def _steps(self, steps: tuple[Callable[[], object], ...]) -> None:
        for step in steps:
            step()

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(WAIT)


@contextmanager
def threaded_proxy() -> Iterator[ThreadedProxy]:
    """An :func:`advertised_proxy`, started on a loop of its own thread; closed at exit."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="netproxy", daemon=True)
    thread.start()
    proxy = advertised_proxy()
    threaded = ThreadedProxy(loop, proxy)
    try:
        threaded._run(proxy.start())
        yield threaded
    finally:
        try:
            threaded._run(proxy.aclose())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(WAIT)
            loop.close()
