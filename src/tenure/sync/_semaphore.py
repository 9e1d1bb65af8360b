"""The sync counting semaphore: ``session.semaphore("pool").acquire(2)``, plain or ``with``."""

from __future__ import annotations

from tenure import client as aio
from tenure._core.values import SemaphoreDescription
from tenure.client._args import Data
from tenure.sync._calls import opened, opened_or_none
from tenure.sync._leases import Lease, RecipeSession
from tenure.sync._recipe import SyncRecipe
from tenure.sync._stream import Stream, same


class Semaphore(SyncRecipe[RecipeSession, aio.Semaphore]):
    """A named counting semaphore (see :class:`tenure.Semaphore`); acquires are FIFO."""

    def create(self, limit: int, data: Data = b"", *, exist_ok: bool = False) -> None:
        """Create the semaphore (see :meth:`tenure.Semaphore.create`)."""
        self.session.portal.call(self._recipe.create, limit, data, exist_ok=exist_ok)

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
        return self.session.portal.call(
            opened,
            lambda: self._recipe.acquire(count, data=data, timeout=timeout, ephemeral=ephemeral),
            self._wrap,
        )

    def try_acquire(
        self, count: int = 1, *, data: Data = b"", ephemeral: bool = False
    ) -> Lease | None:
        """Take ``count`` tokens if they are free right now, else return None."""
        return self.session.portal.call(
            opened_or_none,
            lambda: self._recipe.try_acquire(count, data=data, ephemeral=ephemeral),
            self._wrap,
        )

    def _wrap(self, lease: aio.Lease) -> Lease:
        return self.session.keep_lease(Lease(self.session, lease))

    def describe(
        self,
        *,
        owners: bool = False,
        waiters: bool = False,
        max_staleness: float | None = None,
    ) -> SemaphoreDescription:
        """The semaphore's limit, count and data, and its owners and waiters if asked;
        ``max_staleness``: a replica may answer (see :meth:`tenure.Semaphore.describe`)."""
        return self.session.portal.call(
            self._recipe.describe, owners=owners, waiters=waiters, max_staleness=max_staleness
        )

    def update(self, data: Data) -> None:
        """Replace the semaphore's data."""
        self.session.portal.call(self._recipe.update, data)

    def compare_and_set(self, expected: Data, data: Data) -> bool:
        """Replace the data with ``data`` if it is ``expected`` now, atomically; whether
        it did (see :meth:`tenure.Semaphore.compare_and_set`)."""
        return self.session.portal.call(self._recipe.compare_and_set, expected, data)

    def delete(self, *, force: bool = False) -> None:
        """Delete the semaphore; with ``force``, even while held (its owners lose their leases)."""
        self.session.portal.call(self._recipe.delete, force=force)

    def watch(
        self,
        *,
        data: bool = False,
        owners: bool = False,
        waiters: bool = False,
        max_staleness: float | None = None,
    ) -> Stream[SemaphoreDescription]:
        """The current description, then one after every watched change (coalesced);
        ``max_staleness``: a replica may keep the watch.

        See :meth:`tenure.Semaphore.watch`. Each ``next()`` blocks until there is
        a change; close the stream (or use ``with``) when done.
        """
        watch = self._recipe.watch(
            data=data, owners=owners, waiters=waiters, max_staleness=max_staleness
        )
        return Stream(self.session.portal, watch, same)
