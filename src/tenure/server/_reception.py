"""A server's reception: sockets accepted, admitted or refused, their connections made, served.

:class:`Reception` runs the listeners of the main port and of the accepted face's own
port, on the sockets the server is given, bound already (:func:`listening_sockets`,
by ``tenure serve`` or a cluster member, which keeps them across its terms). Each
socket accepted is admitted or refused at once (``--max-connections-per-address``),
counted while in its handshake (``--max-handshaking``: past it the listeners stop
accepting, :mod:`tenure.server._net.listen`) and against ``--max-connections``, and its
connection made (TLS within ``--handshake-timeout``). A connection of the main port
is native or the accepted face's, told by its first byte
(:mod:`tenure.server._net.accept`): native messages go to the
:class:`~tenure.server._net.native.NativeFace` in fair turns, the others to the
face, or relayed to the member that serves the face (:mod:`tenure.server._net.relay`:
a standby's, another cell's member's). A connection the server cannot serve is
turned away in its own protocol. When
a connection is lost, the sessions it owns are detached (their windows counted from
its last frame) and it is closed once what it is owed is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from tenure._protocol import LocalProtocolError, Refused, ServerConnection
from tenure._runtime.host import Host
from tenure.errors import ErrorCode
from tenure.server import _faces
from tenure.server._config.serve_config import ServeConfig
from tenure.server._net.accept import READ_LIMIT, AcceptedProtocol, FaceProtocol, Kind
from tenure.server._net.fds import native_share
from tenure.server._net.front import Front
from tenure.server._net.gate import Conn, Gate
from tenure.server._net.listen import Admission, Admitted, Listener, bind
from tenure.server._net.native import NativeFace
from tenure.server._net.outbox import Connection, Outboxes
from tenure.server._net.relay import (
    HERE,
    MARK,
    Relayed,
    RelayError,
    preamble,
    read_preamble,
    relay,
    route,
)
from tenure.server._net.throttle import peer_host
from tenure.server._role import Role
from tenure.server.plug import AcceptedFace

log = logging.getLogger("tenure.server")

__all__ = ["ListenError", "Reception", "Sockets", "listening_sockets"]


@dataclass(frozen=True, slots=True)
class Sockets:
    """The listening sockets a server is given, bound already by whoever starts it
    (:func:`listening_sockets`): the main port's, and the accepted face's own port's
    (empty: none). Whoever bound them closes them (:meth:`close`) once the server is
    done: a cluster member keeps them across its terms, so that a connection that
    arrives between two terms waits in the backlog."""

    native: list[socket.socket]
    accepted: list[socket.socket] = field(default_factory=list)

    def close(self) -> None:
        """Close every socket (the server listens on duplicates of its own)."""
        for sock in (*self.native, *self.accepted):
            sock.close()


class ListenError(OSError):
    """A listener's port could not be bound: ``listener`` says which (``native``: the
    main port; else the name of the face whose own port it is), ``error`` why."""

    def __init__(self, listener: str, error: OSError) -> None:
        super().__init__(error.errno, error.strerror)
        self.listener = listener
        self.error = error


def listening_sockets(config: ServeConfig) -> Sockets:
    """Bind the main port and the own port of the accepted face ``config`` turns on (the
    face registry's), on every address of ``--host``.

    Raises:
        ListenError: a port cannot be bound (then none is left open).
    """
    try:
        native = bind(config.host, config.port)
    except OSError as error:
        raise ListenError("native", error) from error
    own = _faces.accepted_own_port(config)
    if own is None:
        return Sockets(native)
    name, port = own
    try:
        return Sockets(native, bind(config.host, port))
    except OSError as error:
        for sock in native:
            sock.close()
        raise ListenError(name, error) from error


class Reception:
    """See the module docstring. ``stopping()``: whether the server is shutting down;
    ``detach(conn)``: detach the sessions a lost native connection owns."""

    def __init__(
        self,
        config: ServeConfig,
        host: Host,
        gate: Gate,
        out: Outboxes,
        native: NativeFace,
        role: Role,
        *,
        stopping: Callable[[], bool],
        detach: Callable[[Conn], None],
        secret: bytes = b"",
    ) -> None:
        """``secret``: what a relayed connection's preamble is signed with (a cluster's
        shared secret; empty: none is relayed, nor served)."""
        self.config = config
        self.secret = secret
        self.host = host
        self.gate = gate
        self.out = out
        self.native = native
        self.role = role
        self._stopping = stopping
        self._detach = detach
        #: The connections served now: native ones and the accepted face's, in the
        #: order they came (a dict, not a set: a step down or a stop tells them in an
        #: order that is the same in every run, which a simulated run's replay needs).
        self.conns: dict[Connection, None] = {}
        #: Set while no connection is open.
        self.idle = asyncio.Event()
        self.idle.set()
        #: The face the main port hands its other connections to (set by :meth:`open`).
        self.accepted: AcceptedFace[Any] | None = None
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
        self._listeners: list[Listener] = []

    def open(self, sockets: Sockets, accepted: AcceptedFace[Any] | None) -> tuple[str, int]:
        """Listen on ``sockets`` (duplicates: the caller keeps and closes its own): the
        main port's, and the accepted face's own port's if ``accepted`` is given one.
        Returns the main port's address."""
        self.accepted = accepted
        listener = Listener(
            [sock.dup() for sock in sockets.native], partial(self.admit, native=True)
        )
        self._listen(listener)
        if accepted is not None and sockets.accepted:
            own = [sock.dup() for sock in sockets.accepted]
            self._listen(Listener(own, partial(self.admit, native=False)))
        host, port = listener.sockets[0].getsockname()[:2]
        return str(host), int(port)

    def _listen(self, listener: Listener) -> None:
        self._listeners.append(listener)
        self.admission.add(listener)

    def close(self) -> None:
        """Stop listening (the connections stay)."""
        for listener in self._listeners:
            listener.close()

    def close_main(self) -> None:
        """Stop listening on the main port (the journal failed: nothing more is served)."""
        if self._listeners:
            self._listeners[0].close()

    def served(self) -> int:
        """How many connections are served now."""
        return len(self.conns)

    # -- admitting ----------------------------------------------------------------------

    def admit(self, sock: socket.socket, *, native: bool) -> None:
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
            self.refuse_address(sock, host, native=native)
            return
        self._refusing.discard(host)
        entry = self.admission.enter(host)
        task = asyncio.ensure_future(self._connect(sock, entry, native=native))
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    def front(self, port: int, backend: int) -> Front:
        """Accept on ``port`` for a listening face whose listener is on loopback
        port ``backend``, counted against ``--max-connections-per-address``."""
        front = Front(self.admission, backend, partial(self.refuse_address, native=False))
        front.start(self.config.host, port)
        return front

    def refuse_address(self, sock: socket.socket, host: str, *, native: bool) -> None:
        """Close ``sock``: its address has ``--max-connections-per-address`` already."""
        cap = self.config.max_connections_per_address
        if host not in self._refusing:  # once per burst: a flood must not flood the log
            self._refusing.add(host)
            fields = {"peer": host, "max_connections_per_address": cap}
            log.warning(
                "too many connections from one address; refusing",
                extra={"event": "connections_refused", "fields": fields},
            )
        if native and self.accepted is None and self.gate.tls is None:
            # Only native clients here, in the clear: say why (no wait: best effort).
            refusal = Refused(
                ErrorCode.LIMIT_EXCEEDED, f"max_connections_per_address ({cap}) reached"
            )
            with contextlib.suppress(OSError, LocalProtocolError):
                sock.send(ServerConnection().send(refusal))
        with contextlib.suppress(OSError):  # what came already: closing on it would reset
            sock.recv(READ_LIMIT)
        sock.close()

    async def _connect(self, sock: socket.socket, entry: Admitted, *, native: bool) -> None:
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

    def _closed_to_new(self) -> bool:
        return self._stopping() or self.host.dead

    # -- serving ------------------------------------------------------------------------

    async def _serve_connection(
        self,
        entry: Admitted,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        accepted: AcceptedProtocol,
    ) -> None:
        conn = Conn(reader, writer, ServerConnection(max_frame_size=self.config.max_frame_size))
        conn.entry = entry
        if self._closed_to_new() or self.admission.served > self.max_connections:
            entry.unserved()  # (still handshaking: --max-handshaking bounds those turned away)
            code, why = (
                (ErrorCode.UNAVAILABLE, "the server is shutting down")
                if self._closed_to_new()
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
        self.conns[conn] = None
        self.idle.clear()
        self.gate.accepted(conn)
        kind = await accepted.kind
        # A native client's first frame is a Hello, whose 4-byte length starts with a
        # zero byte; an accepted face's request starts with another (a relayed one's
        # with the relay's mark). Without an accepted face, a connection that is not
        # native is closed.
        face = self.accepted
        if kind is Kind.OTHER and face is not None and not conn.closing:
            # From here the face's connection owns the streams: the native one must
            # not close them (it raced the face's last answer out of the door).
            self.conns.pop(conn, None)
            self.gate.closed(conn)
            entry = conn.entry
            if entry is not None:
                entry.passed()
            relayed = accepted.first == MARK
            await self._serve_other(face, reader, writer, conn.peer, relayed=relayed)
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
        self, entry: Admitted, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """The accepted face's own port: every connection speaks its protocol."""
        if self._closed_to_new() or self.admission.served > self.max_connections:
            entry.unserved()  # (itself included in served)
            writer.close()  # at the limit: nothing written, the close says it
            return
        assert self.accepted is not None  # (its port is why this listens)
        peer = writer.get_extra_info("peername")
        await self._serve_other(self.accepted, reader, writer, str(peer) if peer else "?")

    async def _serve_other(
        self,
        face: AcceptedFace[Any],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: str,
        *,
        relayed: bool = False,
    ) -> None:
        """An accepted face's connection: served here, relayed to the member that
        serves the face (:func:`~tenure.server._net.relay.route`), or closed (no leader
        known now, a relayed connection that would go on, or a member over TLS, which
        relays nothing: its clients reconnect). ``relayed``: it starts with a relay's
        preamble, which gives the client's address."""
        if relayed:
            try:
                async with asyncio.timeout(self.config.handshake_timeout):
                    peer = await read_preamble(reader, self.secret)
            except (RelayError, OSError, TimeoutError, asyncio.IncompleteReadError) as error:
                fields = {"peer": peer, "error": str(error) or type(error).__name__}
                log.info("relayed connection refused", extra={"fields": fields})
                writer.close()
                return
        target = route(self.role, _faces.entry(face.protocol).nodes)
        if target == HERE:
            await self._serve_accepted(face, reader, writer, peer)
        elif target is None or relayed or not self.secret or self.config.tls_cert:
            writer.close()
        else:
            await self._relay(face.protocol, reader, writer, peer, target)

    async def _relay(
        self,
        protocol: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: str,
        target: str,
    ) -> None:
        """Relay a connection of face ``protocol`` to ``target`` (a member's main
        address) until either ends; closed with the others at a stop or step down."""
        conn = Relayed(writer, peer)
        self.conns[conn] = None
        self.idle.clear()
        opened_at = asyncio.get_running_loop().time()
        fields = {"peer": peer, "protocol": protocol, "relayed_to": target}
        log.info("connection opened", extra={"event": "connection_opened", "fields": fields})
        try:
            first = preamble(self.secret, peer)
            await relay(reader, writer, target, first, self.config.handshake_timeout)
        except (OSError, TimeoutError) as error:
            fields = {"peer": peer, "relayed_to": target, "error": str(error) or repr(error)}
            log.info("relay ended", extra={"fields": fields})
        finally:
            _log_closed(peer, protocol, opened_at)
            self.conns.pop(conn, None)
            if not self.conns:
                self.idle.set()
            writer.close()

    async def _serve_accepted(
        self,
        face: AcceptedFace[Any],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: str,
    ) -> None:
        writer.transport.set_write_buffer_limits(high=self.config.pause_unread)
        fconn = face.connect(reader, writer, peer)
        self.conns[fconn] = None
        self.idle.clear()
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
            self.conns.pop(fconn, None)
            if not self.conns:
                self.idle.set()
            self.out.finish(fconn)

    def _lost(self, conn: Conn) -> None:
        """The connection is over: detach the sessions it still owns, then close it."""
        _log_closed(conn.peer, "native", conn.opened_at)
        self.conns.pop(conn, None)
        self.gate.closed(conn)
        if not self.conns:
            self.idle.set()
        conn.closing = True
        self._detach(conn)
        self.out.finish(conn)


def _log_closed(peer: str, protocol: str, opened_at: float) -> None:
    seconds = round(asyncio.get_running_loop().time() - opened_at, 3)
    fields = {"peer": peer, "protocol": protocol, "seconds": seconds}
    log.info("connection closed", extra={"event": "connection_closed", "fields": fields})
