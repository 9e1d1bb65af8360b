"""A model of one etcd cluster's state, sans-I/O: what tenure's etcd client asks of it.

:class:`SimEtcdStore` answers the requests of etcd's v3 KV and Lease APIs as etcd's
server applies them (server/etcdserver/txn, server/etcdserver/api/v3rpc/key.go and
lease.go, server/lease/lessor.go), taking and returning aetcd's ``rpc_pb2`` messages,
raising :class:`~tenure.testing.sim.etcd._keyspace.EtcdRpcError` with etcd's status
code and words. Its keys are a :class:`~tenure.testing.sim.etcd._keyspace.SimKeyspace`
(MVCC, compaction), its watches a :class:`~tenure.testing.sim.etcd._watches.SimWatchTable`,
the rules of one request (the checks, compares, sorting) :mod:`~tenure.testing.sim.etcd._rules`.
Time is passed in (``now``): nothing here reads a clock, draws a number or does I/O;
:mod:`tenure.testing.sim.etcd._stubs` serves it over fake gRPC stubs on a loop.

Modelled, as etcd does it:

* **Range**: one key, ``[key, range_end)``, or every key from ``key`` on (``range_end``
  ``b"\\0"``); at a revision (ErrFutureRev above the store's, ErrCompacted below the
  compaction); ``limit`` with ``more``; ``count`` (every key in the range, before the
  limit and the revision filters); ``count_only``; ``keys_only`` (the lease kept, as
  etcd 3.5 keeps it); ``min``/``max`` mod
  and create revision filters; ``sort_target``/``sort_order`` (ascending by default
  for a target other than the key). The header's revision is the store's, not the
  one read at. ``serializable`` changes nothing (one member's view is the cluster's).
* **Put** (``lease``, ``prev_kv``, ``ignore_value``, ``ignore_lease``) and
  **DeleteRange** (``prev_kv``): one revision each (a delete of nothing, none).
* **Txn**: the compares (VERSION, CREATE, MOD, VALUE, LEASE with EQUAL, NOT_EQUAL,
  GREATER, LESS) over a key or a range (every key of it must hold; an empty range is
  judged as one key of zeros, and fails any VALUE compare), evaluated, nested Txns'
  too, before anything is applied; the ops of the branch taken (Range, Put,
  DeleteRange, nested Txn) in order, later ops reading what earlier ones wrote; one
  revision if it wrote, none if not. Refused before it runs, as etcd's gRPC layer
  refuses: more than ``max_txn_ops`` compares or ops in a branch, an empty key, an
  empty op, a key put twice or put and deleted in one branch (etcd's checkIntervals,
  with its quirks: a delete to ``b"\\0"`` never clashes); and, on the branch taken,
  a put on a lease that does not exist, a range at a compacted or future revision.
* **Compact**, **LeaseGrant** (ID 0: the store chooses, deterministically; a TTL
  under ``min_lease_ttl`` is raised to it, as etcd's minimum of 1.5 election
  timeouts is, 2 s by default), **LeaseRevoke** (its keys deleted in one revision),
  **LeaseKeepAlive** (TTL 0 for a lease gone or expired), **LeaseTimeToLive** (TTL -1
  for a lease gone; ``keys``), **LeaseLeases**; leases end when the driver calls
  :meth:`SimEtcdStore.expire`, and a new leader renews every one
  (:meth:`SimEtcdStore.promote`, etcd's lessor Promote: its TTL plus the election
  timeout from then).
* Every response's header: the cluster id, a member id, the revision, the raft term.

Not modelled: auth (users, roles, tokens, permissions), the Cluster (members) and
Maintenance APIs (status, alarms, defragment, snapshots, hash checks), the space quota
(NOSPACE), lease checkpoints (a leader change renews every lease to its full TTL,
as with checkpoints off, etcd's default), RangeStream, fragmented watch responses,
and anything of raft beyond its term (every member sees every write at once: the
fake's latency is the only lag).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from aetcd.rpc import rpc_pb2

from tenure.testing.sim.etcd._keyspace import (
    COMPACTED,
    FUTURE_REV,
    KEY_NOT_FOUND,
    LEASE_EXISTS,
    LEASE_NOT_FOUND,
    LEASE_TTL_TOO_LARGE,
    EtcdRpcError,
    SimKeyspace,
)
from tenure.testing.sim.etcd._rules import (
    check_intervals,
    check_key,
    check_put,
    check_range,
    check_txn,
    filtered,
    holds,
    in_key_order,
    in_order,
    kept,
    op_kind,
)
from tenure.testing.sim.etcd._watches import SimWatchTable

__all__ = ["MAX_LEASE_TTL", "MAX_TXN_OPS", "MIN_LEASE_TTL", "SimEtcdStore"]

#: etcd's defaults: the largest lease TTL, the smallest (ceil of 1.5 election timeouts
#: of 1 s), and the most compares or ops of a Txn branch (--max-txn-ops).
MAX_LEASE_TTL: Final = 9_000_000_000
MIN_LEASE_TTL: Final = 2
MAX_TXN_OPS: Final = 128

_COMPARE = rpc_pb2.Compare
#: A Txn's branch decided: whether its compares held, and the plans of the nested Txns
#: of the branch taken, in order (etcd's txnPath).
_Plan = tuple[bool, list["_Plan"]]


@dataclass(slots=True)
class _LeaseState:
    lease_id: int
    ttl: int
    expiry: float  # the time it ends unless renewed (in the driver's clock)
    keys: set[bytes] = field(default_factory=set)


class SimEtcdStore:
    """One etcd cluster's keys, leases and watches (module docstring)."""

    def __init__(
        self,
        *,
        cluster_id: int = 0x5E7C_1A55_E7CD_0001,
        member_id: int = 0x1D5C_0E7C_D000_0001,
        min_lease_ttl: int = MIN_LEASE_TTL,
        max_txn_ops: int = MAX_TXN_OPS,
    ) -> None:
        self.keys = SimKeyspace()
        self.watches = SimWatchTable(self.keys, self.header)
        self.leases: dict[int, _LeaseState] = {}
        self.cluster_id, self.member_id = cluster_id, member_id
        #: The leader's term (a new leader moves it on: :meth:`promote`).
        self.raft_term = 2
        self.min_lease_ttl, self.max_txn_ops = min_lease_ttl, max_txn_ops
        # Chosen lease ids: the member's 15 low bits over a counter, as etcd's request
        # id generator puts the member id over its counter (positive: etcd's rule).
        self._next_lease = ((member_id & 0x7FFF) << 48) + 1

    @property
    def revision(self) -> int:
        """The store's revision."""
        return self.keys.revision

    def header(self, revision: int) -> Any:
        """A response header at ``revision``."""
        return rpc_pb2.ResponseHeader(
            cluster_id=self.cluster_id,
            member_id=self.member_id,
            revision=revision,
            raft_term=self.raft_term,
        )

    # -- KV -------------------------------------------------------------------------------

    def range(self, request: Any) -> Any:
        """A RangeRequest answered."""
        check_range(request)
        response = self._read(request, self.keys.revision)
        response.header.CopyFrom(self.header(self.keys.revision))
        return response

    def put(self, request: Any) -> Any:
        """A PutRequest applied."""
        check_put(request)
        self._check_put_now(request)
        return self._committed(self._put(request))

    def delete_range(self, request: Any) -> Any:
        """A DeleteRangeRequest applied."""
        check_key(request.key)
        return self._committed(self._delete(request))

    def txn(self, request: Any) -> Any:
        """A TxnRequest applied (module docstring)."""
        check_txn(request, self.max_txn_ops)
        check_intervals(request.success)
        check_intervals(request.failure)
        plan = self._plan(request)  # every compare first, at the revision before it
        self._check_plan(request, plan)
        response = self._execute(request, plan)
        self._commit()
        response.header.CopyFrom(self.header(self.keys.revision))
        return response

    def compact(self, request: Any) -> Any:
        """A CompactionRequest applied (ErrCompacted at or below the last one)."""
        revision = int(request.revision)
        if revision <= self.keys.compacted:
            raise EtcdRpcError(COMPACTED)
        if revision > self.keys.revision:
            raise EtcdRpcError(FUTURE_REV)
        self.keys.compact(revision)
        return rpc_pb2.CompactionResponse(header=self.header(self.keys.revision))

    def _committed(self, response: Any) -> Any:
        self._commit()
        response.header.CopyFrom(self.header(response.header.revision))
        return response

    def _commit(self) -> None:
        """End the write: the watches hear of what it changed."""
        changes = self.keys.end()
        if changes:
            self.watches.notify(self.keys.revision, changes)

    def _read(self, request: Any, current: int) -> Any:
        revision = int(request.revision)
        if revision > current:
            raise EtcdRpcError(FUTURE_REV)
        if revision <= 0:
            revision = current
        if revision < self.keys.compacted:
            raise EtcdRpcError(COMPACTED)
        key, end, limit = request.key, request.range_end, request.limit
        response = rpc_pb2.RangeResponse(count=self.keys.count(key, end, revision))
        response.header.revision = current
        if request.count_only:
            return response
        if limit > 0 and in_key_order(request) and not filtered(request):
            # etcd's own shortcut (apply.go's Range): only these need reading.
            found = self.keys.live(key, end, revision, limit=limit)
            response.more = response.count > limit
        else:
            found = in_order(
                request, [kv for kv in self.keys.live(key, end, revision) if kept(request, kv)]
            )
            if 0 < limit < len(found):
                found, response.more = found[:limit], True
        response.kvs.extend(kv.message(with_value=not request.keys_only) for kv in found)
        return response

    def _check_put_now(self, request: Any) -> None:
        if request.lease and request.lease not in self.leases:
            raise EtcdRpcError(LEASE_NOT_FOUND)
        if (request.ignore_value or request.ignore_lease) and self.keys.at(
            request.key, self.keys.read_revision()
        ) is None:
            raise EtcdRpcError(KEY_NOT_FOUND)

    def _put(self, request: Any) -> Any:
        key = bytes(request.key)
        before = self.keys.at(key, self.keys.read_revision())
        value, lease = bytes(request.value), int(request.lease)
        if before is not None:
            value = (before.value or b"") if request.ignore_value else value
            lease = before.lease if request.ignore_lease else lease
        self.keys.put(key, value, lease)
        old = before.lease if before is not None else 0
        if old != lease:
            if old in self.leases:
                self.leases[old].keys.discard(key)
            if lease:
                self.leases[lease].keys.add(key)
        response = rpc_pb2.PutResponse()
        response.header.revision = self.keys.revision + 1
        if request.prev_kv and before is not None:
            response.prev_kv.CopyFrom(before.message())
        return response

    def _delete(self, request: Any) -> Any:
        gone = self.keys.live(request.key, request.range_end, self.keys.read_revision())
        response = rpc_pb2.DeleteRangeResponse(deleted=len(gone))
        if request.prev_kv:
            response.prev_kvs.extend(kv.message() for kv in gone)
        for kv in gone:
            self.keys.delete(kv.key)
            if kv.lease in self.leases:
                self.leases[kv.lease].keys.discard(kv.key)
        response.header.revision = self.keys.read_revision()  # the write's, if it wrote
        return response

    # -- Txn ------------------------------------------------------------------------------

    def _plan(self, request: Any) -> _Plan:
        held = all(self._holds(compare) for compare in request.compare)
        ops = request.success if held else request.failure
        return held, [self._plan(op.request_txn) for op in ops if op_kind(op) == "request_txn"]

    def _holds(self, compare: Any) -> bool:
        found = self.keys.live(compare.key, compare.range_end, self.keys.revision)
        if not found:  # (no way to tell a missing value from an empty one: refused)
            return compare.target != _COMPARE.VALUE and holds(compare, None)
        return all(holds(compare, kv) for kv in found)

    def _check_plan(self, request: Any, plan: _Plan) -> None:
        held, nested = plan
        inner = iter(nested)
        for op in request.success if held else request.failure:
            kind = op_kind(op)
            if kind == "request_range":
                revision = int(op.request_range.revision)
                if revision > self.keys.revision:
                    raise EtcdRpcError(FUTURE_REV)
                if revision and revision < self.keys.compacted:
                    raise EtcdRpcError(COMPACTED)
            elif kind == "request_put":
                self._check_put_now(op.request_put)
            elif kind == "request_txn":
                self._check_plan(op.request_txn, next(inner))

    def _execute(self, request: Any, plan: _Plan) -> Any:
        held, nested = plan
        inner = iter(nested)
        response = rpc_pb2.TxnResponse(succeeded=held)
        for op in request.success if held else request.failure:
            kind, out = op_kind(op), response.responses.add()
            if kind == "request_range":
                out.response_range.CopyFrom(self._read(op.request_range, self.keys.read_revision()))
            elif kind == "request_put":
                out.response_put.CopyFrom(self._put(op.request_put))
            elif kind == "request_delete_range":
                out.response_delete_range.CopyFrom(self._delete(op.request_delete_range))
            else:  # (a nested Txn's header is left empty, as etcd leaves it)
                out.response_txn.CopyFrom(self._execute(op.request_txn, next(inner)))
        return response

    # -- leases ---------------------------------------------------------------------------

    def lease_grant(self, request: Any, now: float) -> Any:
        """A LeaseGrantRequest applied at ``now``."""
        lease_id, ttl = int(request.ID), int(request.TTL)
        while lease_id == 0 or (request.ID == 0 and lease_id in self.leases):
            lease_id, self._next_lease = self._next_lease, self._next_lease + 1
        if ttl > MAX_LEASE_TTL:
            raise EtcdRpcError(LEASE_TTL_TOO_LARGE)
        if lease_id in self.leases:
            raise EtcdRpcError(LEASE_EXISTS)
        ttl = max(ttl, self.min_lease_ttl)
        self.leases[lease_id] = _LeaseState(lease_id, ttl, now + ttl)
        return rpc_pb2.LeaseGrantResponse(
            header=self.header(self.keys.revision), ID=lease_id, TTL=ttl
        )

    def lease_revoke(self, request: Any) -> Any:
        """A LeaseRevokeRequest applied: its keys deleted in one revision."""
        lease = self.leases.get(int(request.ID))
        if lease is None:
            raise EtcdRpcError(LEASE_NOT_FOUND)
        self._revoke(lease)
        return rpc_pb2.LeaseRevokeResponse(header=self.header(self.keys.revision))

    def lease_keepalive(self, request: Any, now: float) -> Any:
        """One LeaseKeepAliveRequest answered at ``now`` (TTL 0: no such lease, or it
        expired and waits to be revoked, as etcd's Renew answers then)."""
        response = rpc_pb2.LeaseKeepAliveResponse(
            header=self.header(self.keys.revision), ID=request.ID
        )
        lease = self.leases.get(int(request.ID))
        if lease is not None and lease.expiry > now:
            lease.expiry = now + lease.ttl
            response.TTL = lease.ttl
        return response

    def lease_time_to_live(self, request: Any, now: float) -> Any:
        """A LeaseTimeToLiveRequest answered at ``now`` (TTL -1: no such lease)."""
        response = rpc_pb2.LeaseTimeToLiveResponse(
            header=self.header(self.keys.revision), ID=request.ID, TTL=-1
        )
        lease = self.leases.get(int(request.ID))
        if lease is not None:
            # (etcd truncates the seconds left, as Go's int64(float) does)
            response.TTL, response.grantedTTL = int(lease.expiry - now), lease.ttl
            if request.keys:
                response.keys.extend(sorted(lease.keys))
        return response

    def lease_leases(self, request: Any) -> Any:
        """A LeaseLeasesRequest answered (by id)."""
        return rpc_pb2.LeaseLeasesResponse(
            header=self.header(self.keys.revision),
            leases=[rpc_pb2.LeaseStatus(ID=lease_id) for lease_id in sorted(self.leases)],
        )

    def expire(self, now: float) -> list[int]:
        """Revoke every lease not renewed in time by ``now`` (each in a revision of its
        own, if it has keys); their ids, in the order revoked."""
        due = sorted(
            (lease for lease in self.leases.values() if lease.expiry <= now),
            key=lambda lease: (lease.expiry, lease.lease_id),
        )
        for lease in due:
            self._revoke(lease)
        return [lease.lease_id for lease in due]

    def next_expiry(self) -> float | None:
        """When the next lease ends unless renewed (None: no lease)."""
        return min((lease.expiry for lease in self.leases.values()), default=None)

    def promote(self, now: float, extend: float) -> None:
        """A new leader: the term moves on and every lease ends no sooner than its TTL
        plus ``extend`` (the election timeout) from ``now``."""
        self.raft_term += 1
        for lease in self.leases.values():
            lease.expiry = now + extend + lease.ttl

    def _revoke(self, lease: _LeaseState) -> None:
        for key in sorted(lease.keys):  # (sorted: etcd's order, the same on every member)
            if self.keys.at(key, self.keys.read_revision()) is not None:
                self.keys.delete(key)
        del self.leases[lease.lease_id]
        self._commit()
