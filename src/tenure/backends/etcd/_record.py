"""The session's record on etcd: what it keeps, whose it is, and the moves made on it.

``n/<node>/sess/<sid>``, on the session's lease, keeps the description, the window,
``seq`` (bumped by each re-attach and each resume), ``key`` (the SHA-256 of the
session's secret: the ticket carries the secret), ``owner`` (a random id of the
client object that owns the session now), its client's identity (``host``,
``pid``, ``name``) and ``at``, when it was opened (UNIX seconds by the opening
client's clock: etcd has none to offer). Every mutating Txn of the session
compares the record's mod_revision with its own last bump's, so a replaced
connection, or a previous owner after a resume, cannot act. A previous owner that
sees a record it did not write knows it was fenced off.
"""

from __future__ import annotations

import contextlib
import hashlib
from typing import TYPE_CHECKING, Any

from aetcd.rpc import rpc_pb2

from tenure._core.values import ClientIdentity
from tenure.backends.etcd._keys import compare_mod, decode, delete, encode, get, put
from tenure.errors import TenureError

if TYPE_CHECKING:
    from tenure.backends.etcd._session import EtcdSession

__all__ = [
    "adopt",
    "identity_fields",
    "identity_of",
    "key_digest",
    "let_go",
    "owns",
    "reattach",
    "record_value",
]

#: Tries at a Txn on the record after a bump of ours whose answer was lost.
ATTEMPTS = 3


def key_digest(secret: bytes) -> bytes:
    """What the session's record keeps of its secret (the ticket has the secret itself)."""
    return hashlib.sha256(secret).digest()


def record_value(s: EtcdSession, seq: int) -> bytes:
    """The session's record with ``seq``, owned by this client object."""
    return encode(
        {
            "description": s.description,
            "window": s.window,
            "seq": seq,
            "key": key_digest(s.secret),
            "owner": s.owner,
            **identity_fields(s.identity, s.created_at),
        }
    )


def identity_fields(identity: ClientIdentity, created_at: float | None) -> dict[str, Any]:
    """What the record keeps of its client's identity and of when it was opened."""
    fields: dict[str, Any] = {"host": identity.host, "pid": identity.pid, "name": identity.name}
    if created_at is not None:
        fields["at"] = created_at
    return fields


def identity_of(value: dict[str, Any]) -> tuple[str, ClientIdentity, float | None]:
    """A record's description, identity and creation time (defaults for a record written
    before tenure 0.14 kept them, or one that is not tenure's)."""

    def text(key: str) -> str:
        found = value.get(key)
        return found if isinstance(found, str) else ""

    pid, at = value.get("pid"), value.get("at")
    return (
        text("description"),
        ClientIdentity(text("host"), pid if type(pid) is int and pid >= 0 else 0, text("name")),
        float(at) if isinstance(at, int | float) else None,
    )


def owns(s: EtcdSession, kv: Any) -> bool:
    """Whether a version of the record is one this client object wrote."""
    try:
        return bool(decode(kv.value).get("owner") == s.owner)
    except ValueError:
        return False


def adopt(s: EtcdSession, kv: Any) -> bool:
    """Take the record ``kv`` as our last bump if we wrote it; else we are fenced off.

    (A bump of ours whose answer was lost with a connection left the record at a
    revision we never heard of: ours all the same.) Returns whether it was ours; if
    it is the session's record and not ours, the session is lost (fenced).
    """
    if int(kv.create_revision) != s.record_created:
        return False  # another session's record, the lease having gone: diagnose
    if not owns(s, kv):
        s.fenced()
        return False
    s.seq, s.seq_rev = int(decode(kv.value)["seq"]), int(kv.mod_revision)
    return True


async def reattach(s: EtcdSession) -> None:
    """After a new keepalive stream: keep the lease if it lives, and bump ``seq``."""
    if s.ended is not None:
        return
    request = rpc_pb2.LeaseTimeToLiveRequest(ID=s.lease_id)
    reply = await s.conn.lease_call("LeaseTimeToLive", request)
    if reply.TTL <= 0:
        await s.diagnose()
        return
    for _ in range(ATTEMPTS):
        seq = s.seq + 1
        reply = await s.conn.txn(
            [compare_mod(s.record_key, s.seq_rev)],
            [put(s.record_key, record_value(s, seq), s.lease_id)],
            [get(s.record_key)],
        )
        if reply.succeeded:
            s.seq, s.seq_rev = seq, int(reply.header.revision)
            return
        record = reply.responses[0].response_range.kvs
        if not record or not adopt(s, record[0]):
            await s.diagnose()
            return
    await s.diagnose()


async def let_go(s: EtcdSession) -> None:
    """Revoke the lease, unless another client resumed the session (then it is theirs).

    The record is deleted first under a compare of our last bump: a resume racing
    this finds no record (the session is over), and one that came first makes the
    compare fail, and we leave its lease alone.
    """
    with contextlib.suppress(TenureError):
        for _ in range(ATTEMPTS):
            reply = await s.conn.txn(
                [compare_mod(s.record_key, s.seq_rev)],
                [delete(s.record_key)],
                [get(s.record_key)],
            )
            record = reply.responses[0].response_range.kvs
            if reply.succeeded or not record:
                break
            if not owns(s, record[0]):
                return  # resumed elsewhere: not ours to end
            s.seq_rev = int(record[0].mod_revision)
        await s.conn.lease_call("LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=s.lease_id))
