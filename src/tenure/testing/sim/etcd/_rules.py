"""etcd's rules for one request, apart from any state: the checks its gRPC layer makes
before a request runs, and how a compare, a range's filters and its sort are judged.

Kept apart from :class:`~tenure.testing.sim.etcd._store.SimEtcdStore`, which applies
the requests, as etcd keeps them (server/etcdserver/api/v3rpc/key.go: checkRangeRequest,
checkPutRequest, checkTxnRequest, checkIntervals; server/etcdserver/txn: compareKV,
pruneKVs, the sorters). Each check raises
:class:`~tenure.testing.sim.etcd._keyspace.EtcdRpcError` with etcd's code and words.
"""

from __future__ import annotations

from typing import Any

from aetcd.rpc import rpc_pb2

from tenure.testing.sim.etcd._keyspace import (
    DUPLICATE_KEY,
    EMPTY_KEY,
    INVALID_SORT,
    KEY_NOT_FOUND,
    LEASE_PROVIDED,
    TOO_MANY_OPS,
    VALUE_PROVIDED,
    EtcdRpcError,
    KeyVersion,
)

__all__ = [
    "check_intervals",
    "check_key",
    "check_put",
    "check_range",
    "check_txn",
    "filtered",
    "holds",
    "in_key_order",
    "in_order",
    "kept",
    "op_kind",
]

_RANGE = rpc_pb2.RangeRequest
_COMPARE = rpc_pb2.Compare


def op_kind(op: Any) -> str | None:
    """Which request a Txn op carries (``request_range``...; None: none)."""
    kind: str | None = op.WhichOneof("request")
    return kind


# -- checks before a request runs ---------------------------------------------------------


def check_key(key: bytes) -> None:
    """A key must be given."""
    if not key:
        raise EtcdRpcError(EMPTY_KEY)


def check_range(request: Any) -> None:
    """A RangeRequest's key and sort options."""
    check_key(request.key)
    if request.sort_order not in _RANGE.SortOrder.values():
        raise EtcdRpcError(INVALID_SORT)
    if request.sort_target not in _RANGE.SortTarget.values():
        raise EtcdRpcError(INVALID_SORT)


def check_put(request: Any) -> None:
    """A PutRequest's key, and no value or lease with ``ignore_value``/``ignore_lease``."""
    check_key(request.key)
    if request.ignore_value and request.value:
        raise EtcdRpcError(VALUE_PROVIDED)
    if request.ignore_lease and request.lease:
        raise EtcdRpcError(LEASE_PROVIDED)


def check_txn(request: Any, max_ops: int) -> None:
    """A TxnRequest's size (``max_ops`` compares, or ops per branch) and every op."""
    ops = max(len(request.compare), len(request.success), len(request.failure))
    if ops > max_ops:
        raise EtcdRpcError(TOO_MANY_OPS)
    for compare in request.compare:
        check_key(compare.key)
    for op in [*request.success, *request.failure]:
        kind = op_kind(op)
        if kind == "request_range":
            check_range(op.request_range)
        elif kind == "request_put":
            check_put(op.request_put)
        elif kind == "request_delete_range":
            check_key(op.request_delete_range.key)
        elif kind == "request_txn":
            check_txn(op.request_txn, max_ops - ops)  # (a nested one has what is left)
        else:
            raise EtcdRpcError(KEY_NOT_FOUND)  # an empty op: etcd's word for it


def check_intervals(ops: Any) -> tuple[set[bytes], list[tuple[bytes, bytes]]]:
    """etcd's checkIntervals: refuse a key put twice, or put and deleted, by ``ops``
    (nested Txns' included: both branches of one may put a key, only one runs); the
    keys they put and the ranges they delete."""
    deletes = [
        (bytes(op.request_delete_range.key), bytes(op.request_delete_range.range_end))
        for op in ops
        if op_kind(op) == "request_delete_range"
    ]
    puts: set[bytes] = set()
    for op in ops:
        if op_kind(op) != "request_txn":
            continue
        then_puts, then_deletes = check_intervals(op.request_txn.success)
        else_puts, else_deletes = check_intervals(op.request_txn.failure)
        for key in then_puts:
            if key in puts or _deleted(deletes, key):
                raise EtcdRpcError(DUPLICATE_KEY)
            puts.add(key)
        for key in else_puts:
            if (key in puts and key not in then_puts) or _deleted(deletes, key):
                raise EtcdRpcError(DUPLICATE_KEY)
            puts.add(key)
        deletes += then_deletes + else_deletes
    for op in ops:
        if op_kind(op) == "request_put":
            key = bytes(op.request_put.key)
            if key in puts or _deleted(deletes, key):
                raise EtcdRpcError(DUPLICATE_KEY)
            puts.add(key)
    return puts, deletes


def _deleted(deletes: list[tuple[bytes, bytes]], key: bytes) -> bool:
    # etcd compares these as plain strings: a range to b"\0" holds no key (its quirk).
    return any(key == start if not end else start <= key < end for start, end in deletes)


# -- compares, filters and sorting --------------------------------------------------------


def holds(compare: Any, kv: KeyVersion | None) -> bool:
    """Whether ``compare`` holds for ``kv`` (None: an absent key's zeros), as etcd's
    compareKV: a value the compare does not carry for its target is zero."""
    union, target = compare.WhichOneof("target_union"), compare.target
    mine: Any = 0
    theirs: Any = 0
    if target == _COMPARE.VALUE:
        mine = (kv.value or b"") if kv else b""
        theirs = bytes(compare.value) if union == "value" else b""
    elif target == _COMPARE.CREATE:
        mine = kv.create if kv else 0
        theirs = compare.create_revision if union == "create_revision" else 0
    elif target == _COMPARE.MOD:
        mine = kv.main if kv else 0
        theirs = compare.mod_revision if union == "mod_revision" else 0
    elif target == _COMPARE.VERSION:
        mine = kv.version if kv else 0
        theirs = compare.version if union == "version" else 0
    elif target == _COMPARE.LEASE:
        mine = kv.lease if kv else 0
        theirs = compare.lease if union == "lease" else 0
    order = (mine > theirs) - (mine < theirs)
    results: dict[int, bool] = {
        _COMPARE.EQUAL: order == 0,
        _COMPARE.NOT_EQUAL: order != 0,
        _COMPARE.GREATER: order > 0,
        _COMPARE.LESS: order < 0,
    }
    return results.get(compare.result, True)


def filtered(request: Any) -> bool:
    """Whether a RangeRequest filters by revision (:func:`kept` may drop a version)."""
    return bool(
        request.max_mod_revision
        or request.min_mod_revision
        or request.max_create_revision
        or request.min_create_revision
    )


def kept(request: Any, kv: KeyVersion) -> bool:
    """Whether ``kv`` passes a RangeRequest's revision filters (0: no filter)."""
    return not (
        (request.max_mod_revision and kv.main > request.max_mod_revision)
        or (request.min_mod_revision and kv.main < request.min_mod_revision)
        or (request.max_create_revision and kv.create > request.max_create_revision)
        or (request.min_create_revision and kv.create < request.min_create_revision)
    )


def in_key_order(request: Any) -> bool:
    """Whether a RangeRequest asks for its keys in key order (none asked: key order;
    another target without an order: ascending by it, as etcd does)."""
    order, target = request.sort_order, request.sort_target
    if target == _RANGE.KEY:
        return order in (_RANGE.NONE, _RANGE.ASCEND)
    return False


def in_order(request: Any, found: list[KeyVersion]) -> list[KeyVersion]:
    """``found`` (in key order) sorted as a RangeRequest asks: ascending by default
    for a target other than the key (ties keep key order: Go's sort leaves them open)."""
    if in_key_order(request):
        return found
    order, target = request.sort_order, request.sort_target
    if order == _RANGE.NONE:
        order = _RANGE.ASCEND
    keys: dict[int, Any] = {
        _RANGE.KEY: lambda kv: kv.key,
        _RANGE.VERSION: lambda kv: kv.version,
        _RANGE.CREATE: lambda kv: kv.create,
        _RANGE.MOD: lambda kv: kv.main,
        _RANGE.VALUE: lambda kv: kv.value or b"",
    }
    return sorted(found, key=keys[target], reverse=order == _RANGE.DESCEND)
