"""The two storages limits finds by URL scheme: blocking and asyncio.

Both are the same :class:`~._keeper.LimitsKeeper`: the asyncio storage runs it on the
caller's event loop, the blocking one on a :class:`tenure.sync.Portal` of its own
(an event loop in a background thread, as ``tenure.sync`` runs its clients), so
Flask's threads, slowapi's and any other caller share one connection and session.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable

from limits.aio import storage as aio
from limits.storage import MovingWindowSupport, SlidingWindowCounterSupport, Storage

from tenure.contrib.limits._keeper import LimitsKeeper
from tenure.contrib.limits._names import DEFAULT_PREFIX, DEFAULT_TIMEOUT
from tenure.errors import InvalidArgumentError, TenureError
from tenure.sync import Portal

Clock = Callable[[], float]


def _refuse_unknown(options: dict[str, float | str | bool]) -> None:
    if options:
        raise InvalidArgumentError(
            f"unknown option(s) of the tenure storage: {', '.join(sorted(options))} "
            "(it takes node, key_prefix, recovery_window, timeout, clock and wrap_exceptions; "
            "the tenure URL's own options go in the URL)"
        )


class TenureStorage(Storage, MovingWindowSupport, SlidingWindowCounterSupport):
    """limits' storage on a tenure server: ``tenure://host:port?node=limits``.

    Every strategy of limits: the fixed window, the moving window and the sliding
    window counter, each key's record kept in the node (docs/integrations.md,
    "limits"). ``tenures://`` connects over TLS, and every option of a tenure URL
    (``token``, ``ca``, several ``host:port`` of a cluster...) goes in the URL.

    Args:
        uri: the storage URL; ``?node=`` names the node (``limits`` by default),
            created if missing.
        wrap_exceptions: raise tenure's errors wrapped in limits'
            ``StorageError`` (limits' own option).
        node: the node, instead of the URL's ``node``.
        key_prefix: what the names of the storage's semaphores start with (``reset``
            clears those only).
        recovery_window: of the storage's session (None: the node's): how long
            after this process dies its holds keep the records it wrote.
        timeout: the longest a call waits for the server, in seconds (past it:
            UnavailableError), as the client would otherwise wait for a server that
            went away for up to the session's recovery window.
        clock: the wall clock that times the windows (UNIX seconds; tests pass
            their own).

    It connects on first use, and again in a process forked after that (a child
    never uses its parent's connection). :meth:`close` ends its session.
    """

    # (A list, as limits' registry reads it when the class is made.)
    STORAGE_SCHEME = ["tenure", "tenures"]  # noqa: RUF012

    def __init__(
        self,
        uri: str,
        wrap_exceptions: bool = False,
        *,
        node: str | None = None,
        key_prefix: str = DEFAULT_PREFIX,
        recovery_window: float | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        clock: Clock = time.time,
        **options: float | str | bool,
    ) -> None:
        _refuse_unknown(options)
        super().__init__(uri, wrap_exceptions=wrap_exceptions)

        def keeper() -> LimitsKeeper:
            return LimitsKeeper(
                uri,
                node=node,
                key_prefix=key_prefix,
                recovery_window=recovery_window,
                timeout=timeout,
                clock=clock,
            )

        self._new_keeper = keeper
        self._keeper = keeper()  # (checks the arguments now, before anything is sent)
        #: The node the storage keeps its records in.
        self.node = self._keeper.node
        self._portal: Portal | None = None
        self._pid = os.getpid()
        self._guard = threading.Lock()

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        """What limits wraps in its StorageError when asked: tenure's errors."""
        return TenureError

    def _running(self) -> tuple[Portal, LimitsKeeper]:
        if self._pid != os.getpid():
            # Forked: the parent's portal thread is not here, and its connection and
            # session are the parent's. Start afresh, leaving theirs alone.
            self._guard, self._portal, self._pid = threading.Lock(), None, os.getpid()
            self._keeper = self._new_keeper()
        with self._guard:
            if self._portal is None:
                self._portal = Portal("tenure-limits")
            return self._portal, self._keeper

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Fixed window: add ``amount`` hits (starting a window of ``expiry`` seconds if
        none runs); the window's count."""
        portal, keeper = self._running()
        return portal.call(keeper.incr, key, expiry, amount)

    def get(self, key: str) -> int:
        """Fixed window: the hits of the window running now (0 if none)."""
        portal, keeper = self._running()
        return portal.call(keeper.get, key)

    def get_expiry(self, key: str) -> float:
        """Fixed window: when the window running now ends (now if none), UNIX seconds."""
        portal, keeper = self._running()
        return portal.call(keeper.get_expiry, key)

    def check(self) -> bool:
        """Whether the storage reaches its node."""
        portal, keeper = self._running()
        return portal.call(keeper.check)

    def reset(self) -> int | None:
        """Clear every record of the storage; how many there were."""
        portal, keeper = self._running()
        return portal.call(keeper.reset)

    def clear(self, key: str) -> None:
        """Clear the record of ``key``, whatever its strategy."""
        portal, keeper = self._running()
        portal.call(keeper.clear, key)

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """Moving window: log ``amount`` hits if fewer than ``limit - amount + 1`` went in
        the last ``expiry`` seconds; whether it did."""
        portal, keeper = self._running()
        return portal.call(keeper.acquire_entry, key, limit, expiry, amount)

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """Moving window: when its oldest hit went, and its hits."""
        portal, keeper = self._running()
        return portal.call(keeper.get_moving_window, key, limit, expiry)

    def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        """Sliding window counter: count ``amount`` hits if the weighted count leaves
        room; whether it did."""
        portal, keeper = self._running()
        return portal.call(keeper.acquire_sliding_window_entry, key, limit, expiry, amount)

    def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        """Sliding window counter: (previous hits, its seconds left, current hits, its
        seconds left)."""
        portal, keeper = self._running()
        return portal.call(keeper.get_sliding_window, key, expiry)

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        """Sliding window counter: clear the key's buckets."""
        self.clear(key)

    def close(self) -> None:
        """End the session and the connection (records nobody else holds go with
        them); the storage connects again if used after."""
        with self._guard:
            portal, self._portal = self._portal, None
        if portal is not None and self._pid == os.getpid():
            try:
                portal.call(self._keeper.close)
            finally:
                portal.close()
                self._keeper = self._new_keeper()


class AsyncTenureStorage(aio.Storage, aio.MovingWindowSupport, aio.SlidingWindowCounterSupport):
    """The asyncio twin of :class:`TenureStorage`: ``async+tenure://host:port``.

    Its methods run on the event loop of their caller: one loop per storage (the
    first that uses it). Same arguments as :class:`TenureStorage`.
    """

    STORAGE_SCHEME = ["async+tenure", "async+tenures"]  # noqa: RUF012

    def __init__(
        self,
        uri: str,
        wrap_exceptions: bool = False,
        *,
        node: str | None = None,
        key_prefix: str = DEFAULT_PREFIX,
        recovery_window: float | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        clock: Clock = time.time,
        **options: float | str | bool,
    ) -> None:
        _refuse_unknown(options)
        super().__init__(uri, wrap_exceptions=wrap_exceptions)
        self._keeper = LimitsKeeper(
            uri,
            node=node,
            key_prefix=key_prefix,
            recovery_window=recovery_window,
            timeout=timeout,
            clock=clock,
        )
        #: The node the storage keeps its records in.
        self.node = self._keeper.node
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        """What limits wraps in its StorageError when asked: tenure's errors."""
        return TenureError

    def _on_loop(self) -> LimitsKeeper:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise InvalidArgumentError(
                "an async tenure storage runs on the event loop that used it first; "
                "make one storage per loop"
            )
        return self._keeper

    async def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Fixed window: add ``amount`` hits; the window's count."""
        return await self._on_loop().incr(key, expiry, amount)

    async def get(self, key: str) -> int:
        """Fixed window: the hits of the window running now (0 if none)."""
        return await self._on_loop().get(key)

    async def get_expiry(self, key: str) -> float:
        """Fixed window: when the window running now ends (now if none)."""
        return await self._on_loop().get_expiry(key)

    async def check(self) -> bool:
        """Whether the storage reaches its node."""
        return await self._on_loop().check()

    async def reset(self) -> int | None:
        """Clear every record of the storage; how many there were."""
        return await self._on_loop().reset()

    async def clear(self, key: str) -> None:
        """Clear the record of ``key``, whatever its strategy."""
        await self._on_loop().clear(key)

    async def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """Moving window: log ``amount`` hits if there is room; whether it did."""
        return await self._on_loop().acquire_entry(key, limit, expiry, amount)

    async def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """Moving window: when its oldest hit went, and its hits."""
        return await self._on_loop().get_moving_window(key, limit, expiry)

    async def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        """Sliding window counter: count ``amount`` hits if there is room; whether it did."""
        return await self._on_loop().acquire_sliding_window_entry(key, limit, expiry, amount)

    async def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        """Sliding window counter: both buckets' hits and seconds left."""
        return await self._on_loop().get_sliding_window(key, expiry)

    async def clear_sliding_window(self, key: str, expiry: int) -> None:
        """Sliding window counter: clear the key's buckets."""
        await self._on_loop().clear(key)

    async def close(self) -> None:
        """End the session and the connection; it connects again if used after."""
        await self._on_loop().close()
