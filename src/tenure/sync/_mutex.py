"""The sync mutex: ``with session.mutex("job") as lock:``, reentrant per thread if asked."""

from __future__ import annotations

import threading
from types import TracebackType

from tenure import client as aio
from tenure._core.values import MutexDescription
from tenure.client._args import Data
from tenure.client._caller import ThreadCaller, this_thread
from tenure.sync._calls import opened, opened_or_none
from tenure.sync._held import NotAsync
from tenure.sync._leases import Lock, RecipeSession
from tenure.sync._recipe import SyncRecipe


class Mutex(SyncRecipe[RecipeSession, aio.Mutex], NotAsync):
    """A named mutex (see :class:`tenure.Mutex`); ``with session.mutex("job") as lock:``.

    Waiters are served in arrival order, across threads, sessions and processes.
    A reentrant one nests per thread: the thread that holds it takes it again at
    once (one hold, one token); another thread queues. Leaving ``with mutex`` leaves
    this thread's innermost block on it (see :class:`tenure.Mutex` on leaving twice).
    """

    def __init__(self, session: RecipeSession, mutex: aio.Mutex) -> None:
        super().__init__(session, mutex)
        #: Whether the thread that holds it may acquire it again, nested.
        self.reentrant = mutex.reentrant
        #: The most acquisitions one thread may nest (None: not reentrant).
        self.max_depth = mutex.max_depth
        #: Seconds each lock lasts at most after its grant (None: the node's, if any).
        self.max_hold = mutex.max_hold
        self._guard = threading.Lock()
        # Each thread's open blocks, innermost last (by thread object: a new thread may
        # reuse an ended one's ident, and must not exit the blocks it left open).
        self._entered: dict[ThreadCaller, list[Lock]] = {}

    def lock(self, *, timeout: float | None = None, data: Data = b"") -> Lock:
        """Wait for the lock (``timeout`` seconds at most); use the Lock plain or in ``with``.

        Raises:
            TimeoutError: not held within ``timeout``.
        """
        return self.session.portal.call(
            opened, lambda: self._recipe.lock(timeout=timeout, data=data), self._wrap
        )

    def try_lock(self, *, data: Data = b"") -> Lock | None:
        """Take the lock if it is free right now, else return None."""
        return self.session.portal.call(
            opened_or_none, lambda: self._recipe.try_lock(data=data), self._wrap
        )

    def describe(self, *, max_staleness: float | None = None) -> MutexDescription:
        """Held or not, by whom, and who waits (see :meth:`tenure.Mutex.describe`)."""
        return self.session.portal.call(self._recipe.describe, max_staleness=max_staleness)

    def _wrap(self, lock: aio.Lock) -> Lock:
        return self.session.keep_lease(Lock(self.session, lock))

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
