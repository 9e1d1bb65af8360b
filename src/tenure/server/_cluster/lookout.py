"""What a member keeps reading beside its terms: who leads, and who the members are.

:class:`Lookout` runs two tasks for the whole life of a member:

* **the candidates**: it reads the election's keys (the current leader: its
  addresses and term) whenever they change, through a watch, so that a standby
  names the right leader to its clients and a waiting candidate wakes up
  (:attr:`Lookout.candidates`) to see whether it leads now;
* **the members**: every :data:`PUBLISH_EVERY` seconds it writes this member's
  record (role, addresses, the last log index its engine holds) on its lease, and
  reads everyone's, for ClusterStatus and the dashboard.

Neither may end while the member runs: what etcd cannot answer now is tried again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from tenure._etcd.requests import prefix_end
from tenure._etcd.streams import Watcher, WatchHub
from tenure.errors import TenureError, UnavailableError
from tenure.server._cluster.keys import ClusterDataError, ServerRecord
from tenure.server._cluster.role import ClusterRole
from tenure.server._cluster.store import ClusterStore

log = logging.getLogger("tenure.cluster")

__all__ = ["PUBLISH_EVERY", "Lookout"]

#: How often a member writes its record (role, applied index) and reads the others'.
PUBLISH_EVERY: Final = 1.0


class Lookout:
    """See the module docstring. ``record()``: this member's record and the lease it
    lives on now (None: it holds no lease)."""

    def __init__(
        self,
        store: ClusterStore,
        hub: WatchHub,
        role: ClusterRole,
        record: Callable[[], tuple[ServerRecord, int] | None],
    ) -> None:
        self.store = store
        self.hub = hub
        self.role = role
        self.record = record
        #: Set when a candidate key came or went (the election may have moved).
        self.candidates = asyncio.Event()

    def start(self) -> list[asyncio.Task[None]]:
        """Start both tasks; the caller cancels them when the member ends."""
        return [
            asyncio.ensure_future(self._watch_candidates()),
            asyncio.ensure_future(self._publish()),
        ]

    async def _watch_candidates(self) -> None:
        keys = self.store.keys
        watcher: Watcher | None = None
        while True:
            try:
                current, revision = await self.store.leader()
            except (UnavailableError, ClusterDataError) as error:
                # (an unreadable candidate is someone else's key: it leads nothing here)
                log.warning("reading the leader: %s", error)
                await asyncio.sleep(0.5)
                continue
            self.role.saw(current)
            self.candidates.set()
            if watcher is None:
                watcher = self.hub.watch(keys.candidates, prefix_end(keys.candidates), revision + 1)
            await watcher.wait()
            _, reset = watcher.drain()
            if reset:  # events may be lost: read again, and watch from there
                watcher.cancel()
                watcher = None

    async def _publish(self) -> None:
        while True:
            mine = self.record()
            try:
                if mine is not None:
                    await self.store.record(*mine)
                self.role.members = await self.store.members()
            except TenureError as error:  # (a lease that just ended, etcd away: next time)
                log.debug("writing this member's record: %s", error)
            await asyncio.sleep(PUBLISH_EVERY)
