"""The network server: connections in, engine steps journaled, replies and pushes out.

Everything runs on one event loop, so the engine sees one command at a time. Each
step (a client's command, a DetachSession for a lost connection, a timer tick) is
applied, logged, and its answers and pushes are put in their connection's outbox.
The outboxes (:mod:`tenure.server._net.outbox`) leave only after the commit that
follows (group commit, see :mod:`tenure.server._durable_host`), so no reply or push ever
tells a client about a change the disk does not have. A failed commit is fatal: the
journal is aborted, every connection dropped, and the server exits non-zero.

The server speaks several protocols, its faces (:mod:`tenure.server.plug`). Native
messages are handled by :class:`~tenure.server._net.native.NativeFace` (in fair
turns, :mod:`tenure.server._net.accept`); the faces of other lock services are made
from what the settings turn on (:mod:`tenure.server._faces`): an accepted face is
handed the connections whose first byte is not a native frame's, and those of its own
port; a listening face runs a listener of its own, whose streams the outboxes write
like connections. Session ownership and the queues of detached
sessions are in
:class:`~tenure.server._session_table.SessionTable` (docs/protocol.md section 11);
the handshake, tokens, authorization and the handshake, idle and silence timeouts
in :class:`~tenure.server._net.gate.Gate`; TLS in :mod:`tenure.server._net.tls`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from tenure._core import CloseSession, DetachSession, Effect, Engine, SessionEnded
from tenure._protocol import GoingAway, LocalProtocolError, Refused, ServerConnection, State
from tenure._protocol.fanout import FiredPushes
from tenure._runtime.clock import Clock
from tenure.errors import ErrorCode, NotLeaderError, TenureError
from tenure.server import _faces
from tenure.server._config.quota_settings import default_quota
from tenure.server._config.serve_config import ServeConfig
from tenure.server._durability.identity import server_secret
from tenure.server._durability.journal import Journal
from tenure.server._durable_host import DurableHost, DurableOutput
from tenure.server._face_set import FaceSet
from tenure.server._net.accept import READ_LIMIT, AcceptedProtocol, FaceProtocol, Kind
from tenure.server._net.fds import native_share
from tenure.server._net.front import Front
from tenure.server._net.gate import Conn, Gate
from tenure.server._net.listen import Admission, Entry, Listener, bind
from tenure.server._net.native import NativeFace
from tenure.server._net.outbox import Connection, Outboxes
from tenure.server._net.pauses import HeardClock
from tenure.server._net.throttle import peer_host
from tenure.server._net.token_rates import TokenRates
from tenure.server._observe import Observer
from tenure.server._role import STANDALONE_ROLE, Role
from tenure.server._session_table import SessionTable
from tenure.server.plug import AcceptedFace, Face, FaceFactory, Plug

log = logging.getLogger("tenure.server")


class Server:
    """Serves one engine, through its durable host, to many connections (module docstring).

    ``faces`` makes the faces of other lock services by name (None: those ``config``
    turns on, :func:`tenure.server._faces.factories`); at most one of them may be an
    accepted face, as the main port tells only native clients from one other protocol.

    Raises (at construction):
        ConfigError: the TLS or auth files named in ``config`` cannot be loaded.
        ValueError: ``faces`` makes two accepted faces.
    """

    def __init__(
        self,
        config: ServeConfig,
        journal: Journal | None,
        engine: Engine | None,
        instance_id: bytes,
        faces: Mapping[str, FaceFactory] | None = None,
        observer: Observer | None = None,
        *,
        role: Role = STANDALONE_ROLE,
        make_host: HostMaker | None = None,
        secret: bytes | None = None,
    ) -> None:
        """``observer``: told of requests, commands, effects and commits (the metrics of
        ``--http-port``; None: nobody measures); ``role``: whether it leads a cluster (a
        server of a cluster steps down instead of exiting when its journal fails, see
        :meth:`step_down`); ``make_host``: makes its host from what the server routes
        (None: a :class:`DurableHost` over ``journal`` and ``engine``); ``secret``: what
        the faces sign with (None: the data directory's, made on first use)."""
        self.config = config
        self.instance_id = instance_id
        self.exit_code = 0
        self.role = role
        self.out = Outboxes(config, lambda: self.host.request_flush())
        self.gate = Gate(
            config,
            instance_id,
            self.out.emit,
            window_of=self._window_of,
            detach=self._detach_all,
            role=role,
        )
        if make_host is None:
            assert journal is not None, "a journal, or make_host"
            assert engine is not None, "an engine, or make_host"
            make_host = partial(
                DurableHost,
                journal,
                engine,
                batch_interval=config.batch_interval,
                slow_commit=config.slow_commit,
                observer=observer,
            )
        # The engine's deadlines run on heard time: the server's own stalls do not
        # count against its clients (docs/guarantees.md 6e).
        self.host = make_host(
            deliver=self._deliver,
            output=self.out,
            on_fatal=self._on_fatal,
            clock=HeardClock(self.gate.pauses),
        )
        # (Not state: a replay decides no deadlock; the serving engine decides with this.)
        self.host.engine.deadlock_search_limit = config.deadlock_search_limit
        # (Nor these: a replay lifts them; the serving engine holds new nodes to them.)
        self.host.engine.max_nodes = config.max_nodes
        self.host.engine.node_ceilings = config.node_ceilings
        # (Nor this: slices end in the state one tick would; a replay ticks whole.)
        self.host.step_budget = config.step_budget
        # (Nor the quotas and the memory budget: tenure._core.quotas. The request rates
        # are the host's, checked before the engine sees a token's command.)
        ledger = self.host.engine.ledger
        ledger.budget = config.memory_budget
        if self.gate.tokens is not None:
            ledger.quotas = self.gate.tokens.quotas(default_quota(config))
            self.host.rates = TokenRates(ledger.quotas, ledger.refused)
        self._table: SessionTable[Conn | Face] = SessionTable(max_queued=config.max_queued_pushes)
        self._conns: set[Connection] = set()
        #: The main port's connection cap: ``--max-connections``, or less if the
        #: process's file descriptors cannot also hold the HTTP port's (fds.py).
        self.max_connections = native_share(
            config.max_connections, config.http_max_connections if config.http_port else 0
        )
        #: The main port's and the accepted face's own port's connections, counted
        #: from their accept():
        #: handshaking (``--max-handshaking``: past it, the listeners stop accepting),
        #: per address, and against ``max_connections`` (:mod:`tenure.server._net.listen`).
        self.admission = Admission(config.max_handshaking, config.max_connections_per_address)
        #: The addresses refused by ``--max-connections-per-address`` now (each
        #: logged once per burst, until a connection is admitted again).
        self._refusing: set[str] = set()
        #: The accepted sockets whose connection (its TLS handshake) is being made.
        self._connecting: set[asyncio.Task[None]] = set()
        self.native = NativeFace(
            self.host,
            self.gate,
            self.out,
            self._table,
            stopping=lambda: self._stopping,
            observer=observer,
        )
        #: What the faces, and the dashboard's login tickets, sign with: the data
        #: directory's secret, or a cluster's shared one.
        self.secret = server_secret(config.data_dir) if secret is None else secret
        # What the server lends each face; its own ``attach`` is the one argument left.
        lend = partial(
            Plug,
            config,
            self.host,
            self.gate.tokens,
            self.out.send,
            self.out.finish,
            forget=self._table.forget,
            connections=lambda: len(self._conns),
            secret=self.secret,
            role=role,
            front=self._front if config.max_connections_per_address else None,
        )
        makers = _faces.factories(config) if faces is None else faces
        #: The faces of other lock services this server speaks.
        self.faces = FaceSet(makers, lend, route=self._table.attach, observer=observer)
        self._accepted_listener: Listener | None = None
        #: The listener :meth:`start` was binding when it failed: ``native`` (the main
        #: port) or a face's name (its own port); None: none failed.
        self.binding: str | None = None
        self._shutdown_task: asyncio.Task[None] | None = None
        self._stopping = False
        #: Why the server stepped down (a cluster's: it no longer leads, or a standby's
        #: term ended); None: it did not.
        self.stepped_down: str | None = None
        self._listener: Listener | None = None
        self._done = asyncio.Event()
        self._idle = asyncio.Event()  # set when no connection is open
        self._idle.set()

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self, sockets: Sockets | None = None) -> tuple[str, int]:
        """Listen; returns the address actually bound (``--port 0`` picks one).

        ``sockets``: listen on these, bound already (a cluster's server keeps its ports
        across its terms: a connection that arrives between two waits in the backlog).

        Raises:
            OSError: a port cannot be bound (:attr:`binding` says which); then nothing
                listens, no face runs and the journal is closed.
        """
        config = self.config
        self.binding = "native"
        try:
            # Our own accept loops (tenure.server._net.listen): they stop accepting
            # while --max-handshaking connections are in their handshake.
            native = (
                [sockets.native.dup()] if sockets is not None else bind(config.host, config.port)
            )
            self._listener = Listener(native, partial(self._admit, native=True))
            self.admission.add(self._listener)
            accepted = self.faces.accepted
            if accepted is not None and accepted.port:
                self.binding = self.faces.name_of(accepted)
                own = (
                    [sockets.accepted.dup()]
                    if sockets is not None and sockets.accepted is not None
                    else bind(config.host, accepted.port)
                )
                self._accepted_listener = Listener(own, partial(self._admit, native=False))
                self.admission.add(self._accepted_listener)
            self.host.start()
            self.faces.start()
            await self.faces.listen(partial(setattr, self, "binding"))
        except OSError:
            self._stopping = True  # (nothing was served: stop() has nothing to say)
            self._close_listeners()
            self.faces.stop()
            self.host.shutdown()
            raise
        self.binding = None
        host, port = self._listener.sockets[0].getsockname()[:2]
        return str(host), int(port)

    def _close_listeners(self) -> None:
        for listener in (self._listener, self._accepted_listener):
            if listener is not None:
                listener.close()

    @property
    def stopping(self) -> bool:
        """Whether the server is shutting down, or stopped by a failed journal."""
        return self._stopping or self.host.dead or self._done.is_set()

    def connections(self) -> dict[str, int]:
        """The client connections open now, by face (``native``, the accepted face's,
        and each listening face's streams)."""
        native = sum(1 for conn in self._conns if isinstance(conn, Conn))
        counts = {"native": native}
        if self.faces.accepted is not None:
            counts[self.faces.accepted.protocol] = len(self._conns) - native
        return counts | self.faces.connections()

    async def wait(self) -> int:
        """Until the server stopped (signal or fatal error); returns the exit code."""
        await self._done.wait()
        return self.exit_code

    def stop(self) -> None:
        """Graceful shutdown: stop accepting, GoingAway to everyone, close the journal."""
        if self._stopping or self.host.dead:
            return
        self._stopping = True
        log.info("shutting down", extra={"fields": {"connections": len(self._conns)}})
        self._close_listeners()
        self.faces.stop()
        for conn in list(self._conns):
            if not isinstance(conn, Conn):
                continue  # an accepted face's: it answers that it drains, closed with the rest
            if conn.codec.state is State.OPEN:
                self.out.emit(conn, GoingAway(ErrorCode.UNAVAILABLE, "the server is shutting down"))
            elif conn.codec.state in (State.HANDSHAKE, State.GREETING):
                self.out.emit(conn, Refused(ErrorCode.UNAVAILABLE, "the server is shutting down"))
                conn.closing = True
        self._shutdown_task = asyncio.ensure_future(self._shutdown())

    async def _shutdown(self) -> None:
        self.host.flush()
        self.host.stop()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.config.shutdown_grace):
                await self._idle.wait()
        await self.faces.close(self.config.shutdown_grace)
        await self.host.settled()  # every answer owed is durable and written before the close
        for conn in list(self._conns):
            conn.writer.close()
        if not self.host.shutdown():
            self.exit_code = 1
        log.info("stopped", extra={"fields": {"exit_code": self.exit_code}})
        self._done.set()

    async def step_down(self, why: str) -> None:
        """Stop serving at once, for good: this server of a cluster no longer leads (or a
        standby's term ends). Idempotent.

        Nothing that is not durable leaves: the host acknowledges nothing more, and what
        was sealed to a batch not yet in the log is dropped. Native clients are told
        ``NOT_LEADER`` (GoingAway; Refused during the handshake), naming the leader if
        one is known; the other faces' connections and streams are dropped (their
        clients reconnect, and find the leader). The listeners close (a cluster keeps
        the sockets for its next server), then :meth:`wait` returns 0.
        """
        if self.stepped_down is not None or self._done.is_set():
            return
        self.stepped_down = why
        self._stopping = True
        self._close_listeners()
        self.faces.stop()
        self.host.abandon()
        self.out.drop_sealed()
        word = str(NotLeaderError.pointing_to(self.role.leader(), why))
        for conn in list(self._conns):
            conn.outbox.clear()
            if isinstance(conn, Conn):
                _last_word(conn, word)
            else:
                conn.writer.transport.abort()
        self.faces.abort()
        await self.faces.close(0.0)
        for conn in list(self._conns):
            if isinstance(conn, Conn):
                conn.writer.close()
        self._done.set()

    def _on_fatal(self) -> None:
        """The journal failed: drop every connection unanswered and exit non-zero (a
        server of a cluster steps down instead: :meth:`step_down`)."""
        if self.role.name:
            self._shutdown_task = asyncio.ensure_future(
                self.step_down("this server's journal in etcd failed")
            )
            return
        self.exit_code = 1
        if self._listener is not None:
            self._listener.close()
        for conn in list(self._conns):
            conn.outbox.clear()
            conn.writer.transport.abort()
        self.faces.abort()
        self._done.set()

    # -- connections --------------------------------------------------------------------

    def _admit(self, sock: socket.socket, *, native: bool) -> None:
        """A socket just accepted on the main port (``native``) or the accepted face's
        own: closed at once past ``--max-connections-per-address``; otherwise counted
        (in its handshake from now: its TLS handshake too) and its connection made."""
        try:
            peer = sock.getpeername()
        except OSError:  # (reset already)
            sock.close()
            return
        host = peer_host(peer)
        if self.admission.over_address_cap(host):
            # At once, not after a first byte: waiting would let the peer hold the
            # descriptor that the cap is there to save.
            self._refuse_address(sock, host, native=native)
            return
        self._refusing.discard(host)
        entry = self.admission.enter(host)
        task = asyncio.ensure_future(self._connect(sock, entry, native=native))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    def _front(self, port: int, backend: int) -> Front:
        """Accept on ``port`` for a listening face (YDB's) whose listener is on loopback
        port ``backend``, counted against ``--max-connections-per-address``."""
        front = Front(self.admission, backend, partial(self._refuse_address, native=False))
        front.start(self.config.host, port)
        return front

    def _refuse_address(self, sock: socket.socket, host: str, *, native: bool) -> None:
        cap = self.config.max_connections_per_address
        if host not in self._refusing:  # once per burst: a flood must not flood the log
            self._refusing.add(host)
            fields = {"peer": host, "max_connections_per_address": cap}
            log.warning(
                "too many connections from one address; refusing",
                extra={"event": "connections_refused", "fields": fields},
            )
        if native and self.faces.accepted is None and self.gate.tls is None:
            # Only native clients here, in the clear: say why (no wait: best effort).
            refusal = Refused(
                ErrorCode.LIMIT_EXCEEDED, f"max_connections_per_address ({cap}) reached"
            )
            with contextlib.suppress(OSError, LocalProtocolError):
                sock.send(ServerConnection().send(refusal))
        with contextlib.suppress(OSError):  # what came already: closing on it would reset
            sock.recv(READ_LIMIT)
        sock.close()

    async def _connect(self, sock: socket.socket, entry: Entry, *, native: bool) -> None:
        """Make the connection of an accepted socket (its TLS handshake, within
        ``--handshake-timeout``); its protocol releases ``entry`` when it is lost."""
        config, tls = self.config, self.gate.tls
        factory: Callable[[], asyncio.Protocol]
        if native:
            factory = partial(
                AcceptedProtocol,
                partial(self._serve_connection, entry),
                turn=config.max_requests_per_turn,
                pause_unread=config.pause_unread,
                on_lost=entry.closed,
            )
        else:
            factory = partial(
                FaceProtocol,
                partial(self._serve_accepted_only, entry),
                on_made=entry.passed,  # (an accepted face's clients: no handshake of ours)
                on_lost=entry.closed,
            )
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                factory,
                sock,
                ssl=tls,
                ssl_handshake_timeout=config.handshake_timeout if tls is not None else None,
            )
        except Exception:  # a failed or timed-out TLS handshake (not logged), a reset
            entry.closed()
            sock.close()

    async def _serve_connection(
        self,
        entry: Entry,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        accepted: AcceptedProtocol,
    ) -> None:
        conn = Conn(reader, writer, ServerConnection(max_frame_size=self.config.max_frame_size))
        conn.entry = entry
        if (
            self._stopping
            or self.host.dead
            or self.admission.served > self.max_connections  # (itself included)
        ):
            entry.unserved()  # (still handshaking: --max-handshaking bounds those turned away)
            code, why = (
                (ErrorCode.UNAVAILABLE, "the server is shutting down")
                if self._stopping or self.host.dead
                else (
                    ErrorCode.LIMIT_EXCEEDED,
                    f"max_connections ({self.max_connections}) reached",
                )
            )
            await self._turn_away(conn, accepted, Refused(code, why))
            return
        await self._serve_native_port(conn, reader, writer, accepted)

    async def _serve_native_port(
        self,
        conn: Conn,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        accepted: AcceptedProtocol,
    ) -> None:
        """Serve a connection of the main port: native, or the accepted face's."""
        self._conns.add(conn)
        self._idle.clear()
        self.gate.accepted(conn)
        kind = await accepted.kind
        # A native client's first frame is a Hello, whose 4-byte length starts with a
        # zero byte; an accepted face's request starts with another. Without an
        # accepted face, a connection that is not native is closed; on a standby too
        # (the face's clients reconnect, through a balancer that finds the leader).
        face = self.faces.accepted if self.role.leading else None
        if kind is Kind.OTHER and face is not None and not conn.closing:
            # From here the face's connection owns the streams: the native one must
            # not close them (it raced the face's last answer out of the door).
            self._conns.discard(conn)
            self.gate.closed(conn)
            entry = conn.entry
            if entry is not None:
                entry.passed()
            await self._serve_accepted(face, reader, writer, conn.peer)
            return
        try:
            if kind is Kind.NATIVE:
                # (partials: called once per message, they add no Python frame)
                accepted.feed_to(
                    partial(self.native.on_data, conn),
                    partial(self.native.serve_one, conn, accepted),
                )
                await accepted.done
        finally:
            accepted.finish()
            self._lost(conn)

    async def _turn_away(self, conn: Conn, accepted: AcceptedProtocol, refusal: Refused) -> None:
        """Refuse a connection we cannot serve, in its own protocol.

        Which one is known only from its first bytes (bounded by the handshake
        timeout): a native client gets the Refused; an accepted face's client gets
        nothing but the close (as its own server would do at its limits).
        """
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(self.config.handshake_timeout):
                kind = await accepted.kind
            if kind is Kind.NATIVE:
                conn.writer.write(conn.codec.send(refusal))
            else:
                await conn.reader.read(READ_LIMIT)  # all of it: no reset
        accepted.finish()
        conn.writer.close()

    async def _serve_accepted_only(
        self, entry: Entry, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """The accepted face's own port: every connection speaks its protocol."""
        if (
            self._stopping
            or self.host.dead
            or not self.role.leading
            or self.admission.served > self.max_connections  # (itself included)
        ):
            entry.unserved()
            writer.close()  # at the limit (or a standby): nothing written, the close says it
            return
        assert self.faces.accepted is not None  # (its port is why this listens)
        peer = writer.get_extra_info("peername")
        await self._serve_accepted(self.faces.accepted, reader, writer, str(peer) if peer else "?")

    async def _serve_accepted(
        self,
        face: AcceptedFace[Any],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: str,
    ) -> None:
        writer.transport.set_write_buffer_limits(high=self.config.pause_unread)
        fconn = face.connect(reader, writer, peer)
        self._conns.add(fconn)
        self._idle.clear()
        protocol, opened_at = face.protocol, asyncio.get_running_loop().time()
        fields = {"peer": peer, "protocol": protocol}
        log.info("connection opened", extra={"event": "connection_opened", "fields": fields})
        try:
            await face.serve(fconn)
        except OSError:
            pass  # the connection broke: the face lets go of what it held (its waiters,
            # say, and what it releases on a close)
        finally:
            _log_closed(peer, protocol, opened_at)
            self._conns.discard(fconn)
            if not self._conns:
                self._idle.set()
            self.out.finish(fconn)

    def _lost(self, conn: Conn) -> None:
        """The connection is over: detach the sessions it still owns, then close it."""
        _log_closed(conn.peer, "native", conn.opened_at)
        self._conns.discard(conn)
        self.gate.closed(conn)
        if not self._conns:
            self._idle.set()
        conn.closing = True
        self._detach_all(conn)
        self.out.finish(conn)

    def _detach_all(self, conn: Conn) -> None:
        """Detach the sessions ``conn`` owns, their windows counted from its last frame."""
        sessions = self._table.drop_connection(conn)
        if sessions and not (self._stopping or self.host.dead):
            silent_for = self.gate.silent_for(conn)
            for session_id in sessions:
                with contextlib.suppress(TenureError):
                    self.host.execute(DetachSession(session_id, silent_for))
            fields = {"peer": conn.peer, "sessions": sessions, "silent_for": round(silent_for, 3)}
            log.info("connection lost; sessions detached", extra={"fields": fields})

    def _window_of(self, conn: Conn) -> float | None:
        """The shortest recovery window of the sessions attached to ``conn`` (None: none)."""
        sessions = self.host.engine.sessions
        windows = [sessions[sid].timeout for sid in self._table.owned_by(conn) if sid in sessions]
        return min(windows, default=None)

    # -- effects ------------------------------------------------------------------------

    def _deliver(self, effects: list[Effect]) -> None:
        for effect in effects:
            if type(effect) is SessionEnded:
                _log_session_ended(effect)
        routed, overflowed = self._table.route(effects)
        fired = FiredPushes()  # a change's watch firings: encoded once for all watchers
        for conn, effect in routed:
            if isinstance(conn, Conn):
                self.out.push(conn, effect, fired)
            else:
                conn.deliver(effect)
        for session_id in overflowed:
            log.warning("session %d overflowed its push queue; closing it", session_id)
            asyncio.get_running_loop().call_soon(self._close_overflowed, session_id)

    def _close_overflowed(self, session_id: int) -> None:
        with contextlib.suppress(TenureError):
            self.host.execute(CloseSession(session_id))
            self._table.forget(session_id)


@dataclass(frozen=True, slots=True)
class Sockets:
    """Listening sockets a server is started on (a cluster's, kept across its terms):
    the main port's, and the accepted face's own port's (None: none)."""

    native: socket.socket
    accepted: socket.socket | None = None


class HostMaker(Protocol):
    """Makes a server's host from what the server routes (see :class:`Server`)."""

    def __call__(
        self,
        *,
        deliver: Callable[[list[Effect]], None],
        output: DurableOutput,
        on_fatal: Callable[[], None],
        clock: Clock,
    ) -> DurableHost: ...


def _last_word(conn: Conn, why: str) -> None:
    """Tell a native connection NOT_LEADER, now (nothing queued before it leaves)."""
    state = conn.codec.state
    message = (
        GoingAway(ErrorCode.NOT_LEADER, why)
        if state is State.OPEN
        else Refused(ErrorCode.NOT_LEADER, why)
    )
    conn.closing = True
    if state in (State.OPEN, State.HANDSHAKE, State.GREETING):
        with contextlib.suppress(Exception):  # (a broken transport: nothing to tell)
            conn.writer.write(conn.codec.send(message))


def _log_closed(peer: str, protocol: str, opened_at: float) -> None:
    seconds = round(asyncio.get_running_loop().time() - opened_at, 3)
    fields = {"peer": peer, "protocol": protocol, "seconds": seconds}
    log.info("connection closed", extra={"event": "connection_closed", "fields": fields})


def _log_session_ended(effect: SessionEnded) -> None:
    """Log a session the server ended (its recovery window passed, its node was dropped)."""
    expired = effect.code is ErrorCode.SESSION_EXPIRED
    fields = {"session_id": effect.session_id, "code": effect.code.name, "why": effect.message}
    event = "session_expired" if expired else "session_ended"
    log.info(event.replace("_", " "), extra={"event": event, "fields": fields})
