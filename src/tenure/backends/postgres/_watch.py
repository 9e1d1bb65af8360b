"""Semaphore watches on PostgreSQL: the latest state after each watched change.

A watch subscribes to its semaphore's notifications (``s<name>`` on the node's
channel), then registers itself in the database (a change notifies only a
registered semaphore: :mod:`._sql_watches`), *before* it reads the first state,
so no change between them is missed. Closed, it unregisters (best effort: a row
left behind costs only unheard notifications until its session ends).
After each notification (or a reconnect of the LISTEN connection, after which
everything is read again) it reads the semaphore: that is the latest state, so a
busy consumer gets the newest state, never a queue of old ones. A state that does
not differ from the last one yielded in what is watched (data, owners, waiters;
existence and limit always) is not yielded.

A prefix watch (:func:`watch_prefix`) hears every ``s<name>`` of its node and keeps
those under its prefix, registered in ``prefix_watches`` so that a change of any
such name notifies (:mod:`._sql_watches`); its consumer reads each name back. A
reconnect of the LISTEN connection is a reset: notifications were lost meanwhile,
the registration was not, and the consumer lists the prefix again.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from typing import Protocol

from tenure._core.values import SemaphoreDescription
from tenure.backends._prefix import PrefixFeed, PrefixStream
from tenure.backends._readback import ReadbackWatch
from tenure.errors import TenureError

__all__ = ["PgWatch", "PgWatchHome", "watch_prefix"]


class PgWatchHome(Protocol):
    """What a watch asks of its home, the session's administration (a
    :class:`~tenure.backends.postgres._admin.PgAdmin`)."""

    #: The session's armed watches (the store fails them when the session ends).
    watches: set[PgWatch]

    def subscribe(self, payload: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on each ``payload`` on the node's channel; the stop function."""

    async def read(self, name: str, *, owners: bool, waiters: bool) -> SemaphoreDescription:
        """The semaphore now (``exists=False`` if missing)."""

    async def register_watch(self, name: str, watch_id: int) -> None:
        """Register a watch of ``name``: from its commit on, changes of it notify."""

    async def unregister_watch(self, name: str, watch_id: int) -> None:
        """Remove a registration (once the watch stopped listening)."""

    #: The session's armed prefix watches' feeds (failed when the session ends).
    prefix_watches: set[PrefixFeed]

    def hear_names(self, callback: Callable[[str | None], None]) -> Callable[[], None]:
        """Call ``callback`` with the name of each ``s<name>`` on the node's channel (None
        after a reconnect of the LISTEN connection); the stop function."""

    async def register_prefix_watch(self, prefix: str, watch_id: int) -> None:
        """Register a prefix watch: from its commit on, changes under it notify."""

    async def unregister_prefix_watch(self, watch_id: int) -> None:
        """Remove a prefix watch's registration."""


class PgWatch(ReadbackWatch):
    """A :class:`~tenure.backends._base.WatchStream` over the node's notifications."""

    def __init__(
        self, home: PgWatchHome, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> None:
        super().__init__(name, data=data, owners=owners, waiters=waiters)
        self._home = home
        self._stop: Callable[[], None] | None = None
        self._id = secrets.randbits(63)
        self._registered = False

    async def _arm(self) -> SemaphoreDescription:
        """Subscribe, register, then read the state."""
        self._stop = self._home.subscribe("s" + self._name, self.poke)
        self._home.watches.add(self)
        try:
            await self._home.register_watch(self._name, self._id)
            self._registered = True
            return await self._read()
        except BaseException:
            await self.aclose()
            raise

    async def _read(self) -> SemaphoreDescription:
        return await self._home.read(self._name, owners=self._owners, waiters=self._waiters)

    async def _disarm(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None
        self._home.watches.discard(self)
        if self._registered and self._error is None:  # a session that ended has none
            self._registered = False
            with contextlib.suppress(TenureError):
                await self._home.unregister_watch(self._name, self._id)


async def watch_prefix(home: PgWatchHome, prefix: str) -> PrefixStream:
    """Hear the node's changes, register the prefix, then return: armed (module docstring)."""
    feed = PrefixFeed()
    watch_id = secrets.randbits(63)

    def heard(name: str | None) -> None:
        if name is None:
            feed.reset()  # (the registration stays: only notifications were lost)
        elif name.startswith(prefix):
            feed.put(name)

    stop = home.hear_names(heard)
    home.prefix_watches.add(feed)
    registered = False

    async def disarm() -> None:
        nonlocal registered
        stop()
        home.prefix_watches.discard(feed)
        if registered:
            registered = False
            with contextlib.suppress(TenureError):
                await home.unregister_prefix_watch(watch_id)

    try:
        await home.register_prefix_watch(prefix, watch_id)
    except BaseException:
        await disarm()
        raise
    registered = True
    return PrefixStream(feed, disarm=disarm)
