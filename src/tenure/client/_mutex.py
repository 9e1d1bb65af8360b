"""Mutexes: exclusive holds of an ephemeral semaphore (no create needed); reentrant
ones (``reentrant=True``) are nested by their holder (:mod:`tenure.client._reentrant`)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from functools import partial
from types import TracebackType
from typing import Any

from tenure import lowlevel
from tenure._core.values import MAX_COUNT, MutexDescription, check_max_hold, check_name
from tenure.client import _args
from tenure.client._args import Data
from tenure.client._lease import Lock
from tenure.client._opening import Opening
from tenure.client._recipe_session import RecipeSession
from tenure.client._reentrant import max_depth as checked_max_depth
from tenure.client._semaphore import describe_semaphore
from tenure.errors import NotFoundError


class Mutex:
    """A named mutex in the session's node.

    ``async with session.mutex("job") as lock:`` blocks until the lock is held and
    releases it at the end; the block is cancelled (raising the loss error) if the
    lock is lost meanwhile. Waiters are served in arrival order.

    Not reentrant by default: the task (in ``tenure.sync``, the thread) that holds it
    asking again in the same session gets PreconditionFailedError (it would wait
    behind itself). ``reentrant=True``
    makes it nest: the task that holds it through a reentrant acquire gets it again
    at once, through any mutex object of the session for ``name`` (the session keeps
    the hold, per name and task; per thread in the sync face), with no request sent.
    Each acquisition is a :class:`~tenure.Lock` with the hold's token; leaving its
    block, or releasing it (once; again does nothing), counts the hold down, and the
    last one releases it. A nested acquisition keeps the hold's data (``data=`` and
    ``timeout`` apply to the first one only). Another task, even of this session or
    started inside the block, does not share the hold: it queues (its try fails). A
    loss of the hold cancels every nested block with the loss error. A task holding
    ``name`` through a plain acquire cannot nest a reentrant one in it, nor the other
    way round (PreconditionFailedError). More than ``max_depth`` acquisitions at once
    (MAX_REENTRANT_DEPTH by default) is a LimitExceededError.

    Leaving ``async with mutex`` leaves the innermost block of this task open on this
    object; with none open, it does nothing. One object nested in itself cannot tell
    an inner block left twice from its outer block left: where a block may be left
    twice (an exit stack, an ``__aexit__`` called by hand), give each block its own
    object (``session.mutex(name, reentrant=True)`` per block) or its own lock
    (``async with mutex.lock() as lock``): every exit but a block's first then does
    nothing, as releasing again does.

    ``max_hold`` (seconds): each lock ends that long after its grant, on the store's
    clock, whatever the session does; its holder sees it lost (the block cancelled
    with LeaseLostError). See :meth:`tenure.Session.acquire`.
    """

    def __init__(
        self,
        session: RecipeSession,
        name: str,
        reentrant: bool = False,
        *,
        max_depth: int | None = None,
        max_hold: float | None = None,
    ) -> None:
        self.session = session
        self.name = check_name("semaphore", name)  # (_args.semaphore_name, one call less)
        #: Seconds each lock lasts at most after its grant (None: the node's, if any).
        self.max_hold = None if max_hold is None else check_max_hold(max_hold)
        if reentrant is False and max_depth is None:  # the common case, nothing to check
            #: Whether its holder may acquire it again, nested (see the class docstring).
            self.reentrant = False
            #: The most acquisitions one holder may nest (None: not reentrant).
            self.max_depth: int | None = None
        else:
            self.reentrant = _args.flag("reentrant", reentrant)
            self.max_depth = checked_max_depth(self.reentrant, max_depth)
        self._entered: dict[asyncio.Task[object] | None, list[Lock]] = {}

    def __repr__(self) -> str:
        kind = "reentrant Mutex" if self.reentrant else "Mutex"
        return f"<{kind} {self.name!r} of session {self.session.id}>"

    def lock(self, *, timeout: float | None = None, data: Data = b"") -> Opening[Lock]:
        """Wait for the lock (``timeout`` seconds at most); ``await`` it or use ``async with``.

        Raises:
            TimeoutError: not held within ``timeout``.
            InvalidArgumentError: at once (before the await), naming a bad argument.
        """
        # (session.acquire, with the name checked once, by __init__: only the call's
        # own arguments are checked here.)
        # (Inline for the common arguments, bytes and no timeout: one acquire each.)
        owner_data = data if type(data) is bytes else _args.as_data(data)
        wait = None if timeout is None else _args.timeout(timeout)
        return Opening(partial(self._acquiring, owner_data, wait), "mutex.lock(...)", "lock")

    def _acquiring(self, data: bytes, timeout: float | None) -> Coroutine[Any, Any, Lock]:
        """The acquire of :meth:`lock`, its arguments checked: what ``async with``
        awaits at once (no :class:`Opening` to make: two calls less a block)."""
        bound = self.max_hold
        if self.max_depth is not None:  # reentrant
            return lowlevel.lock_reentrant(
                self.session, self.name, data, timeout, self.max_depth, bound
            )
        if bound is not None:
            return lowlevel.acquire(
                self.session, Lock, self.name, MAX_COUNT, data, timeout, True, bound
            )
        return lowlevel.acquire(self.session, Lock, self.name, MAX_COUNT, data, timeout, True)

    async def try_lock(self, *, data: Data = b"") -> Lock | None:
        """Take the lock if it is free right now (or, reentrant, held by this task), else None."""
        try:
            return await self.lock(timeout=0, data=data)
        except TimeoutError:
            return None

    async def describe(self, *, max_staleness: float | None = None) -> MutexDescription:
        """Whether the mutex is held, by whom (session, description, identity, since
        when, token), and who waits, in service order.

        A free mutex is ``held=False`` (not NotFoundError: it only exists while held
        or awaited). ``max_staleness``: a replica may answer, as
        :meth:`tenure.Semaphore.describe` says.
        """
        try:
            state = await describe_semaphore(
                self.session, self.name, owners=True, waiters=True, max_staleness=max_staleness
            )
        except NotFoundError:
            return MutexDescription(self.name, held=False, owner=None)
        owner = state.owners[0] if state.owners else None
        return MutexDescription(self.name, owner is not None, owner, state.waiters)

    async def __aenter__(self) -> Lock:
        lock = await self._acquiring(b"", None)  # (lock(), its defaults: nothing to check)
        await lock.__aenter__()
        self._entered.setdefault(asyncio.current_task(), []).append(lock)
        return lock

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        task = asyncio.current_task()
        stack = self._entered.get(task)
        if stack is None:
            # No block of this task is open on the mutex: leaving again does nothing,
            # as releasing again does.
            return
        lock = stack.pop()
        if not stack:
            del self._entered[task]
        await lock.__aexit__(exc_type, exc, tb)
