"""The keyspace of a simulated etcd: every key's versions (etcd's MVCC), read at any
revision not compacted, and the errors etcd answers with.

What :class:`~tenure.testing.sim.etcd._store.SimEtcdStore` keeps its keys in, as
etcd's ``mvcc`` package keeps them (server/storage/mvcc: ``kvstore_txn.go``,
``key_index.go``):

* one global **revision**, 1 in an empty store, which a write (a Put, a DeleteRange
  that deleted something, a Txn that wrote) moves on by exactly one, however many
  keys it changed; each change of a write has its place in it (etcd's sub-revision);
* per key, its **versions** in revision order: a put (create_revision, mod_revision,
  version, lease, value) or a tombstone (a delete); a key's create_revision is the
  revision of the put that made it after its last tombstone, its version counts the
  puts since then;
* a **log** of every change in revision order, which a watch from an old revision
  replays (:mod:`tenure.testing.sim.etcd._watches`);
* **compaction** at revision C: each key keeps its newest version at or below C
  (dropped too if it is a tombstone) and everything after; the log keeps what
  etcd's backend keeps (every change after C, and the puts at C). A read at a
  revision below C fails with ErrCompacted; one at C itself is served.

A write is made between the first change and :meth:`SimKeyspace.end`: reads in
between (a Txn's later ops) see its changes, as etcd's write transaction does.
Nothing here reads a clock.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Final

import grpc
from aetcd.rpc import kv_pb2

__all__ = [
    "COMPACTED",
    "DUPLICATE_KEY",
    "EMPTY_KEY",
    "FUTURE_REV",
    "INVALID_SORT",
    "KEY_NOT_FOUND",
    "LEASE_EXISTS",
    "LEASE_NOT_FOUND",
    "LEASE_TTL_TOO_LARGE",
    "LEASE_PROVIDED",
    "REQUEST_TOO_LARGE",
    "TOO_MANY_OPS",
    "VALUE_PROVIDED",
    "EtcdRpcError",
    "KeyVersion",
    "SimKeyspace",
]

_CODE = grpc.StatusCode
# etcd's own words and codes (api/v3rpc/rpctypes/error.go): tenure's client reads both
# (tenure._etcd.client.translate: "lease not found", "request is too large").
EMPTY_KEY: Final = (_CODE.INVALID_ARGUMENT, "etcdserver: key is not provided")
KEY_NOT_FOUND: Final = (_CODE.INVALID_ARGUMENT, "etcdserver: key not found")
VALUE_PROVIDED: Final = (_CODE.INVALID_ARGUMENT, "etcdserver: value is provided")
LEASE_PROVIDED: Final = (_CODE.INVALID_ARGUMENT, "etcdserver: lease is provided")
TOO_MANY_OPS: Final = (_CODE.INVALID_ARGUMENT, "etcdserver: too many operations in txn request")
DUPLICATE_KEY: Final = (_CODE.INVALID_ARGUMENT, "etcdserver: duplicate key given in txn request")
INVALID_SORT: Final = (_CODE.INVALID_ARGUMENT, "etcdserver: invalid sort option")
COMPACTED: Final = (_CODE.OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted")
FUTURE_REV: Final = (_CODE.OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision")
LEASE_NOT_FOUND: Final = (_CODE.NOT_FOUND, "etcdserver: requested lease not found")
LEASE_EXISTS: Final = (_CODE.FAILED_PRECONDITION, "etcdserver: lease already exists")
LEASE_TTL_TOO_LARGE: Final = (_CODE.OUT_OF_RANGE, "etcdserver: too large lease TTL")
REQUEST_TOO_LARGE: Final = (_CODE.INVALID_ARGUMENT, "etcdserver: request is too large")


class EtcdRpcError(Exception):
    """What etcd answers a request with instead of a response: a gRPC status ``code``
    and its ``details`` (one of the pairs above)."""

    def __init__(self, error: tuple[grpc.StatusCode, str]) -> None:
        super().__init__(error[1])
        self.code, self.details = error


@dataclass(frozen=True, slots=True)
class KeyVersion:
    """One version of a key: a put, or a tombstone (``value`` None) at ``main``."""

    key: bytes
    main: int  # the revision of the write (a tombstone's: the delete's)
    sub: int  # its place among that write's changes
    value: bytes | None
    create: int = 0
    version: int = 0
    lease: int = 0

    @property
    def tombstone(self) -> bool:
        """Whether this version is a delete."""
        return self.value is None

    def message(self, *, with_value: bool = True) -> Any:
        """etcd's ``mvccpb.KeyValue`` of it (a tombstone's: its key and revision only,
        as etcd's watch events carry a delete)."""
        if self.value is None:
            return kv_pb2.KeyValue(key=self.key, mod_revision=self.main)
        return kv_pb2.KeyValue(
            key=self.key,
            create_revision=self.create,
            mod_revision=self.main,
            version=self.version,
            value=self.value if with_value else b"",
            lease=self.lease,
        )


def _main(version: KeyVersion) -> int:
    return version.main


def _within(keys: list[bytes], key: bytes, end: bytes) -> list[bytes]:
    """The keys of sorted ``keys`` in ``[key, end)`` (etcd's range: ``end`` empty is
    ``key`` alone, ``b"\\0"`` every key from ``key`` on)."""
    low = bisect.bisect_left(keys, key)
    if not end:
        return keys[low : low + 1] if low < len(keys) and keys[low] == key else []
    high = len(keys) if end == b"\0" else bisect.bisect_left(keys, end, lo=low)
    return keys[low:high]


def _inside(candidate: bytes, key: bytes, end: bytes) -> bool:
    """Whether ``candidate`` is in the range ``[key, end)`` (as :func:`_within`)."""
    if not end:
        return candidate == key
    return key <= candidate and (end == b"\0" or candidate < end)


class SimKeyspace:
    """Every key's versions, the log of changes, the revision and the compaction
    (module docstring)."""

    def __init__(self) -> None:
        #: The revision of the last write (1: nothing written yet, as in etcd).
        self.revision = 1
        #: The revision compacted at (-1: never; etcd's compactMainRev starts there).
        self.compacted = -1
        self._versions: dict[bytes, list[KeyVersion]] = {}
        self._keys: list[bytes] = []  # the keys of _versions, sorted
        #: The keys live in the newest state (a write in progress's changes in), sorted:
        #: a read of now, the most common, walks these alone, as etcd's index skips
        #: what was deleted (a cluster's trimmed log is thousands of tombstones).
        self._live: list[bytes] = []
        self._log: list[KeyVersion] = []
        self._changes: list[KeyVersion] = []  # the write in progress

    # -- reads ----------------------------------------------------------------------------

    def read_revision(self) -> int:
        """The revision a read sees now: inside a write that changed something, the
        write's (etcd's storeTxnWrite.Range)."""
        return self.revision + 1 if self._changes else self.revision

    def span(self, key: bytes, end: bytes) -> list[bytes]:
        """The keys with versions in ``[key, end)``: ``end`` empty is ``key`` alone,
        ``b"\\0"`` every key from ``key`` on (etcd's mkGteRange)."""
        return _within(self._keys, key, end)

    def at(self, key: bytes, revision: int) -> KeyVersion | None:
        """``key``'s live version at ``revision`` (None: absent then)."""
        versions = self._versions.get(key)
        if not versions:
            return None
        found = versions[-1]
        if found.main > revision:  # (a key's newest version is the one read, mostly)
            place = bisect.bisect_right(versions, revision, key=_main)
            if place == 0:
                return None
            found = versions[place - 1]
        return None if found.value is None else found

    def live(self, key: bytes, end: bytes, revision: int, limit: int = 0) -> list[KeyVersion]:
        """The live versions of ``[key, end)`` at ``revision``, in key order: the first
        ``limit`` of them (0: all)."""
        if revision >= self.read_revision():
            keys = _within(self._live, key, end)
            versions = self._versions
            return [versions[k][-1] for k in (keys[:limit] if limit else keys)]
        found: list[KeyVersion] = []
        for k in self.span(key, end):
            version = self.at(k, revision)
            if version is not None:
                found.append(version)
                if len(found) == limit:
                    break
        return found

    def count(self, key: bytes, end: bytes, revision: int) -> int:
        """How many keys of ``[key, end)`` are live at ``revision`` (not compacted): the
        live keys now, less what the changes since ``revision`` made live, plus what
        they deleted."""
        now = len(_within(self._live, key, end))
        if revision >= self.read_revision():
            return now
        changed = {v.key for v in self.changes_since(revision + 1) if _inside(v.key, key, end)}
        for k in changed:
            now += (self.at(k, revision) is not None) - (self._versions[k][-1].value is not None)
        return now

    def changes_since(self, revision: int) -> list[KeyVersion]:
        """Every change kept from ``revision`` on, in order (a watch's replay)."""
        return self._log[bisect.bisect_left(self._log, revision, key=_main) :]

    # -- a write --------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes, lease: int) -> KeyVersion:
        """Put ``key`` in the write in progress; its new version."""
        before = self.at(key, self.read_revision())
        main = self.revision + 1
        version = KeyVersion(
            key,
            main,
            len(self._changes),
            value,
            create=before.create if before is not None else main,
            version=before.version + 1 if before is not None else 1,
            lease=lease,
        )
        self._add(version)
        return version

    def delete(self, key: bytes) -> None:
        """Delete ``key`` (live) in the write in progress."""
        self._add(KeyVersion(key, self.revision + 1, len(self._changes), None))

    def _add(self, version: KeyVersion) -> None:
        key = version.key
        versions = self._versions.get(key)
        if versions is None:
            versions = self._versions[key] = []
            bisect.insort(self._keys, key)
        was_live = bool(versions) and versions[-1].value is not None
        versions.append(version)
        if was_live and version.value is None:
            del self._live[bisect.bisect_left(self._live, key)]
        elif not was_live and version.value is not None:
            bisect.insort(self._live, key)
        self._log.append(version)
        self._changes.append(version)

    def end(self) -> list[KeyVersion]:
        """End the write in progress: the revision moves on if it changed anything;
        its changes, in order."""
        changes, self._changes = self._changes, []
        if changes:
            self.revision += 1
        return changes

    # -- compaction -----------------------------------------------------------------------

    def compact(self, revision: int) -> None:
        """Forget what no read at ``revision`` or later needs (module docstring); the
        caller checked that ``compacted < revision <= self.revision``."""
        for key in self._keys:
            versions = self._versions[key]
            place = bisect.bisect_right(versions, revision, key=_main)
            if place == 0:
                continue  # every version is newer: all kept
            keep = place - 1
            if versions[keep].tombstone:
                keep = place  # a key deleted by then is gone from the index
            del versions[:keep]
            if not versions:
                del self._versions[key]
        self._keys = [key for key in self._keys if key in self._versions]
        start = bisect.bisect_left(self._log, revision, key=_main)
        # A tombstone at the compaction revision itself goes too (key_index.go's
        # compact: "remove any tombstone"): a watch from there hears only the puts.
        self._log = [v for v in self._log[start:] if v.main > revision or not v.tombstone]
        self.compacted = revision
