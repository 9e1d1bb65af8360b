"""What a session asks of the store its state lives in, by purpose, and what a store may tell it.

Every backend session is one :class:`~tenure.backends._session.StoreSession`: the
policies every store shares (loss told once, the local deadline, heartbeats,
background work, hold numbers, the acquire skeleton with its one cancel-vs-grant
rule, release until answered) are written there, once. What differs between
stores is a small adapter, in four parts by purpose, each a protocol of its own:

* :class:`Store`, the session's life there: where it is, how it is kept alive,
  its ticket's secret, its end;
* :class:`Acquiring`: enqueue an acquire, await its grant, withdraw it, release a
  hold, renew a grant, read the holds back;
* :class:`Administering`: create, change, reserve, claim, delete and describe
  semaphores;
* :class:`Watching`: watch a semaphore, or every semaphore under a prefix.

An adapter gives each part as the object that does it: one object may do several
(``postgres://``'s store is its own :class:`Store`, its acquirer the
:class:`Acquiring`), and a store that is an engine spoken to in commands does
:class:`Acquiring` and :class:`Administering` with one
:class:`~tenure.backends._engine.CommandStore` over its channel. The
:class:`Store` is bound to its session (:meth:`Store.bind`), and binds whatever
part of its own needs the session.

A store talks back to its session through :class:`BoundSession`, the narrow part
of the session it may see: composed of what a part reads (:class:`SessionView`),
tells (:class:`SessionLosses`) and has done (:class:`SessionWork`), so that each part
of a store is typed with no more of the session than it uses. This module is a leaf
(it imports no backend module but the contract and the ledger), so a store's parts
can depend on it without circles.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final, Literal, Protocol, TypeVar, runtime_checkable

from tenure._core.claims import ClaimRecord
from tenure._core.commands import RateReservation
from tenure._core.values import SemaphoreDescription
from tenure.backends._base import Grant, Handoff, HeldGrant, PrefixWatchStream, WatchStream
from tenure.backends._ledger import HoldLedger, Pending
from tenure.errors import LostError

__all__ = [
    "QUEUED",
    "Acquiring",
    "Administering",
    "BoundSession",
    "EagerRelease",
    "Enqueued",
    "HandingOff",
    "InQueue",
    "Reserving",
    "SendsReleaseOnce",
    "SessionLosses",
    "SessionView",
    "SessionWork",
    "StaleAdministering",
    "StaleWatchingStore",
    "Store",
    "Watching",
    "Withdrawal",
]

R = TypeVar("R")


class InQueue(enum.Enum):
    """An acquire joined the queue: its grant is to be awaited (:meth:`Acquiring.await_grant`)."""

    QUEUED = "queued"


#: What :meth:`Acquiring.enqueue` returns for a request that waits.
QUEUED: Final = InQueue.QUEUED

#: :meth:`Acquiring.enqueue`'s outcome: granted at once, busy (``timeout=0``), or queued.
Enqueued = Grant | None | Literal[InQueue.QUEUED]


class Withdrawal(enum.Enum):
    """What :meth:`Acquiring.withdraw` found, when it did not find a grant it can name."""

    #: The request is gone from the store, and it was never granted.
    WITHDRAWN = "withdrawn"
    #: The request was no longer queued: it may have been granted (or have ended).
    #: A grant that raced it is released; releasing what is not held is harmless.
    UNKNOWN = "unknown"


class SessionView(Protocol):
    """What a store's part may read of the session it works for: how it ended, and its
    ledger of acquires and holds."""

    @property
    def ended(self) -> LostError | None:
        """How the session ended, or None while it lives."""

    @property
    def ledger(self) -> HoldLedger:
        """The session's acquires in progress, grants held and being released."""

    def check_alive(self) -> None:
        """Raise the session's loss error if it ended."""


class SessionLosses(Protocol):
    """What a store's part tells the session it works for of what was lost: the
    session, its node, one grant. Each is told once to the client."""

    def lose(self, error: LostError) -> None:
        """The store says the session is gone: end it, tell the client (once)."""

    def dropped(self) -> None:
        """The node was dropped by force: grants lost, waits not found, session closed."""

    def grant_lost(self, name: str, hold: int, token: int, error: LostError) -> None:
        """The grant ``token`` of hold ``hold`` on ``name`` ended without a release."""


class SessionWork(Protocol):
    """What a store's part has the session it works for do: run work in the
    background, send a change until it is answered, tell when the session ends."""

    def spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        """Run ``coro`` in the background (errors are logged: there is no caller)."""

    async def until_answered(self, call: Callable[..., Awaitable[R]], *args: Any) -> R:
        """``call(*args)``, sent again while the store cannot be reached, until it answers
        or the session ends (which raises its loss)."""

    def ending(self) -> asyncio.Future[None]:
        """A future done when the session ends (for a wait that must end with it)."""


class BoundSession(SessionView, SessionLosses, SessionWork, Protocol):
    """The session a store adapter is bound to (:meth:`Store.bind`): what the adapter
    may read of it (:class:`SessionView`), tell it (:class:`SessionLosses`) and have
    it do (:class:`SessionWork`), and its life as the store's backend sees it.

    A part of the adapter that needs less types the session with what it needs: one
    of those three, or a home of its own composed of them.
    """

    def deadline_passed(self) -> bool:
        """Give the session up if its local deadline passed; whether it has ended."""

    async def close(self) -> None:
        """End the session as its client would (when the backend closes)."""


# The errors of every part: a call that could not reach the store raises
# ``UnavailableError`` (the session decides whether to send it again); one that finds
# the session gone raises its ``LostError`` or tells the session; the others raise the
# contract's errors (NotFoundError, LimitExceededError...).


class Store(Protocol):
    """The session's life in one store: where, kept alive how, its secret, its end."""

    #: Where the store is, for messages ("etcd (127.0.0.1:2379)").
    where: str
    #: Seconds between two heartbeats of the session, or None: the store renews the
    #: session by other means (a keepalive stream, a connection's pings).
    beat_period: float | None

    def bind(self, session: BoundSession) -> None:
        """The session this adapter works for (called once, by the session); the store
        binds its parts that need it."""

    def confirmed_at(self) -> float:
        """The send time (loop time) of the last renewal the store answered.

        The store cannot have kept the session longer than its window past it: the
        session is given up then (``float('inf')``: never in doubt).
        """

    async def heartbeat(self) -> None:
        """Renew the session (when :attr:`beat_period` is set): return once renewed.

        News that the session ended is told to the session (``lose``, ``dropped``);
        UnavailableError if the store could not be reached.
        """

    def secret(self) -> bytes:
        """The ticket's secret: the store's proof that a resumer owns the session."""

    def stop(self, error: LostError) -> None:
        """The session ended here: stop what the store runs for it, fail its watches."""

    async def close(self) -> None:
        """End the session in the store (it ended here already): best effort, bounded.

        Called after the client's close, and after the session was given up on its
        local deadline (the store may still keep it). Raises nothing.
        """


class Acquiring(Protocol):
    """How a session's acquires and holds are done in one store."""

    def new_request_id(self) -> int:
        """An id for a new acquire, unused by this session's other acquires (the ledger
        knows them by it; a store that sends it keeps it unused across owners too)."""

    async def enqueue(self, pending: Pending) -> Enqueued:
        """Send the acquire ``pending`` describes: its grant, None (busy), or QUEUED.

        Whatever the store must keep between here and :meth:`await_grant` goes in
        ``pending.state``.
        """

    async def enqueue_all(self, pendings: list[Pending]) -> list[Grant] | InQueue | None:
        """Send one all-or-none acquire of the ``pendings`` (one per name): a grant each,
        None (busy), or QUEUED (each pending's grant then comes as a queued one's does).

        Raises:
            UnsupportedError: the store has no all-or-none acquire.
        """

    async def await_grant(self, pending: Pending) -> Grant | None:
        """Wait for the grant of a queued acquire; raise how it ended otherwise.

        None: busy (a try, ``timeout=0``, that a store answers only after queueing).
        The session's end fails ``pending.future``: a wait must end then too.
        """

    async def withdraw(self, pending: Pending) -> Grant | Withdrawal:
        """Take the request ``pending`` back from the store's queue.

        Returns the grant that raced the withdrawal if it knows it (it stays held:
        the session decides what becomes of it), else a :class:`Withdrawal`.
        """

    async def release(self, name: str, hold: int) -> bool:
        """Drop hold ``hold`` of ``name`` (and a queued upgrade of it); whether it was held.

        The same release sent twice must be harmless (it is sent again after a
        lost answer).
        """

    async def renew(self, name: str, grant: Grant) -> float:
        """Extend a grant's lease TTL; the TTL now in force."""

    async def holds(self) -> list[HeldGrant]:
        """The session's holds as the store keeps them now, in (name, hold) order."""


@runtime_checkable
class EagerRelease(Protocol):
    """An :class:`Acquiring` whose release can be sent at once, in the caller's turn of
    the loop.

    Such a store (``tenure://``, ``memory://``, ``redis://``) carries a client's requests
    in the order they are asked, so a release sent before ``release()`` returns reaches
    the engine before anything the client asks afterwards. A store without it sends the
    release from a task of its own.
    """

    def release_now(self, name: str, hold: int) -> asyncio.Future[bool] | None:
        """The release sent now: its answer's future; None if it cannot be sent now."""


@runtime_checkable
class SendsReleaseOnce(Protocol):
    """An :class:`Acquiring` whose ``release()`` sends the release once a call: an
    answer lost after sending raises ``UnavailableError``, never sent again within the
    call. A release sent by such a call, the first, that finds nothing held tells that
    the store had ended the grant first (:mod:`tenure.backends._release`); a store that
    sends again within the call may find its own first send applied."""

    release_sent_once: bool


@runtime_checkable
class HandingOff(Protocol):
    """What a store's :class:`Acquiring` adds where its backend declares HANDOFF: a
    hold offered and adopted in the store, each in one step of its own."""

    async def offer_hold(self, name: str, hold: int, secret: bytes) -> Grant:
        """Keep a proof of ``secret`` with the session's hold ``hold`` on ``name`` (the
        latest offer replaces an earlier one); the hold as offered. LeaseLostError or
        NotFoundError if the session does not hold it."""

    async def adopt_hold(self, handoff: Handoff, hold: int) -> HeldGrant:
        """Move the hold ``handoff`` names to this session's hold ``hold`` under a new,
        greater token, in one step (see
        :meth:`tenure.backends._abilities.Handoffs.adopt_hold`); the new hold with its
        data. The offering session is told its grant ended (``grant_lost``) as any
        grant lost without a release."""


class Administering(Protocol):
    """How a session administers semaphores in one store (each as the contract's
    :class:`~tenure.backends._base.BackendSession` method of the same name, or the
    semaphore write of its kind, whose arguments the session checked)."""

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """A :class:`~tenure.backends._writes.CreateWrite` (its docstring)."""

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """An :class:`~tenure.backends._writes.UpdateWrite` (its docstring)."""

    async def swap_semaphore_data(self, name: str, expected: bytes, data: bytes) -> bool:
        """A :class:`~tenure.backends._writes.SwapWrite` (its docstring)."""

    async def claim(
        self, name: str, claim_id: str, at_least: float, at_most: float, data: bytes
    ) -> ClaimRecord:
        """See :meth:`tenure.backends._base.Claiming.claim` (called again with the
        same ``claim_id`` while the store cannot be reached)."""

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """See :class:`tenure.backends._writes.DeleteWrite`."""

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """See :meth:`tenure.backends._base.CoreSession.describe_semaphore`."""


@runtime_checkable
class Reserving(Protocol):
    """What a store's :class:`Administering` adds where the store reserves a rate
    limiter's units in one call of its own, on its own clock (its backend declares
    RATE_RESERVATION; elsewhere the client reserves over the core)."""

    async def reserve_units(
        self, name: str, count: float, max_wait: float | None
    ) -> RateReservation:
        """See :meth:`tenure.backends._base.RateReservations.reserve_units`."""


@runtime_checkable
class StaleAdministering(Protocol):
    """What a store's :class:`Administering` adds where a replica may answer its
    describes (``tenure://``'s, over a cluster's standbys; elsewhere the session
    describes fresh, which is within any staleness)."""

    async def describe_semaphore_stale(
        self, name: str, *, owners: bool, waiters: bool, max_staleness: float
    ) -> SemaphoreDescription:
        """See :meth:`tenure.backends._base.StaleDescribing.describe_semaphore_stale`."""


@runtime_checkable
class StaleWatchingStore(Protocol):
    """What a store's :class:`Watching` adds where a replica may arm its watches
    (``tenure://``'s, on a cluster's standbys; elsewhere the session watches as ever,
    fresh, which is within any staleness)."""

    async def watch_semaphore_stale(
        self, name: str, *, data: bool, owners: bool, waiters: bool, max_staleness: float
    ) -> WatchStream:
        """See :meth:`tenure.backends._base.StaleWatching.watch_semaphore_stale`."""

    async def watch_prefix_stale(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool, max_staleness: float
    ) -> PrefixWatchStream:
        """See :meth:`tenure.backends._base.StaleWatching.watch_prefix_stale`."""


class Watching(Protocol):
    """How a session watches semaphores in one store (the store's :meth:`Store.stop`
    fails its watches when the session ends)."""

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> WatchStream:
        """See :meth:`tenure.backends._base.CoreSession.watch_semaphore`."""

    async def watch_prefix(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool
    ) -> PrefixWatchStream:
        """See :meth:`tenure.backends._base.PrefixWatch.watch_prefix` (``prefix``
        checked already)."""
