"""A simulated etcd cluster on the running loop, reached through fake grpc.aio channels.

:class:`SimEtcd` serves one :class:`~tenure.testing.sim.etcd._store.SimEtcdStore` to
the :class:`~tenure.testing.sim.etcd._calls.SimChannel`-s :meth:`SimEtcd.channel`
makes, one per endpoint asked for: aetcd's real stubs run over them, and so does
tenure's :class:`~tenure._etcd.client.EtcdClient` (with its keepalive and watch
streams) once its channel comes from here (a subclass's ``_open_channel``, or a
channel factory in the client's options).

Every message crosses after a latency drawn from the ``rng`` given (``latency`` plus
up to ``jitter`` seconds), in order on each stream. The cluster's work runs in no
simulated process's context and on the loop's own clock (a paused client does not
pause etcd; a client's clock that drifts does not move etcd's). Nothing here reads
the wall clock, starts a thread or draws an unseeded number.

Faults, each a method, so that a run's schedule decides them:

* :meth:`SimEtcd.down` / :meth:`SimEtcd.up`: calls to the endpoint fail with
  UNAVAILABLE (a request reaching it meanwhile is not applied; an answer on its way
  back is lost after its request was); its streams break;
* :meth:`SimEtcd.lose_next_answers`, and ``loss`` (a probability drawn from ``rng``):
  a unary call is applied but its caller gets UNAVAILABLE, and cannot tell;
* :meth:`SimEtcd.leader_change`: every stream breaks ("etcdserver: no leader"), the
  raft term moves on, and every lease is renewed to its TTL plus the election
  timeout, as a new leader's lessor does;
* :meth:`SimEtcd.disconnect`: one host's connections reset (its process died, or
  the link broke): its streams break, its calls under way fail UNAVAILABLE (those
  that reached the cluster were applied all the same).

Given a simulated ``network``, the cluster is its host :data:`ETCD_HOST` there, and
every message between it and a client's host crosses the network
(:meth:`~tenure.testing.sim._network.SimNetwork.carry`): a cut between a server and
etcd holds their messages (a call's deadline passes; what was held arrives after the
heal, and is applied then), a slow link delays them.

etcd's timers run on the loop: a lease is revoked at the first tick of the lessor
(every ``revoke_interval``, 500 ms) after its TTL ran out; watches from a passed
revision are caught up every ``sync_interval`` (100 ms); idle ``progress_notify``
watches hear the revision every ``progress_interval`` (10 minutes). A request over
``max_request_bytes`` that goes through raft is refused ("etcdserver: request is too
large"), one over that plus gRPC's 512 KiB by gRPC; an answer over the channel's
``grpc.max_receive_message_length`` (4 MiB) fails RESOURCE_EXHAUSTED. One member
up serves everything (quorum is not modelled); Authenticate answers that auth is
off; the Maintenance and Cluster APIs answer UNIMPLEMENTED.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import math
import random
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import grpc
from aetcd.rpc import rpc_pb2

from tenure.testing.sim._processes import PROCESS
from tenure.testing.sim.etcd._calls import (
    MAX_RECEIVE,
    SimChannel,
    SimStreamCall,
    SimUnaryCall,
    rpc_error,
)
from tenure.testing.sim.etcd._keyspace import REQUEST_TOO_LARGE, EtcdRpcError
from tenure.testing.sim.etcd._store import SimEtcdStore
from tenure.testing.sim.etcd._streams_served import ETCD_HOST, ServedStream, StreamsServed

if TYPE_CHECKING:
    from tenure.testing.sim._network import SimNetwork

__all__ = ["ETCD_HOST", "GRPC_OVERHEAD", "MAX_REQUEST_BYTES", "SimEtcd"]

#: The cluster's host on the simulated network.
#: etcd's --max-request-bytes, and what its gRPC server takes above it.
MAX_REQUEST_BYTES: Final = 1536 * 1024
GRPC_OVERHEAD: Final = 512 * 1024

_CODE = grpc.StatusCode
_REFUSED: Final = (
    "failed to connect to all addresses; last error: UNAVAILABLE: {}: Connection refused"
)
_RESET: Final = "Socket closed"
_NO_LEADER: Final = "etcdserver: no leader"


class SimEtcd(StreamsServed):
    """One simulated etcd cluster of ``endpoints`` on the running loop (module
    docstring); ``store`` its state (a new one if None). A
    :class:`~tenure.testing.sim.etcd._calls.SimChannelHome`."""

    def __init__(
        self,
        endpoints: Sequence[str],
        rng: random.Random,
        *,
        store: SimEtcdStore | None = None,
        latency: float = 0.0005,
        jitter: float = 0.0005,
        loss: float = 0.0,
        revoke_interval: float = 0.5,
        sync_interval: float = 0.1,
        progress_interval: float = 600.0,
        election_timeout: float = 1.0,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        network: SimNetwork | None = None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.network = network
        #: The channels made, by number, while they live (in the order made).
        self._channels: weakref.WeakValueDictionary[int, SimChannel] = weakref.WeakValueDictionary()
        self._channel_numbers = itertools.count()
        self.store = store = store if store is not None else SimEtcdStore()
        self.members = {endpoint: _member_id(endpoint) for endpoint in endpoints}
        self.rng = rng
        self.latency, self.jitter, self.loss = latency, jitter, loss
        self.revoke_interval, self.sync_interval = revoke_interval, sync_interval
        self.progress_interval, self.election_timeout = progress_interval, election_timeout
        self.max_request_bytes = max_request_bytes
        #: Unary answers lost after their request was applied.
        self.answers_lost = 0
        self._down: set[str] = set()
        self._lose = 0
        self._streams: dict[SimStreamCall, ServedStream] = {}  # the open ones, in order
        self._watch_streams: dict[int, ServedStream] = {}
        self._expiry: asyncio.TimerHandle | None = None
        self._expiry_at: float | None = None
        self._sync: asyncio.TimerHandle | None = None
        # Each unary method: its request type, its handler, and whether the request
        # goes through raft (and so must fit --max-request-bytes).
        self._methods: dict[str, tuple[Any, Callable[[Any], Any], bool]] = {
            "KV/Range": (rpc_pb2.RangeRequest, store.range, False),
            "KV/Put": (rpc_pb2.PutRequest, store.put, True),
            "KV/DeleteRange": (rpc_pb2.DeleteRangeRequest, store.delete_range, True),
            "KV/Txn": (rpc_pb2.TxnRequest, store.txn, True),
            "KV/Compact": (rpc_pb2.CompactionRequest, store.compact, True),
            "Lease/LeaseGrant": (rpc_pb2.LeaseGrantRequest, self._grant, True),
            "Lease/LeaseRevoke": (rpc_pb2.LeaseRevokeRequest, store.lease_revoke, True),
            "Lease/LeaseTimeToLive": (rpc_pb2.LeaseTimeToLiveRequest, self._ttl, False),
            "Lease/LeaseLeases": (rpc_pb2.LeaseLeasesRequest, store.lease_leases, False),
            "Auth/Authenticate": (rpc_pb2.AuthenticateRequest, _auth_off, False),
        }

    # -- what a test or a nemesis does ----------------------------------------------------

    def channel(self, endpoint: str, options: Sequence[tuple[str, Any]] = ()) -> SimChannel:
        """A channel to ``endpoint`` (``options``: grpc's; the receive limit is read)."""
        limit = int(dict(options).get("grpc.max_receive_message_length", MAX_RECEIVE))
        process = PROCESS.get()
        host = None if process is None else process.name
        channel = SimChannel(self, endpoint, limit if limit > 0 else math.inf, host)
        self._channels[next(self._channel_numbers)] = channel
        return channel

    def is_up(self, endpoint: str) -> bool:
        """Whether ``endpoint`` is a member of the cluster and answers."""
        return endpoint in self.members and endpoint not in self._down

    def down(self, endpoint: str) -> None:
        """``endpoint`` stops answering (module docstring)."""
        self._down.add(endpoint)
        for served in [s for s in self._streams.values() if s.call.endpoint == endpoint]:
            self._break(served, _CODE.UNAVAILABLE, _RESET)

    def up(self, endpoint: str) -> None:
        """``endpoint`` answers again."""
        self._down.discard(endpoint)

    def disconnect(self, host: str) -> None:
        """``host``'s connections to the cluster reset (module docstring)."""
        for channel in list(self._channels.values()):
            if channel.host != host:
                continue
            for call in channel.calls():
                if isinstance(call, SimUnaryCall):
                    call.finish(None, rpc_error(_CODE.UNAVAILABLE, _RESET))
                elif call in self._streams:
                    self._break(self._streams[call], _CODE.UNAVAILABLE, _RESET)
                else:
                    call.end(_CODE.UNAVAILABLE, _RESET)

    def lose_next_answers(self, count: int = 1) -> None:
        """The next ``count`` unary calls applied lose their answers (module docstring)."""
        self._lose += count

    def leader_change(self) -> None:
        """A new leader (module docstring)."""
        self.store.promote(self.now(), self.election_timeout)
        for served in list(self._streams.values()):
            self._break(served, _CODE.UNAVAILABLE, _NO_LEADER)
        self._changed()

    def compact(self, revision: int) -> None:
        """Compact the store at ``revision`` (an operator's ``etcdctl compact``)."""
        self.store.compact(rpc_pb2.CompactionRequest(revision=revision))
        self._changed()

    def close(self) -> None:
        """Stop: every stream breaks, no timer of the cluster's is left."""
        for served in list(self._streams.values()):
            self._break(served, _CODE.UNAVAILABLE, "etcdserver: server stopped")
        for timer in (self._expiry, self._sync):
            if timer is not None:
                timer.cancel()
        self._expiry = self._sync = self._expiry_at = None

    # -- unary calls ------------------------------------------------------------------------

    def send_unary(self, call: SimUnaryCall) -> None:
        """Carry ``call``'s request to its endpoint (the answer comes back the same way)."""
        when = self.now() + self._latency()
        if self.is_up(call.endpoint):
            self._carry(call.channel.host, True, None, when, self._serve, call)
        else:
            error = rpc_error(_CODE.UNAVAILABLE, _REFUSED.format(call.endpoint))
            self._carry(call.channel.host, False, None, when, call.finish, None, error)

    def _serve(self, call: SimUnaryCall) -> None:
        if not self.is_up(call.endpoint):  # down with the request on its way: not applied
            call.finish(None, rpc_error(_CODE.UNAVAILABLE, _RESET))
            return
        answer, error = None, None
        try:
            answer = self._apply(call.method, call.request, call.endpoint)
        except EtcdRpcError as refusal:
            error = rpc_error(refusal.code, refusal.details)
        self._changed()
        lost = self._lose > 0 or (self.loss > 0 and self.rng.random() < self.loss)
        self._lose = max(0, self._lose - 1)
        when = self.now() + self._latency()
        self._carry(call.channel.host, False, None, when, self._reply, call, answer, error, lost)

    def _apply(self, method: str, data: bytes, endpoint: str) -> bytes:
        served = self._methods.get(method.removeprefix("/etcdserverpb."))
        if served is None:
            raise EtcdRpcError((_CODE.UNIMPLEMENTED, f"{method} is not modelled by SimEtcd"))
        kind, handler, proposed = served
        limit = self.max_request_bytes + GRPC_OVERHEAD
        if len(data) > limit:
            details = f"grpc: received message larger than max ({len(data)} vs. {limit})"
            raise EtcdRpcError((_CODE.RESOURCE_EXHAUSTED, details))
        request = kind.FromString(data)
        if len(data) > self.max_request_bytes and proposed and not _reads_only(request):
            raise EtcdRpcError(REQUEST_TOO_LARGE)
        response = handler(request)
        response.header.member_id = self.members[endpoint]
        return bytes(response.SerializeToString())

    def _reply(self, call: SimUnaryCall, answer: bytes | None, error: Any, lost: bool) -> None:
        limit = call.channel.max_receive
        if lost or not self.is_up(call.endpoint):
            self.answers_lost += lost
            call.finish(None, rpc_error(_CODE.UNAVAILABLE, _RESET))
        elif answer is not None and len(answer) > limit:
            details = f"Received message larger than max ({len(answer)} vs. {limit})"
            call.finish(None, rpc_error(_CODE.RESOURCE_EXHAUSTED, details))
        else:
            call.finish(answer, error)

    def _grant(self, request: Any) -> Any:
        return self.store.lease_grant(request, self.now())

    def _ttl(self, request: Any) -> Any:
        return self.store.lease_time_to_live(request, self.now())

    # -- etcd's timers ------------------------------------------------------------------------

    def _changed(self) -> None:
        """After any change: send what the watches have to say, set the timers."""
        for number, response in self.store.watches.drain():
            served = self._watch_streams.get(number)
            if served is not None:
                response.header.member_id = self.members[served.call.endpoint]
                self._to_client(served, response.SerializeToString())
        due = when = self.store.next_expiry()
        if due is not None and self.revoke_interval > 0:  # the lessor's next tick after it
            when = max(due, math.ceil(due / self.revoke_interval) * self.revoke_interval)
        if when != self._expiry_at:
            if self._expiry is not None:
                self._expiry.cancel()
            self._expiry_at = when
            self._expiry = None if when is None else self._at(when, self._expire)
        if self._sync is None and self.store.watches.unsynced():
            self._sync = self._at(self.now() + self.sync_interval, self._catch_up)

    def _expire(self) -> None:
        # (the time it was set for: the loop's clock may read a rounding below it)
        now = max(self.now(), self._expiry_at or 0.0)
        self._expiry = self._expiry_at = None
        self.store.expire(now)
        self._changed()

    def _catch_up(self) -> None:
        self._sync = None
        self.store.watches.sync()
        self._changed()


def _member_id(endpoint: str) -> int:
    """A member's id, the same in every run (``hash()`` is salted per process)."""
    return int.from_bytes(hashlib.sha256(endpoint.encode()).digest()[:8], "big")


def _reads_only(request: Any) -> bool:
    """Whether a request is a Txn of ranges only (etcd serves one without raft)."""
    if not isinstance(request, rpc_pb2.TxnRequest):
        return False
    ops = [*request.success, *request.failure]
    return all(op.WhichOneof("request") == "request_range" for op in ops)


def _auth_off(request: Any) -> Any:
    raise EtcdRpcError((_CODE.FAILED_PRECONDITION, "etcdserver: authentication is not enabled"))
