"""One session of the backend contract: what it grants, what it does, and whom it tells.

:class:`BackendSession` is what :meth:`Backend.open_session
<tenure.backends._base.Backend.open_session>` returns: acquires that give a
:class:`Grant` (read back as :class:`HeldGrant`), semaphores administered and
watched, a ticket to resume it; news it did not answer a call with goes to its
:class:`SessionListener`. Part of the backend contract (re-exported by
:mod:`tenure.backends._base` and :mod:`tenure.backends`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tenure._core.claims import ClaimRecord
from tenure._core.commands import RateReservation
from tenure._core.values import SemaphoreDescription
from tenure.backends._tickets import SessionTicket
from tenure.backends._watch_streams import PrefixWatchStream, WatchStream
from tenure.backends._writes import SemaphoreWrite
from tenure.errors import LostError

__all__ = ["BackendSession", "Grant", "HeldGrant", "SessionListener"]


@dataclass(frozen=True, slots=True)
class Grant:
    """A successful acquire: the fencing token, the count held, the lease TTL if any.

    ``hold`` tells this hold from the session's other holds on the same semaphore
    (the backend's number for it; the session gives it back to restate, release or
    renew this hold).
    """

    token: int
    count: int
    lease_ttl: float | None = None
    hold: int = 0


@dataclass(frozen=True, slots=True)
class HeldGrant:
    """One hold of a session, as :meth:`BackendSession.holds` reads it back.

    ``grant`` is what the acquire that made the hold returned (token, count, lease
    TTL, hold number); ``data`` is the owner data the hold carries.
    """

    name: str
    grant: Grant
    data: bytes


class SessionListener(Protocol):
    """Receives a backend session's bad news; called on the event loop, never twice."""

    def session_lost(self, error: LostError) -> None:
        """The session ended without being closed by its client (expired, dropped...).

        Every grant of the session ended with it; the backend does not also call
        :meth:`lease_lost` for each.
        """

    def lease_lost(self, name: str, token: int, error: LostError) -> None:
        """The grant with ``token`` on semaphore ``name`` ended without a release.

        (Its lease TTL ran out, the semaphore was deleted by force...)
        """


class BackendSession(Protocol):
    """One session: an owner of grants, alive while its client is or for its window.

    The full set: the core every backend has (:class:`~tenure.backends._abilities.CoreSession`,
    ten members; its ``write_semaphore`` is the four semaphore writes below as one) and
    every ability (:data:`~tenure.backends._abilities.ABILITIES`), which the built-in
    backends implement where they declare its capability. Each member's meaning is
    stated here in full; a backend of another package implements the core and the
    abilities it declares.

    While the connection to the backend is lost, the backend keeps the session for
    its recovery window and re-attaches it by itself when it can (with
    :attr:`Capability.SESSION_RECOVERY`); calls made meanwhile wait for that, within
    the window. If the window passes, the listener hears :meth:`session_lost`, and
    every call raises the loss error.
    """

    @property
    def session_id(self) -> int:
        """The backend's id of this session, as owners and waiters show it."""

    @property
    def recovery_window(self) -> float:
        """The window in force, in seconds: the one asked for (or the node's default)
        as the backend keeps it (``etcd://`` rounds it up to whole seconds, 2 at least)."""

    async def acquire(
        self,
        name: str,
        *,
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
        task: int = 0,
    ) -> Grant | None:
        """A new hold of ``count`` tokens of semaphore ``name``, with owner data ``data``.

        A session may hold a semaphore more than once: each acquire is a hold of its
        own, an owner or waiter like another session's (two holds of one session
        queue behind each other in arrival order). :attr:`Grant.hold` names it for
        :meth:`restate`, :meth:`release` and :meth:`renew`.

        ``timeout`` is how long to wait, by the backend's clock (None: forever; 0:
        only try, returning None if the tokens are not free now or others wait).
        A waiting request is served in arrival order (with :attr:`Capability.FIFO`).
        ``ephemeral`` creates a missing semaphore with the largest limit; it is
        deleted when its last owner and waiter are gone.

        ``task`` is the client's number of the task that asks (0: not known; never
        two alike among the live tasks of one session's client), kept with the
        request and the hold it becomes: a backend with
        :attr:`Capability.DEADLOCK_DETECTION` refuses a request that must wait and
        would close a deadlock (DeadlockError). The client passes it only to a
        session whose ``task_numbers`` attribute is true (optional: a backend of
        another package may lack the parameter).

        Raises TimeoutError when a positive timeout passes, NotFoundError for a
        missing semaphore that is not ephemeral, LimitExceededError if ``count``
        exceeds the limit or the queue is full, DeadlockError (above). If the
        awaiting task is cancelled, the request is withdrawn (a grant that raced the
        cancellation is released), so a cancelled acquire never leaves a hold behind.
        """

    async def acquire_all(
        self,
        names: Sequence[str],
        *,
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
        task: int = 0,
    ) -> list[Grant] | None:
        """A new hold of ``count`` tokens of each semaphore of ``names``, all or none.

        Granted only when every one can be at once, and then all in one step (a grant
        each, in the order of ``names``); waiting, it is in every queue with one
        arrival (:attr:`Capability.ALL_OR_NONE`). ``timeout`` and ``ephemeral`` are
        :meth:`acquire`'s (None: busy, with ``timeout`` 0), and so is ``task`` (the set
        is checked for deadlocks as one request in every queue). Cancelled, it is withdrawn
        from every queue, and grants that raced the cancellation are released.

        Raises UnsupportedError on a backend without ALL_OR_NONE, and what
        :meth:`acquire` raises.
        """

    async def restate(
        self,
        name: str,
        grant: Grant,
        *,
        count: int,
        data: bytes,
        timeout: float | None,
        task: int = 0,
    ) -> Grant | None:
        """Change the hold ``grant`` in place: its count, its data, or both.

        No more tokens than held, or new data, apply at once and keep the token.
        More tokens queue as an upgrade (``timeout`` and ``task`` as for
        :meth:`acquire`) that, once granted, replaces the hold with a new token;
        until then, and if the upgrade fails or is cancelled, the hold stays as it
        was. Returns the hold's new Grant (None: ``timeout`` 0 and the tokens are
        not free).
        """

    def release(self, name: str, grant: Grant) -> Awaitable[bool]:
        """Drop the hold ``grant`` (and a queued upgrade of it); await whether it was there.

        Started before it returns: the hold is the session's no more, and the
        release is sent until the store answers (or the session ends), whether or
        not anyone awaits the answer. A session whose ``releases_in_order`` is true
        (an optional attribute: false if missing) sends it before this returns, so
        the client's later requests reach the store after it (``tenure://``,
        ``memory://``, ``redis://``); leaving ``async with`` then does not wait for
        the answer.
        """

    def deadline_passed(self) -> bool:
        """Give the session up if its local deadline passed (the listener hears
        :meth:`session_lost` before this returns); whether the session has ended.

        The deadline's timer may not have run yet when the client asks (its event
        loop was blocked past the window): a client that is about to act as a holder
        (a release) asks first, so that it never believes in its holds longer than
        the store could keep them.
        """

    async def renew(self, name: str, grant: Grant) -> float:
        """Extend the hold ``grant``, which has a lease TTL; the TTL now in force (LEASE_TTL)."""

    async def reserve_units(
        self, name: str, count: float, max_wait: float | None
    ) -> RateReservation:
        """Reserve ``count`` units of the rate limiter ``name`` (a semaphore whose data is
        a bucket, :mod:`tenure._core.rates`) on the store's clock, unless they would wait
        more than ``max_wait`` seconds; NotFoundError if missing, PreconditionFailedError
        if its data is no bucket. A lost answer may have reserved them."""

    async def claim(
        self, name: str, claim_id: str, at_least: float, at_most: float, data: bytes
    ) -> ClaimRecord:
        """Claim ``name`` for at least ``at_least`` and at most ``at_most`` seconds of the
        store's clock (:mod:`tenure._core.claims`, :attr:`Capability.CLAIMS`); the claim
        that holds the name now: this one (its id is ``claim_id``), or another's.

        The claim lives in the persistent semaphore ``name``, made if missing; a
        semaphore holding anything else but an ended claim's record refuses it
        (PreconditionFailedError). The claim does not end with the session; the store
        ends it (and deletes the semaphore) at ``at_most`` after its grant, or once
        released at the later of the release and ``at_least`` after its grant. A call
        whose answer was lost is sent again with the same ``claim_id`` and answered
        with the same claim. LimitExceededError past the node's ``max_claims``;
        UnsupportedError on a backend without CLAIMS.
        """

    async def write_semaphore(self, name: str, write: SemaphoreWrite) -> bool:
        """Create a persistent semaphore, replace its data, compare-and-set it, or delete
        it: ``write`` is one of the four kinds (:data:`SemaphoreWrite`, each kind's
        meaning and errors in its docstring); whether it did (False only for a swap
        that found other data)."""

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """Describe a semaphore (owners in grant order, waiters in service order).

        NotFoundError if missing.
        """

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> WatchStream:
        """Arm a watch on the semaphore's data, owners and/or waiters (:class:`WatchStream`).

        Every state has owners and waiters listed if watched. The stream survives
        reconnects; LimitExceededError if the session watches too much already.
        """

    async def watch_prefix(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool
    ) -> PrefixWatchStream:
        """Arm a watch of every semaphore whose name starts with ``prefix`` (``""``:
        every one of the node), those made later too (:class:`PrefixWatchStream`).

        Armed when this returns: every change after that is told. Existence is
        always watched; ``data``, ``owners`` and ``waiters`` add those aspects (and
        list owners, waiters in the states pushed). It counts as one watch against
        the node's ``max_watches_per_session``: LimitExceededError past it.
        UnsupportedError on a backend without :attr:`Capability.PREFIX_WATCH`.
        """

    async def close(self) -> None:
        """End the session: every hold is released and every request withdrawn. Idempotent.

        The listener hears nothing: the client asked for it.
        """

    def ticket(self) -> SessionTicket:
        """What a later process needs to take this session back (:meth:`Backend.open_session`).

        Raises the session's loss error (or SessionClosedError) once it ended, and
        UnsupportedError on a backend without :attr:`Capability.SESSION_RECOVERY`.
        """

    async def holds(self) -> list[HeldGrant]:
        """The session's holds as the backend keeps them now, in (name, hold) order.

        After a resume these are what the session took back; a client rebuilds its
        lease objects from them. Reads the backend (its I/O is the backend's).
        """
