"""Watches of the engine-driven backends: engine watches made into streams.

The engine's watch fires with the state a change left and, being repeating, stays
armed. :class:`WatchFeed` keeps the latest state a firing brought for one watcher;
:class:`EngineWatch` turns feeds into the contract's
:class:`~tenure.backends._base.WatchStream`, arming a new engine watch whenever the
old one is gone (after a re-attach, a firing may have been lost, and a restarted
server keeps no watches). :class:`EngineWatches` is a session's
:class:`~tenure.backends._store.Watching` on ``memory://`` and ``tenure://``: its
watches and prefix watches, armed in the engine, fed by its firings (a WatchFired
push, which :meth:`CommandStore.deliver <tenure.backends._engine.CommandStore.deliver>`
hands on). A watch that allows some staleness is armed on a cluster's standby where
the session has one (:class:`StandbyArming`: ``tenure://``'s,
:class:`~tenure.backends._standby_reads.StandbyArms`), else as any: its firings come
from that standby (:meth:`EngineWatches.fired_from`), and its connection's loss is a
re-arm (:meth:`EngineWatches.source_lost`). Watch ids are each server's own: the
watches are kept by the server that armed them (``""``: the session's own) and id.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol, Self, TypeVar

from tenure._core import CancelWatch, Command, DescribeSemaphore, WatchFired, WatchPrefix
from tenure._core.values import SemaphoreDescription
from tenure.backends._base import PrefixWatchStream, WatchStream
from tenure.backends._prefix import PrefixFeed, PrefixStream
from tenure.backends._store import SessionView, SessionWork
from tenure.errors import LostError

__all__ = ["EngineCalls", "EngineWatch", "EngineWatches", "StandbyArming", "WatchFeed"]

R = TypeVar("R")


class EngineCalls(Protocol):
    """What carries one command to the engine and brings back its reply (or raises its
    error): all that watches, and reading holds back, need of a channel."""

    async def call(self, command: Command[R]) -> R:
        """Apply ``command`` and return the reply."""


class StandbyArming(Protocol):
    """Where a session's watches that allow staleness are armed, and disarmed."""

    async def arm(self, command: Command[R], max_staleness: float) -> tuple[R, str] | None:
        """``command`` armed on a standby: its answer and the standby's address (None:
        armed nowhere; the session arms it itself)."""

    def cancel(self, source: str, watch_id: int) -> None:
        """Disarm ``watch_id``, armed on the standby at ``source``."""

    def close(self) -> None:
        """The session ended: no more firings for it."""


#: A watch's key: the server that armed it (``""``: the session's own) and its id there.
Key = tuple[str, int]


class WatchFeed:
    r"""What one armed engine watch reports: the latest state it was sent.

    The session :meth:`put`\s each state a firing carries, keeping only the latest
    (a watcher that is busy gets the newest state, never a queue of old ones), or
    ``None`` when the watch is gone and a new one must be armed. :meth:`close`
    disarms it.
    """

    __slots__ = ("_error", "_has_news", "_latest", "_on_close", "_waiter", "closed")

    def __init__(self, on_close: Callable[[], None]) -> None:
        self._on_close = on_close
        self._latest: SemaphoreDescription | None = None
        self._has_news = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False

    def put(self, description: SemaphoreDescription | None) -> None:
        """A firing's state (None: arm a new watch); replaces one not taken yet."""
        if self.closed or (self._has_news and self._latest is None):
            return  # closed, or already gone: nothing after that counts
        self._latest, self._has_news = description, True
        self._wake()

    def fail(self, error: BaseException) -> None:
        """The session is gone: :meth:`take` raises ``error`` once the news is taken."""
        if self._error is None:
            self._error = error
            self._wake()

    async def take(self) -> SemaphoreDescription | None:
        """Wait for news: the latest state, or None (arm a new watch)."""
        while not self._has_news:
            if self._error is not None:
                raise self._error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        self._has_news = False
        return self._latest

    def close(self) -> None:
        """Disarm the watch (once)."""
        if not self.closed:
            self.closed = True
            self._on_close()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


#: Arms one engine watch: the state now, and the feed of its firings.
Arm = Callable[[], Awaitable[tuple[SemaphoreDescription, WatchFeed]]]


class EngineWatch:
    """A :class:`~tenure.backends._base.WatchStream` over engine watches, re-armed as needed."""

    def __init__(self, arm: Arm, first: SemaphoreDescription, feed: WatchFeed) -> None:
        self._arm = arm
        self._first: SemaphoreDescription | None = first
        self._feed: WatchFeed | None = feed
        self._closed = False

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SemaphoreDescription:
        """The state the watch was armed with, then the latest after each firing."""
        if self._closed:
            raise StopAsyncIteration
        if self._first is not None:
            first, self._first = self._first, None
            return first
        while True:
            if self._feed is None:
                # The describe of a new watch is the latest state (the session raises
                # its loss error here if it is gone).
                description, self._feed = await self._arm()
                if self._closed:  # closed while arming: disarm what was just armed
                    self._feed.close()
                    raise StopAsyncIteration
                return description
            pushed = await self._feed.take()
            if pushed is not None:
                return pushed
            self._feed.close()
            self._feed = None

    async def aclose(self) -> None:
        """Disarm the watch (idempotent)."""
        self._closed = True
        if self._feed is not None:
            self._feed.close()
            self._feed = None


class EngineWatchesHome(SessionView, SessionWork, Protocol):
    """What :class:`EngineWatches` ask of the session they work for: whether it lives,
    and a task for each watch's feed."""


class EngineWatches:
    """A session's watches in its engine (module docstring), over ``channel``, and on
    standbys through ``standby`` (None: the channel arms every watch)."""

    def __init__(
        self, channel: EngineCalls, session_id: int, standby: StandbyArming | None = None
    ) -> None:
        self._channel = channel
        self._session_id = session_id
        self.standby = standby
        #: Armed watches' feeds, by key (the server that armed it, its id there).
        self._feeds: dict[Key, WatchFeed] = {}
        #: Armed prefix watches' feeds, by key.
        self._prefix_feeds: dict[Key, PrefixFeed] = {}
        self._session: EngineWatchesHome

    def bind(self, session: EngineWatchesHome) -> None:
        """The session these watches are of (bound by its store)."""
        self._session = session

    async def _arm(self, command: Command[R], max_staleness: float | None) -> tuple[R, str]:
        """``command`` armed on a standby if it allows staleness and one arms it, else
        through the channel: its answer, and who armed it ("": the channel)."""
        if max_staleness is not None and self.standby is not None:
            armed = await self.standby.arm(command, max_staleness)
            if armed is not None:
                return armed
        return await self._channel.call(command), ""

    def _cancel(self, key: Key) -> None:
        """Disarm the watch of ``key`` where it was armed (the session alive)."""
        source, watch_id = key
        if source and self.standby is not None:
            self.standby.cancel(source, watch_id)
        elif not source:
            self._session.spawn(self._channel.call(CancelWatch(self._session_id, watch_id)))

    async def watch_semaphore(
        self,
        name: str,
        *,
        data: bool,
        owners: bool,
        waiters: bool,
        max_staleness: float | None = None,
    ) -> WatchStream:
        """One repeating engine watch, armed anew whenever the old one is gone (on a
        standby, given ``max_staleness``, where the session has one)."""
        session, session_id = self._session, self._session_id

        async def arm() -> tuple[SemaphoreDescription, WatchFeed]:
            session.check_alive()
            command = DescribeSemaphore(
                session_id,
                name,
                owners=owners,
                waiters=waiters,
                watch_data=data,
                watch_owners=owners,
                watch_waiters=waiters,
                watch_repeat=True,
            )
            result, source = await self._arm(command, max_staleness)
            assert result.watch_id is not None
            key = (source, result.watch_id)

            def disarm() -> None:
                if self._feeds.pop(key, None) is not None and session.ended is None:
                    self._cancel(key)

            feed = self._feeds[key] = WatchFeed(disarm)
            return result.description, feed

        description, feed = await arm()
        return EngineWatch(arm, description, feed)

    async def watch_prefix(
        self,
        prefix: str,
        *,
        data: bool,
        owners: bool,
        waiters: bool,
        max_staleness: float | None = None,
    ) -> PrefixWatchStream:
        """One engine prefix watch (WatchPrefix), whose firings carry each change's state;
        armed anew (and the consumer told to list again) after a re-attach, or the loss
        of the standby that armed it (given ``max_staleness``)."""
        session, session_id = self._session, self._session_id
        feed = PrefixFeed()
        armed: list[Key] = []  # the engine watch's key (none while it is being re-armed)

        async def arm() -> None:
            session.check_alive()
            command = WatchPrefix(session_id, prefix, data, owners, waiters)
            reply, source = await self._arm(command, max_staleness)
            # (Before any later push: the link holds a push after a reply one turn.)
            key = (source, reply.watch_id)
            self._prefix_feeds[key] = feed
            armed[:] = [key]

        async def disarm() -> None:
            for key in armed:
                if self._prefix_feeds.pop(key, None) is not None and session.ended is None:
                    self._cancel(key)
            armed.clear()

        await arm()
        return PrefixStream(feed, disarm=disarm, rearm=arm)

    async def watch_semaphore_stale(
        self, name: str, *, data: bool, owners: bool, waiters: bool, max_staleness: float
    ) -> WatchStream:
        """:meth:`watch_semaphore` on a standby where the session has one."""
        flags = {"data": data, "owners": owners, "waiters": waiters}
        return await self.watch_semaphore(name, **flags, max_staleness=max_staleness)

    async def watch_prefix_stale(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool, max_staleness: float
    ) -> PrefixWatchStream:
        """:meth:`watch_prefix` on a standby where the session has one."""
        flags = {"data": data, "owners": owners, "waiters": waiters}
        return await self.watch_prefix(prefix, **flags, max_staleness=max_staleness)

    def fired(self, effect: WatchFired) -> None:
        """A firing of one of these watches armed by the session's own server."""
        self.fired_from("", effect)

    def fired_from(self, source: str, effect: WatchFired) -> None:
        """A firing of one of these watches, armed by ``source``: its feed gets the
        state it carries."""
        key = (source, effect.watch_id)
        feed = self._feeds.get(key)
        if feed is not None:
            feed.put(effect.description)
        elif (prefixed := self._prefix_feeds.get(key)) is not None:
            prefixed.put(effect.name, effect.description)

    def source_lost(self, source: str) -> None:
        """The connection to the standby at ``source`` was lost: each watch armed there
        is armed again (a prefix watch's consumer told to list again)."""
        for key in [key for key in self._feeds if key[0] == source]:
            self._feeds.pop(key).put(None)
        for key in [key for key in self._prefix_feeds if key[0] == source]:
            self._prefix_feeds.pop(key).reset(rearm=True)

    def forget(self) -> list[int]:
        """Wake every watcher to arm a new watch; returns the old watches' ids to cancel
        on the session's new connection (those armed on standbys are cancelled there).

        After a re-attach a firing may have been lost (and a restarted server keeps
        no watches, and may re-use their ids; a node that moved left its watches on
        its old cell's standbys): describing again reads the latest state; a prefix
        watch's consumer is told to list again (a reset) once it is re-armed.
        """
        stale, self._feeds = self._feeds, {}
        for feed in stale.values():
            feed.put(None)
        prefixed, self._prefix_feeds = self._prefix_feeds, {}
        for prefix_feed in prefixed.values():
            prefix_feed.reset(rearm=True)
        own: list[int] = []
        for source, watch_id in [*stale, *prefixed]:
            if not source:
                own.append(watch_id)
            elif self.standby is not None:
                self.standby.cancel(source, watch_id)
        return own

    def stop(self, error: LostError) -> None:
        """The session ended: every watch ends with ``error``."""
        for feed in self._feeds.values():
            feed.fail(error)
        self._feeds.clear()
        for prefixed in self._prefix_feeds.values():
            prefixed.fail(error)
        self._prefix_feeds.clear()
        if self.standby is not None:
            self.standby.close()
