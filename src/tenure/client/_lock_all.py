"""All-or-none locks: several mutexes taken in one step, or none of them.

``session.lock_all(["acct/1", "acct/7"])`` holds the mutexes of every name at once
or waits for all of them, never holding some while it waits for others (as taking
them one by one would: Redisson's MultiLock, a lock per round trip). The backend
makes it one request (``AllOrNone.acquire_all``; on ``tenure://`` and
``memory://`` one AcquireAll of the engine) that joins every name's queue with one
arrival, so queues agree on the order of requests: two sessions locking
overlapping sets in opposite orders never deadlock, and the earliest request waiting
anywhere is served first. Each name's hold is a :class:`~tenure.Lock` of its own,
with its own fencing token (``held.tokens[name]``); the mutexes are the ones
``session.mutex(name)`` takes, so both exclude each other.

The loss of any one of them ends the whole :class:`HeldLocks`: the block under
``async with`` is cancelled (raising the loss) and the others are released.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from types import MappingProxyType

from tenure.client._lease import LeaseKeeper, Lock, start_release
from tenure.client._loss import CancelOnLoss, EndSignal, Guarded
from tenure.errors import LostError, PreconditionFailedError


class HeldLocks(Guarded):
    """The mutexes of several names, taken together (see the module docstring).

    ``tokens[name]`` is each one's fencing token and ``locks[name]`` its
    :class:`~tenure.Lock`. ``async with held:`` guards a block (cancelled if any one
    is lost) and releases them all at its end; ``await held.release()`` does too.
    """

    def __init__(self, session: LeaseKeeper, locks: Mapping[str, Lock]) -> None:
        #: The session that holds them (a :class:`~tenure.client.Session`).
        self.session = session
        #: Each name's lock, in the order the names were asked for.
        self.locks: Mapping[str, Lock] = MappingProxyType(dict(locks))
        #: Each name's fencing token.
        self.tokens: Mapping[str, int] = MappingProxyType(
            {name: lock.token for name, lock in locks.items()}
        )
        self._signal = EndSignal()
        self._scopes: list[CancelOnLoss] = []
        for lock in locks.values():
            lock.lost.add_callback(self._member_ended)

    def __repr__(self) -> str:
        state = "held" if not self._signal.ended else f"ended({self._signal.reason!r})"
        names = ", ".join(f"{name!r}={token}" for name, token in self.tokens.items())
        return f"<HeldLocks {names} {state}>"

    @property
    def held(self) -> bool:
        """Whether every one is still held."""
        return not self._signal.ended

    async def release(self) -> None:
        """Release every one (idempotent); returns once the backend applied them."""
        self._confirm_held()
        self._signal.end(None)
        await asyncio.gather(*(lock.release() for lock in self.locks.values()))

    def _member_ended(self, reason: LostError | None) -> None:
        """One ended: lost, the whole ends with its loss and the others are released.

        Released a moment later (the next turn of the loop), and only those still
        held then: a loss that is the session's ends every lock with it, one after
        the other, and those must end lost, not released.
        """
        if reason is None or self._signal.ended:
            return
        self._signal.end(reason)
        asyncio.get_running_loop().call_soon(self._release_the_rest)

    def _release_the_rest(self) -> None:
        for lock in self.locks.values():
            if lock.held:
                start_release(lock)

    def _check_enter(self) -> None:
        if self._signal.ended and self._signal.reason is None:
            raise PreconditionFailedError(f"{self!r} was released; lock them again")

    def _confirm_held(self) -> None:
        for lock in self.locks.values():
            lock._confirm_held()  # a loss found ends them all lost, and this with them

    def _end_block(self) -> Awaitable[object] | None:
        self._confirm_held()
        self._signal.end(None)
        waits = [w for lock in self.locks.values() if (w := lock._end_block()) is not None]
        return asyncio.gather(*waits) if waits else None
