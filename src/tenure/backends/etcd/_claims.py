"""Claims on etcd: a name held once per slot, timed by two leases (etcd's own clock).

etcd has no clock a Txn can read, so a claim's times are leases, whose expiry is the
leader's clock: a claim of ``name`` puts two keys on a lease of TTL ``at_most``, the
semaphore's record ``s/<name>/rec`` (limit 1, its data the claim's record) and
``c/<name>`` (the claim's id and its leases: what ``max_claims`` counts). A second
lease of TTL ``at_least`` is granted with them; a release puts both keys again on it
(or deletes them if it is gone: ``at_least`` has passed). When a lease expires etcd
deletes its keys in one revision: the claim ends, the semaphore goes, and its
watchers see it go. A claim is live while ``c/<name>`` exists and the record is its
claim's (the same id).

**Times.** A TTL is whole seconds (etcd's granularity, 2 at least), and both leases
are granted just before the claim's Txn: each TTL is the time asked plus
:data:`LEASE_MARGIN`, rounded up, so a claim lasts up to about two seconds longer
than asked, never shorter unless its Txn is answered more than the margin after the
leases were granted (a warning is logged then). A leader change renews every lease
to its full TTL, so a claim may then last longer again. The record's grant and
release times are this client's wall clock (etcd has none to offer), for display.

**Token.** The Txn that makes the claim makes its record: the Txn's revision is the
record's create_revision, and that is the claim's fencing token, ordered with every
grant's (etcd's grants take their Txn's revision too). The record is written with
``-`` in its token's place (the revision is not known before the Txn), and read
with the create_revision there (:meth:`SemState._record`); a release writes it out.

**The Txn** compares that the record, the semaphore's queue and ``c/<name>`` are
absent, and that no key of ``c/`` changed since the count was read (etcd's compare
of a whole range's mod_revisions): ``max_claims`` is counted exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Final

from aetcd.rpc import rpc_pb2

from tenure._core.claims import ClaimRecord, claim_data, parse_claim
from tenure._core.values import check_data
from tenure._etcd.client import EtcdClient, LeaseNotFoundError
from tenure._etcd.requests import (
    compare_create,
    compare_empty,
    compare_mod,
    compare_unchanged_since,
    delete,
    get,
    get_prefix,
    put,
)
from tenure.backends.etcd._keys import Layout, decode, encode
from tenure.backends.etcd._node import NodeView, config_of
from tenure.backends.etcd._opening import MIN_TTL
from tenure.backends.etcd._queue import SemState
from tenure.backends.etcd._record import SessionRecord
from tenure.backends.etcd._session_keys import SessionKeys
from tenure.backends.etcd._txns import TxnSender
from tenure.errors import (
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
    TenureError,
)

__all__ = ["LEASE_MARGIN", "Claims", "release_claim"]

log = logging.getLogger("tenure.etcd")

#: Seconds added to a claim's times before they are rounded up to a lease's TTL: the
#: leases are granted before the Txn that makes the claim (module docstring).
LEASE_MARGIN: Final = 1.0


def lease_seconds(seconds: float) -> int:
    """The TTL of a lease that must last ``seconds`` from a Txn made just after its grant."""
    return max(MIN_TTL, math.ceil(seconds + LEASE_MARGIN))


class Claims:
    """One session's claims (module docstring): given the session's keys, Txns and
    record, the client's view of the node and its channel to etcd (reads, leases)."""

    def __init__(
        self,
        keys: SessionKeys,
        sender: TxnSender,
        record: SessionRecord,
        view: NodeView,
        conn: EtcdClient,
    ) -> None:
        self._keys, self._sender, self._record, self._view = keys, sender, record, view
        self._conn = conn

    async def claim(
        self, name: str, claim_id: str, at_least: float, at_most: float, data: bytes
    ) -> ClaimRecord:
        """See :meth:`tenure.backends._base.Claiming.claim`."""
        layout, node = self._keys.layout, self._keys.node
        record_key, marker = layout.record(node, name), layout.claim(node, name)
        leases: tuple[int, int] | None = None
        granted_at = 0.0  # (when ``leases`` were granted, on the loop's clock)
        try:
            while True:
                found = await _read(self._conn, layout, node, name)
                if found.config is None:
                    await self._record.ensure_alive()  # (dropped: the session says so)
                    raise NotFoundError(f"node {node!r} does not exist")
                self._view.update(found.config)  # (read with the claims: its settings now)
                config = config_of(found.config)
                data = check_data("claim data", data, config.max_data_size)
                state, mark, count_rev, count = found.state, found.mark, found.revision, found.count
                claimed = None if mark is None else decode(mark.value)
                live = _live(state, claimed)
                if live is not None:
                    return live  # the caller's (a retry), or another's: refused
                _check_free(name, state)
                if state.record or mark is not None:
                    # An ended claim's record (put again without its lease), or a key of
                    # a claim whose record is another's now: they go, then again.
                    await self._drop_stale(state, mark)
                    continue
                if count >= config.max_claims:
                    raise LimitExceededError(
                        f"max_claims ({config.max_claims}) reached on node {node!r}"
                    )
                if not state.exists:
                    await self._check_room(state.revision)
                loop = asyncio.get_running_loop()
                if leases is not None and loop.time() - granted_at > LEASE_MARGIN / 2:
                    for lease in leases:  # (tries went on: leases counting down too long)
                        if lease:
                            await _revoke(self._conn, lease)
                    leases = None
                if leases is None:
                    granted_at = loop.time()
                    leases = await _grant(self._conn, at_least, at_most)
                least, most = leases
                at = time.time()
                # The token's place is '-': the Txn's revision, not known before it.
                text = claim_data(
                    ClaimRecord(claim_id, 1, at, at_least, at_most, None, self._keys.lease_id, data)
                )
                words = text.split(b" ")
                words[2] = b"-"
                # Its answer lost (UnavailableError), the Txn may have made the claim:
                # its leases are then the claim's, and a retry of the same id finds it.
                sent, leases = leases, None
                reply = await self._sender.txn(
                    [
                        compare_create(record_key, 0),
                        compare_create(marker, 0),
                        compare_empty(layout.queue(node, name)),
                        compare_unchanged_since(layout.claims(node), count_rev),
                    ],
                    [
                        put(record_key, encode({"limit": 1, "data": b" ".join(words)}), most),
                        put(marker, encode({"id": claim_id, "least": least, "most": most}), most),
                    ],
                    [],
                )
                if reply.succeeded:
                    elapsed = loop.time() - granted_at
                    if elapsed > LEASE_MARGIN:
                        log.warning(
                            "claim of %r: its Txn was answered %.1f s after its leases' "
                            "grant, past the margin of %.1f s: it may end that much early",
                            name,
                            elapsed,
                            LEASE_MARGIN,
                        )
                    token = int(reply.header.revision)
                    return ClaimRecord(
                        claim_id, token, at, at_least, at_most, None, self._keys.lease_id, data
                    )
                leases = sent  # not the claim's: kept for the next try
                # Something changed since the read (a claim, a count, a request): again.
        finally:
            if leases is not None:  # unused: they go (no key of anyone's is on them)
                for lease in leases:
                    if lease:
                        await _revoke(self._conn, lease)

    async def _check_room(self, revision: int) -> None:
        """LimitExceededError if the node has ``max_semaphores`` semaphores (counted only
        when the view's bound does not prove room, as an acquire's check)."""
        limit = self._view.config.max_semaphores
        bound = self._view.semaphores_bound(revision)
        if (bound is None or bound >= limit) and await self._sender.count_semaphores() >= limit:
            raise LimitExceededError(
                f"max_semaphores ({limit}) reached on node {self._keys.node!r}"
            )

    async def _drop_stale(self, state: SemState, mark: Any) -> None:
        """Delete what is left of an ended claim (a record of a claim, a claim's key)
        if it is still what was read."""
        record_key = self._keys.layout.record(self._keys.node, state.name)
        compares, ops = [], []
        if state.record:
            compares.append(compare_mod(record_key, state.record_mod))
            ops.append(delete(record_key))
        if mark is not None:
            compares.append(compare_mod(bytes(mark.key), int(mark.mod_revision)))
            ops.append(delete(bytes(mark.key)))
        await self._sender.txn(compares, ops, [])


async def release_claim(
    conn: EtcdClient, layout: Layout, node: str, name: str, claim_id: str
) -> bool:
    """See :meth:`tenure.backends._base.Backend.release_claim`: the claim's keys are
    put again on its ``at_least`` lease, or deleted if that lease is gone (or there is
    none: ``at_least`` 0); a Txn that compares both keys' mod_revisions, read again if
    they changed."""
    record_key, marker = layout.record(node, name), layout.claim(node, name)
    while True:
        reply = await conn.txn([], [get(layout.config(node)), get(record_key), get(marker)])
        found = [response.response_range.kvs for response in reply.responses]
        if not found[0]:
            raise NotFoundError(f"node {node!r} does not exist")
        if not found[1] or not found[2]:
            return False
        rec, mark = found[1][0], found[2][0]
        state = SemState.parse(name, layout.semaphore(node, name), [rec], reply.header.revision)
        claimed = decode(mark.value)
        live = _live(state, claimed)
        if live is None or live.id != claim_id or live.released_at is not None:
            return False
        compares = [
            compare_mod(record_key, int(rec.mod_revision)),
            compare_mod(marker, int(mark.mod_revision)),
        ]
        least = int(claimed.get("least") or 0)
        released = claim_data(dataclasses.replace(live, released_at=time.time()))
        ops = [
            put(record_key, encode({"limit": state.limit, "data": released}), least),
            put(marker, encode({**claimed, "released": True}), least),
        ]
        if least:
            try:
                answer = await conn.txn(compares, ops, [])
            except LeaseNotFoundError:  # at_least has passed: it ends now
                answer = await conn.txn(compares, [delete(record_key), delete(marker)], [])
        else:
            answer = await conn.txn(compares, [delete(record_key), delete(marker)], [])
        if answer.succeeded:
            return True
        # It changed since the read (it ended, or was released meanwhile): read again.


@dataclass(frozen=True, slots=True)
class _Read:
    """What a claim reads first, at one revision: the semaphore, its claim's key (None:
    none), how many claims the node has, and its settings' key (None: no node)."""

    state: SemState
    mark: Any
    revision: int
    count: int
    config: Any


async def _read(conn: EtcdClient, layout: Layout, node: str, name: str) -> _Read:
    """:class:`_Read`, in one Txn of reads."""
    prefix = layout.semaphore(node, name)
    reply = await conn.txn(
        [],
        [
            get_prefix(prefix),
            get(layout.claim(node, name)),
            get_prefix(layout.claims(node), count_only=True),
            get(layout.config(node)),
        ],
    )
    revision = int(reply.header.revision)
    sem, mark, counted, config = (response.response_range for response in reply.responses)
    return _Read(
        SemState.parse(name, prefix, sem.kvs, revision),
        mark.kvs[0] if mark.kvs else None,
        revision,
        int(counted.count),
        config.kvs[0] if config.kvs else None,
    )


def _live(state: SemState, claimed: dict[str, Any] | None) -> ClaimRecord | None:
    """The live claim (the record is of the claim ``c/<name>`` names), or None."""
    if claimed is None or not state.record or state.entries:
        return None
    try:
        record = parse_claim(state.name, state.data)
    except PreconditionFailedError:
        return None
    return record if record.id == claimed.get("id") else None


def _check_free(name: str, state: SemState) -> None:
    """PreconditionFailedError unless ``name`` has no record and nobody holds or awaits it."""
    if state.entries:
        raise PreconditionFailedError(
            f"semaphore {name!r} is held or awaited: only a free semaphore whose data is "
            "a claim's record (or none) can be claimed"
        )
    if state.record:
        parse_claim(name, state.data)  # PreconditionFailedError if it is none


async def _grant(conn: EtcdClient, at_least: float, at_most: float) -> tuple[int, int]:
    """The claim's leases: ``at_least``'s (0: none, a release ends it at once) and
    ``at_most``'s, granted together."""

    async def grant(seconds: float) -> int:
        request = rpc_pb2.LeaseGrantRequest(TTL=lease_seconds(seconds))
        return int((await conn.lease_call("LeaseGrant", request)).ID)

    if at_least > 0:
        least, most = await asyncio.gather(grant(at_least), grant(at_most))
        return least, most
    return 0, await grant(at_most)


async def _revoke(conn: EtcdClient, lease: int) -> None:
    """Revoke a lease no key is on (unreachable: it expires by itself)."""
    with contextlib.suppress(TenureError):
        await conn.lease_call("LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=lease))
