"""Listings and kill_session on etcd.

Names are %-encoded in keys, and the encoded order is not the names' order (``a:``
is ``a%3A``, which sorts before ``a9``), so a page cannot be one Range from
``after``: pages are picked from every name, in code point order as on every
backend.

* **Nodes**: one Range (keys only, limit 1) per node finds its first key, ``cfg``
  if it exists (``cfg`` sorts first among a node's keys), then skips past its range:
  a page costs one round trip per node of the store.
* **Semaphores**: the keys of the node's semaphores whose names start with the
  prefix (one key range: the prefix encodes to a prefix), read keys only in Ranges
  of :data:`KEYS_PER_RANGE` at one revision; then the page's semaphores are read at
  that revision, :data:`RANGES_PER_TXN` to a Txn.
* **Sessions** are keyed by their lease id in 16 hex digits, so a page is one Range
  of records from ``after``; each session's lease is asked (LeaseTimeToLive, with
  its keys: the TTL left, and its requests, :data:`LEASE_QUERIES` at a time) how
  long etcd keeps it and what it holds and waits for.
* **kill_session** puts a marker saying so (``kill/<sid>``, on a lease of
  :data:`KILL_MARKER_TTL` of its own), in a Txn that finds the session's record,
  then revokes the session's lease: etcd deletes its record, requests and grants at
  once, as on expiry, and its client, finding the record gone, reads the marker.
"""

from __future__ import annotations

import asyncio
import heapq
from typing import Any, Final

from aetcd.rpc import rpc_pb2

from tenure._core.values import (
    SemaphoreSummary,
    SessionSummary,
    check_name,
    check_page_limit,
)
from tenure._etcd.client import EtcdClient, LeaseNotFoundError
from tenure._etcd.requests import get, prefix_end, put, range_request
from tenure.backends._store_listing import (
    check_bound,
    check_session_after,
    check_session_id,
    killed_message,
    page_args,
)
from tenure.backends.etcd._keys import Layout, decode, encode
from tenure.backends.etcd._opening import revoke
from tenure.backends.etcd._queue import SemState
from tenure.backends.etcd._record import identity_of
from tenure.backends.etcd._who import GETS_PER_TXN
from tenure.errors import NotFoundError, UnavailableError

__all__ = [
    "KEYS_PER_RANGE",
    "KILL_MARKER_TTL",
    "LEASE_QUERIES",
    "NODES_SCANNED_MAX",
    "kill_session",
    "list_nodes",
    "list_semaphores",
    "list_sessions",
]

#: Keys one Range of a semaphore listing reads.
KEYS_PER_RANGE: Final = 2000
#: Semaphores read per Txn for a page's counts (their values may be large).
RANGES_PER_TXN: Final = 16
#: LeaseTimeToLive calls in flight at once for a page of sessions.
LEASE_QUERIES: Final = 16
#: Seconds a kill's marker stays for the killed session's client to read.
KILL_MARKER_TTL: Final = 3600
#: Most nodes (and Ranges of keys) one page walks before giving up.
NODES_SCANNED_MAX: Final = 1_000_000
_NO_LEASE: Final = -1  # LeaseTimeToLive's TTL of a lease that is gone


async def list_nodes(conn: EtcdClient, layout: Layout, after: str, limit: int) -> list[str]:
    """See :meth:`tenure.backends._base.Backend.list_nodes` (module docstring)."""
    after, limit = check_bound(after), check_page_limit(limit)
    nodes = layout.prefix + b"n/"
    end, start = prefix_end(nodes), nodes
    found: list[str] = []
    for _ in range(NODES_SCANNED_MAX):
        reply = await conn.range(
            rpc_pb2.RangeRequest(key=start, range_end=end, limit=1, keys_only=True)
        )
        if not reply.kvs:
            return heapq.nsmallest(limit, found)
        key = bytes(reply.kvs[0].key)
        escaped = key[len(nodes) :].split(b"/", 1)[0]
        name = layout.unescape(escaped.decode())
        if key == layout.config(name) and name > after:
            found.append(name)
            if len(found) > 4 * limit:  # memory bounded by the page
                found = heapq.nsmallest(limit, found)
        start = prefix_end(nodes + escaped + b"/")
    raise UnavailableError(f"listing nodes walked more than {NODES_SCANNED_MAX} nodes")


async def _require_node(conn: EtcdClient, layout: Layout, node: str) -> None:
    reply = await conn.range(rpc_pb2.RangeRequest(key=layout.config(node), count_only=True))
    if not reply.count:
        raise NotFoundError(f"node {node!r} does not exist")


async def list_semaphores(
    conn: EtcdClient, layout: Layout, node: str, prefix: str, after: str, limit: int
) -> list[SemaphoreSummary]:
    """See :meth:`tenure.backends._base.Backend.list_semaphores` (module docstring)."""
    node = check_name("node", node)
    prefix, after, limit = page_args(prefix, after, limit)
    await _require_node(conn, layout, node)
    semaphores = layout.semaphores(node)
    start = semaphores + layout.escape(prefix).encode()
    end = prefix_end(start)
    names: set[str] = set()
    revision = 0
    for _ in range(NODES_SCANNED_MAX):
        reply = await conn.range(
            rpc_pb2.RangeRequest(
                key=start, range_end=end, keys_only=True, limit=KEYS_PER_RANGE, revision=revision
            )
        )
        revision = revision or int(reply.header.revision)  # one revision for the listing
        for kv in reply.kvs:
            name = layout.unescape(bytes(kv.key)[len(semaphores) :].split(b"/", 1)[0].decode())
            if name > after and name.startswith(prefix):
                names.add(name)
        if len(names) > 4 * limit:
            names = set(heapq.nsmallest(limit, names))
        if not reply.more or not reply.kvs:
            break
        start = bytes(reply.kvs[-1].key) + b"\0"
    else:
        raise UnavailableError(f"listing semaphores read more than {NODES_SCANNED_MAX} Ranges")
    page = heapq.nsmallest(limit, names)
    summaries: list[SemaphoreSummary] = []
    for first in range(0, len(page), RANGES_PER_TXN):
        chunk = page[first : first + RANGES_PER_TXN]
        ops = [
            rpc_pb2.RequestOp(
                request_range=range_request(layout.semaphore(node, name), revision=revision)
            )
            for name in chunk
        ]
        reply = await conn.txn([], ops)
        for name, response in zip(chunk, reply.responses, strict=True):
            state = SemState.parse(
                name, layout.semaphore(node, name), response.response_range.kvs, revision
            )
            if state.exists:
                owners = state.owners()
                summaries.append(
                    SemaphoreSummary(
                        name,
                        state.limit,
                        sum(entry.count for entry in owners),
                        len(owners),
                        len(state.waiters()),
                        not state.record,
                    )
                )
    return summaries


async def list_sessions(
    conn: EtcdClient, layout: Layout, node: str, after: int, limit: int
) -> list[SessionSummary]:
    """See :meth:`tenure.backends._base.Backend.list_sessions` (module docstring)."""
    node = check_name("node", node)
    after, limit = check_session_after(after), check_page_limit(limit)
    await _require_node(conn, layout, node)
    if after >= 2**63 - 1:  # lease ids are positive int64s
        return []
    reply = await conn.range(
        rpc_pb2.RangeRequest(
            key=layout.session(node, after + 1),
            range_end=prefix_end(layout.sessions(node)),
            limit=limit,
        )
    )
    gate = asyncio.Semaphore(LEASE_QUERIES)

    async def summary(kv: Any) -> SessionSummary | None:
        sid = int(bytes(kv.key).rsplit(b"/", 1)[1], 16)
        try:
            value = decode(kv.value)
        except ValueError:
            return None  # not tenure's
        async with gate:
            try:
                lease = await conn.lease_call(
                    "LeaseTimeToLive", rpc_pb2.LeaseTimeToLiveRequest(ID=sid, keys=True)
                )
            except LeaseNotFoundError:
                return None
        if int(lease.TTL) == _NO_LEASE:
            return None  # ended since the records were read
        holds, waits = await _holds_and_waits(conn, layout, node, [bytes(k) for k in lease.keys])
        description, identity, created_at = identity_of(value)
        return SessionSummary(
            sid,
            description,
            identity,
            float(lease.grantedTTL),
            created_at,
            float(max(0, int(lease.TTL))),
            holds,
            waits,
        )

    found = await asyncio.gather(*(summary(kv) for kv in reply.kvs))
    return [entry for entry in found if entry is not None]


async def _holds_and_waits(
    conn: EtcdClient, layout: Layout, node: str, keys: list[bytes]
) -> tuple[int, int]:
    """How many of a session's requests (its keys on its lease) are granted, and wait."""
    semaphores = layout.semaphores(node)
    requests: list[bytes] = []
    grants: set[bytes] = set()
    for key in keys:
        if not key.startswith(semaphores):
            continue
        head, _, suffix = key.rpartition(b"/")
        if head.endswith(b"/q"):
            requests.append(key)
        elif head.endswith(b"/g"):
            grants.add(head[:-2] + b"/q/" + suffix)
    # A request without a grant key was granted by the Txn that made it if its value
    # says so: those values are read.
    unsure = [key for key in requests if key not in grants]
    at_once = 0
    for first in range(0, len(unsure), GETS_PER_TXN):
        chunk = unsure[first : first + GETS_PER_TXN]
        reply = await conn.txn([], [get(key) for key in chunk])
        for response in reply.responses:
            for kv in response.response_range.kvs:
                try:
                    at_once += bool(decode(kv.value).get("g"))
                except ValueError:
                    continue
    holds = len(requests) - len(unsure) + at_once
    return holds, len(requests) - holds


async def kill_session(conn: EtcdClient, layout: Layout, node: str, session_id: int) -> None:
    """See :meth:`tenure.backends._base.Backend.kill_session` (module docstring)."""
    node, session_id = check_session_id(node, session_id)
    if not 0 < session_id < 2**63:
        await _require_node(conn, layout, node)
        raise NotFoundError(f"session {session_id} of node {node!r} does not exist")
    record = layout.session(node, session_id)
    marker = await conn.lease_call("LeaseGrant", rpc_pb2.LeaseGrantRequest(TTL=KILL_MARKER_TTL))
    note = encode({"message": killed_message(session_id)})
    try:
        reply = await conn.txn(
            [_exists(record)],
            [put(layout.killed(node, session_id), note, int(marker.ID))],
            [get(layout.config(node))],
        )
    except BaseException:
        await revoke(conn, int(marker.ID))
        raise
    if not reply.succeeded:
        await revoke(conn, int(marker.ID))
        if not reply.responses[0].response_range.kvs:
            raise NotFoundError(f"node {node!r} does not exist")
        raise NotFoundError(
            f"session {session_id} of node {node!r} does not exist (it ended, or never was)"
        )
    # etcd deletes every key on the lease at once: record, requests, grants.
    await revoke(conn, session_id)


def _exists(key: bytes) -> Any:
    """A compare that holds while ``key`` exists."""
    return rpc_pb2.Compare(
        key=key, target=rpc_pb2.Compare.CREATE, result=rpc_pb2.Compare.GREATER, create_revision=0
    )
