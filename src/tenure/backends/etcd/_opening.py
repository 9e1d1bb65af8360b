"""Opening a session on etcd: a lease, and the session's record on it.

The record (description, window, the resume secret's digest, the owner's nonce and
the client's identity) is put with the lease in one transaction that also counts
the node's sessions at that revision: past ``max_sessions`` the new session goes
again, so the check needs no read before. A node's settings that changed under
the first try start it again with the new window.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
import time
from typing import Final, NamedTuple

from aetcd.rpc import rpc_pb2

from tenure._etcd.client import EtcdClient, LeaseNotFoundError
from tenure._etcd.requests import compare_mod, get, get_prefix, put
from tenure.backends._opener import NewSession
from tenure.backends.etcd._keys import Layout
from tenure.backends.etcd._node import NodeView
from tenure.backends.etcd._record import SessionRecord
from tenure.errors import LimitExceededError, NotFoundError

__all__ = ["MIN_TTL", "Opened", "lease_ttl", "open_new", "revoke"]

#: etcd's shortest useful lease TTL, in seconds.
MIN_TTL: Final = 2


class Opened(NamedTuple):
    """A session made in etcd: its record, its lease's TTL, and the loop time the lease
    was granted at (its local deadline's base)."""

    record: SessionRecord
    ttl: int
    confirmed_at: float


def lease_ttl(window: float) -> int:
    """The lease TTL of a recovery window: whole seconds, rounded up, at least 2."""
    return max(MIN_TTL, math.ceil(window))


async def revoke(conn: EtcdClient, lease_id: int) -> None:
    """Revoke a lease (gone already: nothing to do)."""
    with contextlib.suppress(LeaseNotFoundError):
        await conn.lease_call("LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=lease_id))


async def open_new(conn: EtcdClient, layout: Layout, asked: NewSession, view: NodeView) -> Opened:
    """Open the session ``asked`` for on its node (``view``): grant a lease, put the
    session's record on it (and count the node's sessions at the same revision, for
    max_sessions)."""
    node, timeout = asked.node, asked.timeout
    sessions, config_key = layout.sessions(node), layout.config(node)
    secret, owner = secrets.token_bytes(16), secrets.token_bytes(8)
    created_at = time.time()
    lease_id = 0
    try:
        while True:
            config = view.config
            window = config.recovery_window if timeout is None else timeout
            ttl = lease_ttl(window)
            if lease_id:  # the settings changed under the first try: start again
                await revoke(conn, lease_id)
            sent_at = asyncio.get_running_loop().time()
            grant = await conn.lease_call("LeaseGrant", rpc_pb2.LeaseGrantRequest(TTL=ttl))
            lease_id = int(grant.ID)
            record = SessionRecord(
                conn,
                layout,
                node,
                lease_id,
                seq=1,
                seq_rev=0,
                created=0,
                node_rev=view.node_rev,
                secret=secret,
                owner_id=owner,
                description=asked.description,
                window=window,
                identity=asked.identity,
                created_at=created_at,
            )
            # Put the record and count the node's sessions with it, at one revision:
            # past max_sessions, this one goes again (two racing both go: never one
            # too many), so the check needs no read before.
            reply = await conn.txn(
                [compare_mod(config_key, view.config_rev)],
                [
                    put(record.key, record.value(1), lease_id),
                    get_prefix(sessions, count_only=True),
                ],
                [get(config_key)],
            )
            if reply.succeeded:
                break
            found = reply.responses[0].response_range.kvs
            if not found or int(found[0].create_revision) != view.node_rev:
                raise NotFoundError(f"node {node!r} does not exist")
            view.update(found[0])
        if int(reply.responses[1].response_range.count) > config.max_sessions:
            raise LimitExceededError(
                f"max_sessions ({config.max_sessions}) reached on node {node!r}"
            )
    except BaseException:
        if lease_id:
            await asyncio.shield(revoke(conn, lease_id))
        raise
    record.seq_rev = record.created = int(reply.header.revision)
    return Opened(record, int(grant.TTL) or ttl, sent_at)
