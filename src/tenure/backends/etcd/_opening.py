"""Opening a session on etcd: a lease, and the session's record on it.

The record (description, window, the resume secret's digest, the owner's nonce and
the client's identity) is put with the lease in one transaction that also counts
the node's sessions at that revision: past ``max_sessions`` the new session goes
again, so the check needs no read before. A node's settings that changed under
the first try start it again with the new window.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from typing import TYPE_CHECKING, Final

from aetcd.rpc import rpc_pb2

from tenure._core.values import ClientIdentity
from tenure.backends._base import SessionListener
from tenure.backends.etcd._keys import compare_mod, encode, get, get_prefix, put
from tenure.backends.etcd._node import NodeView
from tenure.backends.etcd._record import identity_fields, key_digest
from tenure.backends.etcd._session import EtcdSession
from tenure.errors import LimitExceededError, NotFoundError

if TYPE_CHECKING:
    from tenure.backends.etcd import EtcdBackend

__all__ = ["MIN_TTL", "lease_ttl", "open_new"]

#: etcd's shortest useful lease TTL, in seconds.
MIN_TTL: Final = 2


def lease_ttl(window: float) -> int:
    """The lease TTL of a recovery window: whole seconds, rounded up, at least 2."""
    return max(MIN_TTL, math.ceil(window))


async def open_new(
    backend: EtcdBackend,
    node: str,
    view: NodeView,
    timeout: float | None,
    description: str,
    listener: SessionListener,
    identity: ClientIdentity,
) -> EtcdSession:
    """Open a new session on ``node``: grant a lease, put the session's record on it
    (and count the node's sessions at the same revision, for max_sessions)."""
    sessions, config_key = backend.layout.sessions(node), backend.layout.config(node)
    secret, owner = secrets.token_bytes(16), secrets.token_bytes(8)
    created_at = time.time()
    lease_id = 0
    try:
        while True:
            config = view.config
            window = config.recovery_window if timeout is None else timeout
            ttl = lease_ttl(window)
            if lease_id:  # the settings changed under the first try: start again
                await backend.revoke(lease_id)
            sent_at = asyncio.get_running_loop().time()
            grant = await backend.conn.lease_call("LeaseGrant", rpc_pb2.LeaseGrantRequest(TTL=ttl))
            lease_id = int(grant.ID)
            value = encode(
                {
                    "description": description,
                    "window": window,
                    "seq": 1,
                    "key": key_digest(secret),
                    "owner": owner,
                    # When, by this client's clock (etcd has none to offer).
                    **identity_fields(identity, created_at),
                }
            )
            # Put the record and count the node's sessions with it, at one revision:
            # past max_sessions, this one goes again (two racing both go: never one
            # too many), so the check needs no read before.
            reply = await backend.conn.txn(
                [compare_mod(config_key, view.config_rev)],
                [
                    put(backend.layout.session(node, lease_id), value, lease_id),
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
            await asyncio.shield(backend.revoke(lease_id))
        raise
    session = EtcdSession(
        backend,
        node,
        lease_id,
        int(grant.TTL) or ttl,
        listener,
        record_rev=int(reply.header.revision),
        view=view,
        confirmed_at=sent_at,
        seq=1,
        description=description,
        window=window,
        secret=secret,
        owner=owner,
        identity=identity,
        created_at=created_at,
    )
    backend.sessions[lease_id] = session
    backend.keepalive.add(session)
    return session
