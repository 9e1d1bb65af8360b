"""Where ``etcd://`` keeps things: the key layout, the values, and request builders.

Everything lives under the prefix ``P`` (``/tenure/`` by default); node and
semaphore names are percent-encoded (``/`` and ``%`` only), so that one name is
never a prefix of another's keys and each node, semaphore and queue is one range::

    P n/<node>/cfg                         the NodeConfig (no lease)
    P n/<node>/gone/<name>                 a forced delete's marker (put, then deleted)
    P n/<node>/kill/<sid>                  why kill_session ended a session (on a lease of
                                           an hour of its own: its client reads it late)
    P n/<node>/c/<name>                    a live claim (on its at_most or at_least lease): its
                                           id and its leases (:mod:`._claims`)
    P n/<node>/sess/<sid>                  a session (on its lease): description, window, seq,
                                           key (its secret's SHA-256), owner (its client now),
                                           its client's identity and when it was opened
    P n/<node>/s/<name>/rec                a persistent semaphore: limit, data (no lease; a
                                           claim's is on its claim's lease)
    P n/<node>/s/<name>/q/<sid>-<hold>[+]  a request or hold (on the session's lease): count, data,
                                           at (when made; g: true if granted by the Txn that
                                           made it; grp: how many names, of a lock_all's set:
                                           the set's old name, kept for stored keys)
    P n/<node>/s/<name>/g/<sid>-<hold>[+]  the grant of a request that waited (same lease): at
    P n/<node>/s/<name>/p/<sid>-<hold>     a placeholder (same lease, empty): the name is
                                           counted while a lock_all makes its requests
                                           (:mod:`tenure.backends.etcd._set`)

``at`` is a UNIX time by the clock of the client that wrote the key (etcd has no
clock of its own to offer); keys written before tenure 0.14 have none.

Keeping a node's keys under one range makes dropping it one delete, and a
semaphore's keys under one range makes one Range read (at one revision) and one
watch cover its record, queue and grants. ``<sid>`` is the session's lease id in
16 hex digits, ``<hold>`` the hold number in 8; a trailing ``+`` marks a hold's
second request (an upgrade), see :mod:`tenure.backends.etcd._queue`.

Values are msgpack maps.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, unquote

import msgpack
from aetcd.rpc import rpc_pb2

__all__ = [
    "Layout",
    "add_compare_create",
    "add_compare_created_before",
    "add_compare_mod",
    "add_compare_range",
    "add_delete",
    "add_get",
    "add_get_prefix",
    "add_put",
    "compare_create",
    "compare_mod",
    "compare_unchanged_since",
    "decode",
    "delete",
    "delete_prefix",
    "delete_range",
    "encode",
    "get",
    "get_prefix",
    "name_part",
    "prefix_end",
    "put",
]

#: The comparisons and targets of etcd's Txn.
EQUAL: Final = rpc_pb2.Compare.EQUAL
LESS: Final = rpc_pb2.Compare.LESS
CREATE: Final = rpc_pb2.Compare.CREATE
MOD: Final = rpc_pb2.Compare.MOD


#: A name ``quote`` leaves as it is (its always-safe characters).
_PLAIN: Final = re.compile(r"[A-Za-z0-9_.~-]*")


@functools.lru_cache(maxsize=4096)  # every call of a session builds keys of the same names
def _escape(name: str) -> str:
    return quote(name, safe="")


def name_part(name: str) -> bytes:
    """A semaphore's (or node's) part of its keys: ``name`` %-encoded, then ``/``.

    As :meth:`Layout.semaphore` spells it; most names need no encoding, and are
    told apart by a match rather than looked up (a workload of ever new names would
    only churn the cache).
    """
    if _PLAIN.fullmatch(name):
        return (name + "/").encode()
    return (_escape(name) + "/").encode()


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


@dataclass(frozen=True, slots=True)
class Layout:
    """The keys of one deployment (one prefix)."""

    prefix: bytes

    def node(self, node: str) -> bytes:
        """The range of everything of ``node``."""
        return self.prefix + f"n/{_escape(node)}/".encode()

    def config(self, node: str) -> bytes:
        """The node's settings."""
        return self.node(node) + b"cfg"

    def gone(self, node: str) -> bytes:
        """The range of the node's forced-delete markers (:mod:`._node`)."""
        return self.node(node) + b"gone/"

    def gone_marker(self, node: str, name: str) -> bytes:
        """The marker a forced delete of ``name`` puts."""
        return self.gone(node) + _escape(name).encode()

    @staticmethod
    def escape(name: str) -> str:
        """A name as its keys spell it (%-encoded; of a prefix, a prefix)."""
        return _escape(name)

    @staticmethod
    def unescape(escaped: str) -> str:
        """The name a key part stands for."""
        return unquote(escaped)

    def killed(self, node: str, sid: int) -> bytes:
        """Why kill_session ended session ``sid`` (read by its client when it finds it gone)."""
        return self.node(node) + f"kill/{sid:016x}".encode()

    def sessions(self, node: str) -> bytes:
        """The range of the node's session records."""
        return self.node(node) + b"sess/"

    def session(self, node: str, sid: int) -> bytes:
        """One session's record (on its lease)."""
        return self.sessions(node) + f"{sid:016x}".encode()

    def claims(self, node: str) -> bytes:
        """The range of the node's live claims (:mod:`._claims`)."""
        return self.node(node) + b"c/"

    def claim(self, node: str, name: str) -> bytes:
        """The key of the live claim of ``name``."""
        return self.claims(node) + _escape(name).encode()

    def semaphores(self, node: str) -> bytes:
        """The range of every semaphore's keys in the node."""
        return self.node(node) + b"s/"

    def semaphore(self, node: str, name: str) -> bytes:
        """The range of one semaphore's keys: record, queue, grants."""
        return self.semaphores(node) + name_part(name)

    def record(self, node: str, name: str) -> bytes:
        """A persistent semaphore's record."""
        return self.semaphore(node, name) + b"rec"

    def queue(self, node: str, name: str) -> bytes:
        """The range of a semaphore's requests."""
        return self.semaphore(node, name) + b"q/"

    def grants(self, node: str, name: str) -> bytes:
        """The range of a semaphore's grants."""
        return self.semaphore(node, name) + b"g/"


def entry_suffix(sid: int, hold: int, upgrade: bool) -> bytes:
    """The last part of a request's (and its grant's) key."""
    return f"{sid:016x}-{hold:08x}{'+' if upgrade else ''}".encode()


def parse_suffix(suffix: bytes) -> tuple[int, int, bool]:
    """``(sid, hold, upgrade)`` of :func:`entry_suffix`."""
    text = suffix.decode()
    upgrade = text.endswith("+")
    sid, hold = text.rstrip("+").split("-")
    return int(sid, 16), int(hold, 16), upgrade


def encode(value: dict[str, Any]) -> bytes:
    """A value as stored."""
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def decode(raw: bytes) -> dict[str, Any]:
    """A stored value."""
    value = msgpack.unpackb(raw, raw=False)
    if not isinstance(value, dict):
        raise ValueError("not a map")
    return value


# -- request builders (etcd's protobuf messages) --------------------------------------


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
    """Add :func:`compare_created_before` to ``compares``."""
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
