"""Semaphore watches on etcd: the latest state after each watched change.

A watch watches the semaphore's whole range (record, requests, grants) on the
client's one Watch stream from etcd's revision W when it makes the watch (a watch
from a revision already past is served from etcd's unsynced group, caught up every
100 ms: see :meth:`WatchHub.watch`), and reads the semaphore (one Range, revision
R). A change after W comes as an event; one before R is in the read; and when etcd
made the watch after the read (W > R), its creation is read past too. After each
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
from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import prefix_end
from tenure._etcd.streams import Watcher, WatchHub
from tenure.backends._readback import ReadbackWatch, first_of
from tenure.backends.etcd._queue import SemState
from tenure.backends.etcd._session_keys import SessionKeys
from tenure.backends.etcd._txns import TxnSender
from tenure.backends.etcd._types import Armed
from tenure.backends.etcd._who import identified

__all__ = ["EtcdWatch"]


class EtcdWatch(ReadbackWatch):
    """A :class:`~tenure.backends._base.WatchStream` over one etcd watch.

    Given the session's keys and Txns (its reads), the client's channel to etcd (who
    owns and waits: sessions' records) and its one watch stream; ``armed`` is the
    session's set of armed watches (failed when the session ends).
    """

    def __init__(
        self,
        keys: SessionKeys,
        sender: TxnSender,
        conn: EtcdClient,
        hub: WatchHub,
        armed: set[Armed],
        name: str,
        *,
        data: bool,
        owners: bool,
        waiters: bool,
    ) -> None:
        super().__init__(name, data=data, owners=owners, waiters=waiters)
        self._keys, self._sender, self._conn, self._hub = keys, sender, conn, hub
        self._armed = armed
        self._watcher: Watcher | None = None
        #: The revision of the last read, and what it showed.
        self._read_at = 0
        self._shown: SemaphoreDescription | None = None

    async def _arm(self) -> SemaphoreDescription:
        """Arm the watch from now, then read the state (module docstring)."""
        prefix = self._keys.prefix(self._name)
        watcher = self._watcher = self._hub.watch(prefix, prefix_end(prefix), 0)
        self._armed.add(self)
        try:
            return await self._shown_now(await self._sender.read(self._name))
        except BaseException:
            watcher.cancel()
            self._watcher = None
            self._armed.discard(self)
            raise

    async def _shown_now(self, state: SemState) -> SemaphoreDescription:
        self._read_at = state.revision
        self._shown = await self._describe(state)
        return self._shown

    async def _describe(self, state: SemState) -> SemaphoreDescription:
        description = state.describe(owners=self._owners, waiters=self._waiters)
        return await identified(self._conn, self._keys.layout, self._keys.node, description)

    async def _wait(self) -> None:
        assert self._watcher is not None
        await first_of(self._watcher.wait(), self._news.wait())

    async def _read(self) -> SemaphoreDescription:
        watcher = self._watcher
        assert watcher is not None
        events, reset = watcher.drain()
        made = watcher.created_revision
        if not events and not reset and made is not None and made <= self._read_at:
            assert self._shown is not None
            return self._shown  # only the watch being made: the last read covers it
        state = await self._sender.read(self._name)
        if reset:
            watcher.restart(state.revision + 1)
        return await self._shown_now(state)

    async def _disarm(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None
        self._armed.discard(self)
