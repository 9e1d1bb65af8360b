"""The sync client: an async :class:`tenure.Client` driven through its own portal.

A child made by ``fork`` inherits the client as memory, but not its loop thread, and
its connection is the parent's: the client's own calls there open the child's
connection first (:meth:`Client._live`, as redis-py's pool does after a fork), on a
portal of the child's. What the parent opened through it (its sessions, leases,
caches) stays the parent's: used in the child, it raises ForkedClientError.

Layer (CONTRIBUTING.md): this module may also import tenure.sync._objects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from tenure import client as aio
from tenure._core.top_report import TOP_PAGE, TopReport
from tenure._core.values import (
    WHY_PAGE,
    ClientIdentity,
    NodeConfig,
    NodeDescription,
    SemaphoreSummary,
    SessionSummary,
    renamed_settings,
)
from tenure._core.why_report import WhyReport
from tenure.backends import Capability, SessionTicket, shown_url
from tenure.client import _forks
from tenure.client._args import Data
from tenure.client._cache import DEFAULT_CACHE_SIZE
from tenure.client._observers import Observer, checked_observers
from tenure.errors import LostError
from tenure.sync import _leader
from tenure.sync._cache import Cache
from tenure.sync._calls import opened
from tenure.sync._held import ClosesOnExit
from tenure.sync._leases import Leadership
from tenure.sync._objects import Session
from tenure.sync._portal import Portal, shared_portals
from tenure.sync._stream import Stream

#: Taken to open a forked child's connection (:meth:`Client._live`); a new one in each
#: child, as another thread of the parent may have held it at the fork.
_reopening = threading.Lock()


def _new_reopening_lock() -> None:
    global _reopening
    _reopening = threading.Lock()


_forks.after_fork_in_child(_new_reopening_lock)

#: What reopens a client in a forked child: its portal, its async client, and the
#: function that gives the portal back.
Opened = tuple[Portal, aio.Client, Callable[[], None]]


class Client(ClosesOnExit):
    """A connection to one backend, for blocking code. Make one with :func:`tenure.sync.connect`.

    Its event loop runs in a background thread, the :attr:`portal`; ``close()``
    (or leaving ``with``) closes every session, stops the loop and joins the thread.

    Forks: in a child made by ``os.fork`` (a pre-forking server's worker, a
    multiprocessing child), the client's own calls (``session()``, ``list_nodes()``,
    :attr:`portal`, :attr:`async_client`...) first open a connection of the child's own,
    with the same URL and options, as redis-py's pool does after a fork: the child
    never sends on its parent's connection. The sessions, leases and caches the parent
    opened through it stay the parent's (their holds are the parent's): used in the
    child they raise ForkedClientError; open new ones from the client there.
    """

    def __init__(
        self,
        portal: Portal,
        client: aio.Client,
        release: Callable[[], None],
        reopen: Callable[[], Opened],
    ) -> None:
        self._portal = portal
        self._client = client
        self._release = release
        #: Opens the same connection again (in a forked child).
        self._reopen = reopen
        self._guard = threading.Lock()
        self._closed = False
        self.url = client.url

    def __repr__(self) -> str:
        return f"<sync Client {shown_url(self.url)}{' closed' if self._closed else ''}>"

    @property
    def portal(self) -> Portal:
        """The loop thread this client runs on; ``portal.call(async_fn, *args)`` runs there.

        In a child made by fork, reading it opens the child's own (the class says so).
        """
        return self._live()[0]

    @property
    def async_client(self) -> aio.Client:
        """The async :class:`tenure.Client` this one drives, for coroutines of your own
        run on its :attr:`portal` (an integration's: ``client.portal.call(fn,
        client.async_client)``); use it only there, on the portal's loop.

        In a child made by fork, reading it opens the child's own (the class says so).
        """
        return self._live()[1]

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the backend can do."""
        return self._client.capabilities

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (in this process, or in the parent before it
        forked this one: a client inherited open opens the child's own on its next call)."""
        return self._closed

    def _live(self) -> tuple[Portal, aio.Client]:
        """The portal and async client of this process: in a child made by fork since
        they opened, new ones (the parent's are left alone), opened once."""
        if not self._portal.forked or self._closed:
            return self._portal, self._client  # (a closed one: its calls refuse)
        with _reopening:
            if self._portal.forked and not self._closed:
                self._release()  # (in the child: marks the parent's portal closed, alone)
                self._portal, self._client, self._release = self._reopen()
            return self._portal, self._client

    @property
    def observers(self) -> tuple[Observer, ...]:
        """The observers given to :func:`connect` (see :attr:`tenure.Client.observers`)."""
        return self._client.observers

    def create_node(
        self,
        name: str,
        config: NodeConfig | None = None,
        *,
        exist_ok: bool = False,
        **settings: object,
    ) -> None:
        """Create a node (see :meth:`tenure.Client.create_node`); AlreadyExistsError if taken."""
        # Renamed here, in the caller's thread, so that a warning points at its code.
        settings = renamed_settings(settings, stacklevel=2)
        portal, client = self._live()
        portal.call(client.create_node, name, config, exist_ok=exist_ok, **settings)

    def describe_node(self, name: str, *, max_staleness: float | None = None) -> NodeDescription:
        """A node's settings and how many sessions and semaphores it has (see
        :meth:`tenure.Client.describe_node`)."""
        portal, client = self._live()
        return portal.call(client.describe_node, name, max_staleness=max_staleness)

    def alter_node(self, name: str, **changes: object) -> NodeDescription:
        """Change some of a node's settings; returns the new description.

        ``session_timeout=`` is the old name of ``recovery_window=`` (DeprecationWarning).
        """
        changes = renamed_settings(changes, stacklevel=2)
        portal, client = self._live()
        return portal.call(client.alter_node, name, **changes)

    def drop_node(self, name: str, *, force: bool = False) -> None:
        """Drop a node. With live sessions it fails unless ``force`` (they are then lost)."""
        portal, client = self._live()
        portal.call(client.drop_node, name, force=force)

    @property
    def identity(self) -> ClientIdentity:
        """Who this client is in its sessions (see :attr:`tenure.Client.identity`)."""
        return self._live()[1].identity

    def list_nodes(self, *, max_staleness: float | None = None) -> list[str]:
        """Every node's name, sorted (see :meth:`tenure.Client.list_nodes`)."""
        portal, client = self._live()
        return portal.call(client.list_nodes, max_staleness=max_staleness)

    def list_semaphores(
        self, node: str, prefix: str = "", *, max_staleness: float | None = None
    ) -> list[SemaphoreSummary]:
        """The semaphores named with ``prefix`` (see :meth:`tenure.Client.list_semaphores`)."""
        portal, client = self._live()
        return portal.call(client.list_semaphores, node, prefix, max_staleness=max_staleness)

    def list_sessions(
        self, node: str, *, max_staleness: float | None = None
    ) -> list[SessionSummary]:
        """The node's live sessions, by id (see :meth:`tenure.Client.list_sessions`)."""
        portal, client = self._live()
        return portal.call(client.list_sessions, node, max_staleness=max_staleness)

    def kill_session(self, node: str, session_id: int) -> None:
        """End a live session as an expiry would (see :meth:`tenure.Client.kill_session`)."""
        portal, client = self._live()
        portal.call(client.kill_session, node, session_id)

    def why(
        self,
        node: str,
        name: str,
        *,
        after: int = 0,
        limit: int = WHY_PAGE,
        max_staleness: float | None = None,
    ) -> WhyReport:
        """Who blocks ``name`` of ``node``: its holders and waiters, the chain of holders
        that wait, and its roots (see :meth:`tenure.Client.why`)."""
        portal, client = self._live()
        return portal.call(
            client.why, node, name, after=after, limit=limit, max_staleness=max_staleness
        )

    def top(
        self,
        node: str = "",
        *,
        window: float = 60.0,
        sort: str = "wait",
        limit: int = TOP_PAGE,
        max_staleness: float | None = None,
    ) -> TopReport:
        """The most contended names of ``node`` (``""``: every node) over the last
        ``window`` seconds (see :meth:`tenure.Client.top`)."""
        portal, client = self._live()
        return portal.call(
            client.top, node, window=window, sort=sort, limit=limit, max_staleness=max_staleness
        )

    def release_claim(self, node: str, name: str, claim_id: str) -> bool:
        """Release a claim by its id, from any process (see
        :meth:`tenure.Client.release_claim`); whether it shortened a live claim."""
        portal, client = self._live()
        return portal.call(client.release_claim, node, name, claim_id)

    def session(
        self,
        node: str,
        *,
        recovery_window: float | None = None,
        description: str = "",
        resume: SessionTicket | str | None = None,
        ttl: float | None = None,
    ) -> Session:
        """Open a session on ``node``; use it plain (``close()`` it) or in ``with``.

        Args:
            recovery_window: seconds the server keeps the session after its
                connection is lost; ``None`` takes the node's default.
            description: a label shown to other sessions and operators.
            resume: a ticket (:meth:`Session.ticket`, or its ``to_str()``): take that
                live session back with all it holds (:meth:`Session.leases`), as
                :meth:`tenure.Client.session` does.
            ttl: seconds within which :meth:`Session.renew` must be called, or the
                session is lost (SessionExpiredError) and closed, as
                :meth:`tenure.Client.session` says. The deadline is kept on the
                portal's thread: a calling thread that stops renewing loses it.
        """
        portal, client = self._live()
        return portal.call(
            opened,
            lambda: client.session(
                node,
                recovery_window=recovery_window,
                description=description,
                resume=resume,
                ttl=ttl,
            ),
            lambda session: Session(portal, session),
        )

    def sessions(
        self, node: str, *, recovery_window: float | None = None, description: str = ""
    ) -> SessionLoop:
        """Sessions on ``node`` while you iterate: a new one after each loss.

        ``next()`` blocks until the previous session has ended; the loop stops when
        one is closed on purpose::

            for session in client.sessions("my-app", recovery_window=15.0):
                try:
                    with session.mutex("job") as lock:
                        work(lock)
                except tenure.errors.SessionExpiredError:
                    continue
                break
        """
        portal, client = self._live()
        loop = client.sessions(node, recovery_window=recovery_window, description=description)
        return SessionLoop(portal, loop, lambda session: Session(portal, session))

    def lead(
        self,
        node: str,
        name: str,
        work: Callable[[Leadership], object],
        *,
        data: Data = b"",
        requeue: bool = True,
        recovery_window: float | None = None,
        description: str = "",
    ) -> None:
        """Lead the election ``name`` of ``node``, running ``work(leadership)`` while leader.

        As :meth:`tenure.Client.lead`, with ``work`` a plain function run in this
        thread. A loss cannot cancel it: it sets ``leadership.lost`` (and
        ``leadership.check()`` raises it), so ``work`` must watch it, e.g.
        ``while not leadership.lost.is_set(): step()``; the runner campaigns again
        once ``work`` has returned. Blocks until ``work`` returns with ``requeue``
        false, or raises what ``work`` raised (having resigned), or KeyboardInterrupt.
        """
        portal, client = self._live()
        _leader.lead(
            portal,
            client,
            node,
            name,
            work,
            data=data,
            requeue=requeue,
            recovery_window=recovery_window,
            description=description,
        )

    def cache(
        self,
        node: str,
        *,
        prefix: str,
        max_size: int = DEFAULT_CACHE_SIZE,
        owners: bool = True,
    ) -> Cache:
        """Mirror every semaphore of ``node`` under ``prefix`` here, kept current by the
        backend's pushes (see :meth:`tenure.Client.cache`); plain (``close()`` it) or
        ``with``."""
        portal, client = self._live()
        return portal.call(
            opened,
            lambda: client.cache(node, prefix=prefix, max_size=max_size, owners=owners),
            lambda cache: Cache(portal, cache),
        )

    def close(self) -> None:
        """Close every session, stop the loop and join its thread. Idempotent.

        The sessions, and what they hold, are lost with SessionClosedError: they did
        not choose to end, so ``lost_reason`` is that error for each of them.

        In a child made by fork that has not opened its own connection yet, it only
        marks the client closed there: its connection and sessions are the parent's,
        which keeps them.
        """
        if self._portal.forked:
            self._closed = True
            self._release()
            return
        if self._portal.in_portal_thread():
            raise RuntimeError("tenure.sync: cannot close a client from its portal thread")
        with self._guard:
            if self._closed:
                return
            self._closed = True
        try:
            self._portal.call(self._client.aclose)
        finally:
            self._release()


class SessionLoop(Stream[Session]):
    """The iterator behind :meth:`Client.sessions`."""

    def __init__(
        self, portal: Portal, loop: aio.SessionLoop, wrap: Callable[[aio.Session], Session]
    ) -> None:
        super().__init__(portal, loop, self._remember)
        self._open = wrap
        self._current: Session | None = None

    def _remember(self, session: aio.Session) -> Session:
        self._current = self._open(session)
        return self._current

    @property
    def current(self) -> Session | None:
        """The session of the current step."""
        return self._current

    @property
    def last_loss(self) -> LostError | None:
        """Why the current session ended, if it was lost."""
        return None if self._current is None else self._current.lost_reason


def connect(
    url: str,
    *,
    require: Iterable[Capability] = (),
    client_name: str = "",
    observers: Iterable[Observer] = (),
    **options: object,
) -> Client:
    """Connect to the backend ``url`` names (see :func:`tenure.connect`); plain or ``with``.

    Starts the client's loop thread. Clients of the same ``memory://NAME`` share
    one loop thread (the in-process engine is shared per event loop); the thread
    stops when the last of them closes. ``memory://`` takes ``clock=``.
    ``observers`` are called on that thread, with the async objects
    (:class:`tenure.Lease`), each acquire in a copy of the calling thread's context.
    """
    observing = checked_observers(observers)
    required = tuple(require)

    def open_here() -> Opened:
        portal, release = shared_portals.acquire(url)
        try:
            client = portal.call(_connect, url, required, client_name, observing, options)
        except BaseException:
            release()
            raise
        return portal, client, release

    return Client(*open_here(), reopen=open_here)


async def _connect(
    url: str,
    require: tuple[Capability, ...],
    client_name: str,
    observers: tuple[Observer, ...],
    options: dict[str, object],
) -> aio.Client:
    return await aio.connect(
        url, require=require, client_name=client_name, observers=observers, **options
    )
