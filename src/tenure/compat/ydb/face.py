"""The YDB face: YDB's coordination clients served over gRPC from the server's host.

``tenure serve --ydb-port N`` runs a ``grpc.aio`` server on the server's event loop
with the services YDB's SDKs use for coordination:

* ``Ydb.Discovery.V1.DiscoveryService``: ``ListEndpoints`` (this server, so that the
  SDK's driver starts; in a cluster, the leader) and ``WhoAmI``;
* ``Ydb.Auth.V1.AuthService``: ``Login`` (static credentials, :mod:`.tickets`);
* ``Ydb.Coordination.V1.CoordinationService``: the node calls (:mod:`.nodes`) and
  the ``Session`` stream (:mod:`.session_calls`, :mod:`.sessions`, :mod:`.semaphores`);
* ``Ydb.RateLimiter.V1.RateLimiterService``: resources as tenure's rate limiters
  (:mod:`.rate_limiter`, :mod:`.resources`).

Which method is which call is :mod:`.services`'; any other method is UNIMPLEMENTED, a
message that cannot be decoded ends its call with an error status, and neither
touches any other call. Every answer leaves after the commit that covers it, through
the server's outboxes (:mod:`.pipe`). This module is the face as the server sees it
(:class:`tenure.server.plug.ListeningFace`): its parts made from the server's plug,
its listener (with the server's TLS), its stop and abort.

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
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import grpc

from tenure._core import Effect
from tenure.compat.ydb.directory import Directory
from tenure.compat.ydb.metrics import YdbCounts
from tenure.compat.ydb.nodes import NodeCalls
from tenure.compat.ydb.paths import Database
from tenure.compat.ydb.rate_limiter import RateLimiterCalls
from tenure.compat.ydb.services import Services
from tenure.compat.ydb.session_calls import SessionCalls
from tenure.compat.ydb.sessions import YdbSessions
from tenure.compat.ydb.settings import SETTINGS
from tenure.compat.ydb.tickets import Tickets
from tenure.errors import ConfigError
from tenure.server.plug import (
    Auditor,
    Connection,
    Front,
    HostCalls,
    Plug,
    Role,
    ServeConfig,
    Tokens,
)

log = logging.getLogger("tenure.server")

#: How long an aborted face lets its streams end UNAVAILABLE before it stops listening,
#: in seconds: each ends at once, unless a write to a client that does not read holds it.
ABORT_GRACE: Final = 1.0


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
        observer: YdbCounts | None = None,
        role: Role | None = None,
        *,
        secret: bytes,
        front: Callable[[int, int], Front] | None = None,
        audit: Auditor | None = None,
    ) -> None:
        """``observer``: told of each request and call answered (None: not measured);
        ``role``: whether the server leads its cluster (None: not part of one);
        ``secret``: the server's, which signs login tickets (the same on every member of
        a cluster, so a ticket from one is good on the next leader); ``front``: the
        server's, which accepts on ``--ydb-port`` for gRPC (a per-address cap is set:
        :class:`tenure.server.plug.Front`; None: gRPC listens there itself)."""
        self.config = config
        self.settings = settings = config.face(SETTINGS)
        self.observer = observer
        self.host = host
        database = Database(settings.database)
        self.tickets = Tickets(tokens, secret, settings.ticket_ttl)
        self.directory = Directory(
            config, self.tickets, lambda: self.port, role, lambda: self.draining, self._peer
        )
        places = role.places if role is not None else None  # (a cell's: its nodes placed)
        self.nodes = NodeCalls(
            host, self.tickets, database, lambda: self.draining, audit, places=places
        )
        self.rate_limiter = RateLimiterCalls(
            host,
            self.tickets,
            database,
            lambda: self.draining,
            self._peer,
            audit=audit,
            step_budget=config.step_budget,
            max_listed=settings.max_listed_resources,
        )
        self.sessions = YdbSessions(
            host,
            database,
            send,
            finish,
            attach,
            forget,
            settings.ping_interval,
            observer,
            audit,
            tokens=tokens,
        )
        #: The Session streams, served and kept.
        self.calls = SessionCalls(
            config, host, self.tickets, self.directory, self.sessions, self._peer, observer
        )
        self.services = Services(
            host,
            self.directory,
            self.nodes,
            self.rate_limiter,
            self.calls.serve,
            self._peer,
            observer,
        )
        self.port = 0  # bound by start()
        self._server: grpc.aio.Server | None = None
        self._make_front = front
        self._front: Front | None = None
        self._stopping: asyncio.Future[None] | None = None  # abort()'s stop, kept alive
        self._tls = Certificates(config)

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
            observer=plug.observer_as(YdbCounts),
            role=plug.role,
            secret=plug.secret,
            front=plug.front,
            audit=plug.audit,
        )

    @property
    def draining(self) -> bool:
        """Whether the server is stopping (:meth:`stop`): new calls are refused."""
        return self.calls.draining

    # -- as the server sees it -----------------------------------------------------------

    async def start(self) -> int:
        """Listen on ``--ydb-port`` (with the server's TLS); returns the port bound.

        Raises:
            OSError: the port cannot be bound.
        """
        config, settings = self.config, self.settings
        server = grpc.aio.server(
            options=[
                ("grpc.so_reuseport", 0),  # a port taken is an error, not shared
                # Not --max-frame-size: what YDB's SDKs may send (64 MiB) must arrive,
                # so that a request over the node's limits is answered with its own
                # error on a stream that lives on; gRPC would end the stream instead.
                ("grpc.max_receive_message_length", settings.max_message_size),
                ("grpc.max_send_message_length", settings.max_message_size),
                # HTTP/2 pings find clients that vanished without a word.
                ("grpc.keepalive_time_ms", 10_000),
                ("grpc.keepalive_timeout_ms", 5_000),
                # A connection's TLS and HTTP/2 handshakes must be done within
                # --handshake-timeout, as on the main port (gRPC's default: 120 s).
                ("grpc.server_handshake_timeout_ms", int(config.handshake_timeout * 1000)),
            ]
        )
        server.add_generic_rpc_handlers(self.services.handlers())
        address = f"{config.host}:{settings.port}"
        # With a per-address cap, the server accepts on --ydb-port and relays to gRPC
        # on a loopback port (tenure.server.plug.Front): gRPC has no such cap.
        listen = address if self._make_front is None else "127.0.0.1:0"
        try:
            credentials = self._tls.credentials()
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
                self._front = self._make_front(settings.port, self.port)
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
        self.calls.stop()

    async def close(self, grace: float) -> None:
        """Wait (up to ``grace`` seconds) for the streams to end, then stop listening
        (after :meth:`abort`: until its stop is done)."""
        if self._stopping is not None:
            await self._stopping
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self.calls.idle.wait()
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
        self.calls.abort()
        if self._server is not None and self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop_after_streams(self._server))

    async def _stop_after_streams(self, server: grpc.aio.Server) -> None:
        """Stop listening once every stream has ended (bounded: :data:`ABORT_GRACE`)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ABORT_GRACE):
                await self.calls.idle.wait()
        if self._front is not None:
            self._front.close()
        await server.stop(0)

    def prepare_reload(self) -> tuple[str, Callable[[], None]] | None:
        """A reload's step (:class:`tenure.server.plug.Reloading`): the YDB port's TLS
        files, read and checked now, taken by the next handshake."""
        return self._tls.prepare_reload()

    def tokens_gone(self, names: frozenset[str]) -> int:
        """End the Session streams of tokens a reload removed or rotated (UNAUTHORIZED;
        their sessions detached, as on a lost stream, for their timeouts); how many."""
        return self.calls.tokens_gone(names)

    def _peer(self, context: Any) -> str:
        """The client of a call (behind the server's relay, if it relays: ``--ydb-port``
        with a per-address cap)."""
        seen = str(context.peer())
        return seen if self._front is None else self._front.peer(seen)

    def connections(self) -> int:
        """The Session streams open now."""
        return len(self.calls.streams)

    def deliver(self, effect: Effect) -> None:
        """An engine effect for a session a YDB stream started or attached."""
        self.sessions.deliver(effect)


class Certificates:
    """The YDB port's TLS (the native listener's files), as gRPC takes it: read at the
    start, and again by a reload (SIGHUP, ``tenure reload``), whose files gRPC takes
    at the next handshake (it asks :meth:`fetch` before each one); a connection made
    before keeps its own, as on the main port. Whether the port has TLS, and asks
    for clients' certificates, is fixed at the start."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        #: Read by a reload, for gRPC's next handshake (None: nothing new).
        self.pending: grpc.ServerCertificateConfiguration | None = None

    @property
    def on(self) -> bool:
        """The port has TLS (``--tls-cert`` and ``--tls-key``)."""
        return self.config.tls_cert is not None and self.config.tls_key is not None

    def load(self) -> grpc.ServerCertificateConfiguration:
        """The files as they are now.

        Raises:
            ConfigError: one cannot be read, or is not PEM.
        """
        config = self.config
        assert config.tls_cert is not None
        assert config.tls_key is not None
        try:
            pair = (Path(config.tls_key).read_bytes(), Path(config.tls_cert).read_bytes())
            ca = Path(config.tls_client_ca).read_bytes() if config.tls_client_ca else None
        except OSError as error:
            raise ConfigError(f"--ydb-port: cannot read the TLS files: {error}") from None
        # (The same files as the main port's, which the server checks first, at the
        # start and at a reload, the key against the certificate: gRPC would only at
        # a handshake.)
        return grpc.ssl_server_certificate_configuration([pair], root_certificates=ca)

    def credentials(self) -> grpc.ServerCredentials | None:
        """The gRPC server's credentials (None: plain), asking :meth:`fetch` at each
        handshake.

        Raises:
            ConfigError: a file cannot be read.
        """
        if not self.on:
            return None
        return grpc.dynamic_ssl_server_credentials(
            self.load(),
            self.fetch,
            require_client_authentication=self.config.tls_client_ca is not None,
        )

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """gRPC's question before a handshake (on its own thread): the files a reload
        read since the last one, or None (keep what it has)."""
        pending, self.pending = self.pending, None
        return pending

    def prepare_reload(self) -> tuple[str, Callable[[], None]] | None:
        """The files read and checked now, and the step that hands them to gRPC (None:
        no TLS on the port).

        Raises:
            ConfigError: a file does not load; nothing changes.
        """
        if not self.on:
            return None
        loaded = self.load()
        return "ydb_tls", lambda: setattr(self, "pending", loaded)
