"""The sync session: each method is one call through the portal into the async one.

Wrappers of held things are built on the portal thread (inside the call that
opens them), so that they subscribe to the async object's end before anything
else can happen to it. The session keeps the one sync wrapper of each lease it
made (:meth:`Session.keep_lease`), so :meth:`Session.leases` gives those same objects.
Its recipes' wrappers live in a module each (``_mutex``, ``_semaphore``,
``_election``, ``_rwlock``...), typed with the session as a
:class:`~tenure.sync._leases.RecipeSession`.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any, TypeVar, overload

from tenure import client as aio
from tenure._core.members import DEFAULT_MAX_GROUP_MEMBERS
from tenure.backends import SessionTicket
from tenure.client._args import Data
from tenure.sync._barrier import Barrier
from tenure.sync._calls import now, opened
from tenure.sync._claim import Claim
from tenure.sync._counter import Counter
from tenure.sync._election import Election
from tenure.sync._group import Group
from tenure.sync._held import Held
from tenure.sync._latch import Latch
from tenure.sync._leases import Leadership, Lease, Lock, ReadLock, WriteLock
from tenure.sync._lock_all import HeldLocks
from tenure.sync._mutex import Mutex
from tenure.sync._portal import Portal
from tenure.sync._rate_limiter import RateLimiter
from tenure.sync._rwlock import RWLock
from tenure.sync._semaphore import Semaphore

L = TypeVar("L", bound="Lease")


class Session(Held):
    """A session on a node (see :class:`tenure.Session`); ``with`` closes it at the end.

    ``lost`` is set when the session ends: lost (expired, node dropped), or closed
    by you; ``lost_reason`` is the loss error, or None after your own close.
    Everything it holds ends with it (lost with SessionClosedError on a close).
    """

    def __init__(self, portal: Portal, session: aio.Session) -> None:
        super().__init__(portal, session.lost)
        self._session = session
        self.node = session.node
        self.recovery_window = session.recovery_window
        self.description = session.description
        #: Seconds within which :meth:`renew` must be called (None: no ttl).
        self.ttl = session.ttl
        self.id = session.id
        """The backend's id of this session (kept after it ends)."""
        self._wrapped: weakref.WeakKeyDictionary[aio.Lease, Lease] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"<sync Session {self.id} on {self.node!r}{' ended' if self.ended else ''}>"

    @property
    def closed(self) -> bool:
        """Whether the session has ended (closed or lost)."""
        return self.ended

    def ticket(self) -> SessionTicket:
        """What a later process needs to take this session back (see :meth:`tenure.Session.ticket`).

        ``client.session(node, resume=ticket)`` (or ``resume=ticket.to_str()``) in a
        process that restarted within the recovery window gets all it held.
        """
        return self._portal.call(now, self._session.ticket)

    def adopt(self, handoff: str) -> Lease:
        """Take over the hold another session offered with :meth:`Lease.handoff` (see
        :meth:`tenure.Session.adopt`): a sync :class:`Lease` of this session, under a
        new, greater fencing token; the offering lease ends lost."""
        return self._portal.call(
            opened, lambda: self._session.adopt(handoff), lambda lease: self._wrap_lease(lease)
        )

    def leases(self, name: str | None = None) -> list[Lease]:
        """The leases this session holds now (of ``name`` only, if given), by token.

        After a resume, the holds it took back (see :meth:`tenure.Session.leases`):
        each a sync :class:`Lease`, usable in ``with`` and releasable.
        """
        return self._portal.call(
            now, lambda: [self._wrap_lease(x) for x in self._session.leases(name)]
        )

    def _wrap_lease(self, lease: aio.Lease) -> Lease:
        """The one sync wrapper of ``lease`` (made on the portal thread, once)."""
        wrapper = self._wrapped.get(lease)
        return self.keep_lease(Lease(self, lease)) if wrapper is None else wrapper

    def keep_lease(self, lease: L) -> L:
        """Keep ``lease`` (a sync :class:`Lease` just made over an async lease of this
        session) as that lease's one sync twin, so that :meth:`leases` gives it; ``lease``.

        What a sync recipe of your own does with each lease it makes:
        ``session.keep_lease(Lock(session, async_lock))``.
        """
        self._wrapped[lease._lease] = lease
        return lease

    @property
    def portal(self) -> Portal:
        """The loop thread this session's calls go through (its client's
        :attr:`Client.portal`): ``session.portal.call(coroutine_function, *args)`` runs
        a call of the async session (:attr:`async_session`) or its objects, blocking."""
        return self._portal

    @property
    def async_session(self) -> aio.Session:
        """The asyncio session itself, for coroutines run on :attr:`portal` (a sync
        recipe of your own, the test helpers, the integrations)."""
        return self._session

    def barrier(self, name: str, parties: int) -> Barrier:
        """The cyclic barrier ``name`` of ``parties`` parties."""
        return Barrier(self, self._session.barrier(name, parties))

    def claim(
        self, name: str, at_least: float, at_most: float, *, data: Data = b""
    ) -> Claim | None:
        """Claim ``name`` for this slot: a :class:`Claim`, or None if it is claimed (see
        :meth:`tenure.Session.claim`)."""
        found = self._portal.call(
            self._session.claim, name, at_least=at_least, at_most=at_most, data=data
        )
        return None if found is None else Claim(self._portal, found)

    def counter(self, name: str) -> Counter:
        """The counter ``name``."""
        return Counter(self, self._session.counter(name))

    def group(self, name: str, *, max_members: int = DEFAULT_MAX_GROUP_MEMBERS) -> Group:
        """The group ``name`` (see :meth:`tenure.Session.group`)."""
        return Group(self, self._session.group(name, max_members=max_members))

    def latch(self, name: str, count: int) -> Latch:
        """The count-down latch ``name``."""
        return Latch(self, self._session.latch(name, count))

    def lock_all(
        self, names: Iterable[str], *, timeout: float | None = None, data: Data = b""
    ) -> HeldLocks:
        """The mutexes of every name of ``names``, all at once or none (see
        :meth:`tenure.Session.lock_all`); use the result plain or in ``with``.

        Raises:
            TimeoutError: not all held within ``timeout`` (none is held then).
            DeadlockError: waiting would close a deadlock (none is held or queued).
        """
        return self._portal.call(
            opened,
            lambda: self._session.lock_all(names, timeout=timeout, data=data),
            self._wrap_all,
        )

    def _wrap_all(self, held: aio.HeldLocks) -> HeldLocks:
        locks = {name: self.keep_lease(Lock(self, lock)) for name, lock in held.locks.items()}
        return HeldLocks(self, held, locks)

    def rate_limiter(self, name: str, rate: float, burst: float) -> RateLimiter:
        """The rate limiter ``name``: ``rate`` units per second, ``burst`` at most at once."""
        return RateLimiter(self, self._session.rate_limiter(name, rate, burst))

    def mutex(
        self,
        name: str,
        reentrant: bool = False,
        *,
        max_depth: int | None = None,
        max_hold: float | None = None,
    ) -> Mutex:
        """The mutex ``name``; ``reentrant=True``: the thread that holds it may nest it
        (see :meth:`tenure.Session.mutex`), at most ``max_depth`` deep; ``max_hold``:
        each lock ends that many seconds after its grant, whatever the session does."""
        return Mutex(
            self, self._session.mutex(name, reentrant, max_depth=max_depth, max_hold=max_hold)
        )

    def rwlock(self, name: str, *, max_hold: float | None = None) -> RWLock:
        """The readers-writer lock ``name``; ``max_hold``: each hold, read or write,
        ends that many seconds after its grant, whatever the session does."""
        return RWLock(self, self._session.rwlock(name, max_hold=max_hold))

    def semaphore(self, name: str) -> Semaphore:
        """The counting semaphore ``name``."""
        return Semaphore(self, self._session.semaphore(name))

    def election(self, name: str) -> Election:
        """The election ``name``."""
        return Election(self, self._session.election(name))

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
    ) -> Lease: ...

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
    ) -> L: ...

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
    ) -> Any:
        """Hold ``count`` tokens of semaphore ``name`` (see :meth:`tenure.Session.acquire`).

        ``kind`` is the sync :class:`Lease` subclass to return (:class:`Lock`,
        :class:`Leadership`, or a recipe's own); plain or ``with``. ``max_hold``: the
        lease ends that many seconds after its grant, on the store's clock, whatever
        the session does (Capability.MAX_HOLD; a ``with`` block's thread is told of
        the loss as for any lost lease).

        Raises:
            TimeoutError: not granted within ``timeout`` (with ``timeout=0``: busy).
            NotFoundError: the semaphore does not exist and ``ephemeral`` is false.
            LimitExceededError: ``count`` exceeds the limit, or the queue is full.
            DeadlockError: waiting would close a deadlock (nothing is held or queued).
        """
        if issubclass(kind, Leadership):
            inner: type[aio.Lease] = aio.Leadership
        elif issubclass(kind, WriteLock):
            inner = aio.WriteLock
        elif issubclass(kind, Lock):
            inner = aio.Lock
        elif issubclass(kind, ReadLock):
            inner = aio.ReadLock
        else:
            inner = aio.Lease
        return self._portal.call(
            opened,
            lambda: self._session.acquire(
                name,
                count,
                data=data,
                timeout=timeout,
                ephemeral=ephemeral,
                kind=inner,
                max_hold=max_hold,
            ),
            lambda lease: self.keep_lease(kind(self, lease)),
        )

    def renew(self) -> None:
        """Renew a session opened with ``ttl`` (see :meth:`tenure.Session.renew`)."""
        self._portal.call(self._session.renew)

    def close(self) -> None:
        """Close the session: everything it holds is released. Idempotent."""
        if not self.ended:
            self._portal.call(self._session.close)

    def _finish(self) -> None:
        self.close()
