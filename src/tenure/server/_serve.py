"""The network server: connections in, engine steps journaled, replies and pushes out.

Everything runs on one event loop, so the engine sees one command at a time. Each
step (a client's command, a DetachSession for a lost connection, a timer tick) is
applied, logged, and its answers and pushes are put in their connection's outbox.
The outboxes (:mod:`tenure.server._outbox`) leave only after the commit that
follows (group commit, see :mod:`tenure.server._driver`), so no reply or push ever
tells a client about a change the disk does not have. A failed commit is fatal: the
journal is aborted, every connection dropped, and the server exits non-zero.

Native messages are handled by :class:`~tenure.server._native.NativeService` (in
fair turns, :mod:`tenure.server._accept`), dflockd requests by
:class:`~tenure.server._dflockd.DflockdService`. Session ownership and the queues
of detached sessions are in :class:`~tenure.server._session_table.SessionTable`
(docs/protocol.md section 11); the handshake, tokens, authorization and the
handshake, idle and silence timeouts in :class:`~tenure.server._gate.Gate`; TLS in
:mod:`tenure.server._tls`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from tenure._core import CloseSession, DetachSession, Effect, Engine
from tenure._protocol import GoingAway, Refused, ServerConnection, State
from tenure.errors import ErrorCode, TenureError
from tenure.server._accept import READ_LIMIT, AcceptedProtocol, Kind
from tenure.server._config import ServeConfig
from tenure.server._dflockd import DflockdService
from tenure.server._dflockd_holds import DflockdConn, DflockdSettings, load_secret
from tenure.server._driver import JournaledEngine
from tenure.server._gate import Conn, Gate
from tenure.server._journal import Journal
from tenure.server._native import NativeService
from tenure.server._outbox import Outboxes
from tenure.server._session_table import SessionTable

log = logging.getLogger("tenure.server")


class Server:
    """Serves one journaled engine to many connections (see the module docstring).

    Raises (at construction):
        ConfigError: the TLS or auth files named in ``config`` cannot be loaded.
    """

    def __init__(
        self, config: ServeConfig, journal: Journal, engine: Engine, instance_id: bytes
    ) -> None:
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
            on_durable=self.out.write_out,
            on_fatal=self._on_fatal,
            batch_interval=config.batch_interval,
        )
        self._table: SessionTable[Conn | DflockdService] = SessionTable(
            max_queued=config.max_queued_pushes
        )
        self._conns: set[Conn | DflockdConn] = set()
        self.native = NativeService(
            self.host, self.gate, self.out, self._table, stopping=lambda: self._stopping
        )
        self.dflockd = DflockdService(
            self.host,
            DflockdSettings.from_config(config),
            load_secret(config.data_dir),
            self.gate.tokens,
            self.out.line,
            attach=self._attach_to_dflockd,
            forget=self._table.forget,
            connections=lambda: len(self._conns),
        )
        self._dflockd_listener: asyncio.Server | None = None
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
        self.dflockd.keeper.start()
        if self.config.dflockd_port:
            self._dflockd_listener = await asyncio.start_server(
                self._serve_dflockd_only,
                self.config.host,
                self.config.dflockd_port,
                ssl=tls,
                ssl_handshake_timeout=self.config.handshake_timeout if tls is not None else None,
            )
        host, port = self._listener.sockets[0].getsockname()[:2]
        return str(host), int(port)

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
        for listener in (self._listener, self._dflockd_listener):
            if listener is not None:
                listener.close()
        self.dflockd.draining = True
        self.dflockd.keeper.stop()
        for conn in list(self._conns):
            if isinstance(conn, DflockdConn):
                continue  # answers error_draining from now on, closed with the rest
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
        self.host.flush()
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
        if kind is Kind.DFLOCKD and not conn.closing:
            # From here the dflockd connection owns the streams: the native one must
            # not close them (it raced the last dflockd answer out of the door).
            self._conns.discard(conn)
            self.gate.closed(conn)
            await self._serve_dflockd(reader, writer, conn.peer, b"")
            return
        try:
            if kind is Kind.NATIVE:
                accepted.feed_to(
                    lambda data: self.native.on_data(conn, data),
                    lambda: self.native.serve_one(conn, accepted),
                )
                await accepted.done
        finally:
            accepted.finish()
            self._lost(conn)

    async def _turn_away(self, conn: Conn, accepted: AcceptedProtocol, refusal: Refused) -> None:
        """Refuse a connection we cannot serve, in its own protocol.

        Which one is known only from its first bytes (bounded by the handshake
        timeout): a native client gets the Refused; a dflockd client gets nothing but
        the close, as dflockd does at its limits.
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

    async def _serve_dflockd_only(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """The ``--dflockd-port`` listener: every connection speaks dflockd."""
        if self._stopping or self.host.dead or len(self._conns) >= self.config.max_connections:
            writer.close()  # as dflockd does at its limit: nothing written
            return
        peer = writer.get_extra_info("peername")
        await self._serve_dflockd(reader, writer, str(peer) if peer else "?", b"")

    async def _serve_dflockd(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str, first: bytes
    ) -> None:
        writer.transport.set_write_buffer_limits(high=self.config.pause_unread)
        dconn = self.dflockd.new_conn(reader, writer, peer)
        self._conns.add(dconn)
        self._idle.clear()
        try:
            await self.dflockd.serve(dconn, first)
        except OSError:
            pass  # the connection broke: its waiters and (auto-release) grants go
        finally:
            self._conns.discard(dconn)
            if not self._conns:
                self._idle.set()
            self.out.finish(dconn)

    def _attach_to_dflockd(self, session_id: int) -> None:
        """Route the session's effects to the dflockd service (its sessions are its own)."""
        self._table.attach(session_id, self.dflockd)

    def _lost(self, conn: Conn) -> None:
        """The connection is over: detach the sessions it still owns, then close it."""
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
        routed, overflowed = self._table.route(effects)
        for conn, effect in routed:
            if isinstance(conn, DflockdService):
                conn.deliver(effect)
            else:
                self.out.push(conn, effect)
        for session_id in overflowed:
            log.warning("session %d overflowed its push queue; closing it", session_id)
            asyncio.get_running_loop().call_soon(self._close_overflowed, session_id)

    def _close_overflowed(self, session_id: int) -> None:
        with contextlib.suppress(TenureError):
            self.host.execute(CloseSession(session_id))
            self._table.forget(session_id)
