"""A session on etcd: a lease, a record with a sequence number, and what it holds.

**Session = lease.** Its TTL is the recovery window rounded up to whole seconds,
at least 2 (etcd's granularity): the session's window in force. The session id is
the lease id. The record ``n/<node>/sess/<sid>`` (on the lease) holds the
description, the window and ``seq``; every mutating Txn of the session compares
the record's mod_revision, which each re-attach bumps (``seq`` + 1), so a Txn of a
connection that was replaced cannot act (etcd has no per-lease secret)
(:mod:`._record`, :mod:`._txns`).

**Loss.** The keepalive stream renews the lease at a third of its TTL. A renewal
answered with TTL <= 0 means etcd let the lease go: the session is lost. The local
deadline (the session's rule) counts a TTL from the send time of the last renewal
etcd answered. The session also watches its own record, which etcd deletes with
the lease. A session whose node was dropped (by force) ends as dropped; one whose
lease expired with SessionExpiredError.

**Re-attach.** After a new keepalive stream opens (a failover), the session asks
LeaseTimeToLive: a live lease is kept (renewed as before) and ``seq`` bumped.

**Tickets and resume.** The record also keeps ``key``, the SHA-256 of the session's
secret (the ticket carries the secret), and ``owner``, a random id of the client
object that owns the session now. A resume by another process bumps ``seq`` with
its own ``owner``: from then on every Txn of the previous owner fails its compare,
and the previous owner, seeing a record that is not its own, knows it was fenced
off and loses the session. It never revokes a lease it no longer owns.

The store is the session's :class:`~tenure.backends._store.Store` and its
:class:`~tenure.backends._store.Acquiring`, and composes the session's parts, each
an object with one job, given only what it uses (its narrow protocol in
:mod:`._types`): the record, the Txn sender, the
:class:`~tenure.backends.etcd._acquire.SingleAcquirer` (and its
:class:`~tenure.backends.etcd._wait.SingleWaiter`), the lock_all's
:class:`~tenure.backends.etcd._set.SetAcquirer` (and its
:class:`~tenure.backends.etcd._set_wait.SetWaiter`), the
:class:`~tenure.backends.etcd._holds.Holds`, and the
:class:`~tenure.backends.etcd._admin.Admin` (the session's
:class:`~tenure.backends._store.Administering` and
:class:`~tenure.backends._store.Watching`) with its
:class:`~tenure.backends.etcd._claims.Claims`.
"""

from __future__ import annotations

import itertools
import logging
from typing import Protocol

from tenure._etcd.client import EtcdClient
from tenure._etcd.streams import KeepAlive, WatchHub
from tenure.backends._base import Grant, HeldGrant
from tenure.backends._ledger import Pending
from tenure.backends._store import BoundSession, Enqueued, InQueue, Withdrawal
from tenure.backends._turns import Turns
from tenure.backends.etcd._acquire import SingleAcquirer
from tenure.backends.etcd._admin import Admin
from tenure.backends.etcd._claims import Claims
from tenure.backends.etcd._feed import Feeds
from tenure.backends.etcd._hints import Hints
from tenure.backends.etcd._holds import Holds
from tenure.backends.etcd._keys import Layout
from tenure.backends.etcd._node import NodeView
from tenure.backends.etcd._record import SessionRecord
from tenure.backends.etcd._session_keys import SessionKeys
from tenure.backends.etcd._set import SetAcquirer, check_members
from tenure.backends.etcd._set_wait import AllOrNoneSet, SetWaiter
from tenure.backends.etcd._txns import TxnSender
from tenure.backends.etcd._types import Armed
from tenure.backends.etcd._wait import SingleWaiter
from tenure.errors import LostError, PreconditionFailedError

__all__ = ["EtcdHome", "EtcdStore"]

log = logging.getLogger("tenure.etcd")


class EtcdHome(Protocol):
    """What a session on etcd asks of its home, the client (the sessions' shared part)."""

    @property
    def conn(self) -> EtcdClient:
        """The channel to etcd."""

    @property
    def layout(self) -> Layout:
        """Where the keys are."""

    @property
    def keepalive(self) -> KeepAlive:
        """The one keepalive stream."""

    @property
    def watches(self) -> WatchHub:
        """The one watch stream."""

    @property
    def feeds(self) -> Feeds:
        """The feeds of semaphores waited on."""

    @property
    def hints(self) -> Hints:
        """The guesses about semaphores."""

    @property
    def sessions(self) -> dict[int, EtcdStore]:
        """The client's live sessions, by lease id."""

    @property
    def turns(self) -> Turns[bytes]:
        """Whose turn it is to join each semaphore's queue, of this client's requests."""

    def release_view(self, view: NodeView) -> None:
        """A session of the view's node ended."""


class EtcdStore:
    """A session on etcd (module docstring)."""

    beat_period: float | None = None  # the client's keepalive stream renews the lease

    def __init__(
        self,
        home: EtcdHome,
        record: SessionRecord,
        ttl: int,
        view: NodeView,
        *,
        confirmed_at: float,
    ):
        self._home = home
        self.conn = home.conn
        self.hints = home.hints
        self.feeds = home.feeds
        self.hub = home.watches
        self.turns = home.turns
        self.record = record
        self.node = record.node
        self.lease_id = record.lease_id
        #: Where the session's keys are (computed once: every acquire and release
        #: spells them).
        self.keys = SessionKeys(home.layout, self.node, self.lease_id)
        #: The lease's TTL in seconds: the recovery window rounded up (at least 2).
        self.ttl = ttl
        self.view = view
        self.where = f"etcd ({self.conn.endpoint})"
        self.sender = TxnSender(self.conn, home.layout, record, view)
        self.holding = Holds(self)
        self.acquirer = SingleAcquirer(self, SingleWaiter(self))
        self.set_waiter = SetWaiter(self)
        self.set_acquirer = SetAcquirer(self, self.set_waiter)
        self.armed: set[Armed] = set()
        self.admin = Admin(self, self.armed, Claims(self))
        self._confirmed = confirmed_at
        self._requests = itertools.count(1)
        self.session: BoundSession

    def bind(self, session: BoundSession) -> None:
        """The session this store works for: start following its record."""
        self.session = session
        self.record.bind(session)
        self.record.follow(self.hub)

    def secret(self) -> bytes:
        """The ticket's secret (the record keeps its digest)."""
        return self.record.secret

    # -- the lease (Renewable, for the keepalive stream) --------------------------------

    def confirmed_at(self) -> float:
        """The send time of the last renewal etcd answered."""
        return self._confirmed

    async def heartbeat(self) -> None:
        """Nothing to send: the keepalive stream renews the lease."""

    def renewed(self, sent_at: float) -> None:
        """etcd renewed the lease at a request sent at ``sent_at``: move the deadline."""
        self._confirmed = max(self._confirmed, sent_at)

    def lease_gone(self) -> None:
        """etcd says the lease is gone: find out why, then lose the session."""
        self.session.spawn(self.record.diagnose())

    def reconnected(self) -> None:
        """A new keepalive stream: keep the lease if it lives, and bump ``seq``."""
        self.session.spawn(self.record.reattach())

    # -- the node's news (NodeMember) -------------------------------------------------

    def node_changed(self, alive: bool) -> None:
        """Events of the node may have been missed (check the grants), or it went."""
        self.session.spawn(self.holding.check_grants() if alive else self.record.diagnose())

    def forced_delete(self, name: str, revision: int) -> None:
        """``name`` was deleted by force at ``revision``: older grants of it are lost."""
        self.holding.grants_gone(name, revision)

    def tell_deleted(self, name: str) -> None:
        """``name`` was deleted by force here: this client's holders of it hear it now."""
        for store in list(self._home.sessions.values()):
            if store.node == self.node:
                store.holding.grants_gone(name, None)

    # -- acquire, release, renew, read back (Acquiring) ---------------------------------

    def new_request_id(self) -> int:
        """The next id of an acquire here (etcd knows a request by its key: the id only
        tells this session's acquires apart)."""
        return next(self._requests)

    async def enqueue(self, pending: Pending) -> Enqueued:
        """See :meth:`SingleAcquirer.enqueue`."""
        return await self.acquirer.enqueue(pending)

    async def enqueue_all(self, pendings: list[Pending]) -> list[Grant] | InQueue | None:
        """See :meth:`SetAcquirer.enqueue_all`; one name is a plain acquire (as on the
        engine, whose set of one is an ordinary request)."""
        check_members(pendings)
        if len(pendings) == 1:
            enqueued = await self.acquirer.enqueue(pendings[0])
            return [enqueued] if isinstance(enqueued, Grant) else enqueued
        return await self.set_acquirer.enqueue_all(pendings)

    async def await_grant(self, pending: Pending) -> Grant | None:
        """See :meth:`SingleAcquirer.await_grant` (a lock_all's member:
        :meth:`SetWaiter.await_grant`)."""
        if isinstance(pending.state, AllOrNoneSet):
            return await self.set_waiter.await_grant(pending)
        return await self.acquirer.await_grant(pending)

    async def withdraw(self, pending: Pending) -> Grant | Withdrawal:
        """See :meth:`SingleAcquirer.withdraw` (a lock_all's member: :meth:`SetWaiter.withdraw`)."""
        if isinstance(pending.state, AllOrNoneSet):
            return await self.set_waiter.withdraw(pending)
        return await self.acquirer.withdraw(pending)

    async def release(self, name: str, hold: int) -> bool:
        """Delete every key of the hold (and of a queued upgrade of it): both marks."""
        return await self.holding.drop(name, hold)

    async def renew(self, name: str, grant: Grant) -> float:
        """Grants here have no TTL of their own (no LEASE_TTL): nothing to renew."""
        raise PreconditionFailedError(f"the grant of {name!r} has no lease TTL to renew")

    async def holds(self) -> list[HeldGrant]:
        """Each grant the session holds, read now."""
        return await self.holding.read()

    # -- the end ----------------------------------------------------------------------

    def stop(self, error: LostError) -> None:
        """Stop renewing and following; end the watches; leave the client."""
        home = self._home
        # (Only ours: a resume in this same client renews the lease for its own session.)
        home.keepalive.remove(self.lease_id, self)
        if home.sessions.get(self.lease_id) is self:
            del home.sessions[self.lease_id]
        self.record.stop()
        for watch in list(self.armed):
            watch.fail(error)
        home.release_view(self.view)

    async def close(self) -> None:
        """Revoke the lease (every key on it goes at once), unless another client resumed
        the session: then it is theirs."""
        await self.record.let_go()
