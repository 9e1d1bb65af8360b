"""A cluster's state in etcd, as its servers read and write it (the keys: :mod:`.keys`).

Every write a leader makes to the log or the snapshot pointer is one Txn that holds
only while its election key still exists with the revision it was elected at (its
term): a deposed or paused leader can never append (docs/cluster.md, "the fence").
An append also holds only if its entry's key does not exist yet, so two writers can
never fork the log. Reads that must agree with each other (a snapshot and the log
after it) are made at one revision.

Every call goes through :class:`~tenure._etcd.client.EtcdClient` (failover
between the endpoints, auth, TLS), which tries an unanswered call again: a Txn
applied once fails its compare the second time, and :meth:`ClusterStore.append`
reads back what is there to tell "mine" from "someone else's".
"""

from __future__ import annotations

import enum
import os
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

from aetcd.rpc import rpc_pb2

from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import compare_create, delete_prefix, get, prefix_end, put, range_request
from tenure.server._cluster.keys import (
    ClusterDataError,
    ClusterKeys,
    LogEntry,
    Pointer,
    ServerRecord,
    decode_entry,
    decode_member,
    decode_pointer,
    encode,
)

__all__ = ["Appended", "ClusterStore", "Leader", "LogPage"]

#: The bytes of answers one read asks for at most: pages of log entries or snapshot
#: chunks stay well within the channel's limit (``cluster_url.MAX_RECEIVE``).
READ_BUDGET: Final = 32 * 1024 * 1024
#: How long one try of an append waits for etcd's answer, in seconds: an append that
#: etcd's leader took with it when it died is tried again (on the next member) after
#: this, not after the connection's ``request_timeout`` (5 s), during which the leader
#: could answer nothing. A Txn of one entry takes milliseconds on a healthy etcd.
APPEND_TIMEOUT: Final = 1.0
#: The length of a cluster's instance id.
ID_BYTES: Final = 16
#: The length of a cluster's secret.
SECRET_BYTES: Final = 32


class Appended(enum.Enum):
    """What became of an append."""

    DONE = "done"  # the entry is in the log
    DEPOSED = "deposed"  # this server's election key is gone (or renewed): it does not lead
    TAKEN = "taken"  # another writer put that index first: this server does not lead


@dataclass(frozen=True, slots=True)
class Leader:
    """The current leader, as its election key says: its record and its term."""

    member: ServerRecord
    term: int
    lease: int


@dataclass(frozen=True, slots=True)
class LogPage:
    """Log entries read at one revision, in index order, and whether more follow."""

    entries: list[tuple[int, LogEntry]]
    revision: int
    more: bool


async def made_once(conn: EtcdClient, key: bytes, size: int, what: str) -> bytes:
    """The value of ``key`` in ``conn``'s etcd: ``size`` random bytes put there by the
    first to ask (an id, a secret: the same for everyone after).

    Raises:
        ClusterDataError: the key holds something else (``what``, in the message).
    """
    reply = await conn.txn([compare_create(key, 0)], [put(key, os.urandom(size))], [get(key)])
    if reply.succeeded:
        reply = await conn.range(rpc_pb2.RangeRequest(key=key))
        kvs = reply.kvs
    else:
        kvs = reply.responses[0].response_range.kvs
    if not kvs or len(kvs[0].value) != size:
        raise ClusterDataError(f"{key.decode()} is not a {size}-byte {what}")
    return bytes(kvs[0].value)


class ClusterStore:
    """The cluster's keys in etcd, read and written (module docstring)."""

    def __init__(self, conn: EtcdClient, keys: ClusterKeys) -> None:
        self.conn = conn
        self.keys = keys

    # -- identity -----------------------------------------------------------------------

    async def instance_id(self) -> bytes:
        """The cluster's instance id: made by the first server ever to ask, read after.

        Raises:
            ClusterDataError: the key holds something else.
        """
        return await self._made_once(self.keys.id, ID_BYTES, "instance id")

    async def secret(self) -> bytes:
        """The cluster's secret, which the faces sign with (the tokens and tickets they
        hand out): made by the first server to ask, the same on every member after.

        Raises:
            ClusterDataError: the key holds something else.
        """
        return await self._made_once(self.keys.secret, SECRET_BYTES, "secret")

    async def _made_once(self, key: bytes, size: int, what: str) -> bytes:
        """The value of ``key``: ``size`` random bytes put there by the first to ask."""
        return await made_once(self.conn, key, size, what)

    # -- leases and the election ---------------------------------------------------------

    async def grant(self, ttl: int) -> int:
        """A new lease of ``ttl`` seconds; its id."""
        reply = await self.conn.lease_call("LeaseGrant", rpc_pb2.LeaseGrantRequest(TTL=ttl))
        return int(reply.ID)

    async def revoke(self, lease: int) -> None:
        """Revoke ``lease`` (its keys go at once: a resigning leader's successor is next)."""
        await self.conn.lease_call("LeaseRevoke", rpc_pb2.LeaseRevokeRequest(ID=lease))

    async def stand(self, lease: int, me: ServerRecord) -> int:
        """Be a candidate (on ``lease``); the create revision of its key (its term, once
        it leads)."""
        key = self.keys.candidate(lease)
        reply = await self.conn.txn(
            [compare_create(key, 0)], [put(key, encode(me), lease)], [get(key)]
        )
        if reply.succeeded:
            return int(reply.header.revision)
        return int(reply.responses[0].response_range.kvs[0].create_revision)

    async def ahead_of(self, term: int) -> int | None:
        """The create revision of the candidate just before the one at ``term`` (None:
        it is the first: it leads)."""
        request = range_request(self.keys.candidates, keys_only=True)
        request.max_create_revision = term - 1
        request.sort_target = rpc_pb2.RangeRequest.CREATE
        request.sort_order = rpc_pb2.RangeRequest.DESCEND
        request.limit = 1
        reply = await self.conn.range(request)
        return int(reply.kvs[0].create_revision) if reply.kvs else None

    async def leader(self) -> tuple[Leader | None, int]:
        """The current leader (None: no candidate), and the revision it was read at."""
        request = range_request(self.keys.candidates)
        request.sort_target = rpc_pb2.RangeRequest.CREATE
        request.sort_order = rpc_pb2.RangeRequest.ASCEND
        request.limit = 1
        reply = await self.conn.range(request)
        revision = int(reply.header.revision)
        if not reply.kvs:
            return None, revision
        kv = reply.kvs[0]
        lease = int(kv.key[len(self.keys.candidates) :], 16)
        return Leader(decode_member(kv.value), int(kv.create_revision), lease), revision

    # -- the log --------------------------------------------------------------------------

    async def append(self, index: int, entry: LogEntry, lease: int) -> Appended:
        """Put log entry ``index``, if this server still leads in ``entry.term`` (the fence)."""
        candidate, key = self.keys.candidate(lease), self.keys.entry(index)
        value = encode(entry)
        reply = await self.conn.txn(
            [compare_create(candidate, entry.term), compare_create(key, 0)],
            [put(key, value)],
            [get(candidate), get(key)],
            timeout=APPEND_TIMEOUT,
        )
        if reply.succeeded:
            return Appended.DONE
        ours, there = (response.response_range.kvs for response in reply.responses)
        if there and bytes(there[0].value) == value:
            return Appended.DONE  # our own, applied by a try the connection repeated
        if not ours or int(ours[0].create_revision) != entry.term:
            return Appended.DEPOSED
        return Appended.TAKEN

    async def read_log(self, after: int, *, revision: int = 0) -> LogPage:
        """Log entries from ``after + 1`` on, at ``revision`` (0: now): one page."""
        request = rpc_pb2.RangeRequest(
            key=self.keys.entry(after + 1),
            range_end=prefix_end(self.keys.log),
            revision=revision,
            limit=max(1, READ_BUDGET // (2 * 1024 * 1024)),
        )
        reply = await self.conn.range(request)
        entries = [(self.keys.index_of(kv.key), decode_entry(kv.value)) for kv in reply.kvs]
        return LogPage(entries, int(reply.header.revision), bool(reply.more))

    async def log_pages(self, after: int, *, revision: int = 0) -> AsyncIterator[LogPage]:
        """Every log entry after ``after``, page by page, all at one revision."""
        while True:
            page = await self.read_log(after, revision=revision)
            revision = page.revision
            yield page
            if not page.more or not page.entries:
                return
            after = page.entries[-1][0]

    async def last_index(self) -> int:
        """The index of the newest log entry etcd holds; the snapshot pointer's index
        when the log holds none (a snapshot trimmed every entry); 0 when neither exists.

        One Txn (no compares) of two reads, so both see one revision and the read is
        linearizable: every entry etcd committed before it was sent has an index at
        most the answer (the freshness of a standby is judged by it: :mod:`.freshness`).
        """
        newest = range_request(self.keys.log, keys_only=True)
        newest.sort_target = rpc_pb2.RangeRequest.KEY
        newest.sort_order = rpc_pb2.RangeRequest.DESCEND  # keys sort as indexes do
        newest.limit = 1
        reply = await self.conn.txn(
            [], [rpc_pb2.RequestOp(request_range=newest), get(self.keys.snapshot)]
        )
        entries, pointers = (response.response_range.kvs for response in reply.responses)
        last = self.keys.index_of(bytes(entries[0].key)) if entries else 0
        if pointers:
            # An install drops every entry up to its pointer's index, so the pointer
            # is newer only when the log is empty; max() holds either way.
            last = max(last, decode_pointer(pointers[0].value).index)
        return last

    # -- snapshots ------------------------------------------------------------------------

    async def pointer(self, *, revision: int = 0) -> tuple[Pointer | None, int]:
        """The newest snapshot's pointer (None: none yet) and the revision it was read at."""
        reply = await self.conn.range(
            rpc_pb2.RangeRequest(key=self.keys.snapshot, revision=revision)
        )
        revision = int(reply.header.revision)
        return (decode_pointer(reply.kvs[0].value) if reply.kvs else None), revision

    async def read_snapshot(self, pointer: Pointer, revision: int) -> bytes:
        """The bytes of the snapshot ``pointer`` names, read at ``revision``.

        Raises:
            ClusterDataError: chunks are missing or the bytes do not check out.
        """
        prefix = self.keys.chunks(pointer.index, pointer.term)
        parts: list[bytes] = []
        start = prefix
        while True:
            request = rpc_pb2.RangeRequest(
                key=start, range_end=prefix_end(prefix), revision=revision, limit=8
            )
            reply = await self.conn.range(request)
            parts += [bytes(kv.value) for kv in reply.kvs]
            if not reply.more or not reply.kvs:
                break
            start = bytes(reply.kvs[-1].key) + b"\0"
        data = b"".join(parts)
        if len(parts) != pointer.chunks or len(data) != pointer.size:
            raise ClusterDataError(
                f"snapshot {pointer.index}: {len(parts)} chunks of {len(data)} bytes, "
                f"expected {pointer.chunks} of {pointer.size}"
            )
        if zlib.crc32(data) != pointer.crc:
            raise ClusterDataError(f"snapshot {pointer.index}: checksum mismatch")
        return data

    async def write_chunks(self, index: int, term: int, data: bytes, chunk: int) -> Pointer:
        """Write a snapshot's bytes in chunks of at most ``chunk`` bytes (not yet in use)."""
        count = 0
        for count, start in enumerate(range(0, len(data), chunk), 1):
            key = self.keys.chunk(index, term, count - 1)
            await self.conn.txn([], [put(key, data[start : start + chunk])])
        return Pointer(index, term, count, len(data), zlib.crc32(data))

    async def install(self, pointer: Pointer, lease: int, replaced: Pointer | None) -> bool:
        """Make ``pointer`` the newest snapshot and drop the log entries it covers, and the
        chunks of ``replaced``, if this server still leads in ``pointer.term``."""
        ops = [
            put(self.keys.snapshot, encode(pointer)),
            _delete_range(self.keys.log, self.keys.entry(pointer.index + 1)),
        ]
        if replaced is not None:
            ops.append(delete_prefix(self.keys.chunks(replaced.index, replaced.term)))
        reply = await self.conn.txn([compare_create(self.keys.candidate(lease), pointer.term)], ops)
        return bool(reply.succeeded)

    async def drop_chunks(self, pointer: Pointer) -> None:
        """Delete the chunks of a snapshot that was never put in use."""
        await self.conn.txn([], [delete_prefix(self.keys.chunks(pointer.index, pointer.term))])

    # -- members ---------------------------------------------------------------------------

    async def record(self, member: ServerRecord, lease: int) -> None:
        """Write this member's record (on its lease)."""
        await self.conn.txn([], [put(self.keys.member(member.name), encode(member), lease)])

    async def members(self) -> list[ServerRecord]:
        """Every member's record, by name (unreadable ones left out)."""
        reply = await self.conn.range(range_request(self.keys.members))
        found = []
        for kv in reply.kvs:
            try:
                found.append(decode_member(kv.value))
            except ClusterDataError:
                continue
        return found


def _delete_range(start: bytes, end: bytes) -> Any:
    request = rpc_pb2.DeleteRangeRequest(key=start, range_end=end)
    return rpc_pb2.RequestOp(request_delete_range=request)
