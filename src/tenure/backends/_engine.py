"""A store that is an engine, spoken to in commands: ``memory://``, ``tenure://``, ``redis://``.

``memory://`` (an in-process engine), ``tenure://`` (an engine in a server) and
``redis://`` (the engine's rules as Redis functions) all take the engine's
commands (:mod:`tenure._core`) and push its effects. So one adapter,
:class:`CommandStore`, does a session's work there over a :class:`CommandChannel`
(what carries a command to the engine and brings back its reply); each backend
gives the channel, and passes every effect addressed to the session to
:meth:`CommandStore.deliver`.

A push is sent once: one written to a connection that then died, or queued by a
server that then restarted, is lost. So after every re-attach the session reads
its state back page by page (DescribeSession) and settles each page with the
:class:`~tenure.backends._ledger.Ledger`'s rules (:meth:`CommandStore.reconcile`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final, Protocol, TypeVar

from tenure._core import (
    Acquire,
    AcquireAll,
    AcquireFailed,
    AcquireStatus,
    CancelAcquire,
    CancelWatch,
    ClaimName,
    ClaimRecord,
    CloseSession,
    Command,
    CreateSemaphore,
    DeleteSemaphore,
    DescribeSemaphore,
    DescribeSession,
    Effect,
    Granted,
    LeaseLost,
    RateReservation,
    Release,
    Renew,
    ReserveUnits,
    SemaphoreDescription,
    SessionEnded,
    SessionState,
    SwapSemaphoreData,
    UpdateSemaphore,
    WatchFired,
    WatchPrefix,
)
from tenure.backends._base import Grant, HeldGrant, PrefixWatchStream, WatchStream
from tenure.backends._ledger import Pending
from tenure.backends._prefix import PrefixFeed, PrefixStream
from tenure.backends._store import QUEUED, Enqueued, Owner, Queued, Withdrawal
from tenure.backends._watch import EngineWatch, WatchFeed
from tenure.errors import LostError, TenureError, error_from_code

R = TypeVar("R")

__all__ = ["RECONCILE_PAGE", "CommandChannel", "CommandStore", "read_holds"]

log = logging.getLogger("tenure.client")

#: Semaphores per DescribeSession page when reading state back (each costs at most a
#: few KiB).
RECONCILE_PAGE: Final = 128


class CommandChannel(Protocol):
    """Carries one command to the engine and brings back its reply (or raises its error)."""

    async def call(self, command: Command[R]) -> R:
        """Apply ``command`` and return the reply."""


class CommandStore:
    """A :class:`~tenure.backends._store.Store` that is an engine (module docstring).

    ``secret`` is the session's protection key; ``seq_no`` its sequence number
    (each re-attach uses the next).
    """

    beat_period: float | None = None  # the channel keeps the session alive

    def __init__(
        self, channel: CommandChannel, session_id: int, *, secret: bytes, seq_no: int, where: str
    ) -> None:
        self.channel = channel
        self.session_id = session_id
        self.protection_key = secret
        self.seq_no = seq_no
        self.where = where
        self._last_request_id = 0
        self._watches: dict[int, WatchFeed] = {}
        #: Armed prefix watches' feeds, by engine watch id.
        self._prefix_feeds: dict[int, PrefixFeed] = {}
        self.owner: Owner

    def bind(self, owner: Owner) -> None:
        """The session this store works for."""
        self.owner = owner

    def confirmed_at(self) -> float:
        """Never in doubt (a channel that can be lost says otherwise)."""
        return float("inf")

    async def heartbeat(self) -> None:
        """Nothing to send: the channel keeps the session alive."""

    def secret(self) -> bytes:
        """The session's protection key."""
        return self.protection_key

    # -- acquiring ------------------------------------------------------------------

    def new_request_id(self) -> int:
        """The next request id of this session."""
        self._last_request_id += 1
        return self._last_request_id

    async def enqueue(self, pending: Pending) -> Enqueued:
        """One Acquire: granted, busy, or queued (its grant is pushed)."""
        command = Acquire(
            self.session_id,
            pending.name,
            pending.count,
            pending.request_id,
            pending.data,
            pending.timeout,
            pending.ephemeral,
            hold=pending.hold,
            task=pending.task,
        )
        result = await self.channel.call(command)
        if result.status is AcquireStatus.GRANTED:
            assert result.token is not None
            return Grant(result.token, result.count, result.lease_ttl, pending.hold)
        if result.status is AcquireStatus.BUSY:
            return None
        return QUEUED

    async def enqueue_all(self, pendings: list[Pending]) -> list[Grant] | Queued | None:
        """One AcquireAll: a grant each, busy, or queued (each grant is pushed)."""
        first = pendings[0]
        command = AcquireAll(
            self.session_id,
            tuple(p.name for p in pendings),
            tuple(p.hold for p in pendings),
            tuple(p.request_id for p in pendings),
            first.count,
            first.data,
            first.timeout,
            first.ephemeral,
            task=first.task,
        )
        result = await self.channel.call(command)
        if result.status is AcquireStatus.GRANTED:
            return [
                Grant(token, first.count, result.lease_ttl, p.hold)
                for token, p in zip(result.tokens, pendings, strict=True)
            ]
        if result.status is AcquireStatus.BUSY:
            return None
        return QUEUED

    async def await_grant(self, pending: Pending) -> Grant:
        """The grant (or failure) is pushed: :meth:`deliver` settles the future."""
        return await pending.future

    async def withdraw(self, pending: Pending) -> Withdrawal:
        """CancelAcquire: withdrawn if it was still queued; else it may have been granted."""
        command = CancelAcquire(self.session_id, pending.name, pending.request_id, pending.hold)
        still_queued = await self.channel.call(command)
        return Withdrawal.WITHDRAWN if still_queued else Withdrawal.UNKNOWN

    async def release(self, name: str, hold: int) -> bool:
        """Release the hold (and a queued upgrade of it)."""
        return await self.channel.call(Release(self.session_id, name, hold))

    async def renew(self, name: str, grant: Grant) -> float:
        """Renew the grant's lease TTL."""
        return await self.channel.call(Renew(self.session_id, name, hold=grant.hold))

    # -- semaphores -------------------------------------------------------------------

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """CreateSemaphore."""
        await self.channel.call(CreateSemaphore(self.session_id, name, limit, data))

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """UpdateSemaphore."""
        await self.channel.call(UpdateSemaphore(self.session_id, name, data))

    async def swap_semaphore_data(self, name: str, expected: bytes, data: bytes) -> bool:
        """SwapSemaphoreData."""
        return await self.channel.call(SwapSemaphoreData(self.session_id, name, expected, data))

    async def reserve_units(
        self, name: str, count: float, max_wait: float | None
    ) -> RateReservation:
        """ReserveUnits (its time is set by the host that applies it)."""
        return await self.channel.call(ReserveUnits(self.session_id, name, count, max_wait))

    async def claim(
        self, name: str, claim_id: str, at_least: float, at_most: float, data: bytes
    ) -> ClaimRecord:
        """ClaimName (its time is set by the host that applies it)."""
        return await self.channel.call(
            ClaimName(self.session_id, name, claim_id, at_least, at_most, data)
        )

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """DeleteSemaphore."""
        await self.channel.call(DeleteSemaphore(self.session_id, name, force))

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """DescribeSemaphore."""
        command = DescribeSemaphore(self.session_id, name, owners=owners, waiters=waiters)
        return (await self.channel.call(command)).description

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> WatchStream:
        """One repeating engine watch, armed anew whenever the old one is gone."""

        async def arm() -> tuple[SemaphoreDescription, WatchFeed]:
            self.owner.check_alive()
            command = DescribeSemaphore(
                self.session_id,
                name,
                owners=owners,
                waiters=waiters,
                watch_data=data,
                watch_owners=owners,
                watch_waiters=waiters,
                watch_repeat=True,
            )
            result = await self.channel.call(command)
            assert result.watch_id is not None
            watch_id = result.watch_id

            def disarm() -> None:
                if self._watches.pop(watch_id, None) is not None and self.owner.ended is None:
                    self.owner.spawn(self.channel.call(CancelWatch(self.session_id, watch_id)))

            feed = self._watches[watch_id] = WatchFeed(disarm)
            return result.description, feed

        description, feed = await arm()
        return EngineWatch(arm, description, feed)

    async def watch_prefix(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool
    ) -> PrefixWatchStream:
        """One engine prefix watch (WatchPrefix), whose firings carry each change's state;
        armed anew (and the consumer told to list again) after a re-attach."""
        feed = PrefixFeed()
        armed: list[int] = []  # the engine watch's id (none while it is being re-armed)

        async def arm() -> None:
            self.owner.check_alive()
            reply = await self.channel.call(
                WatchPrefix(self.session_id, prefix, data, owners, waiters)
            )
            # (Before any later push: the link holds a push after a reply one turn.)
            self._prefix_feeds[reply.watch_id] = feed
            armed[:] = [reply.watch_id]

        async def disarm() -> None:
            for watch_id in armed:
                if self._prefix_feeds.pop(watch_id, None) is not None and self.owner.ended is None:
                    self.owner.spawn(self.channel.call(CancelWatch(self.session_id, watch_id)))
            armed.clear()

        await arm()
        return PrefixStream(feed, disarm=disarm, rearm=arm)

    def forget_watches(self) -> list[int]:
        """Wake every watcher to arm a new watch; returns the old watches' ids to cancel.

        After a re-attach a firing may have been lost (and a restarted server keeps
        no watches, and may re-use their ids): describing again reads the latest state;
        a prefix watch's consumer is told to list again (a reset) once it is re-armed.
        """
        stale, self._watches = self._watches, {}
        for feed in stale.values():
            feed.put(None)
        prefixed, self._prefix_feeds = self._prefix_feeds, {}
        for prefix_feed in prefixed.values():
            prefix_feed.reset(rearm=True)
        return [*stale, *prefixed]

    # -- what the engine pushes -------------------------------------------------------

    def deliver(self, effect: Effect) -> None:
        """Turn one effect addressed to this session into a future's outcome or news.

        Delivering an effect twice does nothing more (a re-attach may settle what a
        late push tells again).
        """
        owner = self.owner
        if isinstance(effect, Granted):
            grant = Grant(effect.token, effect.count, effect.lease_ttl, effect.hold)
            owner.ledger.granted(effect.request_id, grant)
        elif isinstance(effect, AcquireFailed):
            owner.ledger.failed(effect.request_id, error_from_code(effect.code, effect.message))
        elif isinstance(effect, WatchFired):
            feed = self._watches.get(effect.watch_id)
            if feed is not None:
                feed.put(effect.description)
            elif (prefixed := self._prefix_feeds.get(effect.watch_id)) is not None:
                prefixed.put(effect.name, effect.description)
        elif isinstance(effect, LeaseLost):
            error = error_from_code(effect.code, effect.message)
            assert isinstance(error, LostError)
            owner.grant_lost(effect.name, effect.hold, effect.token, error)
        elif isinstance(effect, SessionEnded):
            error = error_from_code(effect.code, effect.message)
            assert isinstance(error, LostError)
            owner.lose(error)

    # -- reading the state back ----------------------------------------------------------

    def page_size(self) -> int:
        """Semaphores per DescribeSession page."""
        return RECONCILE_PAGE

    async def holds(self) -> list[HeldGrant]:
        """The session's holds as the engine keeps them now (:func:`read_holds`)."""
        return await read_holds(self.channel, self.session_id, self.page_size())

    async def reconcile(self, call: Callable[[Command[Any]], Awaitable[Any]]) -> None:
        """Read the session's state back through ``call`` and settle it, page by page."""
        steps = self.reconciling()
        with contextlib.suppress(StopIteration):
            command = next(steps)
            while True:
                try:
                    reply = await call(command)
                except TenureError as error:
                    command = steps.throw(error)
                else:
                    command = steps.send(reply)

    def reconcile_now(self, execute: Callable[[Command[Any]], Any]) -> None:
        """:meth:`reconcile` through a call that answers at once (an in-process engine)."""
        steps = self.reconciling()
        with contextlib.suppress(StopIteration):
            command = next(steps)
            while True:
                try:
                    reply = execute(command)
                except TenureError as error:
                    command = steps.throw(error)
                else:
                    command = steps.send(reply)

    def reconciling(self) -> Generator[Command[Any], Any, None]:
        """The steps of a reconcile, sans I/O: yields each command, is sent its reply.

        A DescribeSession that fails ends the reconcile with its error; a dropping
        command that fails is fine (what it drops may have ended meanwhile).
        """
        after = ""
        while self.owner.ended is None and not self.owner.ledger.empty:
            page = yield DescribeSession(self.session_id, after, self.page_size())
            for command in self.settle(page, after):
                with contextlib.suppress(TenureError):
                    yield command
            if page.next_after is None:
                return
            after = page.next_after

    def settle(self, page: SessionState, after: str) -> list[Command[Any]]:
        """Agree with one page of the session's state, read just now (:meth:`Ledger.settle`).

        Returns the commands that drop what the engine keeps for this session that
        nobody asked for: send them now, before anything else.
        """
        for missed in page.missed:
            self.deliver(missed)  # failed acquires and lost grants, as their push told
        settled = self.owner.ledger.settle(page, after)
        for (name, hold), token, error in settled.lost:
            self.owner.grant_lost(name, hold, token, error)
        for command in settled.drop:
            log.warning("session %d drops %r: nobody asked for it", self.session_id, command)
        return settled.drop

    # -- the end ----------------------------------------------------------------------

    def stop(self, error: LostError) -> None:
        """The session ended: every watch ends with ``error``."""
        for feed in self._watches.values():
            feed.fail(error)
        self._watches.clear()
        for prefixed in self._prefix_feeds.values():
            prefixed.fail(error)
        self._prefix_feeds.clear()

    async def close(self) -> None:
        """CloseSession (the session is gone if that fails)."""
        with contextlib.suppress(TenureError):
            await self.channel.call(CloseSession(self.session_id))


async def read_holds(channel: CommandChannel, session_id: int, page_size: int) -> list[HeldGrant]:
    """The session's holds as the engine keeps them now, in (name, hold) order.

    After a resume the client knows nothing of what the session holds: it reads the
    engine's account of it (DescribeSession, page by page) and each held
    semaphore's owners (DescribeSemaphore), whose entry of the same token carries
    the hold's data.
    """
    found: list[HeldGrant] = []
    after = ""
    while True:  # each page starts past the last: as many pages as held names
        page = await channel.call(DescribeSession(session_id, after, page_size))
        data: dict[int, bytes] = {}
        for name in sorted({hold.name for hold in page.holds}):
            command = DescribeSemaphore(session_id, name, owners=True, waiters=False)
            description = (await channel.call(command)).description
            data.update((owner.token, owner.data) for owner in description.owners)
        for hold in page.holds:
            grant = Grant(hold.token, hold.count, hold.lease_ttl, hold.hold)
            found.append(HeldGrant(hold.name, grant, data.get(hold.token, b"")))
        if page.next_after is None:
            return found
        after = page.next_after
