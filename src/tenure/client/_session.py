"""Sessions: the unit of liveness. Everything a session holds ends with it.

Layer (CONTRIBUTING.md): this module may also import tenure.client._session_holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Iterable
from functools import partial
from typing import Any, TypeVar, final, overload

from tenure._core.claims import check_claim_times
from tenure.backends._base import CoreSession, SessionTicket, claims, session_recovery
from tenure.client import _args, _forks
from tenure.client._args import Data
from tenure.client._barrier import Barrier
from tenure.client._claim import Claim, Releaser
from tenure.client._counter import Counter
from tenure.client._election import Election
from tenure.client._group import DEFAULT_MAX_GROUP_MEMBERS, Group
from tenure.client._latch import Latch
from tenure.client._lease import Lease, open_lease
from tenure.client._lock_all import HeldLocks
from tenure.client._loss import CancelOnLoss, Guarded
from tenure.client._mutex import Mutex
from tenure.client._opening import Opening
from tenure.client._rate_limiter import RateLimiter
from tenure.client._rwlock import RWLock
from tenure.client._semaphore import Semaphore
from tenure.client._session_holds import SessionHolds
from tenure.client._ttl import Watchdog
from tenure.errors import (
    LostError,
    SessionClosedError,
    SessionExpiredError,
    TenureError,
)

log = logging.getLogger("tenure.client")

L = TypeVar("L", bound=Lease)


class Session(SessionHolds, Guarded):
    """A session on a node: a recovery window, a description, and what it holds.

    If the session is lost (the server expired it, or its node was dropped), every
    lease, lock and leadership it holds is lost with the same error, and the bodies
    of their ``async with`` blocks, and of the session's own, are cancelled.
    """

    def __init__(
        self, node: str, recovery_window: float | None, description: str, ttl: float | None = None
    ) -> None:
        super().__init__(node)
        self.recovery_window = recovery_window
        self.description = description
        #: Seconds within which :meth:`renew` must be called, or the session ends
        #: (None: no ttl, the session lives while its connection does).
        self.ttl = ttl
        self._watchdog: Watchdog | None = None
        self._ttl_close: asyncio.Task[None] | None = None
        self._scopes: list[CancelOnLoss] = []
        #: What releases a claim by its id (the client's release_claim, of this node).
        self._claim_releaser: Releaser | None = None

    def _bind(self, backend_session: CoreSession) -> None:
        super()._bind(backend_session)
        #: The recovery window in force, in seconds: the one asked for (or the node's
        #: default) as the backend keeps it; etcd:// rounds it up to whole seconds,
        #: 2 at least (None only before the session is open).
        self.recovery_window = backend_session.recovery_window
        if self.ttl is not None:
            watchdog = Watchdog(self.ttl, lambda: f"session {self.id}", self._ttl_expired)
            self._watchdog = watchdog
            self._signal.add_callback(lambda _reason: watchdog.stop())

    def __repr__(self) -> str:
        return f"<Session {self.id} on {self.node!r}>"

    @property
    def closed(self) -> bool:
        """Whether the session has ended (closed or lost; in a child made by fork since
        it opened, it is the parent's: closed there, see ForkedClientError)."""
        return self._signal.ended or self._pid != _forks.pid

    def ticket(self) -> SessionTicket:
        """What a later process needs to take this session back (``client.session(node, resume=)``).

        Save ``ticket().to_str()`` where a restarted process finds it (a file, say):
        a process that crashes and restarts within the recovery window resumes the
        session with everything it held. Whoever has the ticket can take the
        session away from this client: keep it as you would a password.

        Raises:
            UnsupportedError: the backend cannot resume sessions (no SESSION_RECOVERY).
            LostError: the session has ended (its loss error, or SessionClosedError).
        """
        return session_recovery(self._backend_session()).ticket()

    async def adopt(self, handoff: str) -> Lease:
        """Take over the hold another session offered with :meth:`Lease.handoff`, from
        any client or process: a :class:`Lease` of this session (and of the calling
        task), usable with ``async with`` as any other.

        In one step the offering lease ends lost and this one holds the same count and
        data under a new fencing token, strictly greater than the offered lease's; a
        lease TTL restarts now; waiters keep their places. Under an auth file the
        adopter needs write access to the node, as to acquire.

        Raises:
            InvalidArgumentError: ``handoff`` is not a hand-off string, or names
                another kind of backend or another node than this session's.
            LeaseLostError: the hold cannot be adopted: it ended (released, expired,
                lost), was adopted already (a hand-off adopts once) or offered again,
                or the string's secret is not its (one answer for all).
            PreconditionFailedError: the calling task holds or is acquiring the same
                semaphore in this session.
            UnsupportedError: the backend cannot hand holds off (no HANDOFF).
            LostError: this session has ended (its loss error).
        """
        return await self._take_over(handoff)

    def leases(self, name: str | None = None) -> list[Lease]:
        """The leases this session holds now (of semaphore ``name`` only, if given), by token.

        After a resume (``client.session(node, resume=ticket)``) these are the holds
        the session took back: each a :class:`Lease` like any other (its ``name``,
        ``token``, ``count`` and ``data``; release it, restate it, or use it in
        ``async with`` so that its loss cancels the body). A resumed lease belongs
        to no caller: a task (sync face: a thread) that holds one may still ask for
        the same semaphore.
        """
        if name is not None:
            name = _args.semaphore_name(name)
        found = [lease for lease in self._leases.values() if name is None or lease.name == name]
        return sorted(found, key=lambda lease: lease.token)

    def barrier(self, name: str, parties: int) -> Barrier:
        """The cyclic barrier ``name`` of ``parties`` parties: ``wait(timeout)``."""
        return Barrier(self, name, parties)

    async def claim(
        self, name: str, at_least: float, at_most: float, *, data: Data = b""
    ) -> Claim | None:
        """Claim ``name`` for this slot: a :class:`Claim`, or None if it is claimed.

        The name then stays claimed at least ``at_least`` seconds after the grant,
        even once released, and at most ``at_most`` seconds, whatever its holder
        does; both are timed by the store, never by this process's clock. The claim
        does not end with this session, and anyone with its ``id`` may release it
        (:meth:`tenure.Client.release_claim`). ``data`` (bytes) goes with it
        (a task id, who runs it): it shows in ``tenure describe``. A call whose answer
        is lost is sent again with the same claim id, and answered with that claim.

        Raises:
            InvalidArgumentError: before anything is sent: ``at_least`` above
                ``at_most``, either negative, not finite or above 366 days
                (MAX_CLAIM_SECONDS), ``at_most`` 0, a bad name or data.
            PreconditionFailedError: the semaphore ``name`` holds something else.
            LimitExceededError: the node's ``max_claims`` live claims are taken.
            UnsupportedError: the backend lacks Capability.CLAIMS.
        """
        name = _args.semaphore_name(name)
        at_least, at_most = check_claim_times(at_least, at_most)
        owner_data = _args.as_data(data)
        backend = self._backend_session()
        if self._claim_releaser is None:
            raise SessionClosedError(f"session on {self.node!r} was never opened by a client")
        claim_id = secrets.token_hex(16)  # (128 bits: the id a retry carries too)
        record = await claims(backend).claim(name, claim_id, at_least, at_most, owner_data)
        if record.id != claim_id:
            return None
        return Claim(self.node, name, record, self._claim_releaser)

    def counter(self, name: str) -> Counter:
        """The counter ``name``: an integer in the data of the semaphore ``name``,
        changed by compare-and-set (add, get, compare_and_set)."""
        return Counter(self, name)

    def group(self, name: str, *, max_members: int = DEFAULT_MAX_GROUP_MEMBERS) -> Group:
        """The group ``name``: members with data (``join``, ``members``, ``watch``) and
        partitions of a key space among them (``partition``); ``max_members`` is its
        limit when this object's join makes it (later users find the stored one)."""
        return Group(self, name, max_members)

    def latch(self, name: str, count: int) -> Latch:
        """The count-down latch ``name``, made with ``count`` by its first use (later
        uses find the count left): ``count_down()``, ``wait(timeout)``."""
        return Latch(self, name, count)

    def lock_all(
        self, names: Iterable[str], *, timeout: float | None = None, data: Data = b""
    ) -> Opening[HeldLocks]:
        """The mutexes of every name of ``names``, all at once or none; ``await`` it or
        use ``async with`` (see :class:`HeldLocks`: ``held.tokens[name]``).

        Raises:
            TimeoutError: not all held within ``timeout`` (none is held then).
            DeadlockError: waiting would close a deadlock (none is held or queued).
            UnsupportedError: the backend has no Capability.ALL_OR_NONE.
            InvalidArgumentError: at once, naming a bad argument (1 to 64 distinct names).
        """
        wanted = tuple(_args.semaphore_name(name) for name in _args.names(names))
        owner_data, wait = _args.as_data(data), _args.timeout(timeout)
        return Opening(
            partial(self._lock_all, wanted, owner_data, wait), "session.lock_all(...)", "locks"
        )

    def mutex(
        self,
        name: str,
        reentrant: bool = False,
        *,
        max_depth: int | None = None,
        max_hold: float | None = None,
    ) -> Mutex:
        """The mutex ``name`` (an ephemeral semaphore taken exclusively).

        With ``reentrant=True`` the task (sync face: the thread) that holds it so may
        acquire it again, nested, at once: one hold, one token, released when the last
        acquisition is (see :class:`Mutex`); at most ``max_depth`` deep
        (MAX_REENTRANT_DEPTH by default). With ``max_hold`` each of its locks ends
        that many seconds after its grant, whatever the session does (see
        :meth:`acquire`).
        """
        return Mutex(self, name, reentrant, max_depth=max_depth, max_hold=max_hold)

    def rate_limiter(self, name: str, rate: float, burst: float) -> RateLimiter:
        """The rate limiter ``name``: ``rate`` units per second, at most ``burst`` at once,
        shared by every process, on the store's clock (``acquire``, ``try_acquire``)."""
        return RateLimiter(self, name, rate, burst)

    def rwlock(self, name: str, *, max_hold: float | None = None) -> RWLock:
        """The readers-writer lock ``name`` (an ephemeral semaphore: readers take one
        token, a writer all of them, in one FIFO queue); with ``max_hold`` each of its
        holds, read or write, ends that many seconds after its grant (see
        :meth:`acquire`)."""
        return RWLock(self, name, max_hold=max_hold)

    def semaphore(self, name: str) -> Semaphore:
        """The counting semaphore ``name``."""
        return Semaphore(self, name)

    def election(self, name: str) -> Election:
        """The election ``name`` (a single-token semaphore whose owner data is the leader's)."""
        return Election(self, name)

    async def close(self) -> None:
        """Close the session: everything it holds is released. Idempotent."""
        await self._close(None)

    async def _close(self, reason: LostError | None) -> None:
        """Close; a ``reason`` means the session was closed from outside (its client)."""
        if self._signal.ended:
            return
        if self._pid != _forks.pid:  # a parent's session: ended here alone, nothing sent
            self._left_behind()
            return
        self._end(reason)
        if self._backend is not None:
            with contextlib.suppress(LostError):
                await self._backend.close()

    def _end_block(self) -> Awaitable[None] | None:
        return self.close()

    async def renew(self) -> None:
        """Renew a session opened with ``ttl``: it now lives ``ttl`` seconds from now.

        Call it at least every ``ttl`` seconds (every ``ttl / 3`` leaves room for a
        slow turn); a session not renewed in time is lost with SessionExpiredError
        and closed in the store, releasing everything it held (see
        :meth:`Client.session`). A session without a ttl has nothing to renew.

        Raises:
            LostError: the session has ended (its loss error, SessionExpiredError
                if its ttl ran out; SessionClosedError once closed).
        """
        self._backend_session()  # raises the session's end
        if self._watchdog is not None:
            self._watchdog.renew()

    def _ttl_expired(self, error: SessionExpiredError) -> None:
        """The ttl ran out: the session is lost now, and closed in the store."""
        if self._signal.ended:
            return
        backend = self._backend
        self._end(error)
        if backend is not None:
            self._ttl_close = asyncio.ensure_future(self._close_expired(backend))

    async def _close_expired(self, backend: CoreSession) -> None:
        try:
            await backend.close()
        except TenureError as error:  # the store ends it by its own rule, later
            log.warning("session %d: could not close it after its ttl: %s", self.id, error)

    # -- what the backend tells (through a _BackendListener) ---------------------------------

    def _listener(self) -> _BackendListener:
        """The listener to open this session's backend session with."""
        return _BackendListener(self)

    # -- the primitive every recipe is written over -----------------------------------

    @overload
    def acquire(
        self,
        name: str,
        count: int = 1,
        *,
        data: Data = b"",
        timeout: float | None = None,
        ephemeral: bool = False,
        max_hold: float | None = None,
    ) -> Opening[Lease]: ...

    @overload
    def acquire(
        self,
        name: str,
        count: int = 1,
        *,
        data: Data = b"",
        timeout: float | None = None,
        ephemeral: bool = False,
        kind: type[L],
        max_hold: float | None = None,
    ) -> Opening[L]: ...

    def acquire(
        self,
        name: str,
        count: int = 1,
        *,
        data: Data = b"",
        timeout: float | None = None,
        ephemeral: bool = False,
        kind: type[Lease] = Lease,
        max_hold: float | None = None,
    ) -> Opening[Any]:
        """Hold ``count`` tokens of semaphore ``name``; ``await`` it or use ``async with``.

        This is the one primitive the recipes (mutex, semaphore, election) use, and
        the one to write new recipes with: a read-write lock is a semaphore of N
        tokens whose readers take 1 and whose writer takes N.

        Args:
            name: the semaphore.
            count: tokens to hold, 1 to the semaphore's limit.
            data: this owner's data, shown to ``describe(owners=True)`` and watchers.
            timeout: seconds to wait, by the backend's clock; ``None`` waits forever,
                ``0`` only tries.
            ephemeral: create the semaphore if missing (with the largest limit); it
                vanishes with its last owner and waiter.
            kind: the :class:`Lease` subclass to return (:class:`Lock`, :class:`Leadership`,
                or a recipe's own).
            max_hold: seconds; the lease ends this long after its grant, on the
                store's clock, whatever the session does (renewals and keep-alives
                do not extend it): its holder sees it lost (LeaseLostError, the block
                cancelled) and its waiters are served. ``None``: the node's
                ``max_hold``, if any (an acquire's own may only shorten it). Needs
                ``Capability.MAX_HOLD`` (else UnsupportedError).

        Every acquire is a lease of its own, even in one session: a second task of
        this session asking for a semaphore queues behind the first, in the
        backend's FIFO queue and by its clock, like another session would. The task
        (in ``tenure.sync``, the thread) that holds (or is acquiring) ``name`` in this
        session cannot ask again: that raises PreconditionFailedError (leases are not
        reentrant, and it would wait behind itself); a mutex made with
        ``reentrant=True`` nests instead (see :class:`Mutex`). To change a held
        lease's count or data, use :meth:`Lease.restate`.

        The backend learns which task asks (in the sync face, which thread): one with
        ``Capability.DEADLOCK_DETECTION`` refuses an acquire whose wait would close a
        cycle of tasks waiting on each other (docs/recipes.md, "Deadlock detection").

        Raises:
            TimeoutError: not granted within ``timeout`` (with ``timeout=0``: busy).
            NotFoundError: the semaphore does not exist and ``ephemeral`` is false.
            LimitExceededError: ``count`` exceeds the limit, or the queue is full.
            DeadlockError: waiting would close a deadlock (nothing is held or queued).
            UnsupportedError: ``max_hold`` on a backend without Capability.MAX_HOLD.
            InvalidArgumentError: at once, naming a bad argument (``max_hold`` above 0,
                finite, at most MAX_HOLD_SECONDS).
        """
        return open_lease(self, name, count, data, timeout, ephemeral, kind, max_hold)


@final
class _BackendListener:
    """The :class:`~tenure.backends.SessionListener` of one session: the backend's news
    reaches the session through it, not through public methods a user could call."""

    __slots__ = ("_session",)

    def __init__(self, session: Session) -> None:
        self._session = session

    def session_lost(self, error: LostError) -> None:
        """The backend says the session is gone."""
        self._session._end(error)

    def lease_lost(self, name: str, token: int, error: LostError) -> None:
        """The backend says one grant is gone."""
        self._session._lease_lost(name, token, error)
