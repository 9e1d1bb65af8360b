"""The client: one connection to a backend, its sessions and what runs in them.

:class:`Client` opens sessions (one, or one after another: :class:`SessionLoop`),
runs a leader (``lead``: :mod:`tenure.client._leader`) and a prefix cache
(``cache``: :mod:`tenure.client._cache`) in sessions of their own, and releases a
claim by its id; what it does with nodes is its base's,
:class:`~tenure.client._node_admin.NodeAdmin`. :func:`connect` makes one.

Layer (CONTRIBUTING.md): this module may also import tenure.client._session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Iterable
from functools import partial
from typing import Any, Self
from urllib.parse import urlsplit

from tenure._core.claims import check_claim_id
from tenure._core.top_report import TOP_PAGE, TopReport
from tenure._core.values import NO_IDENTITY, WHY_PAGE, ClientIdentity, SemaphoreDescription
from tenure._core.why_report import WhyReport
from tenure.backends import Backend, Capability, NameStatistics, SessionTicket, open_backend
from tenure.backends._base import session_recovery
from tenure.client import _args, _forks, _leader, _listing, _why
from tenure.client._args import Data
from tenure.client._cache import DEFAULT_CACHE_SIZE, Cache, check_cache_args
from tenure.client._lease import Leadership
from tenure.client._node_admin import NodeAdmin, redacted
from tenure.client._observers import Observer, checked_observers
from tenure.client._opening import ClosesOnExit, Opening
from tenure.client._session import Session
from tenure.client._ttl import check_ttl
from tenure.errors import (
    ClientClosedError,
    InvalidArgumentError,
    LostError,
    UnsupportedError,
)


class Client(NodeAdmin, ClosesOnExit):
    """A connection to one backend. Make one with :func:`tenure.connect`.

    ``identity`` (host, pid, the ``client_name`` given to connect) goes with every
    session it opens, and shows in owners, waiters and listings.
    """

    def __init__(
        self,
        backend: Backend,
        url: str,
        *,
        identity: ClientIdentity = NO_IDENTITY,
        observers: tuple[Observer, ...] = (),
    ) -> None:
        super().__init__(backend, url)
        self.identity = identity
        self._sessions: set[Session] = set()
        self._observers = observers

    def __repr__(self) -> str:
        return f"<Client {redacted(self.url)!r}{' closed' if self._closed else ''}>"

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the backend can do."""
        return self.backend.capabilities

    @property
    def observers(self) -> tuple[Observer, ...]:
        """The observers given to :func:`connect`, told of every acquire of this client's
        sessions (after the process's: :func:`tenure.add_observer`)."""
        return self._observers

    # -- claims, from any process -------------------------------------------------------

    async def release_claim(self, node: str, name: str, claim_id: str) -> bool:
        """Release the claim ``claim_id`` of ``name`` in ``node``, from any process: no
        session is needed (a producer took the claim, a worker releases it).

        The claim then ends at the later of now and ``at_least`` after its grant.
        Returns whether it shortened a live claim of that id (False: none, ended at
        ``at_most`` already, another claim's id, released already).

        Raises:
            InvalidArgumentError: a bad node or name, an id that is not a claim's (32
                lowercase hex digits).
            NotFoundError: no such node.
            PermissionDeniedError: the client's token is read-only.
            UnsupportedError: the backend lacks Capability.CLAIMS.
        """
        self._check_open()
        node, name = _args.node_name(node), _args.semaphore_name(name)
        claim_id = check_claim_id(claim_id)
        if Capability.CLAIMS not in self.backend.capabilities:
            raise UnsupportedError(
                f"{redacted(self.url)} has no claims (it lacks Capability.CLAIMS)"
            )
        return await self.backend.release_claim(node, name, claim_id)

    # -- who blocks whom ---------------------------------------------------------------

    async def why(
        self,
        node: str,
        name: str,
        *,
        after: int = 0,
        limit: int = WHY_PAGE,
        max_staleness: float | None = None,
    ) -> WhyReport:
        """Who blocks semaphore ``name`` of ``node``: its holders (in grant order) and its
        waiters (in the order they will be served, the ``after``-th left out, ``limit``
        of each), what each holder waits for, and the chain of holders that wait, from
        the name to its **roots**: the holders that wait for nothing, whom everyone
        behind waits on (:class:`WhyReport`). Where the store does not know what a
        holder waits for (it lacks Capability.WAIT_CHAINS), those are None and the
        holders and waiters come from a describe of the name.

        ``max_staleness``: as much staleness allowed (:meth:`_reader`).

        Raises:
            InvalidArgumentError: a bad node or name, ``limit`` outside [1, 10,000],
                a negative ``after``, a bad ``max_staleness``.
            NotFoundError: no such node or semaphore.
        """
        self._check_open()
        reader = self._reader(max_staleness)

        async def describe(node: str, name: str) -> SemaphoreDescription:
            async with self.session(node, description=_why.DESCRIPTION) as session:
                return await session.semaphore(name).describe(owners=True, waiters=True)

        return await _why.why(reader, node, name, after, limit, describe)

    async def top(
        self,
        node: str = "",
        *,
        window: float = 60.0,
        sort: str = "wait",
        limit: int = TOP_PAGE,
        max_staleness: float | None = None,
    ) -> TopReport:
        """The most contended names of ``node`` (``""``: of every node the store keeps):
        the ``limit`` names with the most ``sort`` (``"wait"``: seconds waited,
        ``"queue"``: requests waiting now, ``"hold"``: the longest hold now,
        ``"grants"``, ``"timeouts"``) over the last ``window`` seconds (60 or 300), each
        with its waits, grants, timeouts, cancelled waits, lost holds, queue, holders and
        wait and hold percentiles (:class:`TopReport`). The store keeps a bounded
        number of names, the most contended (a name is kept from its first queued
        request): docs/operations.md, "Who blocks whom". ``max_staleness``: as much
        staleness allowed (:meth:`_reader`).

        Raises:
            UnsupportedError: the backend keeps no statistics per name (it lacks
                Capability.NAME_STATS).
            InvalidArgumentError: a bad node, window, sort or ``limit`` (1 to 10,000).
            NotFoundError: no such node.
            PermissionDeniedError: every node's names asked with a token limited to
                some nodes.
        """
        self._check_open()
        backend = self._reader(max_staleness)
        if Capability.NAME_STATS not in backend.capabilities or not isinstance(
            backend, NameStatistics
        ):
            raise UnsupportedError(
                f"{redacted(self.url)} keeps no statistics per name (it lacks "
                "Capability.NAME_STATS): tenure top needs memory:// or a tenure server"
            )
        if node:
            node = _args.node_name(node)
        return await backend.top(node, window=window, sort=sort, limit=limit)

    # -- sessions, and what runs in them ------------------------------------------------

    def session(
        self,
        node: str,
        *,
        recovery_window: float | None = None,
        description: str = "",
        resume: SessionTicket | str | None = None,
        ttl: float | None = None,
    ) -> Opening[Session]:
        """Open a session on ``node``; ``await`` it, or use ``async with`` (closes at the end).

        Args:
            recovery_window: seconds the server keeps the session (and all it holds)
                after its connection is lost; ``None`` takes the node's default.
            description: a label shown to other sessions and operators.
            ttl: seconds (at most a day) within which the application must renew the
                session (:meth:`Session.renew`), from its opening on, or lose it:
                this client then ends it with SessionExpiredError, as an expiry, and
                closes it in the store, releasing everything it held. For a process
                that can be alive yet stuck (tooz's heartbeats, Consul's TTL
                sessions). ``None``: no ttl. The recovery window still applies to a
                lost connection; ``ttl`` may be given with ``resume``.
            resume: a :class:`SessionTicket` (or its ``to_str()``) from
                :meth:`Session.ticket`: instead of opening a session, take that live
                session back, with everything it holds (a process that crashed and
                restarts within the recovery window). Its holds come back as
                :class:`Lease` objects (:meth:`Session.leases`), tokens unchanged;
                its queued requests are withdrawn, and its previous owner, if still
                alive, is fenced off and loses the session (SessionExpiredError). A
                resumed session keeps its own recovery window and description:
                passing either with ``resume`` is an InvalidArgumentError (and
                :attr:`Session.description` of a resumed session is ``""``: the
                backend keeps the original).

        Raises:
            InvalidArgumentError: at once (before the await), naming a bad argument
                (a ticket of another node, or that is not a ticket).
            UnsupportedError: at once, ``resume`` on a backend without
                :attr:`Capability.SESSION_RECOVERY`.
            SessionExpiredError: the ticket's session has ended (expired, closed), or
                its secret does not match.
        """
        node, recovery_window, description = _session_args(node, recovery_window, description)
        ttl = check_ttl(ttl)
        ticket = _args.ticket(resume, node)
        if ticket is not None:
            if recovery_window is not None or description:
                raise InvalidArgumentError(
                    "a resumed session keeps its own recovery_window and description: "
                    "pass neither with resume="
                )
            if Capability.SESSION_RECOVERY not in self.backend.capabilities:
                raise UnsupportedError(
                    f"{redacted(self.url)} cannot resume sessions "
                    "(it lacks Capability.SESSION_RECOVERY)"
                )
        return Opening(
            lambda: self._open_session(node, recovery_window, description, ticket, ttl),
            "client.session(...)",
            "session",
        )

    def sessions(
        self, node: str, *, recovery_window: float | None = None, description: str = ""
    ) -> SessionLoop:
        """Sessions on ``node`` for as long as you iterate: a new one after each loss.

        Each step waits until the previous session has ended, then opens the next.
        Use it in ``async with`` so that leaving the loop (``break``) closes the
        last session at once::

            async with client.sessions("my-app", recovery_window=15.0) as sessions:
                async for session in sessions:
                    try:
                        async with session.mutex("job") as lock:
                            await work(lock.token)
                    except tenure.errors.SessionExpiredError:
                        continue  # start again in a new session
                    break
        """
        node, recovery_window, description = _session_args(node, recovery_window, description)
        return SessionLoop(self, node, recovery_window, description)

    def lead(
        self,
        node: str,
        name: str,
        work: Callable[[Leadership], Awaitable[object]],
        *,
        data: Data = b"",
        requeue: bool = True,
        recovery_window: float | None = None,
        description: str = "",
    ) -> Coroutine[Any, Any, None]:
        """Lead the election ``name`` of ``node`` for as long as this runs: ``await`` it.

        Campaigns with ``data``; while leader, runs ``await work(leadership)``
        (``leadership.token`` fences what it does). If leadership or its session is
        lost, ``work`` is cancelled at once, and once it has ended this campaigns
        again (in a new session if the old one is gone). When ``work`` returns, it
        resigns; then with ``requeue`` it campaigns again, behind the candidates
        already waiting, else it returns. It returns only then, or raises when
        ``work`` raises (having resigned) or when cancelled (having resigned and
        closed its session). Opening a session and campaigning are retried over
        UnavailableError, with a capped backoff. docs/recipes.md, "Leader runner".

        Args:
            recovery_window, description: of the sessions it opens (see :meth:`session`).

        Raises:
            InvalidArgumentError: at once (before the await), naming a bad argument.
            NotFoundError: the node does not exist (or was dropped).
            ClientClosedError: the client was closed.
        """
        # Checked now; the runner starts when awaited.
        checked = _leader.checked(
            self, node, name, work, data, requeue, recovery_window, description
        )
        return _leader.run(*checked)

    def cache(
        self,
        node: str,
        *,
        prefix: str,
        max_size: int = DEFAULT_CACHE_SIZE,
        owners: bool = True,
    ) -> Opening[Cache]:
        """Mirror every semaphore of ``node`` whose name starts with ``prefix`` here,
        kept current by the backend's pushes; ``async with`` it (or ``await`` it and
        ``aclose()`` it). Entered, it holds the prefix's state: :meth:`Cache.get`,
        :meth:`Cache.items`, and :meth:`Cache.changes` for what changes after.

        The cache opens a session of its own (a new one if that is lost). ``owners``
        False keeps data alone (a config tree): no owners listed, counts not kept
        current. See docs/recipes.md, "Prefix cache".

        Raises:
            InvalidArgumentError: at once, naming a bad argument.
            UnsupportedError: at once, on a backend without
                :attr:`Capability.PREFIX_WATCH` (or a tenure server older than
                protocol version 6, at entry).
            LimitExceededError: more than ``max_size`` semaphores under the prefix
                (at entry, or later from the cache's reads and changes()).
            NotFoundError: the node does not exist.
        """
        check_cache_args(node, prefix, max_size, owners)
        if Capability.PREFIX_WATCH not in self.backend.capabilities:
            raise UnsupportedError(
                f"{redacted(self.url)} cannot watch a prefix (it lacks Capability.PREFIX_WATCH)"
            )

        async def open_cache() -> Cache:
            self._check_open()
            cache = Cache(
                self.backend,
                lambda: self._open_session(node, None, f"cache of {prefix!r}"),
                node,
                prefix,
                max_size=max_size,
                owners=owners,
            )
            await cache._start()
            return cache

        return Opening(open_cache)

    async def _open_session(
        self,
        node: str,
        recovery_window: float | None,
        description: str,
        resume: SessionTicket | None = None,
        ttl: float | None = None,
    ) -> Session:
        self._check_open()
        session = Session(node, recovery_window, description, ttl)
        if resume is None:
            backend_session = await self.backend.open_session(
                node,
                timeout=recovery_window,
                description=description,
                listener=session._listener(),
                identity=self.identity,
            )
        else:
            backend_session = await self.backend.open_session(
                node, timeout=None, description="", listener=session._listener(), resume=resume
            )
        session._bind(backend_session)
        session._claim_releaser = partial(self.release_claim, node)
        session._observers = self._observers
        if resume is not None:
            try:
                session._adopt(await session_recovery(backend_session).holds())
            except BaseException:
                # Nobody could own what it holds: end it rather than leave it unowned.
                await session._close(None)
                raise
        self._sessions.add(session)
        session.lost.add_callback(lambda _reason: self._sessions.discard(session))
        return session

    # -- life -----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close every session (their holders see ClientClosedError) and the backend.

        Every later call raises ClientClosedError. In a child made by fork since the
        client opened, it only marks the client and its sessions closed there: they
        are the parent's, which keeps them (see ForkedClientError).
        """
        if self._closed:
            return
        self._closed = True
        for session in list(self._sessions):
            # Not the session's own choice: code relying on it must hear of it.
            await session._close(
                ClientClosedError(f"the client was closed, and session {session.id} with it")
            )
        if self._pid == _forks.pid:  # (in a child made by fork, the connections are the parent's)
            await self.backend.aclose()


def _session_args(
    node: object, recovery_window: object, description: object
) -> tuple[str, float | None, str]:
    """The checked arguments of :meth:`Client.session` and :meth:`Client.sessions`."""
    return (
        _args.node_name(node),
        _args.recovery_window(recovery_window),
        _args.description(description),
    )


class SessionLoop(ClosesOnExit):
    """The async iterator behind :meth:`Client.sessions`."""

    def __init__(
        self, client: Client, node: str, recovery_window: float | None, description: str
    ) -> None:
        self._client = client
        self._open = (node, recovery_window, description)
        self._current: Session | None = None
        self._stopped = False

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Session:
        if self._stopped:
            raise StopAsyncIteration
        if self._current is not None:
            reason = await self._current.lost
            if reason is None or self._client._closed:  # closed on purpose: loop over
                self._stopped = True
                raise StopAsyncIteration
        self._current = await self._client._open_session(*self._open)
        return self._current

    @property
    def current(self) -> Session | None:
        """The session of the current step."""
        return self._current

    @property
    def last_loss(self) -> LostError | None:
        """Why the current session ended, if it did."""
        return None if self._current is None else self._current.lost_reason

    async def aclose(self) -> None:
        """Stop the loop and close the current session."""
        self._stopped = True
        if self._current is not None:
            await self._current.close()


def connect(
    url: str,
    *,
    require: Iterable[Capability] = (),
    client_name: str = "",
    observers: Iterable[Observer] = (),
    **options: object,
) -> Opening[Client]:
    """Connect to the backend ``url`` names; ``await`` it or use ``async with``.

    ``memory://`` keeps the state in this process (``memory://NAME`` shares it by
    name). ``require`` refuses a backend that lacks a capability, instead of
    silently weakening a guarantee. ``client_name`` (at most 1024 UTF-8 bytes)
    names this client in its sessions' identity, with this host's name and this
    process's id: operators see them on owners, waiters and listings (a
    ``tenure://`` server also logs it). ``observers`` are told of every acquire of
    the client's sessions (:class:`tenure.Observer`: tracing, metrics, the test
    fixtures' recorder). Other keyword options go to the backend (``memory://`` takes
    ``clock=``).
    """

    required = _args.capabilities(require)
    observing = checked_observers(observers)
    identity = _listing.identity_of_this_process(client_name)
    if client_name and urlsplit(url).scheme in ("tenure", "tenures"):
        options.setdefault("client_name", client_name)  # the server's logs name it too

    async def open_client() -> Client:
        backend = await open_backend(url, options, require=required)
        return Client(backend, url, identity=identity, observers=observing)

    return Opening(open_client, "tenure.connect(...)", "client")
