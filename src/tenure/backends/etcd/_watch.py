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

from typing import TYPE_CHECKING, Any

from tenure._core.values import SemaphoreDescription
from tenure.backends._readback import ReadbackWatch, first_of
from tenure.backends.etcd._who import identified

if TYPE_CHECKING:
    from tenure.backends.etcd._session import EtcdSession
    from tenure.backends.etcd._streams import Watcher

__all__ = ["EtcdWatch"]


class EtcdWatch(ReadbackWatch):
    """A :class:`~tenure.backends._base.WatchStream` over one etcd watch."""

    def __init__(
        self, session: EtcdSession, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> None:
        super().__init__(name, data=data, owners=owners, waiters=waiters)
        self._session = session
        self._watcher: Watcher | None = None

    async def _arm(self) -> SemaphoreDescription:
        """Read the state and arm the watch after it."""
        state = await self._session.read(self._name)
        prefix = self._session.layout.semaphore(self._session.node, self._name)
        self._watcher = self._session.backend.watch_range(prefix, state.revision + 1)
        self._session.watches += 1
        return await self._describe(state)

    async def _describe(self, state: Any) -> SemaphoreDescription:
        description: SemaphoreDescription = state.describe(
            owners=self._owners, waiters=self._waiters
        )
        session = self._session
        return await identified(session.conn, session.layout, session.node, description)

    async def _wait(self) -> None:
        assert self._watcher is not None
        self._session.check_alive()
        await first_of(self._watcher.wait(), self._session.lost.wait())

    async def _read(self) -> SemaphoreDescription:
        session, watcher = self._session, self._watcher
        assert watcher is not None
        session.check_alive()
        _, reset = watcher.drain()
        state = await session.read(self._name)
        if reset:
            watcher.restart(state.revision + 1)
        return await self._describe(state)

    async def _disarm(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            self._session.watches -= 1
