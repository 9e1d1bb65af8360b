"""Semaphore watches on Redis: the latest state after each watched change.

Arming a watch registers the session among the semaphore's watchers
(``<base>wt:<name>``) and reads the state, in one function. Every function that
changes the semaphore (its data, owners, waiters, or existence) pushes a ``W`` to
each watcher's inbox; the watch then reads the state again: that is the latest, so
a consumer that was busy gets the newest state, never a queue of old ones. A state
that does not differ from the last one yielded in what is watched is not yielded
(as the engine backends fire only on a watched change). After pushes were missed
(an inbox gap), every watch reads again.

A prefix watch (:meth:`RedisWatches.watch_prefix`) is registered in the node's ``pw`` hash
(``lua/57_prefix_watches.lua``); every function that changes a semaphore under its
prefix pushes a ``P`` with the name, which its consumer reads back. Redis tells
every change of such a semaphore, whatever aspects are watched (the read back shows
what changed). An inbox gap is a reset: the registration stays in Redis, and the
consumer lists the prefix again.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

from tenure._core.values import SemaphoreDescription
from tenure.backends._prefix import PrefixFeed, PrefixStream
from tenure.backends._readback import ReadbackWatch
from tenure.backends._store import SessionView
from tenure.backends.redis._codec import decode_description
from tenure.backends.redis._release import KeyMaker
from tenure.errors import LostError, TenureError

__all__ = ["RedisWatch", "RedisWatches", "RedisWatchesHome"]


class RedisWatchesHome(Protocol):
    """What a session's watches ask of their home, the session's store (a
    :class:`~tenure.backends.redis._store.RedisStore`)."""

    @property
    def backend(self) -> KeyMaker:
        """The client's shared part: each arming and disarming carries a request key,
        so that a retry of one whose answer was lost counts once."""

    @property
    def session(self) -> SessionView:
        """The session."""

    def new_request_id(self) -> int:
        """An id unused by the session's other requests, across its owners."""

    def prefix_watch_limit(self) -> int:
        """How many prefix watches the node may have armed (the URL's option)."""

    async def invoke(self, op: str, key: str, *args: str | bytes | int) -> Any:
        """Call function ``op`` for the session; its result."""


class RedisWatches:
    """A session's watches on Redis (module docstring): its
    :class:`~tenure.backends._store.Watching`, told each push that concerns them."""

    def __init__(self, store: RedisWatchesHome) -> None:
        self.store = store
        #: Armed watches by semaphore name (each is poked by the name's pushes).
        self.by_name: dict[str, set[RedisWatch]] = {}
        #: Armed prefix watches' feeds, by their id (lua/57_prefix_watches.lua).
        self.prefixed: dict[int, PrefixFeed] = {}

    @property
    def armed(self) -> bool:
        """Whether any watch is armed (the session then waits for the node's deadlines)."""
        return bool(self.by_name or self.prefixed)

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> RedisWatch:
        """A watch read back after each push."""
        watch = RedisWatch(self, name, data=data, owners=owners, waiters=waiters)
        await watch.start()
        return watch

    async def watch_prefix(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool
    ) -> PrefixStream:
        """A prefix watch registered in the node, read back after each push (Redis
        tells every change under it, whatever aspects are watched)."""
        store, feed = self.store, PrefixFeed()
        wid = store.new_request_id()  # the client's: pushes find the feed before the answer
        self.prefixed[wid] = feed
        try:
            await store.invoke("watch_prefix", "", wid, prefix, store.prefix_watch_limit())
        except BaseException:
            self.prefixed.pop(wid, None)
            raise

        async def disarm() -> None:
            if self.prefixed.pop(wid, None) is not None and store.session.ended is None:
                with contextlib.suppress(TenureError):
                    await store.invoke("unwatch_prefix", "", wid)

        return PrefixStream(feed, disarm=disarm)

    def changed(self, name: str) -> None:
        """A ``W`` push: ``name`` changed; its watches read it again."""
        for watch in list(self.by_name.get(name, ())):
            watch.poke()

    def changed_under(self, watch_id: int, name: str) -> None:
        """A ``P`` push: ``name``, under prefix watch ``watch_id``, changed."""
        feed = self.prefixed.get(watch_id)
        if feed is not None:
            feed.put(name)

    def missed(self) -> None:
        """Pushes were missed (an inbox gap): every watch reads again, and every prefix
        watch's consumer lists again (still registered in Redis)."""
        for watches in list(self.by_name.values()):
            for watch in list(watches):
                watch.poke()
        for feed in self.prefixed.values():
            feed.reset()

    def stop(self, error: LostError) -> None:
        """The session ended: every watch ends with ``error``."""
        for watches in self.by_name.values():
            for watch in watches:
                watch.fail(error)
        self.by_name.clear()
        for feed in self.prefixed.values():
            feed.fail(error)
        self.prefixed.clear()


class RedisWatch(ReadbackWatch):
    """A :class:`~tenure.backends._base.WatchStream` over the pushes of one semaphore."""

    def __init__(
        self, watches: RedisWatches, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> None:
        super().__init__(name, data=data, owners=owners, waiters=waiters)
        self._watches = watches
        self._store = watches.store
        self._armed = False

    def _flags(self) -> tuple[str, str]:
        return "1" if self._owners else "0", "1" if self._waiters else "0"

    async def _arm(self) -> SemaphoreDescription:
        """Register as a watcher and read the state (one call)."""
        store = self._store
        self._watches.by_name.setdefault(self._name, set()).add(self)  # pushes may come at once
        try:
            key = store.backend.request_key()
            raw = await store.invoke("watch", key, self._name, 1, *self._flags())
        except BaseException:
            self._forget()
            raise
        self._armed = True
        # A poke is not cleared here: one taken before this task resumed may be of a
        # change made after the read (calls share a pipelined connection, and the
        # reply of a later call may be handled first). At worst it costs one read
        # that finds nothing new (not yielded).
        return decode_description(self._name, raw)

    async def _read(self) -> SemaphoreDescription:
        raw = await self._store.invoke("describe_semaphore", "", self._name, *self._flags())
        return decode_description(self._name, raw)

    def _forget(self) -> None:
        by_name = self._watches.by_name
        watches = by_name.get(self._name)
        if watches is not None:
            watches.discard(self)
            if not watches:
                del by_name[self._name]

    async def _disarm(self) -> None:
        self._forget()
        if self._armed and self._store.session.ended is None:
            self._armed = False
            with contextlib.suppress(TenureError):
                key = self._store.backend.request_key()
                await self._store.invoke("watch", key, self._name, -1, "0", "0")
