"""A small etcd v3 client for tests: aetcd's generated stubs over one ``grpc.aio`` channel.

For tests that look at etcd itself (the harness's own tests, a backend test that
checks the keys it wrote), not a second backend: calls are bare, every one with a
deadline, and a failure is the ``grpc.aio.AioRpcError`` etcd's client would see.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import grpc
from aetcd.rpc import rpc_pb2, rpc_pb2_grpc

__all__ = ["CHANNEL_OPTIONS", "DEADLINE", "KEEPALIVE_OPTIONS", "EtcdClient", "etcd_client"]

#: Deadline of every call, in seconds.
DEADLINE: Final = 5.0

#: Channel options: straight to the endpoint (no http_proxy from the environment),
#: and quick reconnects, so a healed network is used again within a second.
CHANNEL_OPTIONS: Final = (
    ("grpc.enable_http_proxy", 0),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
)

#: Options that notice a dead connection (a partition) within seconds: a ping sent
#: after 5 s without reads (etcd refuses pings more often than that by default,
#: ``--grpc-keepalive-min-time``), and any ping unanswered for 1 s ends the
#: connection, failing its calls with UNAVAILABLE. With grpcio 1.85
#: ``grpc.keepalive_timeout_ms`` alone does not: a call through a stalled proxy
#: waited for its whole deadline; ``grpc.http2.ping_timeout_ms`` bounds the wait.
KEEPALIVE_OPTIONS: Final = (
    ("grpc.keepalive_time_ms", 5000),
    ("grpc.http2.ping_timeout_ms", 1000),
)


class EtcdClient:
    """KV and Maintenance calls on one channel."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        self.kv = rpc_pb2_grpc.KVStub(channel)
        self.maintenance = rpc_pb2_grpc.MaintenanceStub(channel)

    async def put(self, key: bytes, value: bytes, *, deadline: float = DEADLINE) -> int:
        """Put ``key``; the revision of the write."""
        reply = await self.kv.Put(rpc_pb2.PutRequest(key=key, value=value), timeout=deadline)
        return int(reply.header.revision)

    async def get(self, key: bytes, *, deadline: float = DEADLINE) -> bytes | None:
        """The value of ``key`` (a linearizable read), None when absent."""
        reply = await self.kv.Range(rpc_pb2.RangeRequest(key=key), timeout=deadline)
        return bytes(reply.kvs[0].value) if reply.kvs else None

    async def status(self, *, deadline: float = DEADLINE) -> Any:
        """The Maintenance Status of the member this channel reached."""
        return await self.maintenance.Status(rpc_pb2.StatusRequest(), timeout=deadline)


@asynccontextmanager
async def etcd_client(
    endpoint: str, *, options: tuple[tuple[str, Any], ...] = ()
) -> AsyncIterator[EtcdClient]:
    """A client of ``endpoint`` (``host:port``), its channel closed at the end.

    ``options`` are added to :data:`CHANNEL_OPTIONS` (keepalive, for instance).
    """
    channel = grpc.aio.insecure_channel(endpoint, options=[*CHANNEL_OPTIONS, *options])
    try:
        yield EtcdClient(channel)
    finally:
        await channel.close()
