"""The etcd client: one ``grpc.aio`` channel to an etcd cluster, failover, auth, errors.

:class:`EtcdClient` holds one channel at a time, to one of the endpoints given. A
unary call that fails with UNAVAILABLE or DEADLINE_EXCEEDED moves the channel to
the next endpoint and is tried again there, until ``connect_timeout`` has passed
since the first try; then it raises :class:`~tenure.errors.UnavailableError`
naming the endpoints and the last reason. The long-lived streams
(:mod:`tenure._etcd.streams`) follow the channel the same way.

Every call that is tried again here is safe to repeat: reads, lease calls, and
Txns, which all compare what they expect (a Txn applied once fails its compare the
second time, and its caller reads why). The one Txn that is not is the enqueue of a
request (the ``etcd://`` backend's); its caller knows to check.

gRPC keepalive pings every 10 s (answered within 5 s) so that a member that died
without closing its sockets is noticed (etcd#8980: a watch on such a member hangs).
etcd refuses pings more often than every 5 s by default.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import grpc
from aetcd.rpc import rpc_pb2, rpc_pb2_grpc

from tenure.errors import (
    AuthenticationError,
    LimitExceededError,
    NotFoundError,
    PermissionDeniedError,
    TenureError,
    UnavailableError,
)

__all__ = ["EtcdClient", "EtcdClientOptions", "LeaseNotFoundError"]

#: gRPC keepalive: a member that vanished without closing its sockets is noticed
#: within 10 s + 5 s (etcd-io/etcd#8980: a watch on a dead member hung without it).
#: Pings only while a call is open (the keepalive and watch streams of any session):
#: etcd's enforcement policy answers pings on an idle connection with GOAWAY
#: too_many_pings, and an idle connection has nothing to lose.
_KEEPALIVE: Final = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),
]
#: Codes after which another endpoint may do better.
_RETRY: Final = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
#: What etcd says of a request larger than its ``--max-request-bytes`` (INVALID_ARGUMENT).
_TOO_LARGE: Final = "request is too large"


class LeaseNotFoundError(NotFoundError):
    """etcd does not know the lease (it expired or was revoked)."""


@dataclass(frozen=True, slots=True)
class EtcdClientOptions:
    """How to reach the cluster (:mod:`tenure._etcd.url` reads them from a URL)."""

    endpoints: tuple[str, ...]
    credentials: Any = None  # grpc.ChannelCredentials for etcds://, else None
    server_hostname: str | None = None
    user: str | None = None
    password: str | None = None
    connect_timeout: float = 5.0
    request_timeout: float = 5.0
    #: The largest answer the channel accepts, in bytes (0: gRPC's default, 4 MiB). A
    #: cluster's server reads its log in pages of many entries (tenure.server._cluster).
    max_receive: int = 0
    #: Makes the channel to an endpoint, given (endpoint, gRPC channel options), in place
    #: of grpc.aio's: the simulation's etcd (tenure.testing.sim). None: a real channel.
    channel_factory: Callable[[str, list[tuple[str, str | int]]], Any] | None = None


class EtcdClient:
    """One gRPC channel to an etcd cluster, to one endpoint at a time (failing over to
    the next), with auth and the stubs etcd's v3 API needs."""

    def __init__(self, options: EtcdClientOptions) -> None:
        self.options = options
        self._index = 0
        self._token: str | None = None
        self.generation = 0  # bumped at every failover: streams reopen on the new channel
        self.channel: Any = None
        self.kv: Any = None
        self.lease: Any = None
        self.watch: Any = None
        self.maintenance: Any = None
        self._old: list[Any] = []
        self._open_channel()

    @property
    def endpoint(self) -> str:
        """The endpoint the channel goes to."""
        return self.options.endpoints[self._index]

    def _open_channel(self) -> None:
        options: list[tuple[str, str | int]] = list(_KEEPALIVE)
        if self.options.server_hostname:
            options.append(("grpc.ssl_target_name_override", self.options.server_hostname))
        if self.options.max_receive:
            options.append(("grpc.max_receive_message_length", self.options.max_receive))
        if self.options.channel_factory is not None:
            self.channel = self.options.channel_factory(self.endpoint, options)
        elif self.options.credentials is None:
            self.channel = grpc.aio.insecure_channel(self.endpoint, options=options)
        else:
            self.channel = grpc.aio.secure_channel(
                self.endpoint, self.options.credentials, options=options
            )
        self.kv = rpc_pb2_grpc.KVStub(self.channel)
        self.lease = rpc_pb2_grpc.LeaseStub(self.channel)
        self.watch = rpc_pb2_grpc.WatchStub(self.channel)
        self.maintenance = rpc_pb2_grpc.MaintenanceStub(self.channel)
        self._auth = rpc_pb2_grpc.AuthStub(self.channel)

    def failover(self, generation: int) -> None:
        """Move to the next endpoint, unless someone did since ``generation``."""
        if generation != self.generation:
            return
        self.generation += 1
        self._old.append(self.channel)  # closed at the end: calls may still use it
        self._index = (self._index + 1) % len(self.options.endpoints)
        self._open_channel()

    def metadata(self) -> tuple[tuple[str, str], ...] | None:
        """The auth token to send, if etcd auth is on."""
        return None if self._token is None else (("token", self._token),)

    async def authenticate(self) -> None:
        """Get an auth token for ``user``/``password`` (etcd's simple or JWT tokens)."""
        if self.options.user is None:
            return
        request = rpc_pb2.AuthenticateRequest(
            name=self.options.user, password=self.options.password or ""
        )
        self._token = None
        reply = await self.call(lambda: self._auth.Authenticate(request, timeout=self._timeout()))
        self._token = str(reply.token)

    def _timeout(self) -> float:
        return self.options.request_timeout

    async def call(self, make: Callable[[], Awaitable[Any]]) -> Any:
        """Run one unary call (``make`` starts it on the current stubs), failing over."""
        # (the loop's clock: what the deadline is compared with in _again)
        generation, started = self.generation, asyncio.get_running_loop().time()
        try:
            return await make()
        except grpc.aio.AioRpcError as error:
            return await self._again(make, error, generation, started)

    async def _again(
        self,
        make: Callable[[], Awaitable[Any]],
        error: grpc.aio.AioRpcError,
        generation: int,
        started: float,
    ) -> Any:
        """The call failed with ``error``: try again, failing over, until
        ``connect_timeout`` after it ``started``."""
        loop = asyncio.get_running_loop()
        deadline = started + self.options.connect_timeout
        reauthenticated = False
        delay = 0.05
        while True:
            code, details = error.code(), error.details() or ""
            if code in _RETRY:
                if loop.time() + delay >= deadline:
                    raise UnavailableError(
                        f"etcd unreachable (endpoints {', '.join(self.options.endpoints)}; "
                        f"last {self.endpoint}: {code.name} {details})"
                    ) from None
                self.failover(generation)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
            elif "invalid auth token" in details and not reauthenticated:
                reauthenticated = True  # tokens expire: get a new one, once
                await self.authenticate()
            else:
                raise translate(error, self.endpoint) from None
            generation = self.generation
            try:
                return await make()
            except grpc.aio.AioRpcError as again:
                error = again

    async def txn(
        self,
        compares: list[Any],
        success: list[Any],
        failure: list[Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """One Txn: ``success`` ops if every compare holds, else ``failure`` ops.

        ``timeout``: how long one try waits for its answer (None: ``request_timeout``).
        """
        request = rpc_pb2.TxnRequest(compare=compares, success=success, failure=failure or [])
        return await self.send_txn(request, timeout=timeout)

    async def send_txn(self, request: Any, *, timeout: float | None = None) -> Any:
        """One Txn, built by the caller (``timeout``: as :meth:`txn`'s).

        :meth:`call`, inlined: every acquire and release is one of these.
        """
        wait = self.options.request_timeout if timeout is None else timeout
        generation, started = self.generation, asyncio.get_running_loop().time()
        try:
            return await self.kv.Txn(request, timeout=wait, metadata=self.metadata())
        except grpc.aio.AioRpcError as error:

            def make() -> Awaitable[Any]:
                return self.kv.Txn(request, timeout=wait, metadata=self.metadata())  # type: ignore[no-any-return]

            return await self._again(make, error, generation, started)

    async def range(self, request: Any) -> Any:
        """One Range."""
        return await self.call(
            lambda: self.kv.Range(request, timeout=self._timeout(), metadata=self.metadata())
        )

    async def lease_call(self, method: str, request: Any) -> Any:
        """One unary Lease call (``LeaseGrant``, ``LeaseRevoke``, ``LeaseTimeToLive``)."""

        def make() -> Awaitable[Any]:
            stub = getattr(self.lease, method)
            return stub(request, timeout=self._timeout(), metadata=self.metadata())  # type: ignore[no-any-return]

        return await self.call(make)

    async def close(self) -> None:
        """Close every channel."""
        for channel in [*self._old, self.channel]:
            with contextlib.suppress(Exception):
                await channel.close()
        self._old.clear()


def translate(error: grpc.aio.AioRpcError, endpoint: str) -> TenureError:
    """The tenure error an etcd gRPC error stands for."""
    code, details = error.code(), error.details() or ""
    where = f"etcd at {endpoint}: {details}"
    if "lease not found" in details:
        return LeaseNotFoundError(where)
    if code == grpc.StatusCode.UNAUTHENTICATED or "authentication failed" in details:
        return AuthenticationError(where)
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDeniedError(where)
    if code == grpc.StatusCode.INVALID_ARGUMENT and _TOO_LARGE in details:
        # Past etcd's --max-request-bytes (1.5 MiB by default): the same request would be
        # refused again however often it is sent. Refused at once, saying which bound.
        return LimitExceededError(f"{where} (a request passed etcd's --max-request-bytes)")
    if code in _RETRY:
        return UnavailableError(where)
    return UnavailableError(f"{where} ({code.name})")
