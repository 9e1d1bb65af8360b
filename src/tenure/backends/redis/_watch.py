"""Semaphore watches on Redis: the latest state after each watched change.

Arming a watch registers the session among the semaphore's watchers
(``<base>wt:<name>``) and reads the state, in one function. Every function that
changes the semaphore (its data, owners, waiters, or existence) pushes a ``W`` to
each watcher's inbox; the watch then reads the state again: that is the latest, so
a consumer that was busy gets the newest state, never a queue of old ones. A state
that does not differ from the last one yielded in what is watched is not yielded
(as the engine backends fire only on a watched change). After pushes were missed
(an inbox gap), every watch reads again.

A prefix watch (:func:`watch_prefix`) is registered in the node's ``pw`` hash
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
from tenure.backends._store import Owner
from tenure.backends.redis._codec import decode_description
from tenure.errors import TenureError

__all__ = ["KeyMaker", "RedisWatch", "WatchHost", "watch_prefix"]


class KeyMaker(Protocol):
    """What makes the request keys of a session's calls (the client's shared part)."""

    def request_key(self) -> str:
        """A request key unique across clients (the answers kept for retries)."""


class WatchHost(Protocol):
    """What a watch needs of its session's store."""

    @property
    def backend(self) -> KeyMaker:
        """The client's shared part: each arming and disarming carries a request key,
        so that a retry of one whose answer was lost counts once."""

    #: Armed watches by semaphore name (each is poked by the name's pushes).
    watches: dict[str, set[RedisWatch]]
    #: Armed prefix watches' feeds, by their id (each is told its pushes' names).
    prefix_watches: dict[int, PrefixFeed]

    def new_request_id(self) -> int:
        """An id unused by the session's other requests, across its owners."""

    @property
    def owner(self) -> Owner:
        """The session."""

    async def invoke(self, op: str, key: str, *args: str | bytes | int) -> Any:
        """Call function ``op`` for the session; its result."""


class RedisWatch(ReadbackWatch):
    """A :class:`~tenure.backends._base.WatchStream` over the pushes of one semaphore."""

    def __init__(
        self, store: WatchHost, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> None:
        super().__init__(name, data=data, owners=owners, waiters=waiters)
        self._store = store
        self._armed = False

    def _flags(self) -> tuple[str, str]:
        return "1" if self._owners else "0", "1" if self._waiters else "0"

    async def _arm(self) -> SemaphoreDescription:
        """Register as a watcher and read the state (one call)."""
        store = self._store
        store.watches.setdefault(self._name, set()).add(self)  # pushes may come at once
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
        watches = self._store.watches.get(self._name)
        if watches is not None:
            watches.discard(self)
            if not watches:
                del self._store.watches[self._name]

    async def _disarm(self) -> None:
        self._forget()
        if self._armed and self._store.owner.ended is None:
            self._armed = False
            with contextlib.suppress(TenureError):
                key = self._store.backend.request_key()
                await self._store.invoke("watch", key, self._name, -1, "0", "0")


async def watch_prefix(store: WatchHost, prefix: str) -> PrefixStream:
    """Arm a prefix watch of the session (module docstring)."""
    feed = PrefixFeed()
    wid = store.new_request_id()  # the client's: pushes find the feed before the answer
    store.prefix_watches[wid] = feed
    try:
        await store.invoke("watch_prefix", "", wid, prefix)
    except BaseException:
        store.prefix_watches.pop(wid, None)
        raise

    async def disarm() -> None:
        if store.prefix_watches.pop(wid, None) is not None and store.owner.ended is None:
            with contextlib.suppress(TenureError):
                await store.invoke("unwatch_prefix", "", wid)

    return PrefixStream(feed, disarm=disarm)
