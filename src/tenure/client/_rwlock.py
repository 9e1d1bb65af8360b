"""Readers-writer locks: readers share an ephemeral semaphore, a writer takes all of it.

A reader holds one token of the semaphore, a writer every token (``MAX_COUNT``, as a
mutex does: a mutex and the write side of a readers-writer lock of the same name
exclude each other). The semaphore's one FIFO queue gives the fairness: a reader
that comes after a waiting writer waits behind it, so a stream of readers never
starves a writer, and the readers queued behind a writer are let in together when
it leaves. Nothing here is specific to a backend: it is ``Session.acquire`` with a
count, so every backend that has mutexes has readers-writer locks.
"""

from __future__ import annotations

from functools import partial

from tenure import lowlevel
from tenure._core.values import MAX_COUNT, RWLockDescription, check_max_hold
from tenure.client import _args
from tenure.client._args import Data
from tenure.client._lease import ReadLock, WriteLock
from tenure.client._opening import Opening
from tenure.client._recipe_session import NamedRecipe, RecipeSession
from tenure.client._semaphore import describe_semaphore
from tenure.errors import NotFoundError


class RWLock(NamedRecipe):
    """A named readers-writer lock in the session's node.

    ``async with session.rwlock("catalog").read() as r:`` shares the lock with other
    readers; ``async with ....write() as w:`` holds it alone. Both wait in one queue,
    in arrival order; each hold has its own fencing token, and its loss cancels the
    block as a mutex's does. A writer may downgrade to a reader with
    ``await w.restate(1)``, keeping its token and letting the readers queued behind
    it in at once.

    ``max_hold`` (seconds): each hold, read or write, ends that long after its grant,
    on the store's clock, whatever the session does (see :meth:`tenure.Session.acquire`).
    """

    def __init__(self, session: RecipeSession, name: str, *, max_hold: float | None = None) -> None:
        super().__init__(session, name)
        #: Seconds each hold lasts at most after its grant (None: the node's, if any).
        self.max_hold = check_max_hold(max_hold)

    def read(self, *, timeout: float | None = None, data: Data = b"") -> Opening[ReadLock]:
        """Wait for a reader's share (``timeout`` seconds at most); ``await`` it or use
        ``async with``.

        Raises:
            TimeoutError: not held within ``timeout``.
            InvalidArgumentError: at once (before the await), naming a bad argument.
        """
        owner_data, wait = _args.as_data(data), _args.timeout(timeout)
        acquire = lowlevel.acquire
        return Opening(
            partial(
                acquire, self.session, ReadLock, self.name, 1, owner_data, wait, True, self.max_hold
            )
        )

    def write(self, *, timeout: float | None = None, data: Data = b"") -> Opening[WriteLock]:
        """Wait for the whole lock (``timeout`` seconds at most); ``await`` it or use
        ``async with``.

        Raises:
            TimeoutError: not held within ``timeout``.
            InvalidArgumentError: at once (before the await), naming a bad argument.
        """
        owner_data, wait = _args.as_data(data), _args.timeout(timeout)
        acquire = lowlevel.acquire
        return Opening(
            partial(
                acquire,
                self.session,
                WriteLock,
                self.name,
                MAX_COUNT,
                owner_data,
                wait,
                True,
                self.max_hold,
            )
        )

    async def try_read(self, *, data: Data = b"") -> ReadLock | None:
        """A reader's share if it can be had right now (no writer holds or waits), else None."""
        try:
            return await self.read(timeout=0, data=data)
        except TimeoutError:
            return None

    async def try_write(self, *, data: Data = b"") -> WriteLock | None:
        """The whole lock if it is free right now, else None."""
        try:
            return await self.write(timeout=0, data=data)
        except TimeoutError:
            return None

    async def describe(self, *, max_staleness: float | None = None) -> RWLockDescription:
        """Who reads, who writes, and who waits (readers and writers, in service order).

        A free lock is described with no readers and no writer (not NotFoundError: it
        only exists while held or awaited). ``max_staleness``: a replica may answer, as
        :meth:`tenure.Semaphore.describe` says.
        """
        try:
            state = await describe_semaphore(
                self.session, self.name, owners=True, waiters=True, max_staleness=max_staleness
            )
        except NotFoundError:
            return RWLockDescription(self.name, readers=(), writer=None)
        writers = [owner for owner in state.owners if owner.count == MAX_COUNT]
        readers = tuple(owner for owner in state.owners if owner.count != MAX_COUNT)
        return RWLockDescription(self.name, readers, writers[0] if writers else None, state.waiters)
