"""The YDB face: YDB's coordination clients served over gRPC from the server's host.

``tenure serve --ydb-port N`` runs a ``grpc.aio`` server on the server's event loop
with the services YDB's SDKs use for coordination:

* ``Ydb.Discovery.V1.DiscoveryService``: ``ListEndpoints`` (this server, so that the
  SDK's driver starts; in a cluster, the leader) and ``WhoAmI``;
* ``Ydb.Auth.V1.AuthService``: ``Login`` (static credentials, :mod:`.tickets`);
* ``Ydb.Coordination.V1.CoordinationService``: the node calls (:mod:`.nodes`) and
  the ``Session`` stream (:mod:`.sessions`, :mod:`.semaphores`);
* ``Ydb.RateLimiter.V1.RateLimiterService``: resources as tenure's rate limiters
  (:mod:`.rate_limiter`, :mod:`.resources`).

Any other method is UNIMPLEMENTED, a message that cannot be decoded ends its call
with an error status, and neither touches any other call. Every answer leaves
after the commit that covers it, through the server's outboxes (:mod:`.pipe`).

In a cluster only the leader serves coordination. On a standby, and on a leader
stepping down, every coordination call (the node calls, the Session stream and the
rate limiter's calls) ends with gRPC ``UNAVAILABLE`` before anything of it is read
or done: that is what makes YDB's SDKs drop the endpoint and discover again, and
discovery names the leader (docs/ydb.md, "In a cluster"). So a standby's face
never starts a session (nor a rate limiter call's):
no ping timer runs and nothing asks its host, which would refuse (``NOT_LEADER``).
A leader's streams end the same way when its term ends (:meth:`YdbFace.abort`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import grpc
from google.protobuf.message import DecodeError

from tenure._core import Effect
from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.directory import Directory
from tenure.compat.ydb.nodes import NodeCalls
from tenure.compat.ydb.paths import Database
from tenure.compat.ydb.rate_limiter import RateLimiterCalls
from tenure.compat.ydb.sessions import YdbSessions
from tenure.compat.ydb.stream import SessionStream
from tenure.compat.ydb.tickets import Tickets, UnauthorizedError
from tenure.errors import ConfigError
from tenure.server.plug import (
    Connection,
    FaceObserver,
    Front,
    HostCalls,
    Plug,
    Role,
    ServeConfig,
    Tokens,
)

log = logging.getLogger("tenure.server")

#: Why a Session stream ends when a message cannot be decoded.
_UNDECODABLE: Final = "a message on the Session stream is not a Ydb.Coordination.SessionRequest"
#: Why a stream ends when the face is aborted (a cluster's term ended, or the journal failed).
_ABORTED: Final = "this server stopped serving; discover the database's endpoint again"
#: How long an aborted face lets its streams end UNAVAILABLE before it stops listening,
#: in seconds: each ends at once, unless a write to a client that does not read holds it.
ABORT_GRACE: Final = 1.0


def _identity(data: bytes) -> bytes:
    """The Session stream's answers are encoded already (by the outbox's writer)."""
    return data


class YdbFace:
    """The YDB face of one server (see the module docstring)."""

    #: The protocol's name in the server's logs and metrics.
    protocol: Final = "ydb"

    def __init__(
        self,
        config: ServeConfig,
        host: HostCalls,
        tokens: Tokens | None,
        send: Callable[[Connection, bytes], None],
        finish: Callable[[Connection], None],
        attach: Callable[[int], None],
        forget: Callable[[int], None],
        observer: FaceObserver | None = None,
        role: Role | None = None,
        *,
        secret: bytes,
        front: Callable[[int, int], Front] | None = None,
    ) -> None:
        """``observer``: told of each request and call answered (None: not measured);
        ``role``: whether the server leads its cluster (None: not part of one);
        ``secret``: the server's, which signs login tickets (the same on every member of
        a cluster, so a ticket from one is good on the next leader); ``front``: the
        server's, which accepts on ``--ydb-port`` for gRPC (a per-address cap is set:
        :class:`tenure.server.plug.Front`; None: gRPC listens there itself)."""
        self.config = config
        self.observer = observer
        self.host = host
        database = Database(config.ydb_database)
        self.tickets = Tickets(tokens, secret, config.ydb_ticket_ttl)
        self.directory = Directory(
            config, self.tickets, lambda: self.port, role, lambda: self.draining, self._peer
        )
        self.nodes = NodeCalls(host, self.tickets, database, lambda: self.draining)
        self.rate_limiter = RateLimiterCalls(
            host, self.tickets, database, lambda: self.draining, self._peer
        )
        self.sessions = YdbSessions(
            host, database, send, finish, attach, forget, config.ydb_ping_interval, observer
        )
        self.streams: set[SessionStream] = set()
        self._opening = 0  # streams not started yet (their first message not read)
        self.draining = False
        self.aborted = False  # abort() was called: streams end UNAVAILABLE
        self.port = 0  # bound by start()
        self._server: grpc.aio.Server | None = None
        self._make_front = front
        self._front: Front | None = None
        self._stopping: asyncio.Future[None] | None = None  # abort()'s stop, kept alive
        self._idle = asyncio.Event()
        self._idle.set()

    @classmethod
    def plugged(cls, plug: Plug) -> YdbFace:
        """The YDB face of the server that lends ``plug``."""
        return cls(
            plug.config,
            plug.host,
            plug.tokens,
            plug.send,
            plug.finish,
            attach=plug.attach,
            forget=plug.forget,
            observer=plug.observer,
            role=plug.role,
            secret=plug.secret,
            front=plug.front,
        )

    # -- as the server sees it -----------------------------------------------------------

    async def start(self) -> int:
        """Listen on ``--ydb-port`` (with the server's TLS); returns the port bound.

        Raises:
            OSError: the port cannot be bound.
        """
        config = self.config
        server = grpc.aio.server(
            options=[
                ("grpc.so_reuseport", 0),  # a port taken is an error, not shared
                # Not --max-frame-size: what YDB's SDKs may send (64 MiB) must arrive,
                # so that a request over the node's limits is answered with its own
                # error on a stream that lives on; gRPC would end the stream instead.
                ("grpc.max_receive_message_length", config.ydb_max_message_size),
                ("grpc.max_send_message_length", config.ydb_max_message_size),
                # HTTP/2 pings find clients that vanished without a word.
                ("grpc.keepalive_time_ms", 10_000),
                ("grpc.keepalive_timeout_ms", 5_000),
                # A connection's TLS and HTTP/2 handshakes must be done within
                # --handshake-timeout, as on the main port (gRPC's default: 120 s).
                ("grpc.server_handshake_timeout_ms", int(config.handshake_timeout * 1000)),
            ]
        )
        server.add_generic_rpc_handlers(self._handlers())
        address = f"{config.host}:{config.ydb_port}"
        # With a per-address cap, the server accepts on --ydb-port and relays to gRPC
        # on a loopback port (tenure.server.plug.Front): gRPC has no such cap.
        listen = address if self._make_front is None else "127.0.0.1:0"
        try:
            credentials = _credentials(config)
            if credentials is None:
                port = server.add_insecure_port(listen)
            else:
                port = server.add_secure_port(listen, credentials)
        except RuntimeError as error:  # grpc's "Failed to bind"
            raise OSError(f"--ydb-port: cannot listen on {listen}: {error}") from None
        await server.start()
        self._server, self.port = server, int(port)
        if self._make_front is not None:
            try:
                self._front = self._make_front(config.ydb_port, self.port)
            except OSError as error:
                await server.stop(0)
                self._server = None
                raise OSError(
                    error.errno, f"--ydb-port: cannot listen on {address}: {error.strerror}"
                ) from None
            self.port = self._front.port
        return self.port

    def stop(self) -> None:
        """The server is stopping: refuse new calls; every stream ends UNAVAILABLE.

        Sessions are detached, not closed: their clients re-attach them to the next
        run of the server within their timeouts.
        """
        self.draining = True
        for stream in list(self.streams):
            if not stream.closing:
                self.sessions.fail(stream, pb.Status.UNAVAILABLE, "the server is shutting down")

    async def close(self, grace: float) -> None:
        """Wait (up to ``grace`` seconds) for the streams to end, then stop listening
        (after :meth:`abort`: until its stop is done)."""
        if self._stopping is not None:
            await self._stopping
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self._idle.wait()
        if self._front is not None:
            self._front.close()
        if self._server is not None:
            await self._server.stop(0)

    def abort(self) -> None:
        """The journal failed, or a cluster's term ended: drop every stream unanswered.

        What a stream was owed is discarded, and its call ends with gRPC UNAVAILABLE
        (YDB's SDKs then discover again: a cluster's next leader), before the listener
        stops (within :data:`ABORT_GRACE`).
        """
        self.aborted = True
        for stream in self.streams:
            stream.writer.abort()
        if self._server is not None and self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop_after_streams(self._server))

    async def _stop_after_streams(self, server: grpc.aio.Server) -> None:
        """Stop listening once every stream has ended (bounded: :data:`ABORT_GRACE`)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ABORT_GRACE):
                await self._idle.wait()
        if self._front is not None:
            self._front.close()
        await server.stop(0)

    def _peer(self, context: Any) -> str:
        """The client of a call (behind the server's relay, if it relays: ``--ydb-port``
        with a per-address cap)."""
        seen = str(context.peer())
        return seen if self._front is None else self._front.peer(seen)

    def connections(self) -> int:
        """The Session streams open now."""
        return len(self.streams)

    def deliver(self, effect: Effect) -> None:
        """An engine effect for a session a YDB stream started or attached."""
        self.sessions.deliver(effect)

    # -- the calls ---------------------------------------------------------------------------

    def _handlers(self) -> tuple[grpc.GenericRpcHandler, ...]:
        def unary(name: str, call: Callable[[Any, Any], Any], request: Any, reply: Any) -> Any:
            return grpc.unary_unary_rpc_method_handler(
                _decoded(self._observed(name, call), request),
                request_deserializer=functools.partial(_decode_or_none, request),
                response_serializer=reply.SerializeToString,
            )

        coordination, discovery, auth = pb.coordination, pb.discovery, pb.auth
        nodes = self.nodes
        return (
            grpc.method_handlers_generic_handler(
                "Ydb.Coordination.V1.CoordinationService",
                {
                    "Session": grpc.stream_stream_rpc_method_handler(
                        self._session,
                        request_deserializer=coordination.SessionRequest.FromString,
                        response_serializer=_identity,
                    ),
                    "CreateNode": unary(
                        "create_node",
                        self._led("create_node", _node_call(self._peer, nodes.create)),
                        coordination.CreateNodeRequest,
                        coordination.CreateNodeResponse,
                    ),
                    "AlterNode": unary(
                        "alter_node",
                        self._led("alter_node", _node_call(self._peer, nodes.alter)),
                        coordination.AlterNodeRequest,
                        coordination.AlterNodeResponse,
                    ),
                    "DropNode": unary(
                        "drop_node",
                        self._led("drop_node", _node_call(self._peer, nodes.drop)),
                        coordination.DropNodeRequest,
                        coordination.DropNodeResponse,
                    ),
                    "DescribeNode": unary(
                        "describe_node",
                        self._led("describe_node", _node_call(self._peer, nodes.describe)),
                        coordination.DescribeNodeRequest,
                        coordination.DescribeNodeResponse,
                    ),
                },
            ),
            self.rate_limiter.handler(
                lambda name, call, request, reply: unary(
                    name, self._led(name, call), request, reply
                )
            ),
            grpc.method_handlers_generic_handler(
                "Ydb.Discovery.V1.DiscoveryService",
                {
                    "ListEndpoints": unary(
                        "list_endpoints",
                        self.directory.list_endpoints,
                        discovery.ListEndpointsRequest,
                        discovery.ListEndpointsResponse,
                    ),
                    "WhoAmI": unary(
                        "who_am_i",
                        self.directory.who_am_i,
                        discovery.WhoAmIRequest,
                        discovery.WhoAmIResponse,
                    ),
                },
            ),
            grpc.method_handlers_generic_handler(
                "Ydb.Auth.V1.AuthService",
                {
                    "Login": unary(
                        "login", self.directory.login, auth.LoginRequest, auth.LoginResponse
                    )
                },
            ),
        )

    def _observed(self, name: str, call: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """A unary call that tells the observer its status (as is, without one)."""
        observer = self.observer
        if observer is None:
            return call

        async def counted(request: Any, context: Any) -> Any:
            response = await call(request, context)
            status = response.operation.status
            observer.ydb_request(name, pb.Status.StatusCode.Name(status).lower())
            return response

        return counted

    def _led(self, name: str, call: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """A coordination call, served only where the cluster is led (module docstring)."""

        async def handler(request: Any, context: Any) -> Any:
            await self._lead_or_leave(name, context)
            await self.host.caught_up()  # (a mass expiry's slices first: --step-budget)
            return await call(request, context)

        return handler

    async def _lead_or_leave(self, name: str, context: Any) -> None:
        """End the call with gRPC UNAVAILABLE unless it is served here (the leader, or a
        server that is not part of a cluster): a gRPC status, not a YDB one, as only
        that makes YDB's SDKs drop the endpoint and discover again (docs/ydb.md).

        Raises:
            grpc.aio.AbortError: the call was ended (gRPC's way out of a handler).
        """
        why = self.directory.elsewhere()
        if why is not None:
            if self.observer is not None:
                self.observer.ydb_request(name, "unavailable")
            await context.abort(grpc.StatusCode.UNAVAILABLE, why)

    async def _session(self, requests: Any, context: Any) -> None:
        """One ``Session`` stream, from its SessionStart to its end.

        A standby reads the SessionStart before it ends the stream UNAVAILABLE: ended
        while the client's first write is on its way, the client's gRPC sees a crossed
        write (INTERNAL, grpc/grpc#36066), which YDB's SDK does not take for "go
        elsewhere"."""
        try:
            token = self.tickets.token_of(context.invocation_metadata(), self._peer(context))
            refusal = self._refusal()
        except UnauthorizedError as error:
            refusal = pb.Status.UNAUTHORIZED, str(error)
        if refusal is not None:
            await context.write(_failure(*refusal))
            return
        self._opening += 1  # (a stream waiting for its start counts against the limit)
        try:
            async with asyncio.timeout(self.config.handshake_timeout):
                first = await context.read()
        except TimeoutError:
            why = f"no SessionStart within {self.config.handshake_timeout:g} s"
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, why)
        except DecodeError:  # (grpc would end the call UNKNOWN, naming the exception)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _UNDECODABLE)
        finally:
            self._opening -= 1
        if first is grpc.aio.EOF:
            return
        await self._lead_or_leave("session", context)  # (the term may have ended meanwhile)
        if first.WhichOneof("request") != "session_start":
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "First message must be a SessionStart"
            )
        stream = SessionStream(self._peer(context), token)
        self.streams.add(stream)
        self._idle.clear()
        try:
            try:
                self.sessions.start(stream, first.session_start)
                await self._serve(stream, context)
            finally:
                stream.writer.gone = True
                if not stream.closing:  # the call was cancelled (its client vanished)
                    self.sessions.end(stream)
                self.streams.discard(stream)
            if self.aborted:  # (said before the listener stops: idle is set after it)
                await context.abort(grpc.StatusCode.UNAVAILABLE, _ABORTED)
            if stream.writer.aborted:
                await context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED, "the client does not read its answers"
                )
        finally:
            if not self.streams:
                self._idle.set()

    def _refusal(self) -> tuple[int, str] | None:
        """Why a new stream is refused at once (a Failure), or None."""
        if self.draining or self.host.dead:
            return pb.Status.UNAVAILABLE, "the server is shutting down"
        if len(self.streams) + self._opening >= self.config.max_connections:
            return (
                pb.Status.OVERLOADED,
                f"max_connections ({self.config.max_connections}) streams are open",
            )
        return None

    async def _serve(self, stream: SessionStream, context: Any) -> None:
        """Read the stream's requests and write its answers, until one side ends it."""
        reader = asyncio.ensure_future(self._read(stream, context))
        sender = asyncio.ensure_future(stream.writer.drain(context))
        try:
            await asyncio.wait((reader, sender), return_when=asyncio.FIRST_COMPLETED)
            if reader.done() and not sender.done():
                if not stream.closing:  # the client hung up: the session waits for it
                    self.sessions.end(stream)
                with contextlib.suppress(TimeoutError):  # what it is owed, then done
                    async with asyncio.timeout(self.config.shutdown_grace):
                        await asyncio.shield(sender)
        finally:
            for task in (reader, sender):
                task.cancel()
            await asyncio.gather(reader, sender, return_exceptions=True)

    async def _read(self, stream: SessionStream, context: Any) -> None:
        while not stream.closing:
            try:
                request = await context.read()
            except DecodeError:
                self.sessions.fail(stream, pb.Status.BAD_REQUEST, _UNDECODABLE)
                return
            if request is grpc.aio.EOF:
                return
            await self.host.caught_up()  # (a mass expiry's slices first: --step-budget)
            try:
                self.sessions.handle(stream, request)
            except Exception:  # a bug must cost this stream, never the server
                log.exception("ydb: a session request failed unexpectedly")
                self.sessions.fail(stream, pb.Status.INTERNAL_ERROR, "internal error")


def _node_call(
    peer: Callable[[Any], str], call: Callable[[Any, Any], Any]
) -> Callable[[Any, Any], Any]:
    """A node call as a gRPC handler: the request, the call's metadata and its client."""

    async def handler(request: Any, context: Any) -> Any:
        return await call(request, (context.invocation_metadata(), peer(context)))

    return handler


def _decode_or_none(message: Any, data: bytes) -> Any:
    """``data`` as a ``message``; None if it is not one (see :func:`_decoded`)."""
    try:
        return message.FromString(data)
    except DecodeError:
        return None


def _decoded(call: Callable[[Any, Any], Any], request: Any) -> Callable[[Any, Any], Any]:
    """``call``, ending INVALID_ARGUMENT for a request that was not a ``request``.

    (A deserializer that raises ends the call UNKNOWN, naming Python's exception.)
    """
    why = f"the request is not a {request.DESCRIPTOR.full_name}"

    async def handler(message: Any, context: Any) -> Any:
        if message is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, why)
        return await call(message, context)

    return handler


def _failure(status: int, why: str) -> bytes:
    response = pb.coordination.SessionResponse(failure={"status": status, "issues": pb.issues(why)})
    return bytes(response.SerializeToString())


def _credentials(config: ServeConfig) -> grpc.ServerCredentials | None:
    """The gRPC server's TLS, from the native listener's files (None: plain)."""
    if config.tls_cert is None or config.tls_key is None:
        return None
    try:
        pair = (Path(config.tls_key).read_bytes(), Path(config.tls_cert).read_bytes())
        ca = Path(config.tls_client_ca).read_bytes() if config.tls_client_ca else None
    except OSError as error:
        raise ConfigError(f"--ydb-port: cannot read the TLS files: {error}") from None
    return grpc.ssl_server_credentials(
        [pair], root_certificates=ca, require_client_auth=ca is not None
    )
