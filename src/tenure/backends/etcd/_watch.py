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

from tenure._core.values import SemaphoreDescription
from tenure.backends._readback import ReadbackWatch, first_of
from tenure.backends.etcd._keys import prefix_end
from tenure.backends.etcd._queue import SemState
from tenure.backends.etcd._streams import Watcher
from tenure.backends.etcd._types import SessionParts
from tenure.backends.etcd._who import identified

__all__ = ["EtcdWatch"]


class EtcdWatch(ReadbackWatch):
    """A :class:`~tenure.backends._base.WatchStream` over one etcd watch.

    ``armed`` is the session's set of armed watches (failed when the session ends).
    """

    def __init__(
        self,
        parts: SessionParts,
        armed: set[ReadbackWatch],
        name: str,
        *,
        data: bool,
        owners: bool,
        waiters: bool,
    ) -> None:
        super().__init__(name, data=data, owners=owners, waiters=waiters)
        self._parts = parts
        self._armed = armed
        self._watcher: Watcher | None = None

    async def _arm(self) -> SemaphoreDescription:
        """Read the state and arm the watch after it."""
        parts = self._parts
        state = await parts.sender.read(self._name)
        prefix = parts.layout.semaphore(parts.node, self._name)
        self._watcher = parts.hub.watch(prefix, prefix_end(prefix), state.revision + 1)
        self._armed.add(self)
        return await self._describe(state)

    async def _describe(self, state: SemState) -> SemaphoreDescription:
        description = state.describe(owners=self._owners, waiters=self._waiters)
        parts = self._parts
        return await identified(parts.conn, parts.layout, parts.node, description)

    async def _wait(self) -> None:
        assert self._watcher is not None
        await first_of(self._watcher.wait(), self._news.wait())

    async def _read(self) -> SemaphoreDescription:
        watcher = self._watcher
        assert watcher is not None
        _, reset = watcher.drain()
        state = await self._parts.sender.read(self._name)
        if reset:
            watcher.restart(state.revision + 1)
        return await self._describe(state)

    async def _disarm(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None
        self._armed.discard(self)
