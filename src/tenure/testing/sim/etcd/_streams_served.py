"""The simulated etcd's streams (:class:`StreamsServed`, a part of
:class:`~tenure.testing.sim.etcd._stubs.SimEtcd`): watch and keepalive streams opened,
their messages carried each way in order, broken, closed, and an idle watch's
progress ticks.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import grpc
from aetcd.rpc import rpc_pb2

from tenure.testing.sim.etcd._calls import SimStreamCall
from tenure.testing.sim.etcd._store import SimEtcdStore

if TYPE_CHECKING:
    from tenure.testing.sim._network import SimNetwork

__all__ = ["ETCD_HOST", "ServedStream", "StreamsServed"]

#: The cluster's host on a simulated network (:class:`~tenure.testing.sim.SimNetwork`).
ETCD_HOST: Final = "etcd"

_CODE = grpc.StatusCode
_REFUSED: Final = (
    "failed to connect to all addresses; last error: UNAVAILABLE: {}: Connection refused"
)
_STREAMS: Final = {
    "/etcdserverpb.Watch/Watch": "watch",
    "/etcdserverpb.Lease/LeaseKeepAlive": "keepalive",
}


@dataclass(eq=False)
class ServedStream:
    """The cluster's end of one stream."""

    call: SimStreamCall
    kind: str  # "watch" or "keepalive"
    number: int  # a watch stream's number in the store's watch table
    open: bool = True
    to_server: float = 0.0  # the last arrival scheduled each way (in order, as TCP's)
    to_client: float = 0.0
    ticker: asyncio.TimerHandle | None = None


class StreamsServed(ABC):
    """The streams of a simulated etcd cluster (module docstring), and how any message
    of the cluster's crosses to a client (:meth:`_carry`): what the cluster gives them
    is :class:`~tenure.testing.sim.etcd._stubs.SimEtcd`'s."""

    store: SimEtcdStore
    members: dict[str, int]
    rng: random.Random
    progress_interval: float
    loop: asyncio.AbstractEventLoop
    network: SimNetwork | None
    latency: float
    jitter: float
    _streams: dict[SimStreamCall, ServedStream]
    _watch_streams: dict[int, ServedStream]

    @abstractmethod
    def is_up(self, endpoint: str) -> bool:
        """Whether ``endpoint`` answers."""

    @abstractmethod
    def _changed(self) -> None:
        """After any change: send what the watches have to say, set the timers."""

    def now(self) -> float:
        """The cluster's time: the loop's, read outside any simulated process (whose
        own clock may be off)."""
        return contextvars.Context().run(self.loop.time)

    def _latency(self) -> float:
        """One crossing's latency, drawn."""
        return self.latency + self.rng.uniform(0.0, self.jitter)

    def _at(self, when: float, callback: Callable[..., object], *args: Any) -> asyncio.TimerHandle:
        """``callback`` at ``when``, in no process's context (the cluster runs while its
        clients are paused)."""
        return self.loop.call_at(when, callback, *args, context=contextvars.Context())

    def _carry(
        self,
        host: str | None,
        to_cluster: bool,
        lane: object | None,
        when: float,
        callback: Callable[..., object],
        *args: Any,
    ) -> None:
        """A message between the cluster and a client on ``host`` (None: of no simulated
        host), to the cluster or from it, over the network if there is one (SimEtcd's
        docstring); ``lane``: the stream whose messages keep their order."""
        if self.network is None or host is None:
            self._at(when, callback, *args)
        elif to_cluster:
            self.network.carry(host, ETCD_HOST, lane, when, callback, *args)
        else:
            self.network.carry(ETCD_HOST, host, lane, when, callback, *args)

    # -- streams ------------------------------------------------------------------------------

    def open_stream(self, call: SimStreamCall) -> None:
        """Open ``call``'s stream, or end it after a crossing: nobody answers there."""
        kind = _STREAMS.get(call.method)
        if kind is None or not self.is_up(call.endpoint):
            code, details = (_CODE.UNAVAILABLE, _REFUSED.format(call.endpoint))
            if kind is None:
                code, details = (_CODE.UNIMPLEMENTED, f"{call.method} is not modelled by SimEtcd")
            when = self.now() + self._latency()
            self._carry(call.channel.host, False, None, when, call.end, code, details)
            return
        number = self.store.watches.open_stream() if kind == "watch" else 0
        self._streams[call] = served = ServedStream(call, kind, number)
        if kind == "watch":
            self._watch_streams[number] = served
            served.ticker = self._at(self.now() + self.progress_interval, self._tick, served)

    def to_server(self, call: SimStreamCall, data: bytes | None) -> None:
        """Carry one message of ``call`` to the cluster, after those before it."""
        served = self._streams.get(call)
        if served is None:
            return  # (never connected, or broken: its reader hears why)
        served.to_server = max(self.now() + self._latency(), served.to_server)
        self._carry(call.channel.host, True, served, served.to_server, self._receive, served, data)

    def hang_up(self, call: SimStreamCall) -> None:
        """The client cancelled ``call``."""
        served = self._streams.get(call)
        if served is not None:
            self._close(served)

    def _receive(self, served: ServedStream, data: bytes | None) -> None:
        if not served.open:
            return
        if served.kind == "keepalive":
            if data is None:  # done writing: etcd's handler ends once it answered
                self._to_client(served, None)
                return
            request = rpc_pb2.LeaseKeepAliveRequest.FromString(data)
            response = self.store.lease_keepalive(request, self.now())
            response.header.member_id = self.members[served.call.endpoint]
            self._to_client(served, response.SerializeToString())
        elif data is not None:  # (etcd keeps a watch stream open after the client's end)
            self.store.watches.request(served.number, rpc_pb2.WatchRequest.FromString(data))
        self._changed()

    def _to_client(self, served: ServedStream, data: bytes | None) -> None:
        served.to_client = max(self.now() + self._latency(), served.to_client)
        host = served.call.channel.host
        self._carry(host, False, served, served.to_client, self._arrive, served, data)

    def _arrive(self, served: ServedStream, data: bytes | None) -> None:
        if not served.open:
            return  # lost with the stream
        if data is not None:
            served.call.deliver(data)
            return
        self._close(served)
        served.call.end(_CODE.OK, "")

    def _break(self, served: ServedStream, code: grpc.StatusCode, details: str) -> None:
        if served.open:
            self._close(served)
            served.call.end(code, details)

    def _close(self, served: ServedStream) -> None:
        served.open = False
        del self._streams[served.call]
        if served.kind == "watch":
            self.store.watches.close_stream(served.number)
            del self._watch_streams[served.number]
        if served.ticker is not None:
            served.ticker.cancel()

    def _tick(self, served: ServedStream) -> None:
        self.store.watches.progress_tick(served.number)
        self._changed()
        served.ticker = self._at(self.now() + self.progress_interval, self._tick, served)
