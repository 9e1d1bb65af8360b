"""The one backend session: what every store's session promises, written once.

A session of any backend is a :class:`StoreSession` over a small adapter of its
store, in four parts by purpose (:mod:`tenure.backends._store`: the
:class:`~tenure.backends._store.Store`, the session's life there; its
:class:`~tenure.backends._store.Acquiring`, :class:`~tenure.backends._store.Administering`
and :class:`~tenure.backends._store.Watching`), each used through its own protocol.
The adapter says how things are done where the state lives; the rules below are the
same everywhere, and this module is the only place that states them. Three of them
are carried out by a module each, over a narrow view of the session: the local
deadline and the heartbeats by :mod:`tenure.backends._liveness`, acquires (and their
withdrawal) by :mod:`tenure.backends._acquires`, releases by
:mod:`tenure.backends._release`; and the hand-offs by
:mod:`tenure.backends._session_handoffs`, over the session's ledger.

**Loss is told once.** The session ends once: the store says so (an expiry, a
kill, another client resuming it), its node is dropped by force, or its local
deadline passes. Then every wait fails (with NotFoundError if the node was
dropped, else with the loss), every watch ends with the loss, the store stops what
it runs for the session, and the listener hears ``session_lost`` once. Every
later call raises the loss. A grant lost alone (its lease ran out, its semaphore
was deleted by force) is told once through ``lease_lost``.

**The local deadline.** The store cannot keep a session longer than its window
past the *send* time of the last renewal it answered
(:meth:`Store.confirmed_at`). At that moment, on this client's monotonic clock,
the session is given up: lost with SessionExpiredError, so the work under its
grants is cancelled then, not when the store is heard from again; and it is
closed in the store as soon as it can be (the store may still keep it).

**Heartbeats.** A store that renews sessions one by one (:attr:`Store.beat_period`)
is sent a heartbeat each period; one that is not answered is sent again after a
pause (growing from :data:`RETRY_MIN` to :data:`RETRY_MAX`); the deadline decides
when to give up.

**Hold numbers** are the :class:`~tenure.backends._ledger.HoldLedger`'s: each hold of a
semaphore has its own; a new acquire takes the lowest not in use (asked for, held,
being released, or being withdrawn).

**A cancelled acquire** (and one whose outcome is unknown because the store could
not be reached: UnavailableError) never leaves a hold behind: its request is
withdrawn, and a grant that raced the withdrawal is released, except a restate's:
an upgrade that was granted replaced the hold, and is kept as the hold. The
withdrawal runs in a task of its own, so a second cancellation cannot stop it;
it is sent until the store answers or the session ends; the hold's number stays
taken until it is through. The caller waits for it at most ``withdraw_wait``
seconds (every backend's option; :data:`WITHDRAW_WAIT`, 1 s, by default: a round
trip, while the store answers), then goes on: its CancelledError (or its
UnavailableError) is what it sees.

**A release is sent until it is answered**, or until the session ends (which
raises the loss): a release given up while the session lives on would leave the
hold in the store, and the session's next acquire of the same hold number would
find it. :meth:`StoreSession.release` starts it and returns its answer's future:
the caller need not wait (a lease's ``release()`` does not), and one that waits
and is cancelled stops only its own wait. A store that can send at once
(:class:`~tenure.backends._store.EagerRelease`: ``tenure://``, ``memory://``,
``redis://``) sends it before ``release`` returns, so whatever the client asks next reaches the
engine after it; others send it from a task. The hold's number stays taken until
the store answers, so the session's next acquire of the name takes another
number and queues behind the release if the semaphore is full. An answer that
is an error other than the session's loss is logged: nobody may be waiting; but
not one that comes once the session has ended, whose end gave every hold back
(the release had nothing left to do): its answer is the loss.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Final, TypeVar

from tenure._core.claims import ClaimRecord, check_claim_id, check_claim_times
from tenure._core.commands import RateReservation
from tenure._core.rates import check_units
from tenure._core.values import SemaphoreDescription, check_duration, check_name, check_prefix
from tenure.backends._abilities import max_holds
from tenure.backends._acquires import Acquires
from tenure.backends._base import (
    Grant,
    Handoff,
    HeldGrant,
    PrefixWatchStream,
    SessionListener,
    SessionTicket,
    WatchStream,
)
from tenure.backends._capability import Capability
from tenure.backends._ledger import HoldLedger
from tenure.backends._liveness import RETRY_MAX, RETRY_MIN, Liveness
from tenure.backends._options import WITHDRAW_WAIT
from tenure.backends._release import Releases
from tenure.backends._session_handoffs import SessionHandoffs
from tenure.backends._session_replicas import ReplicaReads
from tenure.backends._store import (
    Acquiring,
    Administering,
    EagerRelease,
    Reserving,
    Store,
    Watching,
)
from tenure.backends._writes import CreateWrite, DeleteWrite, SemaphoreWrite, SwapWrite, UpdateWrite
from tenure.errors import (
    InvalidArgumentError,
    LeaseLostError,
    LostError,
    NotFoundError,
    SessionClosedError,
    TenureError,
    UnavailableError,
    UnsupportedError,
)

__all__ = ["RETRY_MAX", "RETRY_MIN", "WITHDRAW_WAIT", "StoreSession"]

log = logging.getLogger("tenure.client")

R = TypeVar("R")


class StoreSession(ReplicaReads):
    """A :class:`~tenure.backends._base.BackendSession` over a store adapter (module docstring).

    The class has every ability; a backend makes its sessions of
    :func:`~tenure.backends._session_class.session_class` of its capabilities, which
    leaves out the members of the abilities it lacks (so that the session implements
    exactly what it declares).

    ``store`` is the session's life in the store; ``acquiring``, ``admin`` and
    ``watching`` do its acquires, its semaphore calls and its watches there.
    """

    def __init__(
        self,
        store: Store,
        listener: SessionListener,
        *,
        acquiring: Acquiring,
        admin: Administering,
        watching: Watching,
        scheme: str,
        node: str,
        session_id: int,
        window: float,
        withdraw_wait: float = WITHDRAW_WAIT,
    ) -> None:
        self._store = store
        self._acquiring = acquiring
        self._admin = admin
        self._watching = watching
        self._listener = listener
        #: The kind of backend, as tickets name it (``memory``, ``tenure``, ``etcd``...).
        self.scheme = scheme
        self.node = node
        self._session_id = session_id
        self._window = window
        #: The most seconds a cancelled acquire's caller waits for its withdrawal
        #: (the backend's ``withdraw_wait`` option).
        self.withdraw_wait = withdraw_wait
        #: Acquires in progress, grants held and being released.
        self.ledger = HoldLedger(session_id)
        #: How the session ended (None while it lives).
        self.ended: LostError | None = None
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Future[Any]] = set()
        self._end_waiter: asyncio.Future[None] | None = None
        self._releases = Releases(
            self, acquiring, acquiring.release_now if isinstance(acquiring, EagerRelease) else None
        )
        self._acquires = Acquires(self, acquiring, self._releases)
        self._handoffs = SessionHandoffs(acquiring, self.ledger, scheme, node, session_id)
        store.bind(self)
        self._liveness = Liveness(self, store, window)
        #: See :meth:`tenure.backends._base.CoreSession.deadline_passed`: the
        #: liveness's own (:mod:`tenure.backends._liveness`), bound here so that the
        #: check every block's exit makes twice is one call, not two.
        self.deadline_passed: Callable[[], bool] = self._liveness.deadline_passed

    @property
    def session_id(self) -> int:
        """The store's id of this session."""
        return self._session_id

    @property
    def recovery_window(self) -> float:
        """The window in force, as the store keeps it (see the contract)."""
        return self._window

    @property
    def releases_in_order(self) -> bool:
        """Whether a release is sent before :meth:`release` returns, so that the
        client's later requests reach the store after it (module docstring)."""
        return self._releases.in_order

    def unsupported_reason(self, capability: Capability) -> str | None:
        """Why this session lacks ``capability``, if its store can say (postgres:// behind
        a transaction-pooling pgbouncer has no watches); the ability look-ups add it
        to their refusal (:func:`tenure.backends._abilities.ability`)."""
        reason = getattr(self._admin, "unsupported_reason", None)
        return reason(capability) if callable(reason) else None

    @property
    def store(self) -> Store:
        """The store adapter's :class:`Store` (for its backend and for tests)."""
        return self._store

    # -- what the store tells (BoundSession) -----------------------------------------

    def lose(self, error: LostError) -> None:
        """The session is lost: end it and tell the listener (once)."""
        if self.ended is not None:
            return
        self._end(error, error)
        self._listener.session_lost(error)

    def dropped(self) -> None:
        """The node was dropped by force: grants lost, waits not found, session closed."""
        if self.ended is not None:
            return
        message = f"node {self.node!r} was dropped"
        for (name, _), held in list(self.ledger.held.items()):
            self._listener.lease_lost(name, held.token, LeaseLostError(message))
        self.ledger.held.clear()
        self._end(SessionClosedError(message), NotFoundError(message))
        self._listener.session_lost(SessionClosedError(message))

    def grant_lost(self, name: str, hold: int, token: int, error: LostError) -> None:
        """The grant ``token`` of hold ``hold`` on ``name`` ended without a release.

        Told to the listener once, if a caller held it; a grant its caller has not
        taken yet makes that acquire raise instead (:meth:`HoldLedger.lose`).
        """
        if self.ledger.lose((name, hold), token, error):
            self._listener.lease_lost(name, token, error)

    def check_alive(self) -> None:
        """Raise the session's loss error if it ended."""
        if self.ended is not None:
            raise type(self.ended)(*self.ended.args)

    def spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        """Run ``coro`` in the background (errors are logged: there is no caller)."""
        self.background(coro)

    def background(self, coro: Coroutine[Any, Any, object]) -> asyncio.Future[None]:
        """:meth:`spawn`, answering the task ``coro`` runs in (to wait for it)."""
        task = asyncio.ensure_future(self._logged(coro))
        self.keep(task)
        return task

    # -- acquire, restate, release, renew -------------------------------------------

    #: Acquires take the asking task's number (see the contract's ``task_numbers``).
    task_numbers: Final = True

    #: Acquires take a grant's bound (see the contract's ``max_holds``).
    max_holds: Final = True

    def acquire(
        self,
        name: str,
        *,
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
        task: int = 0,
        max_hold: float | None = None,
    ) -> Coroutine[Any, Any, Grant | None]:
        """See :meth:`tenure.backends._base.CoreSession.acquire` (and ``max_hold``,
        :meth:`tenure.backends._base.MaxHolds.acquire`: refused with UnsupportedError
        where the backend lacks :attr:`Capability.MAX_HOLD`)."""
        if self.ended is not None:  # (check_alive, inline: on every request)
            raise type(self.ended)(*self.ended.args)
        if max_hold is not None and not self.max_holds:
            max_holds(self)  # (UnsupportedError naming the capability)
        hold = self.ledger.free_hold(name)
        return self._acquires.one(
            name, hold, count, data, timeout, ephemeral, False, task, max_hold
        )

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
        """See :meth:`tenure.backends._base.AllOrNone.acquire_all`: one pending
        acquire per name, sent as one (:meth:`Acquires.all`)."""
        self.check_alive()
        return await self._acquires.all(names, count, data, timeout, ephemeral, task)

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
        """See :meth:`tenure.backends._base.CoreSession.restate`."""
        self.check_alive()
        # Not ephemeral: a semaphore deleted meanwhile must not be made anew.
        return await self._acquires.one(name, grant.hold, count, data, timeout, False, True, task)

    def release(self, name: str, grant: Grant) -> asyncio.Future[bool]:
        """See :meth:`tenure.backends._base.CoreSession.release` (module docstring)."""
        if self.ended is not None:  # (check_alive, inline: on every request)
            raise type(self.ended)(*self.ended.args)
        return self._releases.start(name, grant)

    async def until_answered(self, call: Callable[..., Awaitable[R]], *args: Any) -> R:
        """``call(*args)``, sent again while the store cannot be reached (a pause growing
        from RETRY_MIN to RETRY_MAX), until it answers or the session ends (which raises
        its loss): the release's rule, for a store's own changes that must not be lost."""
        pause = RETRY_MIN
        while True:
            self.check_alive()
            try:
                return await call(*args)
            except UnavailableError as error:
                log.info("session %d: not answered, again: %s", self._session_id, error)
            await asyncio.sleep(pause)
            pause = min(pause * 2, RETRY_MAX)

    async def renew(self, name: str, grant: Grant) -> float:
        """See :meth:`tenure.backends._base.LeaseRenewal.renew`."""
        self.check_alive()
        return await self._acquiring.renew(name, grant)

    # -- semaphores -------------------------------------------------------------------

    async def reserve_units(
        self, name: str, count: float, max_wait: float | None
    ) -> RateReservation:
        """See :meth:`tenure.backends._base.RateReservations.reserve_units`."""
        self.check_alive()
        admin = self._admin
        if not isinstance(admin, Reserving):  # (its class has no reserve_units then)
            raise UnsupportedError(f"{self.scheme}:// reserves rate limiters over the core")
        count = check_units(count)  # (checked here once for every store)
        if max_wait is not None:
            max_wait = check_duration("max_wait", max_wait, allow_zero=True)
        return await admin.reserve_units(name, count, max_wait)

    async def claim(
        self, name: str, claim_id: str, at_least: float, at_most: float, data: bytes
    ) -> ClaimRecord:
        """See :meth:`tenure.backends._base.Claiming.claim`: checked here once
        for every store, then sent until answered (a retry carries the same id, and is
        answered with the same claim) or the session ends."""
        self.check_alive()
        check_name("semaphore", name)
        claim_id = check_claim_id(claim_id)
        at_least, at_most = check_claim_times(at_least, at_most)
        if not isinstance(data, bytes):
            raise InvalidArgumentError(f"claim data must be bytes, got {type(data).__name__}")
        return await self.until_answered(self._admin.claim, name, claim_id, at_least, at_most, data)

    async def write_semaphore(self, name: str, write: SemaphoreWrite) -> bool:
        """See :meth:`tenure.backends._core_session.CoreSession.write_semaphore`: each kind
        of write is the store's administering method of its name."""
        self.check_alive()
        admin = self._admin
        if isinstance(write, SwapWrite):
            return await admin.swap_semaphore_data(name, write.expected, write.data)
        if isinstance(write, CreateWrite):
            await admin.create_semaphore(name, write.limit, write.data)
        elif isinstance(write, UpdateWrite):
            await admin.update_semaphore(name, write.data)
        elif isinstance(write, DeleteWrite):
            await admin.delete_semaphore(name, write.force)
        else:
            raise InvalidArgumentError(f"not a semaphore write: {write!r}")
        return True

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """See :meth:`tenure.backends._base.CoreSession.describe_semaphore`."""
        self.check_alive()
        return await self._admin.describe_semaphore(name, owners=owners, waiters=waiters)

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> WatchStream:
        """See :meth:`tenure.backends._base.CoreSession.watch_semaphore`."""
        self.check_alive()
        return await self._watching.watch_semaphore(name, data=data, owners=owners, waiters=waiters)

    async def watch_prefix(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool
    ) -> PrefixWatchStream:
        """See :meth:`tenure.backends._base.PrefixWatch.watch_prefix`."""
        self.check_alive()
        prefix = check_prefix(prefix)  # (checked here once for every store)
        return await self._watching.watch_prefix(
            prefix, data=bool(data), owners=bool(owners), waiters=bool(waiters)
        )

    # -- tickets ----------------------------------------------------------------------

    def ticket(self) -> SessionTicket:
        """See :meth:`tenure.backends._base.SessionRecovery.ticket`."""
        self.check_alive()
        return SessionTicket(self.scheme, self.node, self._session_id, self._store.secret())

    async def holds(self) -> list[HeldGrant]:
        """See :meth:`tenure.backends._base.SessionRecovery.holds` (read from the store now)."""
        self.check_alive()
        return await self._acquiring.holds()

    def adopt(self, holds: list[HeldGrant]) -> None:
        """After a resume: what the store holds for the session is this client's now."""
        for held in holds:
            self.ledger.held[(held.name, held.grant.hold)] = held.grant

    # -- hand-offs (carried out by _session_handoffs) ---------------------------------

    async def offer_hold(self, name: str, grant: Grant) -> Handoff:
        """See :meth:`tenure.backends._abilities.Handoffs.offer_hold`: a fresh secret
        each time (the store keeps only its proof)."""
        self.check_alive()
        return await self._handoffs.offer(name, grant)

    async def adopt_hold(self, handoff: Handoff) -> HeldGrant:
        """See :meth:`tenure.backends._abilities.Handoffs.adopt_hold`: its hold number
        reserved as an acquire's is (:mod:`tenure.backends._session_handoffs`)."""
        self.check_alive()
        return await self._handoffs.adopt(handoff)

    # -- the end ----------------------------------------------------------------------

    async def close(self) -> None:
        """See :meth:`tenure.backends._base.CoreSession.close`."""
        if self.ended is not None:
            return
        self._end(SessionClosedError(f"session {self._session_id} was closed"))
        # Shielded: a body that closes its own session is cancelled meanwhile.
        await asyncio.shield(self._store.close())

    def _end(self, error: LostError, wait_error: TenureError | None = None) -> None:
        self.ended = error
        self.ledger.end(wait_error or error)
        self._liveness.stop()
        if self._end_waiter is not None and not self._end_waiter.done():
            self._end_waiter.set_result(None)
        self._store.stop(error)

    def ending(self) -> asyncio.Future[None]:
        """A future done when the session ends (for a wait that must end with it)."""
        if self._end_waiter is None:
            self._end_waiter = self._loop.create_future()
            if self.ended is not None:
                self._end_waiter.set_result(None)
        return self._end_waiter

    # -- background work ---------------------------------------------------------------

    async def _logged(self, coro: Awaitable[object]) -> None:
        try:
            await coro
        except (TenureError, OSError) as error:
            log.info("session %d: background work failed: %s", self._session_id, error)

    def keep(self, task: asyncio.Future[Any]) -> None:
        """Keep a reference to background work that is already running."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
