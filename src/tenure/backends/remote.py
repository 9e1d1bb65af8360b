"""``tenure://``: the state lives in ``tenure serve`` processes.

``tenure://host:port`` reaches one server; ``tenures://`` the same over TLS.

Several servers, ``tenure://t1:6388,t2:6389,t3:6390``, are the doors of **one
service**: the servers of a ``tenure serve --cluster`` (docs/cluster.md), one of
which leads while the others stand by. The client may be pointed at any of them:
it tries the doors in turn, goes on to the leader a standby names (even one the
URL does not list), and after a failover reaches the new leader the same way,
re-attaching its sessions there within their recovery windows as after any lost
connection (the members share one state, one ``instance_id``). A standalone server
is not accepted as one of several doors (it would be a state of its own).

``?sharded=true`` (or ``sharded=True`` to :func:`tenure.connect`) makes the servers
independent shards instead: each node lives on exactly one of them, chosen by
rendezvous hashing of the node's name over the server addresses as written. Every
client must list the same servers (in any order); adding a server moves only the
nodes that hash to it. Sharding spreads load; it does not replicate.

Options, in the URL query or as keyword arguments of :func:`tenure.connect`
(keywords win): ``token`` (the server's auth token), ``ca`` (a CA file to trust;
implies TLS), ``cert`` and ``key`` (a client certificate, for mTLS),
``server_hostname`` (the name the server's certificate must carry),
``ssl`` (a ready :class:`ssl.SSLContext`, keyword only), ``connect_timeout``
(seconds, default 5), ``request_timeout`` (seconds a request's answer may take,
default 30: past it the request fails with :class:`~tenure.errors.RequestTimeoutError`
and the connection is made again, :mod:`tenure.backends._link_deadline`; a queued
acquire is answered at once, and waits for its grant as long as its own ``timeout``
says), ``client_name`` (shown in the server's logs), ``sharded``
(true/false, 1/0, yes/no; default false), ``withdraw_wait`` (as every
backend's: docs/backends.md, "Cancellation") and ``close_wait`` (seconds the
client's close waits to close on the server the sessions it gave up: default 5;
:meth:`~tenure.backends._remote_session.Shard.aclose`) and ``max_staleness`` (seconds a
read may be stale: a cluster's standbys answer the reads, never older than what the
client wrote, was told or read; :mod:`tenure.backends._standby_reads`; not given: the
leader answers every read).

Each service gets one multiplexed, pipelined connection (see
:mod:`tenure.backends._link`); sessions survive its loss for their recovery window
(:mod:`tenure.backends._remote_session`). :func:`cluster_status` asks each door of
a URL about its cluster (``tenure cluster status``); :func:`read_backup` and
:func:`reload_servers` are ``tenure backup`` and ``tenure reload`` over the native
protocol (:mod:`tenure.backends._remote_admin`).
"""

from __future__ import annotations

import asyncio
import copy
import heapq
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import ClassVar, Final, TypeVar

from tenure._core import (
    AlterNode,
    Command,
    CreateNode,
    CreateSession,
    DescribeNode,
    DropNode,
    KillSession,
    ListNodes,
    ListSemaphores,
    ListSessions,
    NodeConfig,
    NodeDescription,
    ReleaseClaim,
    ResumeSession,
    SessionInfo,
    TopNames,
    WhyName,
)
from tenure._core.contention import merge_reports
from tenure._core.rendezvous import hash64
from tenure._core.top_report import TopReport
from tenure._core.values import SemaphoreSummary, SessionSummary
from tenure._core.why_report import WhyReport
from tenure._protocol.admin import FilesReloaded
from tenure._protocol.cluster import ClusterView, MemberView
from tenure.backends._base import Capability, SessionListener, SessionTicket
from tenure.backends._cells import Cells, service_cells
from tenure.backends._engine import engine_session
from tenure.backends._link import Doors
from tenure.backends._opener import NewSession, SessionFactory
from tenure.backends._options import WITHDRAW_WAIT
from tenure.backends._remote_admin import DoorReload, read_backup, reload_servers
from tenure.backends._remote_session import RemoteStore
from tenure.backends._remote_status import DoorStatus, cluster_status
from tenure.backends._remote_url import CLOSE_WAIT, parse
from tenure.backends._session import StoreSession
from tenure.backends._shard import Shard
from tenure.backends._standby_reads import StandbyReads
from tenure.errors import (
    WrongCellError,
)

R = TypeVar("R")

CAPABILITIES: Final = frozenset(
    {
        Capability.FENCING_TOKENS,
        Capability.FIFO,
        Capability.WATCH,
        Capability.DURABLE,
        Capability.SESSION_RECOVERY,
        Capability.LEASE_TTL,
        Capability.LOCK_DELAY,
    }
)
#: What a server has since a protocol version (an older one refuses its commands).
SINCE_VERSION: Final = {
    5: frozenset({Capability.ALL_OR_NONE, Capability.RATE_RESERVATION}),
    6: frozenset({Capability.PREFIX_WATCH, Capability.CLAIMS}),
    7: frozenset({Capability.HANDOFF, Capability.MAX_HOLD}),
    9: frozenset({Capability.WAIT_CHAINS, Capability.NAME_STATS}),
    10: frozenset({Capability.LONG_HOLDS}),
}


class TenureBackend(SessionFactory):
    """A backend whose state lives in ``tenure serve`` processes: one service (a
    server, or a cluster's doors), or independent shards."""

    scheme: ClassVar[str] = "tenure"

    def __init__(
        self,
        shards: list[Shard],
        *,
        withdraw_wait: float = WITHDRAW_WAIT,
        close_wait: float = CLOSE_WAIT,
        max_staleness: float | None = None,
        cells: Cells | None = None,
    ) -> None:
        """``max_staleness``: seconds a read may be stale, answered by a standby of a
        cluster of several doors (None: every read is the leader's); ``cells``: the
        cells of a service of several (``shards`` is then the first cell's, and each
        cell gets one: :mod:`tenure.backends._cells`)."""
        self._shards = shards
        #: The cells of a service of several (None: one service, or independent shards).
        self.cells = cells
        self.withdraw_wait = withdraw_wait
        self.max_staleness = max_staleness
        #: A cluster's standbys, for the reads that may be stale (None: independent
        #: shards, or cells, each with its own). Its doors are the URL's, and the
        #: standbys the cluster names (one door, a load balancer's, is enough).
        self.standby_reads: StandbyReads | None = None
        if cells is None and len(shards) == 1:
            link = shards[0].link
            self.standby_reads = StandbyReads(link.doors.doors, link.options, link)
        #: Seconds :meth:`aclose` may wait to close the sessions given up (``close_wait``).
        self.close_wait = close_wait
        self._closed = False

    @property
    def shards(self) -> list[Shard]:
        """Every shard: each cell's, or the independent shards, or the one service."""
        if self.cells is not None:
            return list(self.cells.shards.values())
        return self._shards

    @property
    def capabilities(self) -> frozenset[Capability]:
        """Everything the servers speak: the server journals state, so it survives
        restarts; replicated too when the service is a cluster (its Welcome says a
        role): the journal is in etcd, and another member takes over from a lost one.
        What a protocol version added (:data:`SINCE_VERSION`) only when every server
        speaks it; deadlock detection when every server speaks version 6 (an older one
        is sent no task) and looks for deadlocks (its Welcome says so)."""
        found = CAPABILITIES
        welcomes = [shard.link.welcome for shard in self.shards]
        if self.cells is not None:  # (a cell still connecting says nothing yet)
            welcomes = [welcome for welcome in welcomes if welcome is not None]
        oldest = min((w.version if w is not None else 0 for w in welcomes), default=0)
        for version, added in SINCE_VERSION.items():
            if oldest >= version:
                found |= added
        if oldest >= 6 and all(w is not None and w.deadlock_detection for w in welcomes):
            found |= {Capability.DEADLOCK_DETECTION}
        replicated = all(welcome is not None and welcome.role for welcome in welcomes)
        if replicated and (len(self.shards) == 1 or self.cells is not None):  # (each cell's)
            return found | {Capability.REPLICATED}
        return found

    def shard_for(self, node: str) -> Shard:
        """The shard that holds ``node``: the only one, its cell's as far as this client
        knows, or, sharded, the one rendezvous hashing picks (stable across clients)."""
        if self.cells is not None:
            return self.cells.shard_for(node)
        if len(self.shards) == 1:
            return self.shards[0]

        # The door as written, not the server connected: a shard's link may have
        # followed a standby's hint elsewhere. (hash64 is BLAKE2b of "door NUL node",
        # as it always was here: the partitions' rendezvous hashing shares it.)
        return max(self.shards, key=lambda shard: hash64(str(shard.link.doors), node))

    async def _route(self, node: str, send: Callable[[Shard], Awaitable[R]]) -> tuple[Shard, R]:
        """``send(shard)`` to ``node``'s shard: of a service of several cells, its cell's
        (again where a ``WRONG_CELL`` answer points: :meth:`Cells.on_node`; the first
        such answer of a service that had one cell when the client connected makes the
        client learn its cells); that shard and the answer."""
        cells = self.cells
        if cells is None:
            shard = self.shard_for(node)
            try:
                return shard, await send(shard)
            except WrongCellError:
                cells = await self._learn_cells()
                if cells is None:
                    raise
        return await cells.on_node(node, send)

    async def _learn_cells(self) -> Cells | None:
        """The cells of the service, once it has several (None: it has not, or these
        are independent shards)."""
        if self.cells is None and len(self._shards) == 1:
            first = self._shards[0]
            view = await service_cells(first)
            if self.cells is None and view is not None and len(Cells.cells_in(view)) > 1:
                self.cells = Cells(first, view, first.link.options)
                for store in first.sessions.values():  # (opened before the cells were known)
                    store.in_cells = True
        if self.cells is not None:
            await self.cells.learn()
        return self.cells

    async def _on(self, node: str, command: Command[R], *, resend: bool) -> R:
        """``command`` sent to ``node``'s shard (:meth:`_route`); sent again after a
        lost connection only if ``resend``."""
        _, answer = await self._route(node, lambda shard: shard.call(command, resend=resend))
        return answer

    async def create_node(self, name: str, config: NodeConfig) -> None:
        """Create a node on its shard."""
        await self._on(name, CreateNode(name, config), resend=False)

    def reading(self, max_staleness: float) -> TenureBackend:
        """This backend, its reads allowed ``max_staleness`` seconds of staleness (a
        view sharing its connections: :class:`~tenure.backends._base.StaleReading`)."""
        view = copy.copy(self)
        view.max_staleness = max_staleness
        return view

    def _standbys(self, shard: Shard) -> StandbyReads | None:
        """The standbys of ``shard``'s service, for its reads that allow staleness (its
        cell's, of a service of several; None: none)."""
        if self.cells is not None:
            return self.cells.standby_reads(shard)
        return self.standby_reads

    async def _read(self, shard: Shard, command: Command[R]) -> R:
        """A read: a standby's, if the client allows staleness and one answers
        (:mod:`tenure.backends._standby_reads`); else ``shard``'s (sent again after a
        lost connection)."""
        staleness = self.max_staleness
        reads = None if staleness is None else self._standbys(shard)
        if reads is None or staleness is None:
            return await shard.call(command, resend=True)
        return await reads.read(command, staleness, lambda: shard.call(command, resend=True))

    async def _read_node(self, node: str, command: Command[R]) -> R:
        """A read of ``node``'s (:meth:`_read`), from its shard (:meth:`_route`)."""
        _, answer = await self._route(node, lambda shard: self._read(shard, command))
        return answer

    async def describe_node(self, name: str) -> NodeDescription:
        """Describe a node."""
        return await self._read_node(name, DescribeNode(name))

    async def alter_node(self, name: str, changes: Mapping[str, object]) -> NodeDescription:
        """Change node settings."""
        return await self._on(name, AlterNode(name, dict(changes)), resend=True)

    async def drop_node(self, name: str, force: bool) -> None:
        """Drop a node."""
        await self._on(name, DropNode(name, force), resend=False)

    async def list_nodes(self, *, after: str, limit: int) -> list[str]:
        """A page of node names: each shard's page, merged (a node lives on one shard)."""
        pages = [await self._read(shard, ListNodes(after, limit)) for shard in self.shards]
        return heapq.nsmallest(limit, {name for page in pages for name in page.names})

    async def list_semaphores(
        self, node: str, *, prefix: str, after: str, limit: int
    ) -> list[SemaphoreSummary]:
        """A page of the node's semaphores (from the node's shard)."""
        command = ListSemaphores(node, prefix, after, limit)
        return list((await self._read_node(node, command)).semaphores)

    async def list_sessions(self, node: str, *, after: int, limit: int) -> list[SessionSummary]:
        """A page of the node's live sessions (from the node's shard)."""
        command = ListSessions(node, after, limit)
        return list((await self._read_node(node, command)).sessions)

    async def why(self, node: str, name: str, *, after: int, limit: int) -> WhyReport:
        """Who blocks ``name`` of ``node`` (from the node's shard; a read: sent again
        after a lost connection)."""
        return await self._read_node(node, WhyName(node, name, after, limit))

    async def top(self, node: str, *, window: float, sort: str, limit: int) -> TopReport:
        """The most contended names: of ``node``, from its shard; of every node (``""``),
        every shard's, merged (each server keeps its own nodes' statistics). A read:
        sent again after a lost connection."""
        command = TopNames(node, window, sort, limit)
        if node:
            return await self._read_node(node, command)
        reports = [await self._read(shard, command) for shard in self.shards]
        return reports[0] if len(reports) == 1 else merge_reports(reports, limit)

    async def kill_session(self, node: str, session_id: int) -> None:
        """End a live session as an expiry would (needs a read-write token).

        Not sent again after a lost connection: the first may have ended it already,
        and a second would then say NotFoundError.
        """
        await self._on(node, KillSession(node, session_id), resend=False)

    async def release_claim(self, node: str, name: str, claim_id: str) -> bool:
        """Release a claim by its id (ReleaseClaim, version 6: UnsupportedError from an
        older server). Not sent again after a lost connection: a first that released
        it would make the second say False (UnavailableError says the outcome is
        unknown; a caller that sends it again reads False as "not live now")."""
        command = ReleaseClaim(node, name, claim_id)
        return await self._on(node, command, resend=False)

    async def create_session(self, asked: NewSession, listener: SessionListener) -> StoreSession:
        """Open a session on the node's shard (a session lost in transit expires there)."""
        key = secrets.token_bytes(16)
        create = CreateSession(asked.node, key, asked.timeout, asked.description, asked.identity)
        shard, info = await self._at(asked.node, create)
        return self._attached(shard, asked.node, info, key, listener)

    async def resume_session(
        self, node: str, ticket: SessionTicket, listener: SessionListener
    ) -> StoreSession:
        """Take the ticket's session back (ResumeSession, sent again after a lost
        connection: taking it twice is taking it once): the server moves it to this
        connection, withdraws its waits, and tells its previous connection that it
        ended; this client then owns its holds."""
        command = ResumeSession(ticket.session_id, ticket.secret, node)
        shard, info = await self._at(node, command)
        session = self._attached(shard, node, info, ticket.secret, listener)
        try:
            session.adopt(await shard.sessions[info.session_id].commands.holds())
        except BaseException:
            await session.close()
            raise
        return session

    async def _at(self, node: str, command: Command[R]) -> tuple[Shard, R]:
        """``command`` (sent again after a lost connection) to ``node``'s shard: that
        shard (its cell's, :meth:`_on`) and the answer."""
        return await self._route(node, lambda shard: shard.call(command, resend=True))

    async def _home(self, node: str) -> Shard:
        """The shard of the cell that serves ``node`` now: where a session whose node
        moved re-attaches (:class:`RemoteStore`).

        Raises:
            UnavailableError: no cell serves it yet (it moves), or none answered.
            NotFoundError: it is gone.
        """
        shard, _ = await self._at(node, DescribeNode(node))
        return shard

    def _attached(
        self, shard: Shard, node: str, info: SessionInfo, key: bytes, listener: SessionListener
    ) -> StoreSession:
        # (The standbys looked up at each read: the client may learn cells meanwhile, and
        # the session move to another cell with its node.)
        store = RemoteStore(shard, node, info, key, lambda: self._standbys(store.shard))
        store.home = self._home
        store.in_cells = self.cells is not None
        session = engine_session(
            store, listener, "tenure", node, info, self.withdraw_wait, self.capabilities
        )
        shard.sessions[info.session_id] = store
        return session

    async def aclose(self) -> None:
        """Close every session, then every connection: within ``close_wait`` of the
        start, the sessions given up too (:meth:`Shard.aclose`)."""
        if self._closed:
            return
        self._closed = True
        until = asyncio.get_running_loop().time() + self.close_wait
        stores = [store for shard in self.shards for store in shard.sessions.values()]
        await asyncio.gather(*(store.session.close() for store in stores), return_exceptions=True)
        if self.standby_reads is not None:
            await self.standby_reads.aclose()
        if self.cells is not None:
            await self.cells.aclose()
        await asyncio.gather(*(shard.aclose(until) for shard in self.shards))


async def open_backend(url: str, options: Mapping[str, object]) -> TenureBackend:
    """Open ``tenure://`` or ``tenures://`` (TLS): one service, or (``sharded``) every
    shard; connect to it (to each)."""
    settings = parse(url, options)
    if settings.sharded:
        shards = [
            Shard(Doors([endpoint], server_hostname=settings.server_hostname), settings.link)
            for endpoint in settings.endpoints
        ]
    else:
        doors = Doors(settings.endpoints, server_hostname=settings.server_hostname)
        shards = [Shard(doors, settings.link)]
    opened: list[Shard] = []
    try:
        for shard in shards:
            await shard.link.open()
            opened.append(shard)
    except BaseException:
        for shard in opened:
            await shard.aclose()
        raise
    cells = None
    if not settings.sharded:  # (a service of several cells: a shard per cell)
        try:
            view = await service_cells(shards[0])
            if view is not None and len(Cells.cells_in(view)) > 1:
                cells = Cells(shards[0], view, settings.link)
                await cells.learn()
        except BaseException:
            await asyncio.gather(
                *(shard.aclose() for shard in (cells.shards.values() if cells else shards))
            )
            raise
    return TenureBackend(
        shards,
        withdraw_wait=settings.withdraw_wait,
        close_wait=settings.close_wait,
        max_staleness=settings.max_staleness,
        cells=cells,
    )


__all__ = [
    "CAPABILITIES",
    "SINCE_VERSION",
    "ClusterView",
    "DoorReload",
    "DoorStatus",
    "FilesReloaded",
    "MemberView",
    "Shard",
    "TenureBackend",
    "cluster_status",
    "open_backend",
    "read_backup",
    "reload_servers",
]
