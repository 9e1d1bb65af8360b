"""etcd's v3 lock API as a bench :class:`~bench.peers.clients.LockClient` (gRPC, protobuf).

``/v3lockpb.Lock/Lock`` and ``/Unlock`` over ``grpc.aio``, a lease with keepalive per
session, like Go's ``concurrency.NewSession``: the ``etcd`` peer of the benchmarks.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from bench.peers.clients import LockClient, LockSession


class _EtcdChannel:
    """One gRPC channel to etcd with the stubs a lock session calls."""

    def __init__(self, url: str, messages: dict[str, Any], timeout: float) -> None:
        import grpc
        from aetcd.rpc import rpc_pb2_grpc

        self.messages = messages
        self.timeout = timeout
        self.channel = grpc.aio.insecure_channel(url.removeprefix("http://"))
        self.lease = rpc_pb2_grpc.LeaseStub(self.channel)
        self.lock = self.channel.unary_unary(
            "/v3lockpb.Lock/Lock",
            request_serializer=messages["LockRequest"].SerializeToString,
            response_deserializer=messages["LockResponse"].FromString,
        )
        self.unlock = self.channel.unary_unary(
            "/v3lockpb.Lock/Unlock",
            request_serializer=messages["UnlockRequest"].SerializeToString,
            response_deserializer=messages["UnlockResponse"].FromString,
        )

    async def close(self) -> None:
        """Close the channel (its calls end)."""
        await self.channel.close()


class _EtcdSession(LockSession):
    def __init__(self, channel: _EtcdChannel, lease: int, ttl: int) -> None:
        self._channel = channel
        self.lease = lease
        self._keepalive = asyncio.create_task(self._keep_alive(ttl))

    async def _keep_alive(self, ttl: int) -> None:
        # Like concurrency.NewSession: one lease per session, renewed at a third of it.
        from aetcd.rpc import rpc_pb2

        call = self._channel.lease.LeaseKeepAlive()
        try:
            while True:
                await asyncio.sleep(ttl / 3)
                await call.write(rpc_pb2.LeaseKeepAliveRequest(ID=self.lease))
                await call.read()
        finally:
            call.cancel()

    async def acquire(self, key: str) -> Any:
        request = self._channel.messages["LockRequest"](name=key.encode(), lease=self.lease)
        reply = await self._channel.lock(request, timeout=self._channel.timeout)
        return reply.key

    async def release(self, handle: Any) -> None:
        request = self._channel.messages["UnlockRequest"](key=handle)
        await self._channel.unlock(request, timeout=self._channel.timeout)

    async def close(self) -> None:
        from aetcd.rpc import rpc_pb2

        self._keepalive.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._keepalive
        # Revoking the lease releases every lock of the session (session.Close()).
        await self._channel.lease.LeaseRevoke(rpc_pb2.LeaseRevokeRequest(ID=self.lease))


def _lock_messages() -> dict[str, Any]:
    """etcd's v3lockpb messages, built from a descriptor (no generated code ships).

    The response header is declared here with etcd's field numbers rather than
    imported, so the file needs no other .proto in its pool.
    """
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    bytes_, int64, uint64, message = field.TYPE_BYTES, field.TYPE_INT64, field.TYPE_UINT64, 11
    shapes: dict[str, list[tuple[str, int, int, str]]] = {
        "ResponseHeader": [
            ("cluster_id", 1, uint64, ""),
            ("member_id", 2, uint64, ""),
            ("revision", 3, int64, ""),
            ("raft_term", 4, uint64, ""),
        ],
        "LockRequest": [("name", 1, bytes_, ""), ("lease", 2, int64, "")],
        "LockResponse": [
            ("header", 1, message, ".v3lockpb.ResponseHeader"),
            ("key", 2, bytes_, ""),
        ],
        "UnlockRequest": [("key", 1, bytes_, "")],
        "UnlockResponse": [("header", 1, message, ".v3lockpb.ResponseHeader")],
    }
    proto = descriptor_pb2.FileDescriptorProto(
        name="bench/v3lock.proto", package="v3lockpb", syntax="proto3"
    )
    for name, fields in shapes.items():
        msg = proto.message_type.add(name=name)
        for fname, number, ftype, type_name in fields:
            added = msg.field.add(name=fname, number=number, type=ftype)
            added.label = field.LABEL_OPTIONAL
            if type_name:  # set (even empty) only for message fields
                added.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"v3lockpb.{name}"))
        for name in shapes
    }


class EtcdClient(LockClient):
    """etcd's v3 lock API over one gRPC channel, a lease (with keepalive) per session.

    ``/v3lockpb.Lock/Lock`` and ``/Unlock``: what ``etcdctl lock`` and Go's
    concurrency.Mutex users get, the server queueing waiters by revision. (aetcd's
    own Lock is a client-side transaction loop, not this API.) With ``shared=False``
    every session opens a channel (a connection) of its own.
    """

    TTL = 60  # concurrency.NewSession's default lease, in seconds

    def __init__(self, url: str, timeout: float, *, shared: bool = True) -> None:
        super().__init__(url, timeout)
        self.shared = shared
        self._messages: dict[str, Any] = {}
        self._channels: list[_EtcdChannel] = []  # the shared one first, if any

    async def open(self) -> None:
        self._messages = _lock_messages()
        if self.shared:
            self._channels.append(_EtcdChannel(self.url, self._messages, self.timeout))

    async def session(self) -> LockSession:
        from aetcd.rpc import rpc_pb2

        assert self._messages, "open() first"
        if self.shared:
            channel = self._channels[0]
        else:
            channel = _EtcdChannel(self.url, self._messages, self.timeout)
            self._channels.append(channel)
        # The lease grant is the channel's first call: it connects before the clock starts.
        grant = await channel.lease.LeaseGrant(
            rpc_pb2.LeaseGrantRequest(TTL=self.TTL), timeout=self.timeout
        )
        return _EtcdSession(channel, int(grant.ID), self.TTL)

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()
