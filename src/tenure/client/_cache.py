"""A prefix mirrored in the client: every semaphore under it, kept current by pushes.

``client.cache(node, prefix=...)`` keeps, in this process, the view (data, limit,
count, owners) of every semaphore whose name starts with the prefix (Curator's
CuratorCache, a config tree, a service registry), read with :meth:`Cache.get` and
:meth:`Cache.items` without a round trip, and tells what changes
(:meth:`Cache.changes`).

**How it keeps current.** The cache is the client's, not a session's: it opens a
session of its own, arms a prefix watch there *first*
(:meth:`~tenure.backends.PrefixWatch.watch_prefix`), *then* lists the prefix
(``list_semaphores``, paged) and describes each name, so that no change after the
arming is missed. Then it applies the watch's news name by name: a pushed state
replaces the name's view, a name alone (a store that cannot push states) is read
back, a deletion removes it, and a reset (news may have been lost) lists the prefix
again and tells what differs. A name whose news was already waiting when a listing
ended is read back too: its pushed state may be older than the listing's.

**Its session.** If the session is lost (an expiry, an operator's kill, a store
that forgot it), the cache opens a new one, arms a new watch and lists again
(telling what differs); meanwhile it shows the last state it knew. A store it cannot
reach is tried again (50 ms, doubling to 2 s) for as long as the cache is open.

**Limits.** At most ``max_size`` semaphores (:data:`DEFAULT_CACHE_SIZE` unless
given): one more under the prefix ends the cache with LimitExceededError naming it
(at entry, from :meth:`Cache.changes`, and from every read after). Its watch counts
against the node's ``max_watches_per_session`` (in its own session: one of them).

Layer (CONTRIBUTING.md): this module may also import tenure.client._session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

from tenure import lowlevel
from tenure._core.values import SemaphoreDescription, check_prefix
from tenure.backends._base import (
    Backend,
    CoreSession,
    PrefixReset,
    PrefixWatchStream,
    prefix_watch,
)
from tenure.client import _args, _forks
from tenure.client._cache_changes import CacheChange, CacheChanges
from tenure.client._opening import ClosesOnExit
from tenure.client._session import Session
from tenure.errors import (
    ClientClosedError,
    InvalidArgumentError,
    LimitExceededError,
    LostError,
    NotFoundError,
    TenureError,
    UnavailableError,
)

__all__ = ["DEFAULT_CACHE_SIZE", "Cache", "CacheChange", "check_cache_args"]

log = logging.getLogger("tenure.client")

#: Semaphores a cache holds at most unless ``max_size`` says otherwise.
DEFAULT_CACHE_SIZE: Final = 10_000
#: Names per page when the cache lists its prefix.
LIST_PAGE: Final = 500
#: Describes in flight at once while the cache lists (a round trip each).
DESCRIBES_IN_FLIGHT: Final = 32
#: Pauses between tries of a store the cache cannot reach (seconds).
RETRY_MIN: Final = 0.05
RETRY_MAX: Final = 2.0

#: Opens the cache's next session.
OpenSession = Callable[[], Awaitable[Session]]


def check_cache_args(node: object, prefix: object, max_size: object, owners: object) -> None:
    """InvalidArgumentError naming a bad argument of ``client.cache`` (before anything is sent)."""
    _args.node_name(node)
    check_prefix(prefix)
    if type(max_size) is not int or max_size < 1:
        raise InvalidArgumentError(f"max_size must be a positive int, got {max_size!r}")
    _args.flag("owners", owners)


class Cache(ClosesOnExit):
    """Every semaphore under a prefix of a node, mirrored here (module docstring).

    Made by :meth:`tenure.Client.cache`; use it in ``async with`` (it closes at
    the end), or ``await`` it and :meth:`aclose` it.
    """

    def __init__(
        self,
        backend: Backend,
        open_session: OpenSession,
        node: str,
        prefix: str,
        *,
        max_size: int,
        owners: bool,
    ) -> None:
        self.node = node
        """The node the cache mirrors."""
        self.prefix = prefix
        """The prefix of the names it mirrors."""
        self.max_size = max_size
        """The most semaphores it holds (LimitExceededError past it)."""
        self.owners = owners
        """Whether it keeps owners (and counts) current, or data alone."""
        self._backend = backend
        self._open_session = open_session
        self._pid = _forks.pid  # (its task runs in this process only)
        self._view: dict[str, SemaphoreDescription] = {}
        self._consumers: set[CacheChanges] = set()
        self._error: TenureError | None = None
        self._closed = False
        self._session: Session | None = None
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"<Cache {self.prefix!r} of node {self.node!r}: {len(self._view)} semaphores>"

    # -- reading ------------------------------------------------------------------------

    def get(self, name: str) -> SemaphoreDescription | None:
        """The semaphore ``name`` as the cache shows it now, or None if it does not exist
        or is not under the cache's prefix (it is not in the cache).

        Raises:
            InvalidArgumentError: ``name`` is not a str (a caller's mistake, refused as
                every bad argument is, not an answer of None).
            LimitExceededError: the cache ended past ``max_size`` (or the error that
                ended it otherwise).
        """
        if not isinstance(name, str):
            raise InvalidArgumentError(f"name must be a str, got {name!r}")
        self._check()
        if not name.startswith(self.prefix):
            return None  # never in the cache, whatever the store holds under that name
        return self._view.get(name)

    def items(self) -> list[tuple[str, SemaphoreDescription]]:
        """Every semaphore the cache shows now, as (name, view), sorted by name."""
        self._check()
        return sorted(self._view.items())

    def changes(self) -> AsyncIterator[CacheChange]:
        """The changes the cache applies from now on, as :class:`CacheChange` items.

        Each call is a consumer of its own: it sees every change applied after the
        call, whatever the others take. A busy consumer finds one change per name,
        with the latest view: views in between are not kept (the cache promises the
        latest state of each name, not a history). It ends when the cache is closed,
        and raises the error that ended the cache (LimitExceededError...); a consumer
        more than twice ``max_size`` names behind ends with LimitExceededError.
        """
        consumer = CacheChanges(2 * self.max_size, self._consumers.discard)
        if self._error is not None or self._closed:
            consumer.end(self._error)
        else:
            self._consumers.add(consumer)
        return consumer

    def _check(self) -> None:
        if self._error is not None:
            raise type(self._error)(*self._error.args)

    # -- life -----------------------------------------------------------------------------

    async def _start(self) -> None:
        """Open its session, arm its watch, list the prefix: the cache is then current."""
        self._task = asyncio.ensure_future(self._run())
        try:
            await asyncio.shield(self._ready)
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """Stop mirroring: the watch and the cache's session end; consumers stop."""
        if self._closed:
            return
        self._closed = True
        if self._pid != _forks.pid:  # a child made by fork: the task and session are the parent's
            return
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for consumer in list(self._consumers):
            consumer.end(self._error)
        self._consumers.clear()

    async def _run(self) -> None:
        """Sessions, one after another: each arms a watch, lists, and follows it."""
        pause = RETRY_MIN
        while True:
            try:
                session = self._session = await self._open_session()
            except UnavailableError as error:
                if not self._ready.done():  # at entry: say so, rather than hang
                    self._end(error)
                    return
                log.info("cache of %r: cannot open a session yet: %s", self.prefix, error)
                await asyncio.sleep(pause)
                pause = min(RETRY_MAX, pause * 2)
                continue
            except TenureError as error:
                self._end(error)
                return
            try:
                await self._follow(lowlevel.backend_session(session))
            except ClientClosedError as error:
                self._end(error)
                return
            except (LostError, UnavailableError) as error:
                if not self._ready.done() and isinstance(error, UnavailableError):
                    self._end(error)
                    return
                log.info(
                    "cache of %r: session %d ended (%s): a new one", self.prefix, session.id, error
                )
            except TenureError as error:
                self._end(error)
                return
            finally:
                with contextlib.suppress(TenureError):
                    await asyncio.shield(session.close())
            pause = RETRY_MIN

    def _end(self, error: TenureError) -> None:
        """The cache ends with ``error``: at entry, from reads and from consumers."""
        self._error = error
        if not self._ready.done():
            self._ready.set_exception(error)
            self._ready.exception()  # (retrieved: aclose may be first to look)
        for consumer in list(self._consumers):
            consumer.end(error)
        self._consumers.clear()

    # -- following one session's watch ----------------------------------------------------

    async def _follow(self, backend: CoreSession) -> None:
        """Arm, list, then apply the watch's news until the session ends."""
        stream = await prefix_watch(backend).watch_prefix(
            self.prefix, data=True, owners=self.owners, waiters=False
        )
        try:
            suspect = await self._relist(backend, stream, first=not self._ready.done())
            if not self._ready.done():
                self._ready.set_result(None)
            async for news in stream:
                if isinstance(news, PrefixReset):
                    suspect = await self._relist(backend, stream, first=False)
                    continue
                if news.description is None or news.name in suspect:
                    suspect.discard(news.name)
                    view = await self._read(backend, news.name)
                else:
                    view = news.description if news.description.exists else None
                self._apply(news.name, view)
        finally:
            await stream.aclose()

    async def _relist(
        self, backend: CoreSession, stream: PrefixWatchStream, *, first: bool
    ) -> set[str]:
        """List the prefix and describe each name; make it the view (telling what differs
        unless ``first``). Returns the names whose news waits: to be read back."""
        names = await self._list()
        fresh: dict[str, SemaphoreDescription] = {}
        gate = asyncio.Semaphore(DESCRIBES_IN_FLIGHT)

        async def describe(name: str) -> None:
            async with gate:
                view = await self._read(backend, name)
            if view is not None:
                fresh[name] = view

        await asyncio.gather(*(describe(name) for name in names))
        old, self._view = self._view, fresh
        if not first:
            for name in sorted(old.keys() | fresh.keys()):
                if not _same(old.get(name), fresh.get(name)):
                    self._tell(name, fresh.get(name))
        return set(stream.pending())

    async def _list(self) -> list[str]:
        """The names under the prefix now, refusing more than ``max_size`` (paged)."""
        names: list[str] = []
        after = ""
        while True:
            page = await self._backend.list_semaphores(
                self.node, prefix=self.prefix, after=after, limit=LIST_PAGE
            )
            names += (summary.name for summary in page)
            if len(names) > self.max_size:
                raise self._too_many()
            if len(page) < LIST_PAGE:
                return names
            after = page[-1].name

    async def _read(self, backend: CoreSession, name: str) -> SemaphoreDescription | None:
        """The semaphore now (None: it does not exist)."""
        try:
            return await backend.describe_semaphore(name, owners=self.owners, waiters=False)
        except NotFoundError:
            return None

    def _apply(self, name: str, view: SemaphoreDescription | None) -> None:
        """Make ``view`` the name's (None: remove it); tell the consumers if it changed."""
        if view is None:
            if self._view.pop(name, None) is not None:
                self._tell(name, None)
            return
        if _same(self._view.get(name), view):
            return
        if name not in self._view and len(self._view) >= self.max_size:
            raise self._too_many()
        self._view[name] = view
        self._tell(name, view)

    def _tell(self, name: str, view: SemaphoreDescription | None) -> None:
        for consumer in list(self._consumers):
            consumer.tell(name, view)

    def _too_many(self) -> LimitExceededError:
        return LimitExceededError(
            f"max_size ({self.max_size}) reached: the cache of {self.prefix!r} on node "
            f"{self.node!r} holds at most {self.max_size} semaphores (Client.cache's max_size)"
        )


def _same(a: SemaphoreDescription | None, b: SemaphoreDescription | None) -> bool:
    """Whether two views show the same: an owner's ``since`` may differ by the drift of
    its store's clocks between two reads (a server stamps each reply anew), so owners
    are compared by who holds how much with which token and data."""
    if a is None or b is None:
        return a is b
    return _shown(a) == _shown(b)


def _shown(d: SemaphoreDescription) -> tuple[object, ...]:
    owners = tuple((o.session_id, o.count, o.data, o.token) for o in d.owners)
    return (d.exists, d.limit, d.count, d.data, d.ephemeral, owners)
