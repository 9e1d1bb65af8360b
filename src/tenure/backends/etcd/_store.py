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
:class:`~tenure.backends._store.Acquiring`, over the session's parts, each an object
with one job, given in its constructor only the parts it calls: the record, the Txn
sender, the :class:`~tenure.backends.etcd._acquire.SingleAcquirer` (and its
:class:`~tenure.backends.etcd._wait.SingleWaiter`), the lock_all's
:class:`~tenure.backends.etcd._set.SetAcquirer` (and its
:class:`~tenure.backends.etcd._set_wait.SetWaiter`), the
:class:`~tenure.backends.etcd._holds.Holds`, and the
:class:`~tenure.backends.etcd._admin.Admin` (the session's
:class:`~tenure.backends._store.Administering` and
:class:`~tenure.backends._store.Watching`) with its
:class:`~tenure.backends.etcd._claims.Claims`. :func:`compose` builds them all, in
one place; the client's shared parts (its channel, streams, feeds, hints, turns)
come from the backend, which calls it. Two things call back up: the store tells its
home, the client, that it ended (:class:`EtcdHome`), and the parts that tell the
session of losses or read its ledger are bound to it (:meth:`EtcdStore.bind`) when
it is made, after them.
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
from tenure.backends.etcd._lock_set import AllOrNoneSet, check_members
from tenure.backends.etcd._node import NodeView
from tenure.backends.etcd._opening import Opened
from tenure.backends.etcd._record import SessionRecord
from tenure.backends.etcd._session_keys import SessionKeys
from tenure.backends.etcd._set import SetAcquirer
from tenure.backends.etcd._set_wait import SetWaiter
from tenure.backends.etcd._txns import TxnSender
from tenure.backends.etcd._types import Armed
from tenure.backends.etcd._wait import SingleWaiter
from tenure.errors import LostError, PreconditionFailedError

__all__ = ["EtcdHome", "EtcdStore", "compose"]

log = logging.getLogger("tenure.etcd")


class EtcdHome(Protocol):
    """What a session's store calls back into: its home, the client that made it (the
    one call that goes up, from the store to its owner; everything else the store and
    its parts use, they are given)."""

    def session_ended(self, store: EtcdStore) -> None:
        """``store``'s session ended: forget it, and let go of its node's view."""


def compose(
    home: EtcdHome,
    opened: Opened,
    view: NodeView,
    *,
    conn: EtcdClient,
    layout: Layout,
    keepalive: KeepAlive,
    hub: WatchHub,
    feeds: Feeds,
    hints: Hints,
    turns: Turns[bytes],
) -> EtcdStore:
    """The store of the session just ``opened`` on ``view``'s node, and its parts, each
    given the parts it calls (the client's shared ones: the rest of the arguments)."""
    record = opened.record
    keys = SessionKeys(layout, record.node, record.lease_id)
    sender = TxnSender(conn, layout, record, view)
    holds = Holds(keys, sender, record, conn)
    waiter = SingleWaiter(keys, sender, record, conn, feeds)
    acquirer = SingleAcquirer(keys, sender, record, view, hints, turns, waiter, holds)
    set_waiter = SetWaiter(keys, sender, record, conn, feeds, holds)
    set_acquirer = SetAcquirer(keys, sender, record, view, hints, turns, conn, set_waiter)
    armed: set[Armed] = set()
    claims = Claims(keys, sender, record, view, conn)
    admin = Admin(keys, sender, conn, hub, hints, view, armed, claims)
    return EtcdStore(
        home,
        record,
        opened.ttl,
        view,
        keepalive,
        hub,
        holds,
        acquirer,
        set_acquirer,
        set_waiter,
        admin,
        armed,
        where=f"etcd ({conn.endpoint})",
        confirmed_at=opened.confirmed_at,
    )


class EtcdStore:
    """A session on etcd (module docstring), made by :func:`compose`."""

    beat_period: float | None = None  # the client's keepalive stream renews the lease

    def __init__(
        self,
        home: EtcdHome,
        record: SessionRecord,
        ttl: int,
        view: NodeView,
        keepalive: KeepAlive,
        hub: WatchHub,
        holding: Holds,
        acquirer: SingleAcquirer,
        set_acquirer: SetAcquirer,
        set_waiter: SetWaiter,
        admin: Admin,
        armed: set[Armed],
        *,
        where: str,
        confirmed_at: float,
    ):
        self._home = home
        self.record = record
        self.node = record.node
        self.lease_id = record.lease_id
        #: The lease's TTL in seconds: the recovery window rounded up (at least 2).
        self.ttl = ttl
        self.view = view
        self._keepalive = keepalive
        self.hub = hub
        self.where = where
        self.holding = holding
        self.acquirer = acquirer
        self.set_acquirer = set_acquirer
        self.set_waiter = set_waiter
        self.admin = admin
        #: The session's armed watches (failed when it ends).
        self.armed = armed
        self._confirmed = confirmed_at
        self._requests = itertools.count(1)
        self.session: BoundSession

    def bind(self, session: BoundSession) -> None:
        """The session this store works for (made after its parts, which it was given):
        bind the parts that call back into it, and start following its record."""
        self.session = session
        self.record.bind(session)
        self.holding.bind(session)
        self.acquirer.bind(session)
        self.admin.bind(session)
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

    def forced_delete(self, name: str, revision: int | None) -> None:
        """``name`` was deleted by force at ``revision``: older grants of it are lost (None:
        by this client, every grant of it)."""
        self.holding.grants_gone(name, revision)

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
        # (Only ours: a resume in this same client renews the lease for its own session.)
        self._keepalive.remove(self.lease_id, self)
        self.record.stop()
        for watch in list(self.armed):
            watch.fail(error)
        self._home.session_ended(self)

    async def close(self) -> None:
        """Revoke the lease (every key on it goes at once), unless another client resumed
        the session: then it is theirs."""
        await self.record.let_go()
