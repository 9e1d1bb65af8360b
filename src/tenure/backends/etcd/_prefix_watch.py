"""Prefix watches on etcd: one etcd watch of the range of every semaphore under a prefix.

Names are %-encoded character by character in their keys (:mod:`._keys`), so the
keys of every semaphore whose name starts with ``prefix`` are exactly those under
``P n/<node>/s/<escaped prefix>``: one range, one watch, whose events are every
change of a view (the record: data, limit, existence; requests and grants: owners,
waiters, an ephemeral semaphore's existence; a forced delete takes the whole range).
Each event's key names its semaphore (the part before its next ``/``, unescaped),
which the consumer reads back. Every change of such a semaphore is told, whatever
aspects are watched (the read back shows what changed).

**Armed, then listed.** The watch is made from etcd's revision when etcd makes it
(a watch from a past revision would be served from etcd's unsynced group, up to
100 ms late: :meth:`WatchHub.watch`), and the arming returns once etcd said it
made it: every change committed after that comes as an event, and the consumer's
listing, made after, reads at a later revision.

**Reset.** When etcd cancels the watch because its revision was compacted away, or
the watch stream was opened again (a member failed; events re-sent or lost), news
may be missing: the watch is made again from now, and then the consumer is told to
list again (never replaying from an old revision: etcd-io/etcd#13156).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from tenure._etcd.requests import prefix_end
from tenure._etcd.streams import Watcher, WatchHub
from tenure.backends._prefix import PrefixFeed, PrefixStream
from tenure.backends._readback import first_of
from tenure.backends._store import SessionView, SessionWork
from tenure.backends.etcd._session_keys import SessionKeys
from tenure.backends.etcd._types import Armed

__all__ = ["EtcdPrefixWatch"]


class PrefixWatchHome(SessionView, SessionWork, Protocol):
    """What a prefix watch asks of its session: whether it lives, and its end (the
    watch's wait ends with it)."""


class EtcdPrefixWatch:
    """One prefix watch of a session (module docstring); :meth:`arm` it first.

    Given the session (its end ends the arming), where its keys are, and the client's
    one watch stream; ``armed`` is the session's set of armed watches (failed when the
    session ends).
    """

    def __init__(
        self,
        session: PrefixWatchHome,
        keys: SessionKeys,
        hub: WatchHub,
        armed: set[Armed],
        prefix: str,
    ) -> None:
        self._session, self._keys, self._hub, self._armed = session, keys, hub, armed
        self.feed = PrefixFeed()
        self._root = keys.root
        self._key = self._root + keys.layout.escape(prefix).encode()
        self._watcher: Watcher | None = None
        self._pump: asyncio.Task[None] | None = None

    def stream(self) -> PrefixStream:
        """The consumer's stream (re-arms before a reset, disarms when closed)."""
        return PrefixStream(self.feed, disarm=self.disarm, rearm=self._rearm)

    async def arm(self) -> None:
        """Make the etcd watch from now and wait until etcd made it; then follow it."""
        self._armed.add(self)
        watcher = self._watcher = self._hub.watch(self._key, prefix_end(self._key), 0)
        try:
            while watcher.created_revision is None:
                await first_of(watcher.wait(), asyncio.shield(self._session.ending()))
                self._session.check_alive()
                watcher.drain()  # (nothing but its making can come before it is made)
        except BaseException:
            await self.disarm()
            raise
        self._pump = asyncio.ensure_future(self._follow(watcher))

    async def _follow(self, watcher: Watcher) -> None:
        """Tell the feed each event's semaphore, or a reset (module docstring)."""
        root, size = self._root, len(self._root)
        while True:
            await watcher.wait()
            events, reset = watcher.drain()
            if reset:
                self.feed.reset(rearm=True)
                return  # (the re-arming makes a new watch, and a new pump)
            for event in events:
                key = bytes(event.kv.key)
                if key.startswith(root):
                    escaped = key[size:].split(b"/", 1)[0]
                    self.feed.put(self._keys.layout.unescape(escaped.decode()))

    async def _rearm(self) -> None:
        await self._stop()
        await self.arm()

    async def _stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
            self._pump = None

    async def disarm(self) -> None:
        """Stop watching (idempotent)."""
        await self._stop()
        self._armed.discard(self)

    def fail(self, error: BaseException) -> None:
        """The session ended: the consumer's stream raises ``error``."""
        self.feed.fail(error)
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None
        if self._pump is not None:
            self._pump.cancel()
        self._armed.discard(self)
