"""The Txns of one session: each compares the session's record, so only its owner acts.

Every mutating Txn of a session first compares the session's record's
mod_revision with the revision of this client's last bump of ``seq``
(:class:`~tenure.backends.etcd._record.SessionRecord`), and reads the record when that
fails. A Txn that failed because our own re-attach bumped ``seq`` meanwhile (in
flight, or its answer lost) is sent again at the new revision; one that finds
the record gone, or another client's, loses the session (diagnosed: dropped,
expired, killed or fenced off).
"""

from __future__ import annotations

from typing import Any

from aetcd.rpc import rpc_pb2

from tenure._core.values import NodeConfig
from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import EQUAL, MOD, get_prefix
from tenure.backends.etcd._keys import Layout
from tenure.backends.etcd._node import NodeView, config_of
from tenure.backends.etcd._queue import SemState
from tenure.backends.etcd._record import SessionRecord
from tenure.errors import NotFoundError

__all__ = ["TxnSender"]

_parse_txn = rpc_pb2.TxnRequest.FromString


class TxnSender:
    """Sends one session's Txns and reads (module docstring)."""

    def __init__(
        self, conn: EtcdClient, layout: Layout, record: SessionRecord, view: NodeView
    ) -> None:
        self.conn = conn
        self.layout = layout
        self.record = record
        self.view = view
        self.node = record.node
        #: :meth:`new_txn`'s start, serialized, and the ``seq_rev`` it compares.
        self._base, self._base_rev = b"", -1

    async def txn(self, compares: list[Any], success: list[Any], failure: list[Any]) -> Any:
        """A Txn that also compares the session's ``seq``; raises the loss if it is gone.

        ``failure`` ops come after a read of the session's record: the caller finds
        its own at ``responses[1:]``.
        """
        request = self.new_txn()
        request.compare.extend(compares)
        request.success.extend(success)
        request.failure.extend(failure)
        return await self.send(request)

    def new_txn(self) -> Any:
        """A TxnRequest with the session's compare and read in place (:meth:`send` it).

        Callers add their compares and ops in place (``request.compare.add(...)``,
        :func:`~tenure._etcd.requests.add_put`...): building a request in one
        message, not from messages copied into it, is most of what an acquire costs
        this client. The session's part is parsed from its bytes, made once per bump
        of ``seq`` (a quarter of the cost of adding it).
        """
        if self._base_rev != self.record.seq_rev:
            base = rpc_pb2.TxnRequest()
            base.compare.add(
                key=self.record.key, target=MOD, result=EQUAL, mod_revision=self.record.seq_rev
            )
            base.failure.add().request_range.key = self.record.key
            self._base, self._base_rev = base.SerializeToString(), self.record.seq_rev
        return _parse_txn(self._base)

    async def send(self, request: Any) -> Any:
        """Send a request of :meth:`new_txn` (see :meth:`txn`)."""
        record, session = self.record, self.record.session
        while True:
            session.check_alive()
            used = request.compare[0].mod_revision = record.seq_rev
            reply = await self.conn.send_txn(request)
            if reply.succeeded:
                return reply
            found = reply.responses[0].response_range
            if not found.kvs:
                await record.ensure_alive()
                continue
            if int(found.kvs[0].mod_revision) != used:
                if record.seq_rev != used:
                    continue  # re-attached meanwhile: again, with the new seq
                # Bumped by our re-attach (in flight, or its answer lost): again, at
                # its revision; or by a resume elsewhere: fenced off, raise the loss.
                if not record.adopt(found.kvs[0]):
                    await record.ensure_alive()
                continue
            return reply

    async def config(self) -> NodeConfig:
        """The node's settings, read now (for administration; acquires use the view)."""
        reply = await self.conn.range(rpc_pb2.RangeRequest(key=self.layout.config(self.node)))
        if not reply.kvs:
            await self.record.ensure_alive()
            raise NotFoundError(f"node {self.node!r} does not exist")
        self.view.update(reply.kvs[0])
        return config_of(reply.kvs[0])

    async def read(self, name: str) -> SemState:
        """The semaphore's state, read now."""
        prefix = self.layout.semaphore(self.node, name)
        reply = await self.conn.txn([], [get_prefix(prefix)])
        kvs = reply.responses[0].response_range.kvs
        return SemState.parse(name, prefix, kvs, int(reply.header.revision))

    async def count_semaphores(self) -> int:
        """How many semaphores the node has (names with a record or a request), read now;
        the view keeps the count for its bound."""
        prefix = self.layout.semaphores(self.node)
        reply = await self.conn.txn([], [get_prefix(prefix, keys_only=True)])
        kvs = reply.responses[0].response_range.kvs
        count = len({bytes(kv.key)[len(prefix) :].split(b"/")[0] for kv in kvs})
        self.view.counted = (count, int(reply.header.revision))
        return count
