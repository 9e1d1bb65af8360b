"""Reentrant mutexes: the holder of a mutex takes it again at once, nested.

``session.mutex("job", reentrant=True)`` is the mutex ``session.mutex("job")`` is
(the same ephemeral semaphore, taken whole), with one difference: the caller that
holds it through a reentrant acquire (the asyncio task; in the sync face, the
thread) may acquire it again, through any ``Mutex`` object of the same session, and
gets it at once, with no request to the backend. Curator's InterProcessMutex and
Redisson's RLock work so.

There is still one hold in the backend, with one fencing token: each acquisition is
a :class:`ReentrantLock` over it (the hold's token, count and data), and the hold
counts its acquisitions. Releasing one (or leaving its block) counts down once,
idempotently; the last one releases the hold. A loss of the hold ends every
acquisition with the loss error, so every nested block is cancelled, as a plain
lock's block is; the session then forgets the hold, and the next acquire starts
afresh, with a request and a new token.

What the session keeps, per semaphore name and caller, is a :class:`SharedHold`
(:class:`ReentrantHolds`); the session acquires each new hold itself, as any other
(``SessionHolds._lock_reentrant``), and hands it to the table to share. Another
caller, even a task of the same session or one started inside the block, has no
share in it: it queues like anyone else. A caller that holds the name through a
plain acquire cannot nest a reentrant one in it, nor the other way round: either
would wait behind its own hold, so both are refused.
"""

from __future__ import annotations

import asyncio
from typing import Final

from tenure.client import _args
from tenure.client._args import Data
from tenure.client._caller import Caller, named
from tenure.client._lease import Lock, shared_grant
from tenure.errors import (
    InvalidArgumentError,
    LimitExceededError,
    LostError,
    PreconditionFailedError,
)

#: How deep one caller may nest a reentrant mutex by default (``max_depth=`` changes it
#: per mutex). Far beyond what nested calls need: a deeper nesting is a runaway loop or
#: recursion, which this stops with LimitExceededError before it holds without bound.
MAX_REENTRANT_DEPTH: Final = 1000


def max_depth(reentrant: bool, value: object) -> int | None:
    """``mutex()``'s ``max_depth``, checked: a positive int (None: MAX_REENTRANT_DEPTH),
    given only with ``reentrant=True``; None for a mutex that is not reentrant."""
    if not reentrant:
        if value is not None:
            raise InvalidArgumentError(
                "max_depth is the nesting limit of a reentrant mutex: pass reentrant=True with it"
            )
        return None
    if value is None:
        return MAX_REENTRANT_DEPTH
    if type(value) is not int or value < 1:
        raise InvalidArgumentError(f"max_depth must be a positive int, got {value!r}")
    return value


class ReentrantLock(Lock):
    """One acquisition of a reentrant mutex: a :class:`~tenure.Lock` whose hold it shares
    with its holder's other nested acquisitions of the mutex.

    ``token``, ``count`` and ``data`` are the hold's: the token is the same for every
    acquisition while the hold lasts. :meth:`release` (or leaving its ``async with``
    block) counts the hold down once, and again does nothing; the last acquisition
    released releases the hold. If the hold is lost, every acquisition of it is
    lost with the same error (each block under ``async with`` is cancelled).
    """

    def __init__(self, hold: SharedHold) -> None:
        lock = hold.lock
        # The grant without its TTL: the hold renews itself, an acquisition never does.
        super().__init__(lock.session, lock.name, shared_grant(lock), lock.data)
        self._hold = hold

    def _release_soon(self) -> asyncio.Future[bool] | None:
        """Count the hold down; the hold's release if this was its last acquisition."""
        if self._signal.ended:
            return None
        self._finish(None)
        last = self._hold.leave(self)
        if last is not None:
            self._releasing = last._release_soon()
        return self._releasing

    async def restate(
        self, count: int | None = None, *, data: Data | None = None, timeout: float | None = None
    ) -> None:
        """Change the owner data of the hold (every acquisition of it sees it; same token).

        The count is the hold's, shared by every nested acquisition: asking another one
        is refused (PreconditionFailedError), where a plain lock would change it.
        """
        self.check()
        if not self.held:
            raise PreconditionFailedError(f"{self!r} was released; acquire it again")
        if count is not None and _args.count(count) != self.count:
            raise PreconditionFailedError(
                f"{self.name!r} is a reentrant mutex: its count is the hold every nested "
                "acquisition shares, and cannot change (its data can)"
            )
        await self._hold.lock.restate(data=data, timeout=timeout)
        self._hold.mirror()

    def _lose(self, error: LostError) -> None:
        # (Not Lease._lose: the session tracks the hold, not its acquisitions.)
        self._finish(self._translate(error))

    def _released_with_hold(self) -> None:
        """The hold was released under this acquisition: it ends, released."""
        self._finish(None)


class SharedHold:
    """One caller's hold of a reentrant mutex, and the acquisitions that share it."""

    def __init__(self, holds: ReentrantHolds, key: tuple[str, Caller], lock: Lock) -> None:
        #: The hold: a plain lock, which the session tracks (and tells of its loss).
        self.lock = lock
        self._holds = holds
        self._key = key
        # Live acquisitions, in order (a dict: ordered, and O(1) to remove one).
        self._acquisitions: dict[ReentrantLock, None] = {}

    @property
    def key(self) -> tuple[str, Caller]:
        """(semaphore name, caller): whose hold of what this is."""
        return self._key

    def enter(self, depth_limit: int) -> ReentrantLock:
        """One more acquisition; LimitExceededError past ``depth_limit`` of them."""
        self.lock.check()
        depth = len(self._acquisitions)
        if depth >= depth_limit:
            name, caller = self._key
            raise LimitExceededError(
                f"{named(caller)} holds the reentrant mutex {name!r} {depth} deep already, "
                f"its max_depth (the default, MAX_REENTRANT_DEPTH, is {MAX_REENTRANT_DEPTH})"
            )
        acquisition = ReentrantLock(self)
        self._acquisitions[acquisition] = None
        return acquisition

    def leave(self, acquisition: ReentrantLock) -> Lock | None:
        """``acquisition`` ended cleanly: the hold, to release, if no other one is left."""
        self._acquisitions.pop(acquisition, None)
        if self._acquisitions or not self.lock.held:
            return None
        # Forgotten before the release starts: the caller's next acquire is a new hold
        # (queued behind this release), never a share of the ending one.
        self._holds._forget(self)
        return self.lock

    def mirror(self) -> None:
        """Copy the hold's token, count and data to every acquisition (after a restate)."""
        for acquisition in self._acquisitions:
            acquisition.token, acquisition.count = self.lock.token, self.lock.count
            acquisition.data = self.lock.data

    def ended(self, reason: LostError | None) -> None:
        """The hold ended (its lock's end callback): so did every acquisition of it."""
        self._holds._forget(self)
        acquisitions, self._acquisitions = list(self._acquisitions), {}
        for acquisition in acquisitions:
            if reason is None:
                # Released under them (``session.leases()`` gives the hold itself).
                acquisition._released_with_hold()
            else:
                acquisition._lose(reason)


class ReentrantHolds:
    """A session's reentrant mutex holds, by (semaphore name, caller): a table the
    session asks before it acquires, and hands each new hold to (module docstring)."""

    def __init__(self) -> None:
        self._holds: dict[tuple[str, Caller], SharedHold] = {}
        #: Whether some caller holds some reentrant mutex (a plain acquire then
        #: checks): an attribute, not a property, since every acquire reads it.
        self.any = False

    def refuse_plain(self, name: str, caller: Caller) -> None:
        """Refuse a plain acquire of ``name`` by a caller that holds it reentrantly."""
        if (name, caller) in self._holds:
            raise PreconditionFailedError(
                f"{named(caller)} holds {name!r} as a reentrant mutex in this session: "
                f"nest with mutex({name!r}, reentrant=True); an acquire that is not "
                "reentrant would wait behind its own hold"
            )

    def nest(self, name: str, caller: Caller, depth_limit: int) -> Lock | None:
        """One more acquisition of the mutex ``name`` by ``caller``, at once, if it holds
        it reentrantly already (LimitExceededError past ``depth_limit`` of them); None if
        it does not: a new hold is to be acquired (then :meth:`share`)."""
        hold = self._holds.get((name, caller))
        return None if hold is None else hold.enter(depth_limit)

    def share(self, name: str, caller: Caller, lock: Lock, depth_limit: int) -> Lock:
        """``lock``, the hold of ``name`` the session just acquired for ``caller``, shared
        from now on by the caller's nested acquisitions: its first one."""
        hold = self._holds[name, caller] = SharedHold(self, (name, caller), lock)
        self.any = True
        lock.lost.add_callback(hold.ended)
        return hold.enter(depth_limit)

    def _forget(self, hold: SharedHold) -> None:
        if self._holds.get(hold.key) is hold:
            del self._holds[hold.key]
            self.any = bool(self._holds)


def nested_in_plain(name: str, caller: Caller) -> PreconditionFailedError:
    """The refusal of a reentrant acquire of ``name`` by a caller that holds (or is
    acquiring) it through a plain acquire: it would wait behind it."""
    return PreconditionFailedError(
        f"{named(caller)} holds (or is acquiring) {name!r} in this session through "
        "an acquire that is not reentrant: a reentrant one cannot nest in it (it "
        f"would wait behind it); take both with mutex({name!r}, reentrant=True)"
    )
