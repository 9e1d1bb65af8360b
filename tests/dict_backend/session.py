"""A dict backend's session: the ten members of the core, and its watches; no ability.

Every hold of the session is an :class:`~.state.Owner` in its semaphore's list, and
every wait a :class:`~.state.Waiter` in its queue; the session keeps no copy. It
never loses its connection (there is none), so it ends only when closed, killed by
an operator, or with its node dropped by force.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Self, TypeVar

from tenure import SemaphoreDescription
from tenure.backends import (
    CreateWrite,
    DeleteWrite,
    Grant,
    SemaphoreWrite,
    SessionListener,
    SwapWrite,
    UpdateWrite,
)
from tenure.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    LeaseLostError,
    LimitExceededError,
    LostError,
    NotFoundError,
    PreconditionFailedError,
    SessionClosedError,
)

from .state import MAX_COUNT, Holder, Node, Owner, Sem, Waiter, missing, now

T = TypeVar("T")


class DictSession:
    """One session of the dict backend: :class:`tenure.backends.CoreSession`, nothing more."""

    def __init__(
        self,
        node: Node,
        holder: Holder,
        window: float,
        listener: SessionListener,
        live: dict[int, DictSession],
    ) -> None:
        self.node = node
        #: The node's live sessions, this one among them until it ends.
        self._live = live
        self.holder = holder
        self._window = window
        self.listener = listener
        self.created_at = now()
        #: Why it ended (None while it lives).
        self.ended: LostError | None = None
        self.watches: list[DictWatch] = []

    # -- the core: what the session is -------------------------------------------------

    @property
    def session_id(self) -> int:
        """The session's id."""
        return self.holder.session_id

    @property
    def recovery_window(self) -> float:
        """The window asked for (or the node's): kept, never needed (no connection)."""
        return self._window

    def deadline_passed(self) -> bool:
        """No local deadline (nothing between the client and the dicts): whether it ended."""
        return self.ended is not None

    def _alive(self) -> None:
        if self.ended is not None:
            raise type(self.ended)(*self.ended.args)

    # -- the core: holds -------------------------------------------------------------

    def _free_hold(self, sem: Sem | None) -> int:
        taken = set()
        if sem is not None:
            taken = {o.hold for o in sem.owners if o.holder is self.holder}
            taken |= {w.hold for w in sem.queue if w.holder is self.holder}
        hold = 0
        while hold in taken:
            hold += 1
        return hold

    async def acquire(
        self, name: str, *, count: int, data: bytes, timeout: float | None, ephemeral: bool
    ) -> Grant | None:
        """A new hold of ``count`` tokens of ``name`` (CoreSession.acquire)."""
        self._alive()
        node = self.node
        self._check_data(data)
        sem = node.semaphores.get(name)
        if sem is None:
            if not ephemeral:
                raise NotFoundError(f"semaphore {name!r} does not exist")
            self._room_for_one()
            sem = node.semaphores[name] = Sem(name, MAX_COUNT, b"", True)
        if count > sem.limit:
            raise LimitExceededError(f"{count} tokens exceed the limit {sem.limit} of {name!r}")
        waiter = Waiter(self.holder, self._free_hold(sem), count, data, now(), _future())
        return await self._wait(sem, waiter, timeout)

    async def restate(
        self, name: str, grant: Grant, *, count: int, data: bytes, timeout: float | None
    ) -> Grant | None:
        """Change the hold ``grant`` in place, or queue its upgrade (CoreSession.restate)."""
        self._alive()
        self._check_data(data)
        sem = self.node.semaphores.get(name)
        owner = self._owner(sem, grant)
        if sem is None or owner is None:
            raise NotFoundError(f"session {self.session_id} holds no tokens of {name!r}")
        if count > sem.limit:
            raise LimitExceededError(f"{count} tokens exceed the limit {sem.limit} of {name!r}")
        if count <= owner.count:
            owner.count, owner.data = count, data
            self.node.serve(sem)
            return owner.grant()
        waiter = Waiter(self.holder, owner.hold, count, data, now(), _future(), owner)
        return await self._wait(sem, waiter, timeout)

    async def _wait(self, sem: Sem, waiter: Waiter, timeout: float | None) -> Grant | None:
        """Grant ``waiter`` now if it fits and nobody waits; else queue it and wait."""
        node = self.node
        if not sem.queue and sem.fits(waiter.count, waiter.upgrade):
            owner = node.grant(sem, waiter)
            node.serve(sem)
            return owner.grant()
        if timeout == 0:
            return None
        if len(sem.queue) >= node.config.max_waiters:
            raise LimitExceededError(f"the queue of {sem.name!r} is full (max_waiters)")
        sem.queue.append(waiter)
        node.changed(sem.name)
        try:
            owner = await asyncio.wait_for(asyncio.shield(waiter.done), timeout)
        except BaseException:
            self._withdraw(sem, waiter)
            raise
        return owner.grant()

    def _withdraw(self, sem: Sem, waiter: Waiter) -> None:
        """A wait that timed out or was cancelled: out of the queue, or, granted in the
        race, given back (an upgrade's grant is kept: it replaced the hold)."""
        if waiter in sem.queue:
            sem.queue.remove(waiter)
            self.node.serve(sem)
        elif waiter.done.done() and not waiter.done.exception() and waiter.upgrade is None:
            self._drop(sem, waiter.done.result())

    def release(self, name: str, grant: Grant) -> Awaitable[bool]:
        """Drop the hold ``grant`` and a queued upgrade of it (CoreSession.release)."""
        self._alive()
        sem = self.node.semaphores.get(name)
        owner = self._owner(sem, grant)
        found = False
        if sem is not None and owner is not None:
            found = True
            for waiter in [w for w in sem.queue if w.upgrade is owner]:
                sem.queue.remove(waiter)
                waiter.done.set_exception(LeaseLostError(f"the hold of {name!r} was released"))
            self._drop(sem, owner)
        answer: asyncio.Future[bool] = _future()
        answer.set_result(found)
        return answer

    def _owner(self, sem: Sem | None, grant: Grant) -> Owner | None:
        if sem is None:
            return None
        for owner in sem.owners:
            if owner.holder is self.holder and owner.hold == grant.hold:
                return owner
        return None

    def _drop(self, sem: Sem, owner: Owner) -> None:
        if owner in sem.owners:
            sem.owners.remove(owner)
        self.node.serve(sem)

    # -- the core: semaphores ---------------------------------------------------------

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """Describe ``name``; NotFoundError if missing."""
        self._alive()
        return self.node.semaphore(name).describe(owners=owners, waiters=waiters)

    async def write_semaphore(self, name: str, write: SemaphoreWrite) -> bool:
        """Create, update, compare-and-set or delete ``name`` (CoreSession.write_semaphore)."""
        self._alive()
        node = self.node
        if isinstance(write, CreateWrite):
            self._check_data(write.data)
            if name in node.semaphores:
                raise AlreadyExistsError(f"semaphore {name!r} already exists")
            self._room_for_one()
            node.semaphores[name] = Sem(name, write.limit, write.data, False)
            node.changed(name)
            return True
        sem = node.semaphore(name)
        if isinstance(write, UpdateWrite | SwapWrite):
            self._check_data(write.data)
            if isinstance(write, SwapWrite) and sem.data != write.expected:
                return False
            if sem.data != write.data:
                sem.data = write.data
                node.changed(name)
            return True
        if isinstance(write, DeleteWrite):
            if (sem.owners or sem.queue) and not write.force:
                raise PreconditionFailedError(
                    f"semaphore {name!r} has {len(sem.owners)} owner(s) and "
                    f"{len(sem.queue)} waiter(s); use force=True"
                )
            error = LeaseLostError(f"semaphore {name!r} was deleted")
            node.remove(sem, error)
            return True
        raise InvalidArgumentError(f"not a semaphore write: {write!r}")

    def _check_data(self, data: bytes) -> None:
        if len(data) > self.node.config.max_data_size:
            raise LimitExceededError(
                f"data of {len(data)} bytes exceeds max_data_size "
                f"({self.node.config.max_data_size})"
            )

    def _room_for_one(self) -> None:
        if len(self.node.semaphores) >= self.node.config.max_semaphores:
            raise LimitExceededError(f"max_semaphores ({self.node.config.max_semaphores})")

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> DictWatch:
        """Arm a watch of ``name``: its states, each the latest after a change."""
        self._alive()
        if len(self.watches) >= self.node.config.max_watches_per_session:
            raise LimitExceededError(
                f"max_watches_per_session ({self.node.config.max_watches_per_session})"
            )
        watch = DictWatch(self, name, data=data, owners=owners, waiters=waiters)
        self.watches.append(watch)
        return watch

    # -- the core: the end ------------------------------------------------------------

    async def close(self) -> None:
        """End the session: every hold released, every wait withdrawn. Idempotent."""
        if self.ended is None:
            self.end(SessionClosedError(f"session {self.session_id} was closed"))

    def owned(self) -> list[tuple[str, Owner]]:
        """The session's holds, with their semaphores' names."""
        return [
            (sem.name, owner)
            for sem in self.node.semaphores.values()
            for owner in sem.owners
            if owner.holder is self.holder
        ]

    def end(self, error: LostError, wait_error: Exception | None = None) -> None:
        """The session ends with ``error``: holds given back, waits failed (with
        ``wait_error``, if given), watches ended."""
        self.ended = error
        self._live.pop(self.session_id, None)
        for sem in list(self.node.semaphores.values()):
            for waiter in [w for w in sem.queue if w.holder is self.holder]:
                sem.queue.remove(waiter)
                if not waiter.done.done():
                    waiter.done.set_exception(wait_error or type(error)(*error.args))
            mine = [o for o in sem.owners if o.holder is self.holder]
            for owner in mine:
                sem.owners.remove(owner)
            self.node.serve(sem)
        for watch in self.watches:
            watch.wake()


class DictWatch:
    """A watch of one semaphore (:class:`tenure.backends.WatchStream`): the state when
    armed, then the latest state after each change (never a queue of stale ones)."""

    def __init__(
        self, session: DictSession, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> None:
        self._session = session
        self.name = name
        self._data, self._owners, self._waiters = data, owners, waiters
        self._news = asyncio.Event()
        #: What it last told of the watched aspects (None: nothing yet).
        self._last: tuple[object, ...] | None = None
        self._closed = False

    def wake(self) -> None:
        """Something changed (the semaphore, or the session ended)."""
        self._news.set()

    def _state(self) -> SemaphoreDescription:
        sem = self._session.node.semaphores.get(self.name)
        if sem is None:
            return missing(self.name)
        return sem.describe(owners=self._owners, waiters=self._waiters)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SemaphoreDescription:
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._session.ended is not None:
                raise type(self._session.ended)(*self._session.ended.args)
            state = self._state()
            seen = (
                state.exists,
                state.data if self._data else None,
                state.owners if self._owners else None,
                state.waiters if self._waiters else None,
            )
            if seen != self._last:  # (a change of what is not watched says nothing)
                self._last = seen
                return state
            self._news.clear()
            await self._news.wait()

    async def aclose(self) -> None:
        """Stop watching (idempotent)."""
        self._closed = True
        with contextlib.suppress(ValueError):
            self._session.watches.remove(self)
        self._news.set()


def _future() -> asyncio.Future[T]:
    """A future of the running loop (a wait's grant, a release's answer)."""
    return asyncio.get_running_loop().create_future()
