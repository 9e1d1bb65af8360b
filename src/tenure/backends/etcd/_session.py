"""A session on etcd: a lease, a record with a sequence number, and what it holds.

**Session = lease.** Its TTL is the recovery window rounded up to whole seconds,
at least 2 (etcd's granularity); :attr:`EtcdSession.recovery_window` reports it. The
session id is the lease id. The record ``n/<node>/sess/<sid>`` (on the lease) holds
the description, the window and ``seq``; every mutating Txn of the session
compares the record's mod_revision, which each re-attach bumps (``seq`` + 1), so a
Txn of a connection that was replaced cannot act (etcd has no per-lease secret).

**Loss.** The keepalive stream renews the lease at a third of its TTL. A renewal
answered with TTL <= 0 means etcd let the lease go: the session is lost. And, as
``tenure://``'s client does (``_remote_session``, "The local deadline"), the
session is declared expired on this client's monotonic clock a full TTL after
the *send* time of the last renewal etcd answered: etcd cannot have kept it longer,
so the work under its leases is cancelled then, not when etcd is heard from again.
The session also watches its own record, which etcd deletes with the lease: a lease
etcd let go is heard as soon as the event arrives, whatever this client's timers.
A session whose node was dropped (by force) ends with SessionClosedError, its
grants lost with LeaseLostError and its waits with NotFoundError, as the engine
does; one whose lease expired ends with SessionExpiredError.

**Re-attach.** After a new keepalive stream opens (a failover), the session asks
LeaseTimeToLive: a live lease is kept (renewed as before) and ``seq`` bumped (a Txn
comparing the record's mod_revision with our last bump's).

**Tickets and resume** (:mod:`tenure.backends.etcd._resume`). The record also keeps
``key``, the SHA-256 of the session's secret (the ticket carries the secret), and
``owner``, a random id of the client object that owns the session now. A resume
by another process bumps ``seq`` with its own ``owner``: from then on every Txn of
the previous owner fails its compare, and the previous owner, seeing a record
that is not its own (in that Txn's failure, in its watch of the record, or when
it diagnoses), knows it was fenced off and loses the session. It never revokes a
lease it no longer owns: ending a session deletes the record under a compare of
its own bump first.

Acquiring is in :mod:`tenure.backends.etcd._acquire` and ``._wait``, releasing and
losing grants in ``._holds``, administration in ``._admin``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from aetcd.rpc import rpc_pb2

from tenure._core.values import NO_IDENTITY, ClientIdentity, NodeConfig, SemaphoreDescription
from tenure.backends._base import Grant, HeldGrant, SessionListener, SessionTicket
from tenure.backends._store_listing import killed_message
from tenure.backends._store_session import StoreSession
from tenure.backends.etcd import _acquire, _admin, _holds, _record
from tenure.backends.etcd._keys import (
    EQUAL,
    MOD,
    get,
    get_prefix,
)
from tenure.backends.etcd._node import config_of
from tenure.backends.etcd._queue import Held, SemState
from tenure.backends.etcd._watch import EtcdWatch
from tenure.errors import (
    LostError,
    NotFoundError,
    PreconditionFailedError,
    SessionClosedError,
    SessionExpiredError,
    TenureError,
)

if TYPE_CHECKING:
    from tenure.backends.etcd import EtcdBackend
    from tenure.backends.etcd._node import NodeView

__all__ = ["EtcdSession"]

log = logging.getLogger("tenure.etcd")
_DELETE = 1  # mvccpb.Event.DELETE


class EtcdSession(StoreSession[Held]):
    """A :class:`~tenure.backends._base.BackendSession` on etcd (module docstring)."""

    def __init__(
        self,
        backend: EtcdBackend,
        node: str,
        lease_id: int,
        ttl: int,
        listener: SessionListener,
        *,
        record_rev: int,
        view: NodeView,
        confirmed_at: float,
        seq: int,
        description: str,
        window: float,
        secret: bytes,
        owner: bytes,
        record_created: int | None = None,
        identity: ClientIdentity = NO_IDENTITY,
        created_at: float | None = None,
    ) -> None:
        self.log = log
        self.backend = backend
        self.conn = backend.conn
        self.layout = backend.layout
        self.node = node
        self.lease_id = lease_id
        #: The lease's TTL in seconds: the recovery window rounded up (at least 2).
        self.ttl = ttl
        self.window = window
        self.description = description
        #: Who runs the client that opened it, and when (its record keeps both).
        self.identity = identity
        self.created_at = created_at
        #: Who hears of losses (the public session).
        self.listener = listener
        self.record_key = self.layout.session(node, lease_id)
        self.seq = seq
        self.seq_rev = record_rev  # the record's mod_revision after our last bump
        self.record_created = record_rev if record_created is None else record_created
        #: The ticket's secret (the record keeps its digest) and this object's owner id.
        self.secret = secret
        self.owner = owner
        #: The node's settings and forced deletes, shared by this client's sessions.
        self.view = view
        self.node_rev = view.node_rev  # the node's create_revision: dropped and re-made = gone
        self._confirmed = confirmed_at
        self.ended: LostError | None = None
        #: What a wait of this session fails with once it ended (NotFound if dropped).
        self.wait_error: TenureError | None = None
        self.lost = asyncio.Event()
        #: Grants by (name, hold); requests in progress by (name, hold).
        self.held: dict[tuple[str, int], Held] = {}
        self.busy: set[tuple[str, int]] = set()
        self.watches = 0
        self._tasks: set[asyncio.Future[Any]] = set()
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._arm_deadline()
        # etcd deletes the record with the lease: its deletion is heard at once, not
        # when a timer of this client next fires (timers sleep through a clock that
        # jumped, a process that was paused), so work under a lease etcd let go is
        # cancelled as soon as the news can arrive.
        self._record_watch = backend.watches.watch(self.record_key, b"", record_rev + 1)
        self._record_task = asyncio.create_task(self._follow_record())

    @property
    def session_id(self) -> int:
        """The session's id: its etcd lease id."""
        return self.lease_id

    @property
    def recovery_window(self) -> float:
        """The window in force: the lease's TTL (the one asked for, rounded up)."""
        return float(self.ttl)

    # -- the lease (Renewable, for the keepalive stream) --------------------------------

    def renewed(self, sent_at: float) -> None:
        """etcd renewed the lease at a request sent at ``sent_at``: move the deadline."""
        self._confirmed = max(self._confirmed, sent_at)

    def lease_gone(self) -> None:
        """etcd says the lease is gone: find out why, then lose the session."""
        self.spawn(self.diagnose())

    def reconnected(self) -> None:
        """A new keepalive stream: keep the lease if it lives, and bump ``seq``."""
        self.spawn(_record.reattach(self))

    def fenced(self) -> None:
        """Another client resumed this session with its ticket: lose it, let nothing go."""
        self.lose(
            SessionExpiredError(
                f"session {self.lease_id} was resumed by another client (with its ticket): "
                "this client is fenced off"
            )
        )

    def _deadline_span(self) -> float:
        return self.ttl

    def _deadline_passed(self) -> None:
        self.lose(
            SessionExpiredError(
                f"session {self.lease_id}: etcd ({self.conn.endpoint}) has not renewed its "
                f"lease for its TTL ({self.ttl}s); it may have expired it"
            )
        )
        self.spawn(_record.let_go(self))  # etcd may still hold it: let go as soon as it hears us

    async def diagnose(self) -> None:
        """The session's record or lease is gone: lose it, as dropped or as expired."""
        if self.ended is not None:
            return
        reply = await self.conn.txn(
            [],
            [
                get(self.record_key),
                get(self.layout.config(self.node)),
                get(self.layout.killed(self.node, self.lease_id)),
            ],
        )
        record, config = reply.responses[0].response_range, reply.responses[1].response_range
        if record.kvs and int(record.kvs[0].create_revision) == self.record_created:
            if not _record.owns(self, record.kvs[0]):
                self.fenced()  # resumed by another client: alive, but not ours
            return  # alive after all
        if not config.kvs or int(config.kvs[0].create_revision) != self.node_rev:
            self.dropped()
        elif reply.responses[2].response_range.kvs:  # kill_session's marker
            self.lose(SessionExpiredError(killed_message(self.lease_id)))
        else:
            self.lose(SessionExpiredError(f"session {self.lease_id}: its etcd lease expired"))

    def _end(self, error: LostError, wait_error: TenureError) -> None:
        self.ended = error
        self.wait_error = wait_error
        self.lost.set()
        # (Only ours: a resume in this same client renews the lease for its own session.)
        self.backend.keepalive.remove(self.lease_id, self)
        if self.backend.sessions.get(self.lease_id) is self:
            del self.backend.sessions[self.lease_id]
        self._disarm_deadline()
        self._record_watch.cancel()
        if self._record_task is not asyncio.current_task():
            self._record_task.cancel()
        self.backend.release_view(self.view)

    async def _follow_record(self) -> None:
        watcher = self._record_watch
        while self.ended is None:
            await watcher.wait()
            events, reset = watcher.drain()
            if reset or any(
                event.type == _DELETE or not _record.owns(self, event.kv) for event in events
            ):
                try:
                    await self.diagnose()
                except TenureError as error:  # etcd unreachable: the deadline decides
                    log.info("session %d: record check failed: %s", self.lease_id, error)
                if reset and self.ended is None:
                    watcher.restart(self.seq_rev + 1)

    # -- Txns of this session -------------------------------------------------------

    async def txn(self, compares: list[Any], success: list[Any], failure: list[Any]) -> Any:
        """A Txn that also compares the session's ``seq``; raises the loss if it is gone.

        ``failure`` ops come after a read of the session's record: the caller finds
        its own at ``responses[1:]``. A Txn that failed because a re-attach bumped
        ``seq`` meanwhile is sent again.
        """
        request = self.new_txn()
        request.compare.extend(compares)
        request.success.extend(success)
        request.failure.extend(failure)
        return await self.send(request)

    def new_txn(self) -> Any:
        """A TxnRequest with the session's compare and read in place (:meth:`send` it).

        Callers add their compares and ops in place (``request.compare.add(...)``,
        :func:`~tenure.backends.etcd._keys.add_put`...): building a request in one
        message, not from messages copied into it, is most of what an acquire costs
        this client.
        """
        request = rpc_pb2.TxnRequest()
        request.compare.add(key=self.record_key, target=MOD, result=EQUAL, mod_revision=0)
        request.failure.add().request_range.key = self.record_key
        return request

    async def send(self, request: Any) -> Any:
        """Send a request of :meth:`new_txn` (see :meth:`txn`)."""
        while True:
            self.check_alive()
            used = request.compare[0].mod_revision = self.seq_rev
            reply = await self.conn.send_txn(request)
            if reply.succeeded:
                return reply
            record = reply.responses[0].response_range
            if not record.kvs:
                await self.diagnose()
                self.check_alive()
                continue
            if int(record.kvs[0].mod_revision) != used:
                if self.seq_rev != used:
                    continue  # re-attached meanwhile: again, with the new seq
                # Bumped by our re-attach (in flight, or its answer lost): again, at
                # its revision; or by a resume elsewhere: fenced off, raise the loss.
                if not _record.adopt(self, record.kvs[0]):
                    await self.diagnose()
                    self.check_alive()
                continue
            return reply

    async def config(self) -> NodeConfig:
        """The node's settings, read now (for administration; acquires use the view)."""
        reply = await self.conn.range(rpc_pb2.RangeRequest(key=self.layout.config(self.node)))
        if not reply.kvs:
            await self.diagnose()
            self.check_alive()
            raise NotFoundError(f"node {self.node!r} does not exist")
        self.view.update(reply.kvs[0])
        return config_of(reply.kvs[0])

    async def read(self, name: str) -> SemState:
        """The semaphore's state, read now."""
        prefix = self.layout.semaphore(self.node, name)
        reply = await self.conn.txn([], [get_prefix(prefix)])
        kvs = reply.responses[0].response_range.kvs
        return SemState.parse(name, prefix, kvs, int(reply.header.revision))

    async def count_semaphores(self) -> int:
        """How many semaphores the node has (names with a record or a request), read now;
        the view keeps the count for its bound."""
        prefix = self.layout.semaphores(self.node)
        reply = await self.conn.txn([], [get_prefix(prefix, keys_only=True)])
        kvs = reply.responses[0].response_range.kvs
        count = len({bytes(kv.key)[len(prefix) :].split(b"/")[0] for kv in kvs})
        self.view.counted = (count, int(reply.header.revision))
        return count

    # -- acquire, restate, release, renew -------------------------------------------

    async def acquire(
        self, name: str, *, count: int, data: bytes, timeout: float | None, ephemeral: bool
    ) -> Grant | None:
        """See :meth:`tenure.backends._base.BackendSession.acquire`."""
        self.check_alive()
        hold = self.free_hold(name)
        return await _acquire.request(self, name, hold, count, data, timeout, ephemeral)

    async def restate(
        self, name: str, grant: Grant, *, count: int, data: bytes, timeout: float | None
    ) -> Grant | None:
        """See :meth:`tenure.backends._base.BackendSession.restate`."""
        self.check_alive()
        return await _acquire.request(self, name, grant.hold, count, data, timeout, False)

    async def release(self, name: str, grant: Grant) -> bool:
        """See :meth:`tenure.backends._base.BackendSession.release`."""
        self.check_alive()
        held = self.held.get((name, grant.hold))
        if held is not None and (name, grant.hold) not in self.busy:
            # No upgrade of the hold is in flight: its one request and grant are all.
            return await _holds.delete(self, name, grant.hold, [held.suffix])
        return await self.drop_hold(name, grant.hold)

    async def drop_hold(self, name: str, hold: int) -> bool:
        """Delete every key of hold ``hold`` (both requests, both grants); whether any was."""
        return await _holds.drop_hold(self, name, hold)

    async def renew(self, name: str, grant: Grant) -> float:
        """Grants here have no TTL of their own (no LEASE_TTL): nothing to renew."""
        self.check_alive()
        raise PreconditionFailedError(f"the grant of {name!r} has no lease TTL to renew")

    # -- semaphores (tenure.backends.etcd._admin) --------------------------------

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """See :meth:`tenure.backends._base.BackendSession.create_semaphore`."""
        return await _admin.create_semaphore(self, name, limit, data)

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """See :meth:`tenure.backends._base.BackendSession.update_semaphore`."""
        return await _admin.update_semaphore(self, name, data)

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """See :meth:`tenure.backends._base.BackendSession.delete_semaphore`."""
        return await _admin.delete_semaphore(self, name, force)

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """See :meth:`tenure.backends._base.BackendSession.describe_semaphore`."""
        return await _admin.describe_semaphore(self, name, owners=owners, waiters=waiters)

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> EtcdWatch:
        """See :meth:`tenure.backends._base.BackendSession.watch_semaphore`."""
        return await _admin.watch_semaphore(self, name, data=data, owners=owners, waiters=waiters)

    # -- grants lost to a forced delete (told by the node's view; _holds) ------------

    def grants_gone(self, name: str, *, before: int | None = None) -> None:
        """``name`` was deleted by force (at revision ``before``): its grants are lost."""
        _holds.grants_gone(self, name, before)

    async def check_grants(self) -> None:
        """Events of the node may have been missed: is every grant still there?"""
        await _holds.check_grants(self)

    # -- ending ---------------------------------------------------------------------

    async def close(self) -> None:
        """See :meth:`tenure.backends._base.BackendSession.close`: revoke the lease."""
        if self.ended is not None:
            return
        closed = SessionClosedError(f"session {self.lease_id} was closed")
        self._end(closed, closed)
        # Revoking deletes every key on the lease at once: record, requests, grants.
        # Shielded: a body that closes its own session is cancelled meanwhile.
        await asyncio.shield(asyncio.ensure_future(_record.let_go(self)))

    # -- tickets ----------------------------------------------------------------------

    def ticket(self) -> SessionTicket:
        """See :meth:`tenure.backends._base.BackendSession.ticket`: lease id and secret."""
        self.check_alive()
        return SessionTicket("etcd", self.node, self.lease_id, self.secret)

    async def holds(self) -> list[HeldGrant]:
        """See :meth:`tenure.backends._base.BackendSession.holds`: each held key, read now."""
        self.check_alive()
        return await _holds.read_holds(self)
