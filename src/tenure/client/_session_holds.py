"""What a session holds, and how it acquires: the part of :class:`~tenure.client.Session`
that every lease, lock and recipe works through.

A session binds one backend session when it opens (:meth:`SessionHolds._bind`) and
keeps, from then on:

* its leases, by fencing token (a lost grant is told by its token), each made by
  :meth:`~SessionHolds._acquire` (one name) or :meth:`~SessionHolds._lock_all` (an
  all-or-none set), given back through :meth:`~SessionHolds._release`, restated
  through :meth:`~SessionHolds._restate`, forgotten when it ends; a resumed
  session's holds adopted as leases of no caller (:meth:`~SessionHolds._adopt`);
* who asks (:mod:`tenure.client._caller`): what each caller holds or is acquiring
  (:mod:`tenure.client._asking`: a caller that asks again is refused, as it would
  wait behind itself), and the reentrant mutexes' shared holds
  (:mod:`tenure.client._reentrant`), which refuse a plain acquire nested in them and
  the other way round;
* its end (:meth:`~SessionHolds._end`): every lease lost with the session's error;
* its client's observers (:mod:`tenure.client._observers`), told of each acquire
  sent, granted or failed.

It satisfies the protocol its leases are typed with
(:class:`~tenure.client._lease.LeaseKeeper`), so they never import the session's
modules; the reentrant holds are a table it asks, and need nothing of it. The
public face (the recipes, the primitive ``acquire``, ``close``) is
:class:`~tenure.client.Session`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from tenure._core.values import MAX_COUNT
from tenure.backends._base import (
    CoreSession,
    Grant,
    Handoff,
    HeldGrant,
    TaskNumbers,
    all_or_none,
    handoffs,
    max_holds,
    task_numbers,
)
from tenure.client import _forks
from tenure.client._asking import Asking
from tenure.client._caller import Caller, caller_number, current_caller
from tenure.client._lease import Lease, Lock
from tenure.client._lock_all import HeldLocks
from tenure.client._loss import EndSignal
from tenure.client._observers import PROCESS, Attempt, AttemptObserver, Observer
from tenure.client._observers import failed as tell_failed
from tenure.client._observers import granted as tell_granted
from tenure.client._observers import started as tell_started
from tenure.client._reentrant import ReentrantHolds, nested_in_plain
from tenure.errors import LostError, SessionClosedError

__all__ = ["SessionHolds"]

L = TypeVar("L", bound=Lease)

#: The backend's ``task`` argument when it takes none (shared: never changed).
_NO_TASK: dict[str, int] = {}


class SessionHolds:
    """A session's backend session, its leases, who asks, and its end (module docstring)."""

    def __init__(self, node: str) -> None:
        self.node = node
        self._backend: CoreSession | None = None
        self._signal = EndSignal()
        #: Leases held, by token (a lost grant is told by its token).
        self._leases: dict[int, Lease] = {}
        #: Semaphores each caller (task; sync face: thread) holds or is acquiring in
        #: this session, to refuse one that asks again (it would wait behind itself).
        self._asking = Asking()
        #: Reentrant mutex holds, by (name, caller): session.mutex(name, reentrant=True).
        self._reentrant = ReentrantHolds()
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Whether the backend sends a release before it returns, ahead of whatever
        #: the client asks next (then leaving ``async with`` need not wait for it).
        self._releases_in_order = False
        #: The backend session's TaskNumbers ability, if it has one (deadlock
        #: detection): its acquires then say which task asks.
        self._numbered: TaskNumbers | None = None
        #: The client's observers (set by the client that opens it; the process's are
        #: in _observers.PROCESS): with none, an acquire only tests the two tuples.
        self._observers: tuple[Observer, ...] = ()
        #: The process that opened it: a child made by fork never uses it (_forks).
        self._pid = _forks.pid

    def _bind(self, backend_session: CoreSession) -> None:
        """The session is open: ``backend_session`` is its backend's."""
        self._backend = backend_session
        self._numbered = task_numbers(backend_session)
        # Optional in the protocol (a backend of another package may lack it): without
        # it, leaving a block waits for the release's answer, as it always did.
        self._releases_in_order = getattr(backend_session, "releases_in_order", False) is True
        # (Named, current_task skips get_running_loop: a getpid() call in Python 3.11.)
        self._loop = asyncio.get_running_loop()

    @property
    def id(self) -> int:
        """The backend's id of this session (still readable after the session ended)."""
        if self._backend is None:
            raise SessionClosedError(f"session on {self.node!r} was never opened")
        return self._backend.session_id

    # -- acquiring ---------------------------------------------------------------------

    def _backend_session(self) -> CoreSession:
        """The backend's session; the session's loss error once it has ended."""
        if self._pid != _forks.pid:
            self._left_behind()
        if self._signal.ended:
            raise self._signal.reason or SessionClosedError(f"session on {self.node!r} is closed")
        assert self._backend is not None
        return self._backend

    def _left_behind(self) -> None:
        """In a child made by fork since it opened: the session is the parent's. It ends
        here alone, with ForkedClientError (nothing is sent: the parent keeps it)."""
        if not self._signal.ended:
            what = f"session {self.id} on {self.node!r}" if self._backend else "the session"
            self._end(_forks.forked_error(what, self._pid))

    async def _acquire(
        self,
        kind: type[L],
        name: str,
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
        max_hold: float | None = None,
    ) -> L:
        """A new lease of ``kind`` holding ``count`` tokens of semaphore ``name``, with
        ``data`` as its owner data (public as :func:`tenure.lowlevel.acquire`, called
        with the session first). With ``max_hold`` (seconds), the lease ends that long
        after its grant on the store's clock whatever the session does (a backend
        without ``Capability.MAX_HOLD`` refuses it with UnsupportedError).

        ``kind`` is :class:`~tenure.Lease` or a subclass (:class:`~tenure.Lock`,
        :class:`~tenure.Leadership`, a recipe's own), made as ``kind(session, name,
        grant, data)``. ``timeout`` is seconds of the backend's clock (None: no limit;
        0: only try); ``ephemeral`` creates the semaphore if missing, and it goes with
        its last holder and waiter. The arguments are taken as checked
        (:meth:`tenure.Session.acquire` checks them first; a bad one is refused by the
        backend here, after the await). The lease is its caller's
        (:func:`tenure.lowlevel.caller`): a caller that asks again for ``name`` while
        it holds or waits for it is refused.

        Raises:
            TimeoutError: not granted within ``timeout`` (with 0: busy).
            PreconditionFailedError: the caller holds or is acquiring ``name`` here.
            LostError: the session has ended (its loss error).
            The backend's errors: NotFoundError, LimitExceededError, DeadlockError.
        """
        backend = self._backend
        if self._pid != _forks.pid:
            self._left_behind()
        if self._signal.ended or backend is None:  # (_backend_session(), inline)
            raise self._signal.reason or SessionClosedError(f"session on {self.node!r} is closed")
        task = asyncio.current_task(self._loop)
        caller = current_caller(task)
        if self._reentrant.any:
            self._reentrant.refuse_plain(name, caller)
        self._asking.stake_one(name, caller, task)
        watching: list[AttemptObserver] | None = None
        try:
            if self._observers or PROCESS.observers:
                watching, data = self._observe(kind, (name,), count, data, timeout)
            if max_hold is not None:
                # (UnsupportedError naming max_hold where the backend lacks it.)
                acquiring = max_holds(backend).acquire(
                    name,
                    count=count,
                    data=data,
                    timeout=timeout,
                    ephemeral=ephemeral,
                    max_hold=max_hold,
                    **self._asked_by(caller),
                )
            elif self._numbered is not None:  # (_asked_by, inline: no dict to build)
                acquiring = self._numbered.acquire(
                    name,
                    count=count,
                    data=data,
                    timeout=timeout,
                    ephemeral=ephemeral,
                    task=caller_number(caller),
                )
            else:
                acquiring = backend.acquire(
                    name, count=count, data=data, timeout=timeout, ephemeral=ephemeral
                )
            grant = await acquiring
            if grant is None:
                raise TimeoutError(f"{name!r} is busy (timeout=0 only tries)")
            if self._signal.ended:
                # The session ended while the grant was on its way (a Granted push and
                # the session's deadline handled in one turn of the loop): the grant
                # ended with the session, so no lease may outlive it unnoticed.
                raise self._signal.reason or SessionClosedError(
                    f"session on {self.node!r} is closed"
                )
        except BaseException as error:
            self._asking.unstake((name,), caller, task)
            if watching:
                tell_failed(watching, error)
            raise
        lease = kind(self, name, grant, data)
        self._asking.granted(lease, caller, task)
        self._leases[grant.token] = lease
        if watching:
            tell_granted(watching, (lease,))
        return lease

    async def _lock_all(
        self, names: tuple[str, ...], data: bytes, timeout: float | None
    ) -> HeldLocks:
        """Lock every name in one backend request; TimeoutError if not within ``timeout``."""
        session = self._backend_session()
        task = asyncio.current_task(self._loop)
        caller = current_caller(task)
        if self._reentrant.any:
            for name in names:
                self._reentrant.refuse_plain(name, caller)
        backend = all_or_none(session)  # (UnsupportedError before anything is staked)
        self._asking.stake(names, caller, task)
        watching: list[AttemptObserver] | None = None
        try:
            if self._observers or PROCESS.observers:
                watching, data = self._observe(Lock, names, MAX_COUNT, data, timeout)
            grants = await backend.acquire_all(
                names,
                count=MAX_COUNT,
                data=data,
                timeout=timeout,
                ephemeral=True,
                **self._asked_by(caller),
            )
            if grants is None:
                raise TimeoutError(f"{', '.join(map(repr, names))}: not all free (timeout=0)")
            if self._signal.ended:  # (as in _acquire: no lease may outlive its session)
                raise self._signal.reason or SessionClosedError(
                    f"session on {self.node!r} is closed"
                )
        except BaseException as error:
            self._asking.unstake(names, caller, task)
            if watching:
                tell_failed(watching, error)
            raise
        locks: dict[str, Lock] = {}
        for name, grant in zip(names, grants, strict=True):
            lock = locks[name] = Lock(self, name, grant, data)
            self._asking.granted(lock, caller, task)
            self._leases[grant.token] = lock
        if watching:
            tell_granted(watching, tuple(locks.values()))
        return HeldLocks(self, locks)

    def _observe(
        self,
        kind: type[Lease],
        names: tuple[str, ...],
        count: int,
        data: bytes,
        timeout: float | None,
    ) -> tuple[list[AttemptObserver], bytes]:
        """Tell the observers of an acquire about to be sent: those that want its
        end, and the owner data to send (one of theirs, if the caller gave none)."""
        assert self._backend is not None
        attempt = Attempt(self.node, self._backend.session_id, names, count, timeout, kind, data)
        return tell_started(self._observers, attempt), attempt.data

    async def _lock_reentrant(
        self,
        name: str,
        data: bytes,
        timeout: float | None,
        max_depth: int,
        max_hold: float | None = None,
    ) -> Lock:
        """A reentrant acquisition of the mutex ``name`` (public as
        :func:`tenure.lowlevel.lock_reentrant`, called with the session first): at once
        if the caller holds it reentrantly already (``max_depth`` acquisitions at
        most: LimitExceededError past it), else through a new hold with ``data``,
        waiting ``timeout`` seconds, ending ``max_hold`` seconds after its grant if
        given (see :class:`~tenure.Mutex`, ``reentrant=True``)."""
        caller = current_caller(asyncio.current_task(self._loop))
        nested = self._reentrant.nest(name, caller, max_depth)
        if nested is not None:
            return nested
        if self._holds_plainly(name, caller):
            raise nested_in_plain(name, caller)
        lock = await self._acquire(Lock, name, MAX_COUNT, data, timeout, True, max_hold)
        return self._reentrant.share(name, caller, lock, max_depth)

    def _holds_plainly(self, name: str, caller: Caller) -> bool:
        """Whether ``caller`` holds or is acquiring ``name`` through an acquire that is
        not reentrant (its thread, for the sync face: not its task)."""
        if self._asking.staked(name, caller):
            return True
        return any(
            lease.name == name and lease._caller == caller for lease in self._leases.values()
        )

    def _asked_by(self, caller: Caller) -> dict[str, int]:
        """The backend's ``task`` argument: the caller's number, if it takes one."""
        return {"task": caller_number(caller)} if self._numbered is not None else _NO_TASK

    # -- leases: adopted, given back, restated, forgotten --------------------------------

    def _adopt(self, holds: list[HeldGrant]) -> None:
        """A resumed session's holds become its leases (see :meth:`leases`)."""
        for held in holds:
            if held.grant.token not in self._leases:
                self._leases[held.grant.token] = Lease(
                    self, held.name, held.grant, held.data, resumed=True
                )

    async def _handoff(self, lease: Lease) -> str:
        """Offer ``lease``'s hold for adoption (see :meth:`Lease.handoff`)."""
        offered = await handoffs(self._backend_session()).offer_hold(lease.name, lease._grant)
        return offered.to_str()

    async def _take_over(self, text: str) -> Lease:
        """The hold the hand-off ``text`` names, adopted as a lease of this session and
        of the caller (see :meth:`tenure.Session.adopt`)."""
        backend = handoffs(self._backend_session())
        handoff = Handoff.from_str(text)  # (garbled: InvalidArgumentError, before any I/O)
        task = asyncio.current_task(self._loop)
        caller = current_caller(task)
        name = handoff.name
        if self._reentrant.any:
            self._reentrant.refuse_plain(name, caller)
        self._asking.stake_one(name, caller, task)
        try:
            held = await backend.adopt_hold(handoff)
            if self._signal.ended:  # (ended while the answer was on its way: see _acquire)
                raise self._signal.reason or SessionClosedError(
                    f"session on {self.node!r} is closed"
                )
        except BaseException:
            self._asking.unstake((name,), caller, task)
            raise
        lease = Lease(self, held.name, held.grant, held.data)
        self._asking.granted(lease, caller, task)
        self._leases[held.grant.token] = lease
        return lease

    def _release(self, lease: Lease) -> Awaitable[bool] | None:
        """Give a lease back to the backend (the lease has already ended itself): the
        release to await, or None if the session ended (it went with the session)."""
        if self._pid != _forks.pid:  # the parent's to release, not this child's
            self._left_behind()
        if self._backend is not None and not self._signal.ended:
            return self._backend.release(lease.name, lease._grant)
        return None

    def _deadline_passed(self) -> bool:
        """Give the session up if its local deadline passed (see LeaseKeeper): its loss,
        told by the backend, ends every lease; whether the session has ended."""
        backend = self._backend
        if backend is not None and not self._signal.ended:
            backend.deadline_passed()
        return self._signal.ended

    async def _restate(self, lease: Lease, count: int, data: bytes, timeout: float | None) -> Grant:
        """Change a held lease's count or data through the backend (see Lease.restate)."""
        backend = self._backend_session()
        if self._numbered is not None:
            caller = current_caller(asyncio.current_task(self._loop))
            restating = self._numbered.restate(
                lease.name,
                lease._grant,
                count=count,
                data=data,
                timeout=timeout,
                task=caller_number(caller),
            )
        else:
            restating = backend.restate(
                lease.name, lease._grant, count=count, data=data, timeout=timeout
            )
        grant = await restating
        if grant is None:
            raise TimeoutError(f"{lease.name!r} has not {count} tokens free (timeout=0 only tries)")
        if not lease.held:
            # The lease was lost while its upgrade waited: the grant that came anyway
            # is nobody's, so give it back before reporting the loss.
            with contextlib.suppress(LostError):
                await self._backend_session().release(lease.name, grant)
        elif grant.token != lease.token:
            del self._leases[lease.token]
            self._leases[grant.token] = lease
        return grant

    def _forget(self, lease: Lease) -> None:
        """A lease ended: stop tracking it."""
        if self._leases.get(lease.token) is lease:
            del self._leases[lease.token]
        self._asking.forget(lease)

    # -- the end -----------------------------------------------------------------------

    def _end(self, reason: LostError | None) -> None:
        """The session ended (``reason`` None: closed by its holder): every lease is
        lost, with ``reason`` or SessionClosedError."""
        if self._signal.ended:
            return
        self._signal.end(reason)
        lease_reason = reason or SessionClosedError(f"session on {self.node!r} was closed")
        for lease in list(self._leases.values()):
            lease._lose(lease_reason)

    def _lease_lost(self, name: str, token: int, error: LostError) -> None:
        """The backend says the grant of ``token`` on ``name`` is gone: its lease is lost."""
        lease = self._leases.get(token)
        if lease is not None and lease.name == name:
            lease._lose(error)
