"""Counting semaphores: create, acquire, describe, update, delete and watch."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from tenure import lowlevel
from tenure._core.values import SemaphoreDescription
from tenure.backends._base import (
    CreateWrite,
    DeleteWrite,
    StaleDescribing,
    StaleWatching,
    SwapWrite,
    UpdateWrite,
    WatchStream,
)
from tenure.client import _args, _forks
from tenure.client._args import Data
from tenure.client._lease import Lease, open_lease
from tenure.client._opening import Opening
from tenure.client._recipe_session import NamedRecipe, RecipeSession
from tenure.errors import AlreadyExistsError, PreconditionFailedError


class Semaphore(NamedRecipe):
    """A named counting semaphore in the session's node.

    Acquires are served strictly first-in first-out across all sessions; a request
    for more tokens than the limit is an error, not a wait forever.
    """

    async def create(self, limit: int, data: Data = b"", *, exist_ok: bool = False) -> None:
        """Create the semaphore with ``limit`` tokens.

        Raises:
            AlreadyExistsError: it exists, unless ``exist_ok``: then an existing
                semaphore with the same limit is fine (its data is left alone), and
                one with another limit raises PreconditionFailedError.
        """
        limit = _args.count(limit, "limit")
        data = _args.as_data(data)
        exist_ok = _args.flag("exist_ok", exist_ok)
        backend = lowlevel.backend_session(self.session)
        try:
            await backend.write_semaphore(self.name, CreateWrite(limit, data))
        except AlreadyExistsError:
            if not exist_ok:
                raise
            found = await backend.describe_semaphore(self.name, owners=False, waiters=False)
            if found.limit != limit:
                raise PreconditionFailedError(
                    f"semaphore {self.name!r} exists with limit {found.limit}, not {limit}"
                ) from None

    def acquire(
        self,
        count: int = 1,
        *,
        data: Data = b"",
        timeout: float | None = None,
        ephemeral: bool = False,
    ) -> Opening[Lease]:
        """Wait for ``count`` tokens; ``await`` it for a Lease or use ``async with``.

        Args:
            count: tokens to hold (1 to the semaphore's limit).
            data: this owner's data, visible to ``describe(owners=True)`` and watchers.
            timeout: seconds to wait (the server's clock decides); ``None`` waits
                forever and ``0`` only tries (see :meth:`try_acquire`).
            ephemeral: create the semaphore if missing; it vanishes with its last
                owner and waiter.

        Raises:
            TimeoutError: not granted within ``timeout``.
            NotFoundError: the semaphore does not exist and ``ephemeral`` is false.
            LimitExceededError: ``count`` exceeds the limit, or the queue is full.
            InvalidArgumentError: at once (before the await), naming a bad argument.
        """
        return open_lease(self.session, self.name, count, data, timeout, ephemeral, Lease)

    async def try_acquire(
        self, count: int = 1, *, data: Data = b"", ephemeral: bool = False
    ) -> Lease | None:
        """Take ``count`` tokens if they are free right now, else return None."""
        try:
            return await self.acquire(count, data=data, timeout=0, ephemeral=ephemeral)
        except TimeoutError:
            return None

    async def describe(
        self,
        *,
        owners: bool = False,
        waiters: bool = False,
        max_staleness: float | None = None,
    ) -> SemaphoreDescription:
        """The semaphore's limit, count and data, and its owners and waiters if asked.

        ``max_staleness`` (seconds, 0 to 3600): a replica may answer, that stale at
        most, never older than what this client wrote or was told (a cluster's
        standbys: docs/cluster.md, "Reads from standbys"); a backend with none answers
        fresh. None (the default, whatever the client's URL says): the session's own
        read, fresh.

        Raises:
            NotFoundError: the semaphore does not exist.
            InvalidArgumentError: a bad ``max_staleness``.
        """
        owners = _args.flag("owners", owners)
        waiters = _args.flag("waiters", waiters)
        return await describe_semaphore(
            self.session, self.name, owners=owners, waiters=waiters, max_staleness=max_staleness
        )

    async def update(self, data: Data) -> None:
        """Replace the semaphore's data (watchers of data see it).

        Raises:
            NotFoundError: the semaphore does not exist.
            UnavailableError: the answer was lost; whether the data changed is unknown
                (an update is not sent again by itself: applied, then overwritten by
                another client's, a second copy would undo that update).
        """
        data = _args.as_data(data)
        await lowlevel.backend_session(self.session).write_semaphore(self.name, UpdateWrite(data))

    async def compare_and_set(self, expected: Data, data: Data) -> bool:
        """Replace the semaphore's data with ``data`` if it is ``expected`` now, in one
        atomic step; whether it did (False: it was something else; nothing changed).

        Raises:
            NotFoundError: the semaphore does not exist.
            UnsupportedError: a tenure server older than protocol version 4.
            UnavailableError: the answer was lost; whether the data changed is unknown.
        """
        expected, data = _args.as_data(expected), _args.as_data(data)
        backend = lowlevel.backend_session(self.session)
        return await backend.write_semaphore(self.name, SwapWrite(expected, data))

    async def delete(self, *, force: bool = False) -> None:
        """Delete the semaphore; with ``force``, even while held (its owners lose their leases)."""
        force = _args.flag("force", force)
        await lowlevel.backend_session(self.session).write_semaphore(self.name, DeleteWrite(force))

    def watch(
        self,
        *,
        data: bool = False,
        owners: bool = False,
        waiters: bool = False,
        max_staleness: float | None = None,
    ) -> AsyncGenerator[SemaphoreDescription, None]:
        """Yield the current description at once, then again after every watched change.

        Changes that happen while you process one item coalesce: you always get the
        latest state, never a stale queue of old ones. A semaphore that does not
        exist is described with ``exists=False``. The iterator ends with the
        session's loss error if the session is lost.

        ``max_staleness`` (seconds, 0 to 3600): a replica may keep the watch, each
        state it brings (and so each change's news) at most about that stale, the
        first never older than what this client wrote or was told (a cluster's
        standbys: docs/cluster.md, "Reads from standbys"); a backend with none
        watches as ever. None (the default, whatever the client's URL says): the
        session's own watch.

        Raises:
            InvalidArgumentError: a bad ``max_staleness`` (when iterated).
        """
        data = _args.flag("data", data)
        owners = _args.flag("owners", owners)
        waiters = _args.flag("waiters", waiters)
        return watch_semaphore(
            self.session,
            self.name,
            data=data,
            owners=owners,
            waiters=waiters,
            max_staleness=max_staleness,
        )


async def describe_semaphore(
    session: RecipeSession, name: str, *, owners: bool, waiters: bool, max_staleness: object
) -> SemaphoreDescription:
    """``name`` described through ``session``'s backend session: given ``max_staleness``
    (checked: seconds, 0 to 3600), by a replica where the session has any
    (:class:`~tenure.backends.StaleDescribing`); else by the session's own read, as
    :meth:`Semaphore.describe` says.

    Raises:
        InvalidArgumentError: ``max_staleness`` is not None nor 0 to 3600 seconds.
    """
    seconds = _args.max_staleness(max_staleness)
    backend = lowlevel.backend_session(session)
    if seconds is not None and isinstance(backend, StaleDescribing):
        return await backend.describe_semaphore_stale(
            name, owners=owners, waiters=waiters, max_staleness=seconds
        )
    return await backend.describe_semaphore(name, owners=owners, waiters=waiters)


async def watch_semaphore(
    session: RecipeSession,
    name: str,
    *,
    data: bool,
    owners: bool,
    waiters: bool,
    max_staleness: object = None,
) -> AsyncGenerator[SemaphoreDescription, None]:
    """The loop behind :meth:`Semaphore.watch`: the backend's stream, without repeats
    (given ``max_staleness``, checked, on the backend's replicas where it has any:
    :class:`~tenure.backends.StaleWatching`).

    The backend's :class:`~tenure.backends.WatchStream` brings the latest state after
    each change (a busy consumer gets the newest, never a queue); a state equal to
    the one yielded last (after a reconnect, say) is not yielded again.

    Resumed or closed in a child made by fork since it started, it raises
    ForkedClientError and leaves the stream alone: its watch is the parent's.
    """
    seconds = _args.max_staleness(max_staleness)
    backend = lowlevel.backend_session(session)
    stream: WatchStream
    if seconds is not None and isinstance(backend, StaleWatching):
        stream = await backend.watch_semaphore_stale(
            name, data=data, owners=owners, waiters=waiters, max_staleness=seconds
        )
    else:
        stream = await backend.watch_semaphore(name, data=data, owners=owners, waiters=waiters)
    opened_by = _forks.pid
    try:
        last: SemaphoreDescription | None = None
        async for description in stream:
            if description != last:
                last = description
                yield description
                if _forks.pid != opened_by:
                    raise _forks.forked_error(f"the watch of {name!r}", opened_by)
    finally:
        if _forks.pid == opened_by:  # (disarming it would send on the parent's connection)
            await stream.aclose()
