"""A backend session that speaks engine commands over a channel.

Both ``memory://`` (the channel is a direct call into an in-process host) and
``tenure://`` (the channel is a network connection) drive the same engine, so they
share this one implementation of :class:`~tenure.backends._base.BackendSession`:
request ids, pending acquires, armed watches, and turning effects into futures.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from tenure._core import (
    Acquire,
    AcquireFailed,
    AcquireStatus,
    CancelAcquire,
    CancelWatch,
    CloseSession,
    Command,
    CreateSemaphore,
    DeleteSemaphore,
    DescribeSemaphore,
    Effect,
    Granted,
    LeaseLost,
    Release,
    Renew,
    SemaphoreDescription,
    SessionEnded,
    UpdateSemaphore,
    WatchFired,
)
from tenure.backends._base import Grant, SessionListener, WatchFeed
from tenure.errors import LostError, SessionClosedError, TenureError, error_from_code

R = TypeVar("R")

__all__ = ["CommandChannel", "EngineSession"]


class CommandChannel(Protocol):
    """Carries one command to the engine and brings back its reply (or raises its error)."""

    async def call(self, command: Command[R]) -> R:
        """Apply ``command`` and return the reply."""


class EngineSession:
    """A :class:`~tenure.backends._base.BackendSession` over a :class:`CommandChannel`.

    The channel owner must pass every effect addressed to this session to
    :meth:`deliver`.
    """

    def __init__(
        self,
        channel: CommandChannel,
        session_id: int,
        listener: SessionListener,
        *,
        protection_key: bytes,
        seq_no: int,
    ) -> None:
        self._channel = channel
        self._session_id = session_id
        self._listener = listener
        self.protection_key = protection_key
        self.seq_no = seq_no
        self._last_request_id = 0
        self._pending: dict[int, asyncio.Future[Grant]] = {}
        self._orphan_grants: set[int] = set()  # granted after the asker gave up
        self._watches: dict[int, WatchFeed] = {}
        self._tasks: set[asyncio.Task[object]] = set()
        self.ended: LostError | None = None

    @property
    def session_id(self) -> int:
        """The engine's id of this session."""
        return self._session_id

    # -- effects --------------------------------------------------------------------

    def deliver(self, effect: Effect) -> None:
        """Turn one effect addressed to this session into a future's outcome or a callback."""
        if isinstance(effect, Granted):
            grant = Grant(effect.token, effect.count, effect.lease_ttl)
            future = self._pending.get(effect.request_id)
            if future is not None and not future.done():
                future.set_result(grant)
            else:
                self._orphan_grants.add(effect.request_id)
        elif isinstance(effect, AcquireFailed):
            future = self._pending.get(effect.request_id)
            if future is not None and not future.done():
                future.set_exception(error_from_code(effect.code, effect.message))
        elif isinstance(effect, WatchFired):
            feed = self._watches.get(effect.watch_id)
            if feed is not None:
                feed.put(effect.description)
        elif isinstance(effect, LeaseLost):
            error = error_from_code(effect.code, effect.message)
            assert isinstance(error, LostError)
            self._listener.lease_lost(effect.name, effect.token, error)
        elif isinstance(effect, SessionEnded):
            error = error_from_code(effect.code, effect.message)
            assert isinstance(error, LostError)
            self.end(error)
            self._listener.session_lost(error)

    def end(self, error: LostError) -> None:
        """Fail everything still waiting with ``error``; the session is gone."""
        if self.ended is None:
            self.ended = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
                future.exception()  # retrieved here so an unawaited one does not warn
        for feed in self._watches.values():
            feed.fail(error)
        self._pending.clear()
        self._watches.clear()

    # -- operations -----------------------------------------------------------------

    async def acquire(
        self, name: str, *, count: int, data: bytes, timeout: float | None, ephemeral: bool
    ) -> Grant | None:
        """See :meth:`tenure.backends._base.BackendSession.acquire`."""
        self._check_alive()
        self._last_request_id += 1
        request_id = self._last_request_id
        future: asyncio.Future[Grant] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            command = Acquire(self._session_id, name, count, request_id, data, timeout, ephemeral)
            result = await self._channel.call(command)
            if result.status is AcquireStatus.GRANTED:
                assert result.token is not None
                return Grant(result.token, result.count, result.lease_ttl)
            if result.status is AcquireStatus.BUSY:
                return None
            try:
                return await future
            except asyncio.CancelledError:
                await self._withdraw(name, request_id, future)
                raise
        finally:
            self._pending.pop(request_id, None)

    async def _withdraw(self, name: str, request_id: int, future: asyncio.Future[Grant]) -> None:
        """The asker gave up: cancel the queued request, or release a grant that raced it."""
        if self.ended is not None:
            return
        still_queued = await self._channel.call(CancelAcquire(self._session_id, name, request_id))
        granted = request_id in self._orphan_grants or (
            future.done() and not future.cancelled() and future.exception() is None
        )
        self._orphan_grants.discard(request_id)
        if not still_queued and granted:
            await self._channel.call(Release(self._session_id, name))

    async def release(self, name: str) -> bool:
        """See :meth:`tenure.backends._base.BackendSession.release`."""
        self._check_alive()
        return await self._channel.call(Release(self._session_id, name))

    async def renew(self, name: str) -> float:
        """See :meth:`tenure.backends._base.BackendSession.renew`."""
        self._check_alive()
        return await self._channel.call(Renew(self._session_id, name))

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """See :meth:`tenure.backends._base.BackendSession.create_semaphore`."""
        self._check_alive()
        await self._channel.call(CreateSemaphore(self._session_id, name, limit, data))

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """See :meth:`tenure.backends._base.BackendSession.update_semaphore`."""
        self._check_alive()
        await self._channel.call(UpdateSemaphore(self._session_id, name, data))

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """See :meth:`tenure.backends._base.BackendSession.delete_semaphore`."""
        self._check_alive()
        await self._channel.call(DeleteSemaphore(self._session_id, name, force))

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """See :meth:`tenure.backends._base.BackendSession.describe_semaphore`."""
        self._check_alive()
        command = DescribeSemaphore(self._session_id, name, owners=owners, waiters=waiters)
        return (await self._channel.call(command)).description

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> tuple[SemaphoreDescription, WatchFeed]:
        """See :meth:`tenure.backends._base.BackendSession.watch_semaphore`."""
        self._check_alive()
        command = DescribeSemaphore(
            self._session_id,
            name,
            owners=owners,
            waiters=waiters,
            watch_data=data,
            watch_owners=owners,
            watch_waiters=waiters,
            watch_repeat=True,
        )
        result = await self._channel.call(command)
        assert result.watch_id is not None
        watch_id = result.watch_id

        def disarm() -> None:
            if self._watches.pop(watch_id, None) is not None and self.ended is None:
                self._spawn(self._channel.call(CancelWatch(self._session_id, watch_id)))

        feed = self._watches[watch_id] = WatchFeed(disarm)
        return result.description, feed

    async def close(self) -> None:
        """See :meth:`tenure.backends._base.BackendSession.close`."""
        if self.ended is not None:
            return
        self.end(SessionClosedError(f"session {self._session_id} was closed"))
        await self._channel.call(CloseSession(self._session_id))

    # -- helpers --------------------------------------------------------------------

    def _check_alive(self) -> None:
        if self.ended is not None:
            raise type(self.ended)(*self.ended.args)

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        async def run() -> None:
            # If the session or connection is gone, the watch went with it.
            with contextlib.suppress(TenureError, OSError):
                await coro

        task: asyncio.Task[object] = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
