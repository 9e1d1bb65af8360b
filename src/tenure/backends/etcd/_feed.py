"""One watch per semaphore per client: the waiters of this client share its state.

A semaphore that this client's requests wait on has one :class:`Feed`: one etcd
watch on the semaphore's range and one :class:`SemState` moved forward by its
events (:meth:`SemState.apply`), so a change costs one event delivery and one
update here, however many of this client's sessions wait. After each batch of
events only the waiters whose fate may have changed are woken: their request is
granted, gone, or now its turn (admitted, with everything ahead granted). A
release that admits the head wakes the head, not the queue, so a contended
semaphore costs each change O(waiters) here and no read of etcd.

A waiter's own read (its enqueue's read-back) may be newer than the feed's state:
it then waits until the feed has caught up (the events of its own request are in
the range, so the feed gets there). A watch that may have missed events (a new
stream, compaction) makes the feed read the semaphore again and wake every
waiter. A feed lives while any waiter is subscribed.

The watch is made from etcd's revision *now*, not from the first waiter's read:
etcd serves a watch whose start revision has passed from its "unsynced" group,
caught up every 100 ms, so on a semaphore that changed between that read and the
watch (a contended one: when waiting matters) a handoff took up to 100 ms more
(25 handoffs a second between two clients). When etcd made the watch past the
read, the feed reads the semaphore once more, past it, and the watch's events go
on from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import get_prefix, prefix_end
from tenure._etcd.streams import WatchHub
from tenure.backends.etcd._queue import SemState
from tenure.errors import ProtocolError, TenureError

__all__ = ["Feed", "Feeds"]

log = logging.getLogger("tenure.etcd")
_DELETE = 1  # mvccpb.Event.DELETE


class Feed:
    """A semaphore's state as this client follows it (module docstring)."""

    def __init__(self, conn: EtcdClient, hub: WatchHub, prefix: bytes, state: SemState) -> None:
        self._conn = conn
        self.prefix = prefix
        self.state = state
        #: Waiters by request suffix: the event that wakes each.
        self.waiters: dict[bytes, asyncio.Event] = {}
        #: The revision that deleted a waiter's request, as the events told.
        self.deleted: dict[bytes, int] = {}
        #: Why the feed stopped (a value under the prefix that is not tenure's): every
        #: waiter raises it rather than wait for a state nobody can read.
        self.failure: TenureError | None = None
        self._watcher = hub.watch(prefix, prefix_end(prefix), 0)  # from now (docstring)
        self._caught_up = False  # whether the state covers what the watch missed
        self._task = asyncio.create_task(self._follow())

    async def _read(self) -> SemState:
        reply = await self._conn.txn([], [get_prefix(self.prefix)])
        kvs = reply.responses[0].response_range.kvs
        return SemState.parse(self.state.name, self.prefix, kvs, int(reply.header.revision))

    async def _follow(self) -> None:
        watcher = self._watcher
        while True:
            await watcher.wait()
            events, reset = watcher.drain()
            # Not caught up: the watch, made from etcd's revision then, is not made yet,
            # or was made past the first waiter's read (changes in between: read past
            # them; the watch stays as made, synced, and its events up to the read are
            # dropped below, being older than the state).
            stale = False
            if not reset and not self._caught_up:
                made = watcher.created_revision
                if made is None:
                    continue  # (nothing comes before the watch is made)
                stale = made > self.state.revision
            if reset or stale:
                try:
                    self.state = await self._read()
                except ProtocolError as error:
                    self.failure = error
                    self._wake_all()
                    return
                except TenureError as error:  # etcd unreachable: the sessions' ends wake
                    log.info("etcd feed of %r: read failed: %s", self.state.name, error)
                    watcher.must_reset()  # read and watch again on the next round
                    await asyncio.sleep(0.1)
                    continue
                if reset:  # (events may have been lost: watch again from after the read)
                    watcher.restart(self.state.revision + 1)
                self._wake_all()
            self._caught_up = True
            if reset:
                continue
            state = self.state
            fresh = [e for e in events if int(e.kv.mod_revision) > state.revision]
            for event in fresh:
                if event.type == _DELETE:
                    rest = bytes(event.kv.key)[len(self.prefix) :]
                    if rest.startswith(b"q/") and rest[2:] in self.waiters:
                        self.deleted[rest[2:]] = int(event.kv.mod_revision)
            try:
                state.apply(self.prefix, fresh)
            except TenureError as error:
                self.failure = error
                self._wake_all()
                return
            self._wake_changed()

    def _wake_all(self) -> None:
        for event in self.waiters.values():
            event.set()

    def _wake_changed(self) -> None:
        """Wake the waiters whose request is granted, gone, or whose turn has come."""
        state = self.state
        present = set()
        ahead_granted = True
        for entry in state.admitted():
            present.add(entry.suffix)
            event = self.waiters.get(entry.suffix)
            if event is not None and (entry.granted or ahead_granted):
                event.set()
            ahead_granted = ahead_granted and bool(entry.granted)
        for entry in state.entries:
            present.add(entry.suffix)
            event = self.waiters.get(entry.suffix)
            if event is not None and entry.granted:
                event.set()
        for suffix, event in self.waiters.items():
            if suffix not in present:
                event.set()

    def close(self) -> None:
        """Stop following (the last waiter left)."""
        self._watcher.cancel()
        self._task.cancel()


class Feeds:
    """This client's feeds of the semaphores its requests wait on, by key prefix."""

    def __init__(self, conn: EtcdClient, hub: WatchHub) -> None:
        self._conn = conn
        self._hub = hub
        self._feeds: dict[bytes, Feed] = {}

    @contextlib.contextmanager
    def subscribe(
        self, prefix: bytes, state: SemState, suffix: bytes, wake: asyncio.Event | None = None
    ) -> Iterator[tuple[Feed, asyncio.Event]]:
        """Join (or start) the feed of ``state``'s semaphore (its keys under ``prefix``)
        as waiter ``suffix``, woken by ``wake`` (a new event if None: a lock_all's
        members share one, each in its own feed)."""
        feed = self._feeds.get(prefix)
        if feed is None:
            feed = self._feeds[prefix] = Feed(self._conn, self._hub, prefix, state)
        if wake is None:
            wake = asyncio.Event()
        feed.waiters[suffix] = wake
        wake.set()  # look once at once
        try:
            yield feed, wake
        finally:
            feed.waiters.pop(suffix, None)
            feed.deleted.pop(suffix, None)
            if not feed.waiters and self._feeds.get(prefix) is feed:
                del self._feeds[prefix]
                feed.close()

    def __len__(self) -> int:
        """How many semaphores this client follows now."""
        return len(self._feeds)

    def close(self) -> None:
        """Stop every feed (the client closes)."""
        for feed in self._feeds.values():
            feed.close()
        self._feeds.clear()
