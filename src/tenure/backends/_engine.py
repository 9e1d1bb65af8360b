"""A store that is an engine, spoken to in commands: ``memory://``, ``tenure://``, ``redis://``.

``memory://`` (an in-process engine), ``tenure://`` (an engine in a server) and
``redis://`` (the engine's rules as Redis functions) all take the engine's
commands (:mod:`tenure._core`) and push its effects. So one object,
:class:`CommandStore`, does a session's acquires and semaphore calls there (its
:class:`~tenure.backends._store.Acquiring` and
:class:`~tenure.backends._store.Administering`), each a command over a
:class:`CommandChannel` (what carries a command to the engine and brings back its
reply). Each backend gives the channel, and its own
:class:`~tenure.backends._store.Store` (how the session is kept alive there, and
ended), and passes every effect addressed to the session to
:meth:`CommandStore.deliver`. Watches are the engine's
(:class:`~tenure.backends._watch.EngineWatches`), but on ``redis://``, whose
functions push that a semaphore changed, not its state.

A push is sent once: one written to a connection that then died, or queued by a
server that then restarted, is lost. So after every re-attach the session reads
its state back page by page (DescribeSession) and settles each page with the
:class:`~tenure.backends._ledger.HoldLedger`'s rules (:meth:`CommandStore.reconcile`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final, Protocol, TypeVar, runtime_checkable

from tenure._core import (
    Acquire,
    AcquireAll,
    AcquireFailed,
    AcquireStatus,
    CancelAcquire,
    ClaimName,
    ClaimRecord,
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
    SessionInfo,
    SessionState,
    SwapSemaphoreData,
    UpdateSemaphore,
    WatchFired,
)
from tenure.backends._base import Capability, Grant, HeldGrant, SessionListener
from tenure.backends._engine_handoffs import HandoffCommands
from tenure.backends._ledger import Pending
from tenure.backends._session import StoreSession
from tenure.backends._session_class import session_class
from tenure.backends._store import (
    QUEUED,
    Enqueued,
    InQueue,
    SessionLosses,
    SessionView,
    Store,
    Withdrawal,
)
from tenure.backends._watch import EngineCalls, EngineWatches
from tenure.errors import ErrorCode, LostError, TenureError, error_from_code

R = TypeVar("R")

__all__ = [
    "RECONCILE_PAGE",
    "CommandChannel",
    "CommandStore",
    "EngineStore",
    "HoldsReader",
    "MovingCalls",
    "StaleCalls",
    "engine_session",
    "read_holds",
]

log = logging.getLogger("tenure.client")

#: Semaphores per DescribeSession page when reading state back (each costs at most a
#: few KiB).
RECONCILE_PAGE: Final = 128


class CommandChannel(EngineCalls, Protocol):
    """What carries a session's commands to the engine: one command's reply (or its
    error, raised), and a release sent at once (:class:`~tenure.backends._store.EagerRelease`).

    The engine's pushes come back the other way: whoever receives them hands those of
    the session to :meth:`CommandStore.deliver`.
    """

    def send_now(self, release: Release) -> asyncio.Future[bool] | None:
        """``release`` sent now, in the caller's turn of the loop: its answer's future;
        None if it cannot be sent now (it is then sent with :meth:`call`)."""


@runtime_checkable
class HoldsReader(Protocol):
    """A channel that reads the session's holds with their data in one call
    (``redis://``); over any other, :func:`read_holds` asks the engine page by page."""

    async def read_holds(self) -> list[HeldGrant]:
        """The session's holds as the engine keeps them now, in (name, hold) order."""


@runtime_checkable
class MovingCalls(Protocol):
    """A channel whose session's node may move to another cell of its service
    (``tenure://``: :meth:`~tenure.backends._remote_session.RemoteStore.node_moving`)."""

    def node_moving(self, why: str) -> None:
        """The server said the node moves (a SessionEnded of WRONG_CELL, ``why`` its
        message): re-attach where it lives next."""


@runtime_checkable
class StaleCalls(Protocol):
    """A channel whose reads a replica may answer a little stale (``tenure://``'s: a
    cluster's standbys, :mod:`tenure.backends._standby_reads`); over any other, a read
    allowed staleness is sent as any command (fresh: within any staleness)."""

    async def call_stale(self, command: Command[R], max_staleness: float) -> R:
        """``command`` (a read) answered at most ``max_staleness`` seconds stale, never
        older than what the session wrote or was told."""


class CommandStoreHome(SessionView, SessionLosses, Protocol):
    """What a :class:`CommandStore` asks of the session it works for: its end and
    ledger, read as each acquire is settled, and to be told of a grant or the session
    lost."""


class CommandStore(HandoffCommands):
    """The :class:`~tenure.backends._store.Acquiring` and
    :class:`~tenure.backends._store.Administering` of a store that is an engine
    (module docstring): each a command over ``channel``; its hand-offs
    (:class:`~tenure.backends._store.HandingOff`) are :class:`HandoffCommands`'.

    ``first_request_id`` is the session's first request id (a channel whose ids must
    stay unused across the session's owners starts each owner's elsewhere);
    ``page_size`` the semaphores per DescribeSession page; ``watches``, the session's
    engine watches, whose firings :meth:`deliver` hands on (None: the channel's
    engine keeps none, and pushes no WatchFired).
    """

    channel: CommandChannel

    def __init__(
        self,
        channel: CommandChannel,
        session_id: int,
        *,
        first_request_id: int = 1,
        page_size: int = RECONCILE_PAGE,
        watches: EngineWatches | None = None,
    ) -> None:
        self.channel = channel
        self.session_id = session_id
        self.page_size = page_size
        self._requests = itertools.count(first_request_id)
        self._watches = watches
        self.session: CommandStoreHome

    def bind(self, session: CommandStoreHome) -> None:
        """The session this store works for (bound by its :class:`Store`)."""
        self.session = session

    # -- acquiring ------------------------------------------------------------------

    def new_request_id(self) -> int:
        """The next request id of this session."""
        return next(self._requests)

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
            max_hold=pending.max_hold,
        )
        result = await self.channel.call(command)
        if result.status is AcquireStatus.GRANTED:
            assert result.token is not None
            return Grant(result.token, result.count, result.lease_ttl, pending.hold)
        if result.status is AcquireStatus.BUSY:
            return None
        return QUEUED

    async def enqueue_all(self, pendings: list[Pending]) -> list[Grant] | InQueue | None:
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

    def release_now(self, name: str, hold: int) -> asyncio.Future[bool] | None:
        """The Release sent now (:class:`~tenure.backends._store.EagerRelease`)."""
        return self.channel.send_now(Release(self.session_id, name, hold))

    async def renew(self, name: str, grant: Grant) -> float:
        """Renew the grant's lease TTL."""
        return await self.channel.call(Renew(self.session_id, name, hold=grant.hold))

    async def holds(self) -> list[HeldGrant]:
        """The session's holds as the engine keeps them now (:func:`read_holds`, or the
        channel's own read)."""
        if isinstance(self.channel, HoldsReader):
            return await self.channel.read_holds()
        return await read_holds(self.channel, self.session_id, self.page_size)

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

    async def describe_semaphore_stale(
        self, name: str, *, owners: bool, waiters: bool, max_staleness: float
    ) -> SemaphoreDescription:
        """DescribeSemaphore (no watch), which a replica of the channel's may answer
        (:class:`StaleCalls`); else the channel's own answer."""
        command = DescribeSemaphore(self.session_id, name, owners=owners, waiters=waiters)
        if isinstance(self.channel, StaleCalls):
            return (await self.channel.call_stale(command, max_staleness)).description
        return (await self.channel.call(command)).description

    # -- what the engine pushes -------------------------------------------------------

    def deliver(self, effect: Effect) -> None:
        """Turn one effect addressed to this session into a future's outcome or news.

        Delivering an effect twice does nothing more (a re-attach may settle what a
        late push tells again).
        """
        session = self.session
        if isinstance(effect, Granted):
            grant = Grant(effect.token, effect.count, effect.lease_ttl, effect.hold)
            session.ledger.granted(effect.request_id, grant)
        elif isinstance(effect, AcquireFailed):
            session.ledger.failed(effect.request_id, error_from_code(effect.code, effect.message))
        elif isinstance(effect, WatchFired):
            if self._watches is not None:
                self._watches.fired(effect)
        elif isinstance(effect, LeaseLost):
            error = error_from_code(effect.code, effect.message)
            assert isinstance(error, LostError)
            session.grant_lost(effect.name, effect.hold, effect.token, error)
        elif isinstance(effect, SessionEnded):
            if effect.code == ErrorCode.WRONG_CELL and isinstance(self.channel, MovingCalls):
                self.channel.node_moving(effect.message)  # (not ended: it moves with its node)
                return
            error = error_from_code(effect.code, effect.message)
            assert isinstance(error, LostError)
            session.lose(error)

    # -- reading the state back ----------------------------------------------------------

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
        while self.session.ended is None and not self.session.ledger.empty:
            page = yield DescribeSession(self.session_id, after, self.page_size)
            for command in self.settle(page, after):
                with contextlib.suppress(TenureError):
                    yield command
            if page.next_after is None:
                return
            after = page.next_after

    def settle(self, page: SessionState, after: str) -> list[Command[Any]]:
        """Agree with one page of the session's state, read just now (:meth:`HoldLedger.settle`).

        Returns the commands that drop what the engine keeps for this session that
        nobody asked for: send them now, before anything else.
        """
        for missed in page.missed:
            self.deliver(missed)  # failed acquires and lost grants, as their push told
        settled = self.session.ledger.settle(page, after)
        for (name, hold), token, error in settled.lost:
            self.session.grant_lost(name, hold, token, error)
        for command in settled.drop:
            log.warning("session %d drops %r: nobody asked for it", self.session_id, command)
        return settled.drop


async def read_holds(channel: EngineCalls, session_id: int, page_size: int) -> list[HeldGrant]:
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


class EngineStore(Store, Protocol):
    """The store of a session in an engine (``memory://``, ``tenure://``): its acquires
    and semaphore calls are its :attr:`commands`, its watches the engine's."""

    commands: CommandStore
    watches: EngineWatches


def engine_session(
    store: EngineStore,
    listener: SessionListener,
    scheme: str,
    node: str,
    info: SessionInfo,
    withdraw_wait: float,
    capabilities: frozenset[Capability],
) -> StoreSession:
    """The session of ``node`` that ``info`` (the engine's answer to CreateSession or
    ResumeSession) names, over ``store``, told to ``listener``; ``scheme``,
    ``withdraw_wait`` and ``capabilities`` (which abilities it has) are its backend's."""
    return session_class(capabilities)(
        store,
        listener,
        acquiring=store.commands,
        admin=store.commands,
        watching=store.watches,
        scheme=scheme,
        node=node,
        session_id=info.session_id,
        window=info.timeout,
        withdraw_wait=withdraw_wait,
    )
