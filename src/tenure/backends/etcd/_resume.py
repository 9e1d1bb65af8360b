"""Resuming a session on etcd by its ticket: take the lease, fence the old owner, read back.

The ticket names the session's lease and carries its secret; the session's record
keeps the secret's SHA-256 (:func:`~tenure.backends.etcd._record.key_digest`).

1. **Check.** The lease must be alive (LeaseTimeToLive, which also lists the keys on
   it) and the record there, on that lease, with the secret's digest. Anything else
   is SessionExpiredError, the same for each: a ticket tells nothing about
   sessions it does not name.
2. **Fence.** One Txn bumps ``seq`` and writes this client's ``owner`` into the
   record, comparing the mod_revision just read. Every later Txn of the previous
   owner compares its own bump's revision and fails; it sees a record that is not
   its own and loses the session (``SessionRecord.fenced``). From here no call of the
   previous owner acts on the session, so what follows reads a settled state.
3. **Keep alive.** The lease is renewed right away on this client's keepalive
   stream (the previous owner may have been dead for most of a TTL: etcd's
   LeaseTimeToLive says 0 with less than a second left), and the session's local
   deadline counts from that renewal; then the session joins the stream as any.
4. **Read back** (:meth:`~tenure.backends.etcd._holds.Holds.take_back`, once the
   session is made). Each semaphore with a key on the lease is read: the session's
   granted requests are its holds (token and count as the queue says), and its
   requests that wait are withdrawn (deleted under the new ``seq``): nobody waits
   for them any more, and the waiters behind move up.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
from typing import Any, Final

from aetcd.rpc import rpc_pb2

from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import compare_mod, get, put
from tenure._etcd.streams import KeepAlive
from tenure.backends._base import SessionTicket
from tenure.backends.etcd._keys import Layout, decode, encode
from tenure.backends.etcd._node import NodeView
from tenure.backends.etcd._opening import Opened
from tenure.backends.etcd._record import SessionRecord, identity_of, key_digest
from tenure.errors import SessionExpiredError, UnavailableError

__all__ = ["RESUME_ATTEMPTS", "take"]

#: Tries at the fencing Txn when the record changes between its read and the Txn
#: (the previous owner re-attaching at that moment, another resume racing).
RESUME_ATTEMPTS: Final = 5


async def take(
    conn: EtcdClient,
    layout: Layout,
    keepalive: KeepAlive,
    node: str,
    view: NodeView,
    ticket: SessionTicket,
) -> Opened:
    """Check, fence and renew (steps 1 to 3): the session's record, its holds not read."""
    sid = ticket.session_id
    key = layout.session(node, sid)
    gone = SessionExpiredError(
        f"session {sid} of node {node!r} cannot be resumed: no such live session with that "
        "secret (expired, closed, or a ticket of another session)"
    )
    owner = secrets.token_bytes(8)
    for _ in range(RESUME_ATTEMPTS):
        request = rpc_pb2.LeaseTimeToLiveRequest(ID=sid, keys=True)
        lease = await conn.lease_call("LeaseTimeToLive", request)
        if lease.TTL < 0:  # -1: no such lease (0: under a second left, renewed below)
            raise gone
        found = (await conn.txn([], [get(key)])).responses[0].response_range.kvs
        if not found or int(found[0].lease) != sid:
            raise gone
        record = found[0]
        value = _value(record)
        digest = value.get("key")
        if not isinstance(digest, bytes) or not hmac.compare_digest(
            digest, key_digest(ticket.secret)
        ):
            raise gone
        seq = int(value["seq"]) + 1
        value.update(seq=seq, owner=owner)
        bump = await conn.txn(
            [compare_mod(key, int(record.mod_revision))], [put(key, encode(value), sid)]
        )
        if bump.succeeded:
            break
    else:
        raise UnavailableError(
            f"session {sid}'s record kept changing while it was being resumed; try again"
        )
    description, identity, created_at = identity_of(value)
    ttl = int(lease.grantedTTL)
    renewed_at = await _renew_now(keepalive, sid, ttl, gone)
    taken = SessionRecord(
        conn,
        layout,
        node,
        sid,
        seq=seq,
        seq_rev=int(bump.header.revision),
        created=int(record.create_revision),
        node_rev=view.node_rev,
        secret=ticket.secret,
        owner_id=owner,
        description=description,
        window=float(value.get("window", ttl)),
        identity=identity,
        created_at=created_at,
    )
    return Opened(taken, ttl, renewed_at)


class _FirstRenewal:
    """A :class:`~tenure._etcd.streams.Renewable` for one renewal, awaited."""

    def __init__(self, lease_id: int, ttl: int) -> None:
        self.lease_id, self.ttl = lease_id, ttl
        self.done: asyncio.Future[float | None] = asyncio.get_running_loop().create_future()

    def renewed(self, sent_at: float) -> None:
        if not self.done.done():
            self.done.set_result(sent_at)

    def lease_gone(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def reconnected(self) -> None:
        """A failover meanwhile: the stream sends the renewal again when due."""


async def _renew_now(keepalive: KeepAlive, sid: int, ttl: int, gone: SessionExpiredError) -> float:
    """Renew the lease once, now; the loop time the renewal was sent (its deadline's base)."""
    first = _FirstRenewal(sid, ttl)
    keepalive.add(first, at_once=True)
    try:
        async with asyncio.timeout(ttl):  # past a whole TTL etcd let it go anyway
            renewed_at = await first.done
    except TimeoutError:
        raise gone from None
    finally:
        keepalive.remove(sid, first)
    if renewed_at is None:
        raise gone
    return renewed_at


def _value(record: Any) -> dict[str, Any]:
    try:
        return decode(record.value)
    except ValueError as error:
        raise SessionExpiredError(f"the session's record is not tenure's: {error}") from None
