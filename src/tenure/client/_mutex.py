"""Mutexes: exclusive holds of an ephemeral semaphore (no create needed)."""

from __future__ import annotations

import asyncio
from functools import partial
from types import TracebackType

from tenure._core.values import MAX_COUNT, MutexDescription
from tenure.client import _args
from tenure.client._args import Data
from tenure.client._lease import Lock
from tenure.client._opening import Opening
from tenure.client._recipe_session import RecipeSession
from tenure.errors import NotFoundError


class Mutex:
    """A named mutex in the session's node.

    ``async with session.mutex("job") as lock:`` blocks until the lock is held and
    releases it at the end; the block is cancelled (raising the loss error) if the
    lock is lost meanwhile. Waiters are served in arrival order.
    """

    def __init__(self, session: RecipeSession, name: str) -> None:
        self.session = session
        self.name = _args.semaphore_name(name)
        self._entered: dict[asyncio.Task[object] | None, list[Lock]] = {}

    def __repr__(self) -> str:
        return f"<Mutex {self.name!r} of session {self.session.id}>"

    def lock(self, *, timeout: float | None = None, data: Data = b"") -> Opening[Lock]:
        """Wait for the lock (``timeout`` seconds at most); ``await`` it or use ``async with``.

        Raises:
            TimeoutError: not held within ``timeout``.
            InvalidArgumentError: at once (before the await), naming a bad argument.
        """
        # (session.acquire, with the name checked once, by __init__: only the call's
        # own arguments are checked here.)
        owner_data, wait = _args.as_data(data), _args.timeout(timeout)
        acquire = self.session._acquire
        return Opening(partial(acquire, Lock, self.name, MAX_COUNT, owner_data, wait, True))

    async def try_lock(self, *, data: Data = b"") -> Lock | None:
        """Take the lock if it is free right now, else return None."""
        try:
            return await self.lock(timeout=0, data=data)
        except TimeoutError:
            return None

    async def describe(self) -> MutexDescription:
        """Whether the mutex is held, by whom (session, description, identity, since
        when, token), and who waits, in service order.

        A free mutex is ``held=False`` (not NotFoundError: it only exists while held
        or awaited).
        """
        try:
            state = await self.session._backend_session().describe_semaphore(
                self.name, owners=True, waiters=True
            )
        except NotFoundError:
            return MutexDescription(self.name, held=False, owner=None)
        owner = state.owners[0] if state.owners else None
        return MutexDescription(self.name, owner is not None, owner, state.waiters)

    async def __aenter__(self) -> Lock:
        lock = await self.lock()
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
