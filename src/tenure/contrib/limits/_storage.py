"""The two storages limits finds by URL scheme: blocking and asyncio.

Both are the same :class:`~._keeper.LimitsKeeper`: the asyncio storage runs it on the
caller's event loop, over a client of its own; the blocking one on the loop of the
process's shared client of its URL (:func:`tenure.sync.shared_client`: one per
process, fork-aware, closed at exit), so Flask's threads, slowapi's and any other
caller share one connection and session.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from limits.aio import storage as aio
from limits.storage import MovingWindowSupport, SlidingWindowCounterSupport, Storage

import tenure
import tenure.sync
from tenure.contrib.limits._keeper import LimitsKeeper
from tenure.contrib.limits._names import DEFAULT_PREFIX, DEFAULT_TIMEOUT, check_call
from tenure.errors import InvalidArgumentError, TenureError

Clock = Callable[[], float]
T = TypeVar("T")
P = ParamSpec("P")
#: One of the keeper's operations, called with the keeper first.
Op = Callable[Concatenate[LimitsKeeper, P], Coroutine[Any, Any, T]]


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

    It runs on the process's shared client of the URL
    (``tenure.sync.shared_client(url, client_name="limits storage")``), on first use:
    one connection for every storage of the process with that URL, never the
    parent's in a child made by fork (it opens the child's own), closed at exit.
    :meth:`close` ends the storage's session (the connection is the process's).
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

        def keeper(client: tenure.Client | None) -> LimitsKeeper:
            return LimitsKeeper(
                uri,
                client=client,
                node=node,
                key_prefix=key_prefix,
                recovery_window=recovery_window,
                timeout=timeout,
                clock=clock,
            )

        self._new_keeper = keeper
        #: Over the client it runs on (its loop's only): none yet. (Made now to check
        #: the arguments before anything is sent.)
        self._keeper = keeper(None)
        #: The node the storage keeps its records in.
        self.node = self._keeper.node
        #: The loop it last ran on (its shared client's portal then): what close() ends.
        self._portal: tenure.sync.Portal | None = None

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        """What limits wraps in its StorageError when asked: tenure's errors."""
        return TenureError

    def _run(self, op: Op[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """``await op(keeper, ...)`` on the shared client's loop. (Each caller checks its
        arguments first, as the keeper does again: bad ones are refused before the
        shared client connects.)"""
        client = tenure.sync.shared_client(self._keeper.url, client_name="limits storage")
        self._portal = portal = client.portal
        return portal.call(self._on_loop, client.async_client, op, *args, **kwargs)

    async def _on_loop(
        self, client: tenure.Client, op: Op[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        # On the loop's one thread: no lock needed. A keeper over another client (none
        # yet; a parent's, in a child made by fork; one closed by hand since) is
        # replaced: its session and holds are that client's.
        if self._keeper.client is not client:
            self._keeper = self._new_keeper(client)
        return await op(self._keeper, *args, **kwargs)

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Fixed window: add ``amount`` hits (starting a window of ``expiry`` seconds if
        none runs); the window's count."""
        check_call(key, expiry=expiry, amount=amount)
        return self._run(LimitsKeeper.incr, key, expiry, amount)

    def get(self, key: str) -> int:
        """Fixed window: the hits of the window running now (0 if none)."""
        check_call(key)
        return self._run(LimitsKeeper.get, key)

    def get_expiry(self, key: str) -> float:
        """Fixed window: when the window running now ends (now if none), UNIX seconds."""
        check_call(key)
        return self._run(LimitsKeeper.get_expiry, key)

    def check(self) -> bool:
        """Whether the storage reaches its node."""
        return self._run(LimitsKeeper.check)

    def reset(self) -> int | None:
        """Clear every record of the storage; how many there were."""
        return self._run(LimitsKeeper.reset)

    def clear(self, key: str) -> None:
        """Clear the record of ``key``, whatever its strategy."""
        check_call(key)
        self._run(LimitsKeeper.clear, key)

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """Moving window: log ``amount`` hits if fewer than ``limit - amount + 1`` went in
        the last ``expiry`` seconds; whether it did."""
        check_call(key, expiry=expiry, limit=limit, amount=amount)
        return self._run(LimitsKeeper.acquire_entry, key, limit, expiry, amount)

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """Moving window: when its oldest hit went, and its hits."""
        check_call(key, expiry=expiry, limit=limit)
        return self._run(LimitsKeeper.get_moving_window, key, limit, expiry)

    def acquire_sliding_window_entry(
        self, key: str, limit: int, expiry: int, amount: int = 1
    ) -> bool:
        """Sliding window counter: count ``amount`` hits if the weighted count leaves
        room; whether it did."""
        check_call(key, expiry=expiry, limit=limit, amount=amount)
        return self._run(LimitsKeeper.acquire_sliding_window_entry, key, limit, expiry, amount)

    def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        """Sliding window counter: (previous hits, its seconds left, current hits, its
        seconds left)."""
        check_call(key, expiry=expiry)
        return self._run(LimitsKeeper.get_sliding_window, key, expiry)

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        """Sliding window counter: clear the key's buckets."""
        self.clear(key)

    def close(self) -> None:
        """End the storage's session (records nobody else holds go with it); it opens
        another if used after. The connection is the process's shared client's, closed
        at exit."""
        portal = self._portal
        if portal is not None and not portal.closed:  # (closed: a parent's, or by hand)
            portal.call(self._close_on_loop)

    async def _close_on_loop(self) -> None:
        await self._keeper.close()


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
