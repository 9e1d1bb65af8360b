"""Semaphore watches on etcd: the latest state after each watched change.

A watch reads the semaphore (one Range, revision R) and watches its whole range
(record, requests, grants) from R + 1 on the client's one Watch stream. After each
batch of events it reads the semaphore again: that is the latest state, so a
consumer that was busy gets the newest state, never a queue of old ones. A state
that does not differ from the last one yielded in what is watched (data, owners,
waiters; existence and limit always) is not yielded: the engine backends fire
only on a watched change, and so does this.

When etcd cancels the watch because R + 1 was compacted away, the state is read
at the current revision and the watch starts again after it, so the watcher sees
the latest state first (never replaying from an old revision: etcd-io/etcd#13156).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Self

from tenure._core.values import SemaphoreDescription

if TYPE_CHECKING:
    from tenure.backends.etcd._session import EtcdSession
    from tenure.backends.etcd._streams import Watcher

__all__ = ["EtcdWatch"]


class EtcdWatch:
    """A :class:`~tenure.backends._base.WatchStream` over one etcd watch."""

    def __init__(
        self, session: EtcdSession, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> None:
        self._session = session
        self._name = name
        self._what = (data, owners, waiters)
        self._watcher: Watcher | None = None
        self._first: SemaphoreDescription | None = None
        self._last: tuple[Any, ...] | None = None
        self._closed = False

    async def start(self) -> None:
        """Read the state and arm the watch after it."""
        state = await self._session.read(self._name)
        prefix = self._session.layout.semaphore(self._session.node, self._name)
        self._watcher = self._session.backend.watch_range(prefix, state.revision + 1)
        self._session.watches += 1
        self._first = self._describe(state)
        self._last = self._project(self._first)

    def _describe(self, state: Any) -> SemaphoreDescription:
        _, owners, waiters = self._what
        description: SemaphoreDescription = state.describe(owners=owners, waiters=waiters)
        return description

    def _project(self, d: SemaphoreDescription) -> tuple[Any, ...]:
        data, owners, waiters = self._what
        return (
            d.exists,
            d.limit,
            d.ephemeral,
            d.data if data else None,
            (d.count, d.owners) if owners else None,
            d.waiters if waiters else None,
        )

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SemaphoreDescription:
        """The state when armed, then the latest state after each watched change."""
        if self._closed:
            raise StopAsyncIteration
        if self._first is not None:
            first, self._first = self._first, None
            return first
        session, watcher = self._session, self._watcher
        assert watcher is not None
        while True:
            session.check_alive()
            waiting = asyncio.ensure_future(watcher.wait())
            lost = asyncio.ensure_future(session.lost.wait())
            try:
                await asyncio.wait({waiting, lost}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiting.cancel()
                lost.cancel()
            if self._closed:
                raise StopAsyncIteration
            session.check_alive()
            _, reset = watcher.drain()
            state = await session.read(self._name)
            if reset:
                watcher.restart(state.revision + 1)
            description = self._describe(state)
            projection = self._project(description)
            if projection != self._last:
                self._last = projection
                return description

    async def aclose(self) -> None:
        """Stop watching (idempotent)."""
        if not self._closed:
            self._closed = True
            if self._watcher is not None:
                self._watcher.cancel()
                self._session.watches -= 1
