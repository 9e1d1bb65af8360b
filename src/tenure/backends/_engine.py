"""A backend session that speaks engine commands over a channel.

Both ``memory://`` (the channel is a direct call into an in-process host) and
``tenure://`` (the channel is a network connection) drive the same engine, so they
share this one implementation of :class:`~tenure.backends._base.BackendSession`:
request ids, pending acquires, armed watches, and turning effects into futures.
The bookkeeping of acquires and grants, and how it agrees with the engine again
after a re-attach (pushes lost with a connection or a server's restart), is the
:class:`~tenure.backends._ledger.Ledger`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Final, Protocol, TypeVar

from tenure._core import (
    Acquire,
    AcquireFailed,
    AcquireStatus,
    CancelAcquire,
    CancelWatch,
    CloseSession,
    Command,
    CreateSemaphore,
    DeleteSemaphore,
    DescribeSemaphore,
    DescribeSession,
    Effect,
    Granted,
    LeaseLost,
    Release,
    Renew,
    SemaphoreDescription,
    SessionEnded,
    SessionState,
    UpdateSemaphore,
    WatchFired,
)
from tenure.backends._base import Grant, HeldGrant, SessionListener, SessionTicket
from tenure.backends._engine_tickets import read_holds
from tenure.backends._ledger import Ledger
from tenure.backends._watch import EngineWatch, WatchFeed
from tenure.errors import (
    LostError,
    SessionClosedError,
    TenureError,
    error_from_code,
)

R = TypeVar("R")

__all__ = ["CommandChannel", "EngineSession"]

log = logging.getLogger("tenure.client")

#: Semaphores per DescribeSession page when re-attaching (each costs at most a few KiB).
RECONCILE_PAGE: Final = 128


class CommandChannel(Protocol):
    """Carries one command to the engine and brings back its reply (or raises its error)."""

    async def call(self, command: Command[R]) -> R:
        """Apply ``command`` and return the reply."""


class EngineSession:
    """A :class:`~tenure.backends._base.BackendSession` over a :class:`CommandChannel`.

    The channel owner must pass every effect addressed to this session to
    :meth:`deliver`.
    """

    def __init__(
        self,
        channel: CommandChannel,
        session_id: int,
        listener: SessionListener,
        *,
        protection_key: bytes,
        seq_no: int,
        recovery_window: float,
        node: str,
        scheme: str,
    ) -> None:
        self._channel = channel
        self.node = node
        self.scheme = scheme  # the ticket's: the kind of backend
        self._session_id = session_id
        self._recovery_window = recovery_window
        self._listener = listener
        self.protection_key = protection_key
        self.seq_no = seq_no
        self._last_request_id = 0
        #: Acquires in progress and grants held (see :mod:`tenure.backends._ledger`).
        self.ledger = Ledger(session_id)
        self._watches: dict[int, WatchFeed] = {}
        self._tasks: set[asyncio.Task[object]] = set()
        self.ended: LostError | None = None

    @property
    def session_id(self) -> int:
        """The engine's id of this session."""
        return self._session_id

    @property
    def recovery_window(self) -> float:
        """The window the engine granted (the one asked for, or the node's default)."""
        return self._recovery_window

    # -- effects --------------------------------------------------------------------

    def deliver(self, effect: Effect) -> None:
        """Turn one effect addressed to this session into a future's outcome or a callback.

        Delivering an effect twice does nothing more (a re-attach may settle what a
        late push tells again).
        """
        if isinstance(effect, Granted):
            grant = Grant(effect.token, effect.count, effect.lease_ttl, effect.hold)
            self.ledger.granted(effect.request_id, grant)
        elif isinstance(effect, AcquireFailed):
            self.ledger.failed(effect.request_id, error_from_code(effect.code, effect.message))
        elif isinstance(effect, WatchFired):
            feed = self._watches.get(effect.watch_id)
            if feed is not None:
                feed.put(effect.description)
        elif isinstance(effect, LeaseLost):
            error = error_from_code(effect.code, effect.message)
            assert isinstance(error, LostError)
            if self.ledger.lose((effect.name, effect.hold), effect.token, error):
                self._listener.lease_lost(effect.name, effect.token, error)
        elif isinstance(effect, SessionEnded):
            error = error_from_code(effect.code, effect.message)
            assert isinstance(error, LostError)
            self.end(error)
            self._listener.session_lost(error)

    def end(self, error: LostError) -> None:
        """Fail everything still waiting with ``error``; the session is gone."""
        if self.ended is None:
            self.ended = error
        self.ledger.end(error)
        for feed in self._watches.values():
            feed.fail(error)
        self._watches.clear()

    def lose(self, error: LostError) -> None:
        """The session is lost: end it and tell the client (once)."""
        if self.ended is not None:
            return
        self.end(error)
        self._listener.session_lost(error)

    # -- agreeing after a re-attach (see tenure.backends._ledger) ------------------

    def forget_watches(self) -> list[int]:
        """Wake every watcher to arm a new watch; returns the old watches' ids to cancel.

        After a re-attach a firing may have been lost (and a restarted server keeps
        no watches, and may re-use their ids): describing again reads the latest state.
        """
        stale, self._watches = self._watches, {}
        for feed in stale.values():
            feed.put(None)
        return list(stale)

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
        while self.ended is None and not self.ledger.empty:
            page = yield DescribeSession(self._session_id, after, self._page_size())
            for command in self.settle(page, after):
                with contextlib.suppress(TenureError):
                    yield command
            if page.next_after is None:
                return
            after = page.next_after

    def _page_size(self) -> int:
        return RECONCILE_PAGE

    def settle(self, page: SessionState, after: str) -> list[Command[Any]]:
        """Agree with one page of the session's state, read just now (:meth:`Ledger.settle`).

        Returns the commands that drop what the engine keeps for this session that
        nobody asked for: send them now, before anything else.
        """
        for missed in page.missed:
            self.deliver(missed)  # failed acquires and lost grants, as their push told
        settled = self.ledger.settle(page, after)
        for name, token, error in settled.lost:
            self._listener.lease_lost(name, token, error)
        for command in settled.drop:
            log.warning("session %d drops %r: nobody asked for it", self._session_id, command)
        return settled.drop

    # -- operations -----------------------------------------------------------------

    def acquire(
        self, name: str, *, count: int, data: bytes, timeout: float | None, ephemeral: bool
    ) -> Coroutine[Any, Any, Grant | None]:
        """See :meth:`tenure.backends._base.BackendSession.acquire`."""
        if self.ended is not None:  # (_check_alive, inline: on every request)
            raise type(self.ended)(*self.ended.args)
        hold = self.ledger.free_hold(name)
        return self._acquire(name, hold, count, data, timeout, ephemeral)  # (one frame less)

    async def restate(
        self, name: str, grant: Grant, *, count: int, data: bytes, timeout: float | None
    ) -> Grant | None:
        """See :meth:`tenure.backends._base.BackendSession.restate`."""
        self._check_alive()
        # Not ephemeral: a semaphore deleted meanwhile must not be made anew.
        return await self._acquire(name, grant.hold, count, data, timeout, False)

    async def _acquire(
        self,
        name: str,
        hold: int,
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
    ) -> Grant | None:
        """One Acquire of hold ``hold``, awaited to its end (granted, busy, or raised)."""
        self._last_request_id += 1
        request_id = self._last_request_id
        pending = self.ledger.open(request_id, name, hold)
        place = (name, hold)
        try:
            command = Acquire(
                self._session_id, name, count, request_id, data, timeout, ephemeral, hold=hold
            )
            try:
                result = await self._channel.call(command)
            except asyncio.CancelledError:
                # Applied or not, granted or queued: undo whatever it did.
                await self._withdraw(place, request_id)
                raise
            if result.status is AcquireStatus.GRANTED:
                assert result.token is not None
                grant = Grant(result.token, result.count, result.lease_ttl, hold)
                return self.ledger.take(request_id, place, grant)
            if result.status is AcquireStatus.BUSY:
                return None
            pending.queued = True
            try:
                grant = await pending.future
            except asyncio.CancelledError:
                await self._withdraw(place, request_id)
                raise
            return self.ledger.take(request_id, place, grant)
        finally:
            self.ledger.close(request_id)

    async def _withdraw(self, place: tuple[str, int], request_id: int) -> None:
        """The asker gave up: cancel the queued request, or release a grant that raced it.

        Whether a grant raced the cancellation may be unknown (its answer was cut off,
        or pushed on a connection that died), so a request that is no longer queued
        is followed by a Release unless the hold was held before (an upgrade that was
        cancelled keeps the hold): releasing nothing is harmless.
        """
        if self.ended is not None:
            return
        name, hold = place
        # The caller is cancelled, and that is what it must see: if the session ended
        # or cannot be reached meanwhile, there is nothing left to withdraw here.
        with contextlib.suppress(TenureError):
            call = self._channel.call
            still_queued = await call(CancelAcquire(self._session_id, name, request_id, hold))
            if not still_queued and place not in self.ledger.held:
                await call(Release(self._session_id, name, hold))

    async def release(self, name: str, grant: Grant) -> bool:
        """See :meth:`tenure.backends._base.BackendSession.release`."""
        if self.ended is not None:  # (_check_alive, inline: on every request)
            raise type(self.ended)(*self.ended.args)
        ledger = self.ledger
        place = (name, grant.hold)
        token = ledger.held.pop(place, None)
        if token is not None:
            ledger.releasing[place] = token
        try:
            return await self._channel.call(Release(self._session_id, name, grant.hold))
        finally:
            if token is not None and ledger.releasing.get(place) == token:
                del ledger.releasing[place]

    async def renew(self, name: str, grant: Grant) -> float:
        """See :meth:`tenure.backends._base.BackendSession.renew`."""
        self._check_alive()
        return await self._channel.call(Renew(self._session_id, name, hold=grant.hold))

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """See :meth:`tenure.backends._base.BackendSession.create_semaphore`."""
        self._check_alive()
        await self._channel.call(CreateSemaphore(self._session_id, name, limit, data))

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """See :meth:`tenure.backends._base.BackendSession.update_semaphore`."""
        self._check_alive()
        await self._channel.call(UpdateSemaphore(self._session_id, name, data))

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """See :meth:`tenure.backends._base.BackendSession.delete_semaphore`."""
        self._check_alive()
        await self._channel.call(DeleteSemaphore(self._session_id, name, force))

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """See :meth:`tenure.backends._base.BackendSession.describe_semaphore`."""
        self._check_alive()
        command = DescribeSemaphore(self._session_id, name, owners=owners, waiters=waiters)
        return (await self._channel.call(command)).description

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> EngineWatch:
        """See :meth:`tenure.backends._base.BackendSession.watch_semaphore`."""

        async def arm() -> tuple[SemaphoreDescription, WatchFeed]:
            return await self._arm_watch(name, data=data, owners=owners, waiters=waiters)

        description, feed = await arm()
        return EngineWatch(arm, description, feed)

    async def _arm_watch(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> tuple[SemaphoreDescription, WatchFeed]:
        """Describe the semaphore and arm one repeating engine watch on it."""
        self._check_alive()
        command = DescribeSemaphore(
            self._session_id,
            name,
            owners=owners,
            waiters=waiters,
            watch_data=data,
            watch_owners=owners,
            watch_waiters=waiters,
            watch_repeat=True,
        )
        result = await self._channel.call(command)
        assert result.watch_id is not None
        watch_id = result.watch_id

        def disarm() -> None:
            if self._watches.pop(watch_id, None) is not None and self.ended is None:
                self._spawn(self._channel.call(CancelWatch(self._session_id, watch_id)))

        feed = self._watches[watch_id] = WatchFeed(disarm)
        return result.description, feed

    async def close(self) -> None:
        """See :meth:`tenure.backends._base.BackendSession.close`."""
        if self.ended is not None:
            return
        self.end(SessionClosedError(f"session {self._session_id} was closed"))
        await self._channel.call(CloseSession(self._session_id))

    # -- tickets and resume -------------------------------------------------------------

    def ticket(self) -> SessionTicket:
        """See :meth:`tenure.backends._base.BackendSession.ticket`: id and protection key."""
        self._check_alive()
        return SessionTicket(self.scheme, self.node, self._session_id, self.protection_key)

    async def holds(self) -> list[HeldGrant]:
        """See :meth:`tenure.backends._base.BackendSession.holds` (:func:`read_holds`)."""
        self._check_alive()
        return await read_holds(self._channel, self._session_id, self._page_size())

    async def adopt(self) -> None:
        """After a resume: what the engine holds for the session is this client's now.

        (Else a re-attach would settle them as holds nobody asked for, and drop them.)
        """
        for held in await self.holds():
            self.ledger.held[(held.name, held.grant.hold)] = held.grant.token

    # -- helpers --------------------------------------------------------------------

    def _check_alive(self) -> None:
        if self.ended is not None:
            raise type(self.ended)(*self.ended.args)

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        async def run() -> None:
            # If the session or connection is gone, the watch went with it.
            with contextlib.suppress(TenureError, OSError):
                await coro

        task: asyncio.Task[object] = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
