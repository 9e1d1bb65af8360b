"""The session's record on etcd: what it keeps, whose it is, and the moves made on it.

``n/<node>/sess/<sid>``, on the session's lease, keeps the description, the window,
``seq`` (bumped by each re-attach and each resume), ``key`` (the SHA-256 of the
session's secret: the ticket carries the secret), ``owner`` (a random id of the
client object that owns the session now), its client's identity (``host``,
``pid``, ``name``) and ``at``, when it was opened (UNIX seconds by the opening
client's clock: etcd has none to offer). Every mutating Txn of the session
compares the record's mod_revision with its own last bump's, so a replaced
connection, or a previous owner after a resume, cannot act. A previous owner that
sees a record it did not write knows it was fenced off.

The session also watches its record, which etcd deletes with the lease: a lease
etcd let go is heard as soon as the event arrives, whatever this client's timers
(they sleep through a clock that jumped, a process that was paused).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from typing import Any, Final, Protocol

from aetcd.rpc import rpc_pb2

from tenure._core.values import ClientIdentity
from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import compare_mod, delete, get, put
from tenure._etcd.streams import Watcher, WatchHub
from tenure.backends._store import SessionLosses, SessionView, SessionWork
from tenure.backends._store_listing import killed_message
from tenure.backends.etcd._keys import Layout, decode, encode
from tenure.errors import SessionExpiredError, TenureError

__all__ = ["ATTEMPTS", "SessionRecord", "identity_fields", "identity_of", "key_digest"]

log = logging.getLogger("tenure.etcd")
_DELETE = 1  # mvccpb.Event.DELETE

#: Tries at a Txn on the record after a bump of ours whose answer was lost.
ATTEMPTS: Final = 3


def key_digest(secret: bytes) -> bytes:
    """What the session's record keeps of its secret (the ticket has the secret itself)."""
    return hashlib.sha256(secret).digest()


def identity_fields(identity: ClientIdentity, created_at: float | None) -> dict[str, Any]:
    """What the record keeps of its client's identity and of when it was opened."""
    fields: dict[str, Any] = {"host": identity.host, "pid": identity.pid, "name": identity.name}
    if created_at is not None:
        fields["at"] = created_at
    return fields


def identity_of(value: dict[str, Any]) -> tuple[str, ClientIdentity, float | None]:
    """A record's description, identity and creation time (defaults for a record written
    before tenure 0.14 kept them, or one that is not tenure's)."""

    def text(key: str) -> str:
        found = value.get(key)
        return found if isinstance(found, str) else ""

    pid, at = value.get("pid"), value.get("at")
    return (
        text("description"),
        ClientIdentity(text("host"), pid if type(pid) is int and pid >= 0 else 0, text("name")),
        float(at) if isinstance(at, int | float) else None,
    )


class RecordHome(SessionView, SessionLosses, SessionWork, Protocol):
    """What a :class:`SessionRecord` asks of its session: whether it lives, to be told
    it was lost (or its node dropped), and its re-attach sent until answered."""


class SessionRecord:
    """One session's record, and this client object's claim on it (module docstring).

    ``seq_rev`` is the record's mod_revision after our last bump (every mutating
    Txn of the session compares it); ``created`` its create_revision (the same
    lease id on another record is another session); ``node_rev`` the node's
    settings' create_revision when the session opened (dropped and made again is
    another node).
    """

    def __init__(
        self,
        conn: EtcdClient,
        layout: Layout,
        node: str,
        lease_id: int,
        *,
        seq: int,
        seq_rev: int,
        created: int,
        node_rev: int,
        secret: bytes,
        owner_id: bytes,
        description: str,
        window: float,
        identity: ClientIdentity,
        created_at: float | None,
    ) -> None:
        self._conn = conn
        self._layout = layout
        self.node = node
        self.lease_id = lease_id
        self.key = layout.session(node, lease_id)
        self.seq, self.seq_rev, self.created = seq, seq_rev, created
        self.node_rev = node_rev
        #: The ticket's secret (the record keeps its digest) and this object's owner id.
        self.secret = secret
        self.owner_id = owner_id
        self.description = description
        self.window = window
        self.identity = identity
        self.created_at = created_at
        self.session: RecordHome
        self._watcher: Watcher | None = None
        self._following: asyncio.Task[None] | None = None

    def bind(self, session: RecordHome) -> None:
        """The session this record is of."""
        self.session = session

    def value(self, seq: int) -> bytes:
        """The record with ``seq``, owned by this client object."""
        return encode(
            {
                "description": self.description,
                "window": self.window,
                "seq": seq,
                "key": key_digest(self.secret),
                "owner": self.owner_id,
                **identity_fields(self.identity, self.created_at),
            }
        )

    def owns(self, kv: Any) -> bool:
        """Whether a version of the record is one this client object wrote."""
        try:
            return bool(decode(kv.value).get("owner") == self.owner_id)
        except ValueError:
            return False

    def fenced(self) -> None:
        """Another client resumed this session with its ticket: lose it, let nothing go."""
        self.session.lose(
            SessionExpiredError(
                f"session {self.lease_id} was resumed by another client (with its ticket): "
                "this client is fenced off"
            )
        )

    def adopt(self, kv: Any) -> bool:
        """Take the record ``kv`` as our last bump if we wrote it; else we are fenced off.

        (A bump of ours whose answer was lost with a connection left the record at a
        revision we never heard of: ours all the same.) Returns whether it was ours; if
        it is the session's record and not ours, the session is lost (fenced).
        """
        if int(kv.create_revision) != self.created:
            return False  # another session's record, the lease having gone: diagnose
        if not self.owns(kv):
            self.fenced()
            return False
        self.seq, self.seq_rev = int(decode(kv.value)["seq"]), int(kv.mod_revision)
        return True

    async def diagnose(self) -> None:
        """The record or the lease may be gone: lose the session, as dropped or expired."""
        if self.session.ended is not None:
            return
        layout = self._layout
        reply = await self._conn.txn(
            [],
            [
                get(self.key),
                get(layout.config(self.node)),
                get(layout.killed(self.node, self.lease_id)),
            ],
        )
        record, config = reply.responses[0].response_range, reply.responses[1].response_range
        if record.kvs and int(record.kvs[0].create_revision) == self.created:
            if not self.owns(record.kvs[0]):
                self.fenced()  # resumed by another client: alive, but not ours
            return  # alive after all
        if not config.kvs or int(config.kvs[0].create_revision) != self.node_rev:
            self.session.dropped()
        elif reply.responses[2].response_range.kvs:  # kill_session's marker
            self.session.lose(SessionExpiredError(killed_message(self.lease_id)))
        else:
            self.session.lose(
                SessionExpiredError(f"session {self.lease_id}: its etcd lease expired")
            )

    async def ensure_alive(self) -> None:
        """:meth:`diagnose`, then raise the session's loss if it ended (a part that found
        the record, the node or a key of the session gone asks this before it decides)."""
        await self.diagnose()
        self.session.check_alive()

    async def reattach(self) -> None:
        """After a new keepalive stream: keep the lease if it lives, and bump ``seq``.

        Sent again while etcd cannot be reached (right after a failover the cluster
        may still be choosing a leader), until done or the session ends: a re-attach
        given up would leave Txns of the replaced connection able to act.
        """
        if self.session.ended is None:
            await self.session.until_answered(self._reattach)

    async def _reattach(self) -> None:
        if self.session.ended is not None:
            return
        request = rpc_pb2.LeaseTimeToLiveRequest(ID=self.lease_id)
        reply = await self._conn.lease_call("LeaseTimeToLive", request)
        if reply.TTL <= 0:
            await self.diagnose()
            return
        for _ in range(ATTEMPTS):
            seq = self.seq + 1
            reply = await self._conn.txn(
                [compare_mod(self.key, self.seq_rev)],
                [put(self.key, self.value(seq), self.lease_id)],
                [get(self.key)],
            )
            if reply.succeeded:
                self.seq, self.seq_rev = seq, int(reply.header.revision)
                return
            record = reply.responses[0].response_range.kvs
            if not record or not self.adopt(record[0]):
                await self.diagnose()
                return
        await self.diagnose()

    async def let_go(self) -> None:
        """Revoke the lease, unless another client resumed the session (then it is theirs).

        The record is deleted first under a compare of our last bump: a resume racing
        this finds no record (the session is over), and one that came first makes the
        compare fail, and we leave its lease alone.
        """
        with contextlib.suppress(TenureError):
            for _ in range(ATTEMPTS):
                reply = await self._conn.txn(
                    [compare_mod(self.key, self.seq_rev)],
                    [delete(self.key)],
                    [get(self.key)],
                )
                record = reply.responses[0].response_range.kvs
                if reply.succeeded or not record:
                    break
                if not self.owns(record[0]):
                    return  # resumed elsewhere: not ours to end
                self.seq_rev = int(record[0].mod_revision)
            request = rpc_pb2.LeaseRevokeRequest(ID=self.lease_id)
            await self._conn.lease_call("LeaseRevoke", request)

    # -- following the record ---------------------------------------------------------

    def follow(self, hub: WatchHub) -> None:
        """Watch the record from after our last bump (deleted with the lease: the news
        that etcd let it go, as soon as it can arrive)."""
        self._watcher = hub.watch(self.key, b"", self.seq_rev + 1)
        self._following = asyncio.create_task(self._follow(self._watcher))

    async def _follow(self, watcher: Watcher) -> None:
        while self.session.ended is None:
            await watcher.wait()
            events, reset = watcher.drain()
            if reset or any(event.type == _DELETE or not self.owns(event.kv) for event in events):
                try:
                    await self.diagnose()
                except TenureError as error:  # etcd unreachable: the deadline decides
                    log.info("session %d: record check failed: %s", self.lease_id, error)
                if reset and self.session.ended is None:
                    watcher.restart(self.seq_rev + 1)

    def stop(self) -> None:
        """Stop following the record (the session ended)."""
        if self._watcher is not None:
            self._watcher.cancel()
        if self._following is not None and self._following is not asyncio.current_task():
            self._following.cancel()
