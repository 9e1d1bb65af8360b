"""One lock-client interface over every system compared, as its users would write it.

A :class:`LockClient` is what a process opens once (a tenure client, a Redis
connection pool, a gRPC channel to etcd); a :class:`LockSession` is one client of
the lock service (a tenure session, a Redis lock user, an etcd lease, a PostgreSQL
connection, a dflockd connection). Every wait is bounded by ``timeout`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import tenure

#: The tenure node every lock of the benchmarks lives in.
NODE = "bench"


class LockSession:
    """One client of a lock service: acquire and release mutexes by key."""

    async def acquire(self, key: str) -> Any:
        """Wait until the mutex ``key`` is held; return what release needs."""
        raise NotImplementedError

    async def release(self, handle: Any) -> None:
        """Release what ``acquire`` returned."""
        raise NotImplementedError

    async def close(self) -> None:
        """End the session (what it holds is released)."""


class LockClient:
    """What one process opens once to reach a lock service."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout

    async def open(self) -> None:
        """Connect (lazily connecting clients do nothing here)."""

    async def session(self) -> LockSession:
        """A new session (one client of the lock service)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Close the client and everything it opened."""


# -- tenure ---------------------------------------------------------------------------


class _TenureSession(LockSession):
    def __init__(self, session: tenure.Session, own: tenure.Client | None) -> None:
        self._session = session
        self._own = own  # the client this session alone uses, if any

    async def acquire(self, key: str) -> Any:
        return await self._session.mutex(key).lock()

    async def release(self, handle: Any) -> None:
        await handle.release()

    async def close(self) -> None:
        await self._session.close()
        if self._own is not None:
            await self._own.aclose()


class TenureClient(LockClient):
    """``tenure.connect(url)``: one client (one connection) and a session per user.

    With ``shared=False`` every session opens a client (a connection) of its own.
    """

    def __init__(self, url: str, timeout: float, *, shared: bool = True) -> None:
        # A private memory:// would give every client its own state: share it by name.
        super().__init__("memory://bench" if url == "memory://" else url, timeout)
        self.shared = shared
        self._client: tenure.Client | None = None

    async def open(self) -> None:
        self._client = await tenure.connect(self.url)
        await self._client.create_node(NODE, exist_ok=True)

    async def session(self) -> LockSession:
        assert self._client is not None, "open() first"
        if self.shared:
            return _TenureSession(await self._client.session(NODE), None)
        own = await tenure.connect(self.url)
        return _TenureSession(await own.session(NODE), own)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()


# -- redis ----------------------------------------------------------------------------


class _RedisSession(LockSession):
    def __init__(self, redis: Any, timeout: float) -> None:
        self._redis = redis
        self._timeout = timeout

    async def acquire(self, key: str) -> Any:
        # The stock Lock with its defaults (it polls every 0.1 s while the key is
        # taken): what a redis-py user gets. timeout= is the lease, a lock's TTL.
        lock = self._redis.lock(key, timeout=30, blocking_timeout=self._timeout)
        if not await lock.acquire():
            raise TimeoutError(f"redis lock {key!r} not acquired in {self._timeout}s")
        return lock

    async def release(self, handle: Any) -> None:
        await handle.release()


class RedisClient(LockClient):
    """``redis.asyncio.Redis``: one connection pool; each user takes ``Lock`` objects.

    With ``shared=False`` every session opens a ``redis.asyncio.Redis`` (so a pool,
    and a connection) of its own.
    """

    _redis: Any = None

    def __init__(self, url: str, timeout: float, *, shared: bool = True) -> None:
        super().__init__(url, timeout)
        self.shared = shared
        self._own: list[Any] = []  # the clients of the sessions, closed with this one

    async def open(self) -> None:
        import redis.asyncio

        self._redis = redis.asyncio.Redis.from_url(self.url)
        await self._redis.ping()

    async def session(self) -> LockSession:
        if self.shared:
            return _RedisSession(self._redis, self.timeout)
        import redis.asyncio

        own = redis.asyncio.Redis.from_url(self.url)
        self._own.append(own)
        await own.ping()  # connect now, before the clock starts, as the shared pool did
        return _RedisSession(own, self.timeout)

    async def close(self) -> None:
        for own in self._own:
            await own.aclose()
        if self._redis is not None:
            await self._redis.aclose()


# -- etcd -----------------------------------------------------------------------------


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


# -- PostgreSQL advisory locks ---------------------------------------------------------


class _AdvisorySession(LockSession):
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def acquire(self, key: str) -> Any:
        # The server queues the waiter; lock_timeout (set at connect) bounds the wait.
        await self._conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
        return key

    async def release(self, handle: Any) -> None:
        await self._conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (handle,))

    async def close(self) -> None:
        await self._conn.close()  # a session's advisory locks die with its connection


class PostgresAdvisoryClient(LockClient):
    """``pg_advisory_lock`` through psycopg 3, one connection per session.

    What tooz's PostgreSQL driver does: a session-level advisory lock on a hash of
    the key, held by the connection (so a session is a connection, not shareable).
    """

    async def session(self) -> LockSession:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        await conn.execute(f"SET lock_timeout = {int(self.timeout * 1000)}")
        return _AdvisorySession(conn)


# -- dflockd --------------------------------------------------------------------------


class _DflockdSession(LockSession):
    def __init__(self, conn: Any, timeout: float) -> None:
        self._conn = conn
        self._timeout = max(1, int(timeout))  # the protocol counts whole seconds

    async def acquire(self, key: str) -> Any:
        from dflockd_client import _async

        token, _lease = await _async.acquire(self._conn, key, self._timeout)
        return key, token

    async def release(self, handle: Any) -> None:
        from dflockd_client import _async

        await _async.release(self._conn, *handle)

    async def close(self) -> None:
        await self._conn.close()


class DflockdClient(LockClient):
    """dflockd-client's async protocol functions: one connection per session.

    (Its ``DistributedLock`` opens a connection per lock; a connection per client
    that acquires and releases many keys is the cheaper, fairer use.) The
    protocol answers one request at a time per connection, so sessions cannot share.
    """

    async def session(self) -> LockSession:
        from dflockd_client import _async

        host, port = self.url.rsplit(":", 1)
        conn = await _async.open_conn(
            host, int(port), ssl_context=None, connect_timeout_s=self.timeout
        )
        return _DflockdSession(conn, self.timeout)


def lock_client(system: str, url: str, timeout: float, *, shared: bool = True) -> LockClient:
    """The client of ``system`` (a SYSTEMS name) at ``url``.

    ``shared=False``: every session opens a client (a connection) of its own.
    PostgreSQL advisory locks and dflockd's protocol take a connection per session
    either way (a session cannot share one): ``shared`` changes nothing there.
    """
    if system.startswith("tenure-"):
        return TenureClient(url, timeout, shared=shared)
    if system == "redis":
        return RedisClient(url, timeout, shared=shared)
    if system == "etcd":
        return EtcdClient(url, timeout, shared=shared)
    classes: dict[str, type[LockClient]] = {
        "postgres": PostgresAdvisoryClient,
        "dflockd": DflockdClient,
    }
    if system not in classes:
        raise ValueError(f"unknown system {system!r}")
    return classes[system](url, timeout)
