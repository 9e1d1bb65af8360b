"""A store session's calls that a replica may answer: describes and watches that allow
some staleness (:class:`~tenure.backends._base.StaleDescribing`,
:class:`~tenure.backends._base.StaleWatching`).

Where the store has replicas (``tenure://``'s: a cluster's standbys, through
:class:`~tenure.backends._store.StaleAdministering` and
:class:`~tenure.backends._store.StaleWatchingStore`), they go there; elsewhere the
session describes and watches as ever, fresh, which is within any staleness.
:class:`ReplicaReads` is :class:`~tenure.backends._session.StoreSession`'s base.
"""

from __future__ import annotations

from typing import Protocol

from tenure._core.values import SemaphoreDescription, check_prefix
from tenure.backends._base import PrefixWatchStream, WatchStream
from tenure.backends._store import Administering, StaleAdministering, StaleWatchingStore, Watching

__all__ = ["ReplicaReads"]


class _SessionParts(Protocol):
    """What :class:`ReplicaReads` uses of the session it is a base of."""

    @property
    def _admin(self) -> Administering: ...

    @property
    def _watching(self) -> Watching: ...

    def check_alive(self) -> None:
        """Raise the session's loss error once it is lost."""


class ReplicaReads:
    """The session's describes and watches that allow staleness (module docstring)."""

    async def describe_semaphore_stale(
        self: _SessionParts, name: str, *, owners: bool, waiters: bool, max_staleness: float
    ) -> SemaphoreDescription:
        """See :meth:`tenure.backends._base.StaleDescribing.describe_semaphore_stale`:
        the store's replicas', where it has any; else the store's own describe."""
        self.check_alive()
        admin = self._admin
        if not isinstance(admin, StaleAdministering):
            return await admin.describe_semaphore(name, owners=owners, waiters=waiters)
        return await admin.describe_semaphore_stale(
            name, owners=owners, waiters=waiters, max_staleness=max_staleness
        )

    async def watch_semaphore_stale(
        self: _SessionParts,
        name: str,
        *,
        data: bool,
        owners: bool,
        waiters: bool,
        max_staleness: float,
    ) -> WatchStream:
        """See :meth:`tenure.backends._base.StaleWatching.watch_semaphore_stale`: armed
        on the store's replicas, where it has any; else as the session's own watch."""
        self.check_alive()
        watching = self._watching
        if not isinstance(watching, StaleWatchingStore):
            return await watching.watch_semaphore(name, data=data, owners=owners, waiters=waiters)
        return await watching.watch_semaphore_stale(
            name, data=data, owners=owners, waiters=waiters, max_staleness=max_staleness
        )

    async def watch_prefix_stale(
        self: _SessionParts,
        prefix: str,
        *,
        data: bool,
        owners: bool,
        waiters: bool,
        max_staleness: float,
    ) -> PrefixWatchStream:
        """See :meth:`tenure.backends._base.StaleWatching.watch_prefix_stale`."""
        self.check_alive()
        prefix = check_prefix(prefix)  # (checked here once for every store)
        flags = {"data": bool(data), "owners": bool(owners), "waiters": bool(waiters)}
        watching = self._watching
        if not isinstance(watching, StaleWatchingStore):
            return await watching.watch_prefix(prefix, **flags)
        return await watching.watch_prefix_stale(prefix, **flags, max_staleness=max_staleness)
