"""One server of a cluster, from start to exit: a standby, a leader, a standby again.

A :class:`ClusterMember` holds what lasts across its terms: the connection to etcd,
the listening sockets (a connection that arrives between two terms waits in the
backlog), the HTTP endpoint, the :class:`~tenure.server._cluster.role.ClusterRole`
and the :class:`~tenure.server._cluster.follower.Follower`. Each term is one
:class:`~tenure.server._serve.Server` on those sockets:

* **Standby.** The follower keeps the engine warm from the log; the server's
  host (:func:`~tenure.server._cluster.hosts.standby_host`) refuses every command,
  naming the leader. Meanwhile the member is a candidate (a key on its lease, as etcd's
  ``concurrency.Election``) and waits until no candidate is ahead of it.
* **Leader.** Elected, it reads the log's tail the watch had not brought, appends
  one record of its takeover (the engine resumed on its clock: every session's
  window starts afresh, as after a restart of a single server), and serves the same
  engine through the leader's host (:func:`~tenure.server._cluster.hosts.leader_host`),
  every change appended to etcd under the fence of its term.
* **Stepping down.** When its lease could have ended (no renewal answered in time),
  etcd says it is gone, or an append is refused, the server stops at once (nothing
  more is acknowledged, clients are told ``NOT_LEADER``), the member revokes its
  lease if it can (a successor is elected at once) and becomes a standby again,
  with an engine loaded afresh from etcd (what it had not appended is forgotten).

SIGHUP reloads the TLS and auth files of this member's current server (each member
reads its own); its next terms keep them. SIGTERM or SIGINT ends the member: a
leader first lets what it owes reach etcd and its clients, then steps down and
revokes its lease, so that a successor takes over without waiting for the lease to
run out.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Final, TypeVar

from tenure._core.snapshot import resume
from tenure._etcd.client import LeaseNotFoundError
from tenure.errors import TenureError, UnavailableError
from tenure.server._audit import AuditLog
from tenure.server._cluster.appender import Appender
from tenure.server._cluster.follower import Follower
from tenure.server._cluster.freshness import Freshness
from tenure.server._cluster.hosts import follow_into, leader_host, standby_host, unfollow
from tenure.server._cluster.journal import ClusterJournal
from tenure.server._cluster.keys import LogEntry, ServerRecord
from tenure.server._cluster.lease import MemberLease
from tenure.server._cluster.links import CellLinks
from tenure.server._cluster.lookout import Lookout
from tenure.server._cluster.mover import NodeMover
from tenure.server._cluster.role import ClusterRole
from tenure.server._cluster.state_process import StateProcessStarter, spawn
from tenure.server._cluster.store import Appended
from tenure.server._config.cluster_url import ClusterUrl, without_secrets
from tenure.server._config.serve_config import ServeConfig
from tenure.server._logs import announce_settings
from tenure.server._observe import ServerObserver
from tenure.server._reception import ListenError, Sockets
from tenure.server._role import STANDBY
from tenure.server._serve import Server
from tenure.server._server_acts import NativeActs
from tenure.server._server_host import ServerHost

if TYPE_CHECKING:  # the server extra: only with --http-port
    from tenure.server._http.endpoint import Endpoint

log = logging.getLogger("tenure.cluster")

__all__ = ["ClusterMember"]

T = TypeVar("T")

#: How long a revoke of this member's lease may take (at most a lease TTL), in
#: seconds: past it the lease runs out on its own; a stop need not wait for that.
RESIGN_WAIT: Final = 2.0
#: The longest pause between two tries of a call etcd did not answer, in seconds.
MAX_PAUSE: Final = 2.0


class ClusterMember:
    """See the module docstring."""

    def __init__(
        self,
        config: ServeConfig,
        url: ClusterUrl,
        endpoint: Endpoint | None,
        audit: AuditLog | None = None,
        version: str = "",
        start_process: StateProcessStarter = spawn,
    ) -> None:
        """``start_process``: what starts a leader's snapshot process
        (:mod:`~tenure.server._cluster.state_process`; the simulation's runs in-process)."""
        self.start_process = start_process
        self.config = config
        self.version = version  # the server's, stated in its backups
        self.audit = audit  # the audit log of every term's server (None: off)
        self.url = url
        self.endpoint = endpoint
        self.loop = asyncio.get_running_loop()
        self.links = CellLinks(config, url)  # its cell's etcd, and the service's directory
        self.conn, self.store = self.links.conn, self.links.store
        self.hub, self.keepalive = self.links.hub, self.links.keepalive
        self.follower = Follower(self.store, self.hub)
        self.role: ClusterRole | None = None
        self.instance_id = b""
        self.secret = self.relay_secret = b""  # the cluster's (faces), the service's (relays)
        self.server: Server | None = None
        self.lease: MemberLease | None = None
        self.term = 0
        #: Set when a candidate key came or went (the lookout's, once it runs).
        self._candidates = asyncio.Event()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._fresh = True  # the follower's engine is the log's (not a leader's since)
        self._standing: MemberLease | None = None  # the lease of the latest candidacy

    # -- the whole life -------------------------------------------------------------------

    def stop(self) -> None:
        """End the member (a signal): see the module docstring."""
        self._stop.set()

    async def run(self, sockets: Sockets, me: ServerRecord) -> int:
        """Serve as a member until :meth:`stop`; the exit code."""
        self.role = ClusterRole(self.url.name, me, self.links.directory)
        self.role.applied = lambda: self.follower.applied
        fields = {
            "cluster": self.url.name,
            "etcd": without_secrets(",".join(self.url.connection.endpoints)),
            "member": me.name,
            "advertise": me.address,
        }
        log.info("joining the cluster", extra={"event": "cluster_joining", "fields": fields})
        try:
            await self._retrying(self.links.authenticate, "authenticating to etcd")
            self.instance_id = await self._retrying(self.store.instance_id, "reading the id")
            self.secret = await self._retrying(self.store.secret, "reading the secret")
            self.relay_secret = await self._retrying(self.links.directory.secret, "reading secrets")
            await self._retrying(self.follower.load, "loading the cluster's state")
            lookout = Lookout(self.store, self.hub, self._role(), self._current_record)
            self._candidates = lookout.candidates
            self._tasks = lookout.start()
            self._tasks += self.links.directory.start(lambda: self._record(self._role().name))
            while not self._stop.is_set():
                if await self._standby_term(sockets):
                    await self._leader_term(sockets)
            return 0
        except _StoppedError:
            return 0
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.follower.stop()
            await self.links.close()

    # -- standby --------------------------------------------------------------------------

    async def _standby_term(self, sockets: Sockets) -> bool:
        """Serve as a standby until elected (True) or stopped (False).

        A stop that comes while the standby's server steps down, after the election
        was won, wins: the member resigns (no stale candidate stays ahead of the
        others) and does not lead (False), so no term starts without its lease.
        """
        role = self._role()
        role.stand_by()
        follower = self.follower
        if not self._fresh:  # a leader's engine had changes etcd may not have: reload
            await self._retrying(follower.load, "loading the cluster's state")
            self._fresh = True
        follower.start()
        role.applied = lambda: follower.applied
        role.freshness = Freshness(follower)  # (the reads it answers: _net.stale_reads)
        metrics = self._metrics()
        host = standby_host(self.config, follower.engine, role, metrics)
        server = await self._start(host, sockets, role, metrics)
        follow_into(follower, host, server.native.stale.watches)  # (a reload; the watches)
        try:
            while not self._stop.is_set():
                lease = await self._new_lease()
                stand = partial(self.store.stand, lease.lease_id, self._record(STANDBY))
                try:
                    term = await self._retrying(stand, "standing")
                except LeaseNotFoundError:
                    # Its TTL ran out before etcd took the candidacy (etcd slow or cut
                    # off since the grant): a new lease, and stand again. (Raised on, it
                    # ended the member for good: the simulation's cluster seed 48635,
                    # tests/sim/test_found.py.)
                    self.keepalive.remove(lease.lease_id, lease)
                    lease.lease_gone()
                    log.warning("this member's lease in etcd ended before it stood; again")
                    continue
                if await self._until_elected(lease, term):
                    self.lease, self.term = lease, term
                    break
                if lease.lost.is_set():
                    log.warning("this member's lease in etcd ended; standing again")
        finally:
            role.freshness = None
            unfollow(follower)
            await server.step_down("the standby's term ended")
            if self._stop.is_set() and self._standing is not None:
                await self._resign(self._standing)  # no stale candidate ahead of the others
        # (Elected, then stopped while the server stepped down: the lease was let go.)
        return self.lease is not None and not self._stop.is_set()

    async def _until_elected(self, lease: MemberLease, term: int) -> bool:
        """Wait until no candidate is ahead of ``term`` (True), or the lease is lost or
        the member stops (False)."""
        while not (self._stop.is_set() or lease.lost.is_set()):
            failed = self.follower.failed
            if failed is not None:
                raise failed
            self._candidates.clear()
            try:
                ahead = await self._unless_stopped(self.store.ahead_of(term))
            except UnavailableError as error:
                log.debug("reading the election: %s", error)
                ahead = term
            if ahead is None and self.loop.time() < lease.deadline():
                return True
            await _first(
                self._candidates.wait(),
                self._stop.wait(),
                lease.lost.wait(),
                timeout=lease.ttl / 2,
            )
        return False

    # -- leader ---------------------------------------------------------------------------

    async def _leader_term(self, sockets: Sockets) -> None:
        """Lead until the lease could end, an append is refused, or the member stops."""
        lease, term, role = self.lease, self.term, self._role()
        if lease is None:  # (stopped as it was elected: its standby term resigned)
            return
        follower = self.follower
        await follower.stop()
        try:
            started = time.perf_counter()
            await self._until_deadline(follower.catch_up(), lease)
            index = follower.applied + 1
            engine = follower.engine
            self._fresh = False
            now = self.loop.time()
            caught_up = time.perf_counter()
            engine.take_effects()
            resume(engine, now)  # every window and lease TTL starts afresh, as after a restart
            gc.freeze()  # (the state lives on: as a single server's after its recovery)
            spans = {
                "catch_up_s": round(caught_up - started, 6),
                "resume_s": round(time.perf_counter() - caught_up, 6),
            }
            takeover = await self._until_deadline(self.links.takeover(engine, now), lease)
            entry = LogEntry(term, takeover)
            result = await self._until_deadline(
                self.store.append(index, entry, lease.lease_id), lease
            )
        except (UnavailableError, TimeoutError) as error:
            log.warning("elected, but etcd did not answer in time (%s); standing again", error)
            await self._resign(lease)
            return
        if result is not Appended.DONE:
            log.warning("elected, but the log refused the takeover (%s)", result.value)
            await self._resign(lease)
            return
        appender = Appender(
            self.store,
            lease=lease.lease_id,
            term=term,
            next_index=index + 1,
            max_entry=self.config.cluster_max_entry,
            deadline=lease.deadline,
        )
        journal = ClusterJournal(
            self.store,
            appender,
            snapshot_every=self.config.cluster_snapshot_every,
            cluster=self.config.cluster,
            cell=(self.config.cell, self.config.cell_etcd),
            max_nodes=self.config.max_nodes,
            start_process=self.start_process,
        )
        metrics = self._metrics()
        if self.endpoint is not None:
            journal.on_snapshot = self.endpoint.metrics.snapshot_written
        role.lead(term)
        role.applied = lambda: appender.last_index
        host = leader_host(self.config, journal, engine, role, metrics)
        server = await self._start(host, sockets, role, metrics)
        fields: dict[str, object] = {
            "term": term,
            "index": index,
            "sessions": len(engine.sessions),
            **spans,  # (what the takeover took: a failover's parts, bench.micro.failover)
        }
        log.info("leading the cluster", extra={"event": "cluster_leading", "fields": fields})
        # (its nodes in the service's directory: those made before cells, or a claim lost)
        held = [node for node in engine.nodes if node not in engine.moving]  # (moves: .mover)
        mover = NodeMover(self.links.directory, host.host, self.config.cluster_max_entry)
        tasks = [
            asyncio.ensure_future(self.links.register(held)),
            asyncio.ensure_future(mover.run()),
        ]
        try:
            why = await self._while_leading(server, lease)
        finally:
            for task in tasks:
                task.cancel()
        if self._stop.is_set():
            host.flush()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.shutdown_grace):
                    await host.settled()  # what it owes reaches etcd and its clients
        await server.step_down(why)
        role.stand_by()
        fields = {"term": term, "why": why, "index": appender.last_index}
        log.warning("stepped down", extra={"event": "cluster_stepped_down", "fields": fields})
        await self._resign(lease)

    async def _while_leading(self, server: Server, lease: MemberLease) -> str:
        """Until this leader must stop; why."""
        done = asyncio.ensure_future(server.wait())
        try:
            while True:
                left = lease.deadline() - self.loop.time()
                if left <= 0:
                    return "this leader's lease may have ended in etcd"
                await _first(done, self._stop.wait(), lease.lost.wait(), timeout=left)
                if self._stop.is_set():
                    return "the leader is shutting down"
                if lease.lost.is_set():
                    return "etcd ended this leader's lease"
                if done.done():
                    return server.stepped_down or "the leader's server stopped"
        finally:
            done.cancel()

    async def _until_deadline(self, call: Awaitable[T], lease: MemberLease) -> T:
        """``call``, given up (TimeoutError) once the lease could have ended."""
        async with asyncio.timeout_at(lease.deadline()):
            return await call

    async def _resign(self, lease: MemberLease) -> None:
        """Let go of ``lease`` (and with it the candidacy): a successor is elected at once.

        Best effort: a lease etcd already ended (its TTL ran out while this member was
        paused or cut off: "lease not found"), or an etcd out of reach, leaves nothing
        to do but wait for the TTL; the member goes on as a standby either way.
        """
        self.keepalive.remove(lease.lease_id, lease)
        lease.lease_gone()
        with contextlib.suppress(TenureError, TimeoutError):
            async with asyncio.timeout(min(self.config.cluster_lease_ttl, RESIGN_WAIT)):
                await self.store.revoke(lease.lease_id)
        self.lease = None

    async def _new_lease(self) -> MemberLease:
        """A new lease, kept alive from now on."""
        ttl = self.config.cluster_lease_ttl
        sent_at = self.loop.time()
        lease_id = await self._retrying(lambda: self.store.grant(ttl), "granting a lease")
        lease = MemberLease(lease_id, ttl, sent_at)
        self.keepalive.add(lease)
        self._standing = lease
        return lease

    # -- helpers --------------------------------------------------------------------------

    def _role(self) -> ClusterRole:
        assert self.role is not None, "run() first"
        return self.role

    def _record(self, role: str) -> ServerRecord:
        me = self._role().me
        applied = self._role().applied()
        now = time.time()
        server = self.server
        if server is not None and isinstance(server.served.commit.writer, Appender):
            # A leader's (it appends to etcd): the engine's times are on its heard time
            # (server/_net/pauses.py), which its host turns into UNIX time.
            shift = server.host.wall_shift()
        else:
            shift = now - self.loop.time()  # (as a host's wall_shift before any stall)
        return me.rewritten(role, applied, now, shift)

    def _current_record(self) -> tuple[ServerRecord, int] | None:
        """This member's record now, and the lease it lives on (None: no lease)."""
        lease = self.lease if self.lease is not None else self._standing
        if lease is None or lease.lost.is_set():
            return None
        return self._record(self._role().name), lease.lease_id

    def _metrics(self) -> ServerObserver | None:
        return None if self.endpoint is None else self.endpoint.metrics

    async def _start(
        self,
        served: ServerHost,
        sockets: Sockets,
        role: ClusterRole,
        metrics: ServerObserver | None,
    ) -> Server:
        """Start a term's server of ``served`` (its host) on the member's sockets; the server.

        Raises:
            ListenError: a listening face cannot bind its port.
        """
        before = self.server
        first = before is None
        # (A later term keeps what was loaded: a file broken since must not end it.)
        loaded = None if before is None else (before.gate.tls, before.gate.tokens)
        server = self.server = Server(
            self.config,
            served,
            sockets,
            self.instance_id,
            observer=metrics,
            role=role,
            secret=self.secret,
            relay_secret=self.relay_secret,
            audit=self.audit,
            loaded=loaded,
        )
        # (tenure backup and reload over the native protocol: a standby reloads its own
        # files; backups are the leader's)
        also = (self.endpoint.prepare_tls,) if self.endpoint is not None else ()
        server.act_with(NativeActs(server, also, self.version))
        try:
            host, port = await server.start()
        except OSError as error:
            raise ListenError(server.binding or "native", error) from error
        if self.endpoint is not None:
            self.endpoint.serving(server)
        if first:  # (as a single server says it, once: the ports stay across terms)
            fields = {
                "host": host,
                "port": port,
                **{f"{name}_port": face_port for name, face_port in server.faces.ports().items()},
                "instance_id": self.instance_id.hex(),
                "cluster": self.url.name,
                "member": self._role().me.name,
            }
            announce_settings()  # the settings' line, held until now (server._logs)
            log.info("listening", extra={"fields": fields})
        return server

    async def _retrying(self, make: Callable[[], Awaitable[T]], what: str) -> T:
        """``make()`` until etcd answers it (the member waits for etcd, as a standby
        would); raises :class:`_StoppedError` if the member stops meanwhile."""
        pause = 0.1
        while True:
            if self._stop.is_set():
                raise _StoppedError
            try:
                return await self._unless_stopped(make())
            except UnavailableError as error:
                log.warning("%s: %s; trying again", what, error)
            await _first(self._stop.wait(), timeout=pause)
            pause = min(pause * 2, MAX_PAUSE)

    async def _unless_stopped(self, call: Awaitable[T]) -> T:
        """``call``, abandoned (:class:`_StoppedError`) as soon as the member stops: a call
        etcd does not answer is tried for ``connect_timeout`` by the connection, and a
        SIGTERM must not wait for that."""
        task = asyncio.ensure_future(call)
        stopped = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise _StoppedError
        return task.result()


class _StoppedError(Exception):
    """The member was told to stop while it waited for etcd."""


async def _first(*waits: Awaitable[object], timeout: float) -> None:
    """Until the first of ``waits`` is done, or ``timeout`` seconds. The coroutines among
    them are cancelled then; futures and tasks given are left as they are."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    mine = [task for task, wait in zip(tasks, waits, strict=True) if task is not wait]
    try:
        await asyncio.wait(tasks, timeout=max(timeout, 0.0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in mine:
            if not task.done():
                task.cancel()
