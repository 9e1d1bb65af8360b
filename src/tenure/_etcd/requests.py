"""etcd's v3 requests, built: Txn compares and ops, range requests, and ``prefix_end``.

The protobuf messages of etcd's KV API (aetcd's generated ``rpc_pb2``) that every
user of the etcd client sends: the ``etcd://`` backend (its keys:
:mod:`tenure.backends.etcd._keys`) and a cluster's servers (theirs:
:mod:`tenure.server._cluster.keys`). Nothing here knows a key layout: keys and
prefixes are bytes the caller made.

Two ways to build the same thing: a message (:func:`put`, :func:`compare_create`...,
given to a request's constructor) or, in place, an ``add_*`` function that builds it
inside a request's repeated field (a message given to a repeated field is copied
into it: the hot paths build each op where it goes).
"""

from __future__ import annotations

from typing import Any, Final

from aetcd.rpc import rpc_pb2

__all__ = [
    "CREATE",
    "EQUAL",
    "LESS",
    "MOD",
    "add_compare_create",
    "add_compare_created_before",
    "add_compare_mod",
    "add_compare_range",
    "add_delete",
    "add_get",
    "add_get_prefix",
    "add_put",
    "compare_create",
    "compare_empty",
    "compare_mod",
    "compare_unchanged_since",
    "delete",
    "delete_prefix",
    "delete_range",
    "get",
    "get_prefix",
    "prefix_end",
    "put",
    "range_request",
]

#: The comparisons and targets of etcd's Txn.
EQUAL: Final = rpc_pb2.Compare.EQUAL
LESS: Final = rpc_pb2.Compare.LESS
CREATE: Final = rpc_pb2.Compare.CREATE
MOD: Final = rpc_pb2.Compare.MOD


def prefix_end(prefix: bytes) -> bytes:
    """The end of the range of every key that starts with ``prefix`` (etcd's rule)."""
    if prefix and prefix[-1] < 0xFF:  # every prefix of ours: its last byte, plus one
        return prefix[:-1] + bytes((prefix[-1] + 1,))
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"  # every key


# -- whole messages: compares and Txn ops, a range ---------------------------------


def compare_create(key: bytes, revision: int) -> Any:
    """``key``'s create_revision is ``revision`` (0: the key does not exist)."""
    return rpc_pb2.Compare(key=key, target=CREATE, result=EQUAL, create_revision=revision)


def compare_mod(key: bytes, revision: int) -> Any:
    """``key``'s mod_revision is ``revision`` (it has not changed since)."""
    return rpc_pb2.Compare(key=key, target=MOD, result=EQUAL, mod_revision=revision)


def compare_unchanged_since(prefix: bytes, revision: int) -> Any:
    """No key under ``prefix`` was made or changed after ``revision`` (every key's
    mod_revision is at most it; a range compare holds for an empty range)."""
    return rpc_pb2.Compare(
        key=prefix, range_end=prefix_end(prefix), target=MOD, result=LESS, mod_revision=revision + 1
    )


def compare_empty(prefix: bytes) -> Any:
    """No key starts with ``prefix`` (a range compare holds for an empty range)."""
    return rpc_pb2.Compare(
        key=prefix, range_end=prefix_end(prefix), target=CREATE, result=EQUAL, create_revision=0
    )


def put(key: bytes, value: bytes, lease: int = 0) -> Any:
    """A Txn op: put."""
    return rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value, lease=lease))


def delete(key: bytes) -> Any:
    """A Txn op: delete one key."""
    return rpc_pb2.RequestOp(request_delete_range=rpc_pb2.DeleteRangeRequest(key=key))


def delete_prefix(prefix: bytes) -> Any:
    """A Txn op: delete every key under ``prefix``."""
    request = rpc_pb2.DeleteRangeRequest(key=prefix, range_end=prefix_end(prefix))
    return rpc_pb2.RequestOp(request_delete_range=request)


def delete_range(key: bytes, range_end: bytes) -> Any:
    """A Txn op: delete every key of ``[key, range_end)``."""
    request = rpc_pb2.DeleteRangeRequest(key=key, range_end=range_end)
    return rpc_pb2.RequestOp(request_delete_range=request)


def get(key: bytes) -> Any:
    """A Txn op: read one key."""
    return rpc_pb2.RequestOp(request_range=rpc_pb2.RangeRequest(key=key))


def get_prefix(prefix: bytes, *, count_only: bool = False, keys_only: bool = False) -> Any:
    """A Txn op: read every key under ``prefix``."""
    request = range_request(prefix, count_only=count_only, keys_only=keys_only)
    return rpc_pb2.RequestOp(request_range=request)


def range_request(
    prefix: bytes, *, count_only: bool = False, keys_only: bool = False, revision: int = 0
) -> Any:
    """A RangeRequest of every key under ``prefix``."""
    return rpc_pb2.RangeRequest(
        key=prefix,
        range_end=prefix_end(prefix),
        count_only=count_only,
        keys_only=keys_only,
        revision=revision,
    )


# -- in place: ops and compares added to a request's repeated fields ------------------
# (A message given to a repeated field is copied into it; these build it there.)


def add_compare_create(compares: Any, key: bytes, revision: int) -> None:
    """Add :func:`compare_create` to ``compares``."""
    compares.add(key=key, target=CREATE, result=EQUAL, create_revision=revision)


def add_compare_mod(compares: Any, key: bytes, revision: int) -> None:
    """Add :func:`compare_mod` to ``compares``."""
    compares.add(key=key, target=MOD, result=EQUAL, mod_revision=revision)


def add_compare_created_before(compares: Any, prefix: bytes, revision: int) -> None:
    """Add to ``compares``: every key under ``prefix`` was created before ``revision``
    (an empty range holds)."""
    compares.add(
        key=prefix,
        range_end=prefix_end(prefix),
        target=CREATE,
        result=LESS,
        create_revision=revision,
    )


def add_compare_range(
    compares: Any, key: bytes, range_end: bytes, result: Any, revision: int
) -> None:
    """Add: every key of ``[key, range_end)`` has a create_revision ``result`` (EQUAL,
    LESS) ``revision``; an empty range is judged as one key of create_revision 0."""
    compares.add(
        key=key, range_end=range_end, target=CREATE, result=result, create_revision=revision
    )


def add_put(ops: Any, key: bytes, value: bytes, lease: int = 0) -> None:
    """Add a put to ``ops``."""
    request = ops.add().request_put
    request.key = key
    request.value = value
    request.lease = lease


def add_delete(ops: Any, key: bytes) -> None:
    """Add a delete of one key to ``ops``."""
    ops.add().request_delete_range.key = key


def add_get(ops: Any, key: bytes) -> None:
    """Add a read of one key to ``ops``."""
    ops.add().request_range.key = key


def add_get_prefix(ops: Any, prefix: bytes) -> None:
    """Add a read of every key under ``prefix`` to ``ops``."""
    request = ops.add().request_range
    request.key = prefix
    request.range_end = prefix_end(prefix)
