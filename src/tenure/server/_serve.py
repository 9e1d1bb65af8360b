"""The network server: connections in, engine steps journaled, replies and pushes out.

Everything runs on one event loop, so the engine sees one command at a time. Each
step (a client's command, a DetachSession for a lost connection, a timer tick) is
applied, logged, and its answers and pushes are put in their connection's outbox.
The outboxes (:mod:`tenure.server._net.outbox`) leave only after the commit that
follows (group commit, see :mod:`tenure.server._driver`), so no reply or push ever
tells a client about a change the disk does not have. A failed commit is fatal: the
journal is aborted, every connection dropped, and the server exits non-zero.

Native messages are handled by :class:`~tenure.server._net.native.NativeService` (in
fair turns, :mod:`tenure.server._net.accept`), the connections of another lock
service's protocol by the server's front end (:class:`~tenure.server._front_end.FrontEnd`:
dflockd's, :mod:`tenure.compat.dflockd`), and YDB's clients on ``--ydb-port`` by the
YDB face (:class:`~tenure.server._front_end.YdbFace`, :mod:`tenure.compat.ydb`), a
gRPC listener of its own whose streams the outboxes write like connections. Session
ownership and the queues of detached sessions are in
:class:`~tenure.server._session_table.SessionTable` (docs/protocol.md section 11);
the handshake, tokens, authorization and the handshake, idle and silence timeouts
in :class:`~tenure.server._net.gate.Gate`; TLS in :mod:`tenure.server._net.tls`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from functools import partial
from typing import Any

from tenure._core import CloseSession, DetachSession, Effect, Engine, SessionEnded
from tenure._protocol import GoingAway, Refused, ServerConnection, State
from tenure._protocol.fanout import FiredPushes
from tenure.errors import ErrorCode, TenureError
from tenure.server._config.serve_config import ServeConfig
from tenure.server._driver import JournaledEngine
from tenure.server._durability.journal import Journal
from tenure.server._front_end import (
    Face,
    FrontEnd,
    FrontEndFactory,
    Plug,
    YdbFace,
    dflockd,
    ydb_face,
)
from tenure.server._net.accept import READ_LIMIT, AcceptedProtocol, Kind
from tenure.server._net.gate import Conn, Gate
from tenure.server._net.native import NativeService
from tenure.server._net.outbox import Connection, Outboxes
from tenure.server._observe import Observer
from tenure.server._session_table import SessionTable

log = logging.getLogger("tenure.server")


class Server:
    """Serves one journaled engine to many connections (see the module docstring).

    ``front_end`` makes the front end for another lock service's clients (default:
    dflockd's).

    Raises (at construction):
        ConfigError: the TLS or auth files named in ``config`` cannot be loaded.
    """

    def __init__(
        self,
        config: ServeConfig,
        journal: Journal,
        engine: Engine,
        instance_id: bytes,
        front_end: FrontEndFactory | None = None,
        observer: Observer | None = None,
    ) -> None:
        """``observer``: told of requests, commands, effects and commits (the metrics of
        ``--http-port``; None: nobody measures)."""
        self.config = config
        self.instance_id = instance_id
        self.exit_code = 0
        self.out = Outboxes(config, lambda: self.host.request_flush())
        self.gate = Gate(
            config, instance_id, self.out.emit, window_of=self._window_of, detach=self._detach_all
        )
        self.host = JournaledEngine(
            journal,
            engine,
            deliver=self._deliver,
            output=self.out,
            on_fatal=self._on_fatal,
            batch_interval=config.batch_interval,
            slow_commit=config.slow_commit,
            observer=observer,
        )
        self._table: SessionTable[Conn | Face] = SessionTable(max_queued=config.max_queued_pushes)
        self._conns: set[Connection] = set()
        self.native = NativeService(
            self.host,
            self.gate,
            self.out,
            self._table,
            stopping=lambda: self._stopping,
            observer=observer,
        )
        plug = Plug(
            config,
            self.host,
            self.gate.tokens,
            self.out.send,
            self.out.finish,
            attach=self._attach_to_front_end,
            forget=self._table.forget,
            connections=lambda: len(self._conns),
            observer=observer,
        )
        self.front_end: FrontEnd[Any] = (front_end or dflockd())(plug)
        #: The YDB face (``--ydb-port``), its own gRPC listener; None without one.
        self.ydb: YdbFace | None = None
        if config.ydb_port:
            ydb_plug = dataclasses.replace(plug, attach=self._attach_to_ydb)
            self.ydb = ydb_face()(ydb_plug)
        self._front_end_listener: asyncio.Server | None = None
        self._shutdown_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._listener: asyncio.Server | None = None
        self._done = asyncio.Event()
        self._idle = asyncio.Event()  # set when no connection is open
        self._idle.set()

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> tuple[str, int]:
        """Listen; returns the address actually bound (``--port 0`` picks one)."""
        tls, config = self.gate.tls, self.config
        loop = asyncio.get_running_loop()
        self._listener = await loop.create_server(
            lambda: AcceptedProtocol(
                self._serve_connection,
                turn=config.max_requests_per_turn,
                pause_unread=config.pause_unread,
            ),
            self.config.host,
            self.config.port,
            ssl=tls,
            ssl_handshake_timeout=self.config.handshake_timeout if tls is not None else None,
        )
        self.host.start()
        self.front_end.start()
        if self.front_end.port:
            self._front_end_listener = await asyncio.start_server(
                self._serve_front_end_only,
                self.config.host,
                self.front_end.port,
                ssl=tls,
                ssl_handshake_timeout=self.config.handshake_timeout if tls is not None else None,
            )
        if self.ydb is not None:
            await self.ydb.start()
        host, port = self._listener.sockets[0].getsockname()[:2]
        return str(host), int(port)

    @property
    def stopping(self) -> bool:
        """Whether the server is shutting down, or stopped by a failed journal."""
        return self._stopping or self.host.dead or self._done.is_set()

    def connections(self) -> dict[str, int]:
        """The client connections open now, by protocol (``native``, and the front end's)."""
        native = sum(1 for conn in self._conns if isinstance(conn, Conn))
        counts = {"native": native, self.front_end.protocol: len(self._conns) - native}
        if self.ydb is not None:
            counts[self.ydb.protocol] = self.ydb.connections()
        return counts

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
        for listener in (self._listener, self._front_end_listener):
            if listener is not None:
                listener.close()
        self.front_end.stop()
        if self.ydb is not None:
            self.ydb.stop()
        for conn in list(self._conns):
            if not isinstance(conn, Conn):
                continue  # a front end's: it answers that it drains, closed with the rest
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
        if self.ydb is not None:
            await self.ydb.close(self.config.shutdown_grace)
        self.host.settle()  # every answer owed is durable and written before the close
        for conn in list(self._conns):
            conn.writer.close()
        if not self.host.shutdown():
            self.exit_code = 1
        log.info("stopped", extra={"fields": {"exit_code": self.exit_code}})
        self._done.set()

    def _on_fatal(self) -> None:
        """The journal failed: drop every connection unanswered and exit non-zero."""
        self.exit_code = 1
        if self._listener is not None:
            self._listener.close()
        for conn in list(self._conns):
            conn.outbox.clear()
            conn.writer.transport.abort()
        if self.ydb is not None:
            self.ydb.abort()
        self._done.set()

    # -- connections --------------------------------------------------------------------

    async def _serve_connection(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        accepted: AcceptedProtocol,
    ) -> None:
        conn = Conn(reader, writer, ServerConnection(max_frame_size=self.config.max_frame_size))
        if self._stopping or self.host.dead or len(self._conns) >= self.config.max_connections:
            code, why = (
                (ErrorCode.UNAVAILABLE, "the server is shutting down")
                if self._stopping or self.host.dead
                else (
                    ErrorCode.LIMIT_EXCEEDED,
                    f"max_connections ({self.config.max_connections}) reached",
                )
            )
            await self._turn_away(conn, accepted, Refused(code, why))
            return
        self._conns.add(conn)
        self._idle.clear()
        self.gate.accepted(conn)
        kind = await accepted.kind
        # A native client's first frame is a Hello, whose 4-byte length starts with a
        # zero byte; a dflockd request starts with a command letter.
        if kind is Kind.FRONT_END and not conn.closing:
            # From here the front end's connection owns the streams: the native one
            # must not close them (it raced the front end's last answer out of the door).
            self._conns.discard(conn)
            self.gate.closed(conn)
            await self._serve_front_end(reader, writer, conn.peer)
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
        timeout): a native client gets the Refused; a front end's (dflockd) client gets
        nothing but the close, as dflockd does at its limits.
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

    async def _serve_front_end_only(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """The front end's own port (``--dflockd-port``): every connection speaks its protocol."""
        if self._stopping or self.host.dead or len(self._conns) >= self.config.max_connections:
            writer.close()  # as dflockd does at its limit: nothing written
            return
        peer = writer.get_extra_info("peername")
        await self._serve_front_end(reader, writer, str(peer) if peer else "?")

    async def _serve_front_end(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> None:
        writer.transport.set_write_buffer_limits(high=self.config.pause_unread)
        fconn = self.front_end.connect(reader, writer, peer)
        self._conns.add(fconn)
        self._idle.clear()
        protocol, opened_at = self.front_end.protocol, asyncio.get_running_loop().time()
        fields = {"peer": peer, "protocol": protocol}
        log.info("connection opened", extra={"event": "connection_opened", "fields": fields})
        try:
            await self.front_end.serve(fconn)
        except OSError:
            pass  # the connection broke: the front end lets go of what it held (dflockd:
            # its waiters, and its grants with auto-release)
        finally:
            _log_closed(peer, protocol, opened_at)
            self._conns.discard(fconn)
            if not self._conns:
                self._idle.set()
            self.out.finish(fconn)

    def _attach_to_front_end(self, session_id: int) -> None:
        """Route the session's effects to the front end (its sessions are its own)."""
        self._table.attach(session_id, self.front_end)

    def _attach_to_ydb(self, session_id: int) -> None:
        """Route the session's effects to the YDB face."""
        assert self.ydb is not None
        self._table.attach(session_id, self.ydb)

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
