"""The sync wrappers: each method is one call through the portal into the async object.

Wrappers of held things are built on the portal thread (inside the call that
opens them), so that they subscribe to the async object's end before anything
else can happen to it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from types import TracebackType
from typing import Any, TypeVar, overload

from tenure import client as aio
from tenure._core.members import DEFAULT_MAX_GROUP_MEMBERS
from tenure._core.values import MutexDescription, SemaphoreDescription
from tenure.backends import SessionTicket
from tenure.client import LeaderState
from tenure.client._args import Data
from tenure.client._caller import ThreadCaller, this_thread
from tenure.sync._barrier import Barrier
from tenure.sync._calls import now, opened, opened_or_none
from tenure.sync._claim import Claim
from tenure.sync._counter import Counter
from tenure.sync._group import Group
from tenure.sync._held import Held
from tenure.sync._latch import Latch
from tenure.sync._leases import Leadership, Lease, Lock, ReadLock, WriteLock
from tenure.sync._lock_all import HeldLocks
from tenure.sync._portal import Portal
from tenure.sync._rate_limiter import RateLimiter
from tenure.sync._rwlock import RWLock
from tenure.sync._stream import Stream

A = TypeVar("A")
T = TypeVar("T")
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
        return self._track(Lease(self, lease)) if wrapper is None else wrapper

    def _track(self, wrapper: L) -> L:
        """Remember ``wrapper`` as its lease's one sync face (so :meth:`leases` gives it)."""
        self._wrapped[wrapper._lease] = wrapper
        return wrapper

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
        """
        return self._portal.call(
            opened,
            lambda: self._session.lock_all(names, timeout=timeout, data=data),
            self._wrap_all,
        )

    def _wrap_all(self, held: aio.HeldLocks) -> HeldLocks:
        locks = {name: self._track(Lock(self, lock)) for name, lock in held.locks.items()}
        return HeldLocks(self, held, locks)

    def rate_limiter(self, name: str, rate: float, burst: float) -> RateLimiter:
        """The rate limiter ``name``: ``rate`` units per second, ``burst`` at most at once."""
        return RateLimiter(self, self._session.rate_limiter(name, rate, burst))

    def mutex(self, name: str, reentrant: bool = False, *, max_depth: int | None = None) -> Mutex:
        """The mutex ``name``; ``reentrant=True``: the thread that holds it may nest it
        (see :meth:`tenure.Session.mutex`), at most ``max_depth`` deep."""
        return Mutex(self, self._session.mutex(name, reentrant, max_depth=max_depth))

    def rwlock(self, name: str) -> RWLock:
        """The readers-writer lock ``name``."""
        return RWLock(self, self._session.rwlock(name))

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
    ) -> Any:
        """Hold ``count`` tokens of semaphore ``name`` (see :meth:`tenure.Session.acquire`).

        ``kind`` is the sync :class:`Lease` subclass to return (:class:`Lock`,
        :class:`Leadership`, or a recipe's own); plain or ``with``.

        Raises:
            TimeoutError: not granted within ``timeout`` (with ``timeout=0``: busy).
            NotFoundError: the semaphore does not exist and ``ephemeral`` is false.
            LimitExceededError: ``count`` exceeds the limit, or the queue is full.
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
                name, count, data=data, timeout=timeout, ephemeral=ephemeral, kind=inner
            ),
            lambda lease: self._track(kind(self, lease)),
        )

    def close(self) -> None:
        """Close the session: everything it holds is released. Idempotent."""
        if not self.ended:
            self._portal.call(self._session.close)

    def _finish(self) -> None:
        self.close()


class Mutex:
    """A named mutex (see :class:`tenure.Mutex`); ``with session.mutex("job") as lock:``.

    Waiters are served in arrival order, across threads, sessions and processes.
    A reentrant one nests per thread: the thread that holds it takes it again at
    once (one hold, one token); another thread queues. Leaving ``with mutex`` leaves
    this thread's innermost block on it (see :class:`tenure.Mutex` on leaving twice).
    """

    def __init__(self, session: Session, mutex: aio.Mutex) -> None:
        self.session = session
        self.name = mutex.name
        #: Whether the thread that holds it may acquire it again, nested.
        self.reentrant = mutex.reentrant
        #: The most acquisitions one thread may nest (None: not reentrant).
        self.max_depth = mutex.max_depth
        self._mutex = mutex
        self._guard = threading.Lock()
        # Each thread's open blocks, innermost last (by thread object: a new thread may
        # reuse an ended one's ident, and must not exit the blocks it left open).
        self._entered: dict[ThreadCaller, list[Lock]] = {}

    def __repr__(self) -> str:
        return f"<sync Mutex {self.name!r} of session {self.session.id}>"

    def lock(self, *, timeout: float | None = None, data: Data = b"") -> Lock:
        """Wait for the lock (``timeout`` seconds at most); use the Lock plain or in ``with``.

        Raises:
            TimeoutError: not held within ``timeout``.
        """
        return self.session._portal.call(
            opened, lambda: self._mutex.lock(timeout=timeout, data=data), self._wrap
        )

    def try_lock(self, *, data: Data = b"") -> Lock | None:
        """Take the lock if it is free right now, else return None."""
        return self.session._portal.call(
            opened_or_none, lambda: self._mutex.try_lock(data=data), self._wrap
        )

    def describe(self) -> MutexDescription:
        """Held or not, by whom, and who waits (see :meth:`tenure.Mutex.describe`)."""
        return self.session._portal.call(self._mutex.describe)

    def _wrap(self, lock: aio.Lock) -> Lock:
        return self.session._track(Lock(self.session, lock))

    def __enter__(self) -> Lock:
        lock = self.lock().__enter__()
        with self._guard:
            self._entered.setdefault(this_thread(), []).append(lock)
        return lock

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        thread = this_thread()
        with self._guard:
            stack = self._entered.get(thread)
            if stack is None:
                # No block of this thread is open on the mutex: leaving again does
                # nothing, as releasing again does.
                return
            lock = stack.pop()
            if not stack:
                del self._entered[thread]
        lock.__exit__(exc_type, exc, tb)


class Semaphore:
    """A named counting semaphore (see :class:`tenure.Semaphore`); acquires are FIFO."""

    def __init__(self, session: Session, semaphore: aio.Semaphore) -> None:
        self.session = session
        self.name = semaphore.name
        self._semaphore = semaphore

    def __repr__(self) -> str:
        return f"<sync Semaphore {self.name!r} of session {self.session.id}>"

    def create(self, limit: int, data: Data = b"", *, exist_ok: bool = False) -> None:
        """Create the semaphore (see :meth:`tenure.Semaphore.create`)."""
        self.session._portal.call(self._semaphore.create, limit, data, exist_ok=exist_ok)

    def acquire(
        self,
        count: int = 1,
        *,
        data: Data = b"",
        timeout: float | None = None,
        ephemeral: bool = False,
    ) -> Lease:
        """Wait for ``count`` tokens (see :meth:`tenure.Semaphore.acquire`); plain or ``with``.

        Raises:
            TimeoutError: not granted within ``timeout``.
            NotFoundError: the semaphore does not exist and ``ephemeral`` is false.
            LimitExceededError: ``count`` exceeds the limit, or the queue is full.
        """
        return self.session._portal.call(
            opened,
            lambda: self._semaphore.acquire(count, data=data, timeout=timeout, ephemeral=ephemeral),
            self._wrap,
        )

    def try_acquire(
        self, count: int = 1, *, data: Data = b"", ephemeral: bool = False
    ) -> Lease | None:
        """Take ``count`` tokens if they are free right now, else return None."""
        return self.session._portal.call(
            opened_or_none,
            lambda: self._semaphore.try_acquire(count, data=data, ephemeral=ephemeral),
            self._wrap,
        )

    def _wrap(self, lease: aio.Lease) -> Lease:
        return self.session._track(Lease(self.session, lease))

    def describe(self, *, owners: bool = False, waiters: bool = False) -> SemaphoreDescription:
        """The semaphore's limit, count and data, and its owners and waiters if asked."""
        return self.session._portal.call(self._semaphore.describe, owners=owners, waiters=waiters)

    def update(self, data: Data) -> None:
        """Replace the semaphore's data."""
        self.session._portal.call(self._semaphore.update, data)

    def compare_and_set(self, expected: Data, data: Data) -> bool:
        """Replace the data with ``data`` if it is ``expected`` now, atomically; whether
        it did (see :meth:`tenure.Semaphore.compare_and_set`)."""
        return self.session._portal.call(self._semaphore.compare_and_set, expected, data)

    def delete(self, *, force: bool = False) -> None:
        """Delete the semaphore; with ``force``, even while held (its owners lose their leases)."""
        self.session._portal.call(self._semaphore.delete, force=force)

    def watch(
        self, *, data: bool = False, owners: bool = False, waiters: bool = False
    ) -> Stream[SemaphoreDescription]:
        """The current description, then one after every watched change (coalesced).

        See :meth:`tenure.Semaphore.watch`. Each ``next()`` blocks until there is
        a change; close the stream (or use ``with``) when done.
        """
        return Stream(
            self.session._portal,
            self._semaphore.watch(data=data, owners=owners, waiters=waiters),
            _same,
        )


class Election:
    """The election ``name`` (see :class:`tenure.Election`)."""

    def __init__(self, session: Session, election: aio.Election) -> None:
        self.session = session
        self.name = election.name
        self._election = election

    def __repr__(self) -> str:
        return f"<sync Election {self.name!r} of session {self.session.id}>"

    def campaign(self, data: Data = b"", *, timeout: float | None = None) -> Leadership:
        """Wait to become leader with ``data``; plain, or ``with`` (resigns at the end).

        Raises:
            TimeoutError: not leader within ``timeout``.
        """
        return self.session._portal.call(
            opened, lambda: self._election.campaign(data, timeout=timeout), self._wrap
        )

    def _wrap(self, leadership: aio.Leadership) -> Leadership:
        return self.session._track(Leadership(self.session, leadership))

    def leader(self) -> LeaderState | None:
        """The current leader, or None when nobody leads."""
        return self.session._portal.call(self._election.leader)

    def observe(self) -> Stream[LeaderState]:
        """The leader state now, then on every change of leader or data."""
        return Stream(self.session._portal, self._election.observe(), _same)


def _same(value: T) -> T:
    return value
