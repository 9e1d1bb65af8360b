"""tooz's locks over tenure's readers-writer locks (``session.rwlock``).

``coordinator.get_lock(name)`` is the readers-writer lock ``tooz/lock/<name>`` of
the node, held by the coordinator's main session: ``acquire()`` takes the writer's
hold (exclusive), ``acquire(shared=True)`` a reader's. Waiters are served first in,
first out, readers and writers in one queue (a reader behind a waiting writer waits
for it). Each hold has a **fencing token** (:attr:`TenureLock.token`), greater than
every earlier grant's of the lock: pass it to what the lock protects and have that
refuse smaller ones (docs/fencing.md). No other tooz driver gives one.

What tooz expects and how it is kept:

* Not reentrant, not tied to a thread: a second acquire of a held lock, through the
  same object or another, from the same thread or not, is told False (tried) or
  waits (blocking), as with another coordinator. Each acquire asks as a caller of
  its own (:func:`~._coordinator.own_caller`); an object keeps its holds, and
  ``release()`` gives back the latest (False if it holds none, or lost it).
* ``timeout`` (or a number as ``blocking``) bounds the wait by the server's clock.
* ``break_()`` deletes the lock by force: its holders lose their holds (their
  ``release()`` is then False, ``is_still_owner()`` False), waiters ask again,
  and the next acquire makes it afresh.
* ``is_still_owner()`` asks the server whether one of the object's holds is
  still among the lock's owners.
* The holds end with the coordinator's main session: stopped, or not heartbeating
  for ``timeout`` seconds.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from tooz import locking, utils

import tenure
from tenure.errors import NotFoundError

from ._coordinator import Coordinator, own_caller
from ._settings import LOCKS, name_of

__all__ = ["LockDriver", "TenureLock"]

T = TypeVar("T")


class LockDriver(Protocol):
    """What a lock needs of its driver: the coordinator, and a way onto its loop."""

    @property
    def coordinator(self) -> Coordinator:
        """The coordinator's state (sessions), on the loop."""
        ...

    def run(self, fn: Callable[..., Coroutine[Any, Any, T]], /, *args: Any) -> T:
        """``await fn(*args)`` on the loop (tooz's errors for tenure's)."""
        ...


class TenureLock(locking.Lock):
    """A tooz lock: tenure's readers-writer lock ``tooz/lock/<name>`` (module docstring)."""

    def __init__(self, driver: LockDriver, name: bytes) -> None:
        super().__init__(name)
        self._driver = driver
        #: The tenure readers-writer lock (semaphore) behind it.
        self.tenure_name = LOCKS + name_of(name)
        self._guard = threading.Lock()
        #: The object's holds, latest last, each with the process that took it.
        self._holds: list[tuple[int, tenure.Lease]] = []

    def __repr__(self) -> str:
        return f"<TenureLock {self.tenure_name!r} holds={len(self._holds)}>"

    @property
    def token(self) -> int | None:
        """The fencing token of the latest live hold of this object, or None."""
        with self._guard:
            live = self._live()
        return live[-1].token if live else None

    def acquire(
        self, blocking: bool | float = True, shared: bool = False, timeout: float | None = None
    ) -> bool:
        """Take the lock (``shared``: a reader's hold); whether it was granted.

        ``blocking=False`` only tries; ``blocking=True`` waits, at most ``timeout``
        seconds if given; a number as ``blocking`` is the timeout.
        """
        blocking, timeout = utils.convert_blocking(blocking, timeout)
        wait = timeout if blocking else 0.0
        lease = self._driver.run(self._take, bool(shared), wait)
        if lease is None:
            return False
        with self._guard:
            self._holds.append((os.getpid(), lease))
        return True

    def release(self) -> bool:
        """Give back the latest hold; False if the object holds none (or lost it)."""
        with self._guard:
            live = self._live()
            if not live:
                return False
            lease = live[-1]
            self._holds = [(pid, held) for pid, held in self._holds if held is not lease]
        self._driver.run(lease.release)
        return lease.lost_reason is None  # a loss told before the release came first

    def is_still_owner(self) -> bool:
        """Whether the server still counts one of this object's holds among the owners."""
        with self._guard:
            tokens = {lease.token for lease in self._live()}
        return bool(tokens) and self._driver.run(self._owned, tokens)

    def break_(self) -> bool:
        """Delete the lock by force, whoever holds it; whether it existed."""
        return self._driver.run(self._break)

    def _live(self) -> list[tenure.Lease]:
        """The holds of this process still held (a parent's, after a fork, are not)."""
        pid = os.getpid()
        self._holds = [(p, lease) for p, lease in self._holds if p == pid and lease.held]
        return [lease for _, lease in self._holds]

    async def _take(self, shared: bool, wait: float | None) -> tenure.Lease | None:
        loop = asyncio.get_running_loop()
        deadline = None if wait is None else loop.time() + wait
        while True:
            rwlock = (await self._driver.coordinator.main()).rwlock(self.tenure_name)
            left = None if deadline is None else max(0.0, deadline - loop.time())

            async def ask(rwlock: tenure.RWLock = rwlock, left: float | None = left) -> Any:
                try:
                    return await (
                        rwlock.read(timeout=left) if shared else rwlock.write(timeout=left)
                    )
                except TimeoutError:
                    return None

            try:
                lease: tenure.Lease | None = await own_caller(ask)
                return lease
            except NotFoundError:
                # Broken (deleted by force) while this waited: it is free, ask again.
                if deadline is not None and loop.time() >= deadline:
                    return None

    async def _owned(self, tokens: set[int]) -> bool:
        main = await self._driver.coordinator.main()
        try:
            found = await main.semaphore(self.tenure_name).describe(owners=True)
        except NotFoundError:
            return False
        return any(owner.token in tokens for owner in found.owners)

    async def _break(self) -> bool:
        main = await self._driver.coordinator.main()
        try:
            await main.semaphore(self.tenure_name).delete(force=True)
        except NotFoundError:
            return False
        return True
