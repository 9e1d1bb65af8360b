"""The outboxes: what each connection is owed, written only after the commit covering it. [compiled]

Replies, pushes and the other faces' answers are queued per
connection as they are made. At the end of each loop turn the server's host hands the
turn's records to the journal as batch N and :meth:`Outboxes.seal`-s everything
queued so far to N; once N is durable, :meth:`Outboxes.release` writes it (group
commit, see :mod:`tenure.server._group_commit`), so no client ever hears of a change
the disk does not have, not even from an answer that only reads the state. Sealed
batches leave in the order they were sealed, so on one connection a later answer never
overtakes an earlier one. Writing is the only place where bytes leave, and the place
where connections that said their last word are closed and clients that do not read
are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections import deque
from collections.abc import Callable
from typing import Final

from tenure._core import Effect, WatchFired
from tenure._protocol import (
    Failure,
    FrameTooLargeError,
    LocalProtocolError,
    Push,
    Reply,
    ServerMessage,
    State,
)
from tenure._protocol.fanout import FiredPushes
from tenure.errors import ErrorCode
from tenure.server._config.serve_config import ServeConfig
from tenure.server._net.gate import Conn
from tenure.server._net.later import LaterPushes

# The shapes the outboxes write to, in a module of their own that mypyc does not
# compile (a compiled class keeps no docstring; Connection is public through plug).
from tenure.server._net.writers import Connection as Connection
from tenure.server._net.writers import ConnectionWriter as ConnectionWriter
from tenure.server._net.writers import Transport as Transport

log = logging.getLogger("tenure.server")

_LINGER_RESET: Final = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close with a reset


def reset(transport: Transport) -> None:
    """Drop a connection at once, with a TCP reset: what it was owed is discarded.

    For a client that does not read: a plain abort would leave its unread answers
    in the kernel, which goes on offering them to the client (for minutes) behind
    its back; a reset frees them now, and tells the client.
    """
    with contextlib.suppress(OSError, RuntimeError):  # closed meanwhile: nothing to reset
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    transport.abort()


class Outboxes:
    """The connections with something to write (see the module docstring)."""

    def __init__(self, config: ServeConfig, request_flush: Callable[[], None]) -> None:
        self.config = config
        self._request_flush = request_flush
        # (a dict, not a set: its order is the order connections were queued to,
        # not their addresses', so that a seed replays a simulated run:
        # tenure.testing.sim)
        self._outgoing: dict[Connection, None] = {}
        #: Output waiting for its batch to be durable: (batch, [(conn, bytes, close)]).
        self._sealed: deque[tuple[int, list[tuple[Connection, bytes, bool]]]] = deque()
        #: A big fan-out's pushes, encoded over later turns (the routing's).
        self.later = LaterPushes(self.push, config.step_budget)

    def emit(self, conn: Conn, message: ServerMessage, body: bytes | None = None) -> None:
        """Queue ``message`` for a native connection (``body``: its encoding, if made),
        behind the pushes to it that wait for a later turn (encoded now, first)."""
        later = self.later
        if later.waiting and conn in later.waiting:
            later.catch_up(conn)
        try:
            data = conn.codec.send(message, body)
        except (FrameTooLargeError, LocalProtocolError) as error:
            if not isinstance(message, Reply):
                raise
            code = ErrorCode.LIMIT_EXCEEDED
            why = f"the reply is larger than your max_frame_size ({error})"
            if not isinstance(error, FrameTooLargeError):  # a bug: the reply cannot be encoded
                log.error("cannot send %r: %s", message, error)
                code, why = ErrorCode.INTERNAL, "the server could not encode the reply"
            data = conn.codec.send(Failure(message.request_id, code, why))
        self._queue(conn, data)

    def push(self, conn: Conn, effect: Effect, fired: FiredPushes | None = None) -> None:
        """Queue an effect for the native connection its session is attached to.

        ``fired``: where the watch firings of one delivery share their encoding.

        A watch firing whose state does not fit the watcher's frames is sent without
        it (nil: "describe to learn it", docs/protocol.md section 8): the watcher is
        told, never skipped, and its describe of the latest state is refused with
        LIMIT_EXCEEDED naming the sizes while that state is still too large.

        A connection already closed (its end of stream read, its sessions not yet
        detached) takes nothing: pushes in flight die with a connection, and its
        client lists again after its re-attach (section 11). Skipped quietly: a
        warning with a traceback for each of them let a tenant that closes
        connections with many watches armed write the server's log (600 in one
        run of the fault suite's tenant scenario) at a cost to everyone.
        """
        if conn.codec.state is State.CLOSED:
            return
        try:
            if fired is not None and type(effect) is WatchFired:
                self.emit(conn, Push(effect), fired.body(effect, conn.codec.version))
            else:
                self.emit(conn, Push(effect))
        except FrameTooLargeError:
            if type(effect) is not WatchFired or effect.description is None:
                log.warning("dropped a push to %s", conn.peer, exc_info=True)
                return
            bare = WatchFired(effect.session_id, effect.watch_id, effect.name)
            self.emit(conn, Push(bare))
        except LocalProtocolError:
            log.warning("dropped a push to %s", conn.peer, exc_info=True)

    def send(self, conn: Connection, data: bytes) -> None:
        """Queue bytes already encoded (another face's answer)."""
        self._queue(conn, data)

    def finish(self, conn: Connection) -> None:
        """Close ``conn`` once what it is owed is written."""
        conn.closing = True
        self._outgoing[conn] = None
        self._request_flush()

    def _queue(self, conn: Connection, data: bytes) -> None:
        conn.outbox.append(data)
        self._outgoing[conn] = None
        self._request_flush()

    def seal(self, batch: int, durable: int) -> None:
        """Everything queued so far leaves once ``batch`` is durable: now, if ``durable``
        covers it (nothing sealed before can then be waiting)."""
        if not self._outgoing:
            return
        if batch <= durable and not self._sealed:
            for conn in self._outgoing:
                self._write(conn, _take(conn), conn.closing)
        else:
            self._sealed.append(
                (batch, [(conn, _take(conn), conn.closing) for conn in self._outgoing])
            )
        self._outgoing.clear()

    def drop_sealed(self) -> None:
        """Forget what waits for a batch that will never be durable (a cluster's leader
        stepping down: nothing it had not made durable may reach anyone)."""
        self._sealed.clear()
        self.later.clear()
        for conn in self._outgoing:
            conn.outbox.clear()
        self._outgoing.clear()

    def release(self, durable: int) -> None:
        """Batches up to ``durable`` are durable: write what was sealed to them, in order."""
        sealed = self._sealed
        while sealed and sealed[0][0] <= durable:
            for conn, data, closing in sealed.popleft()[1]:
                self._write(conn, data, closing)

    def _write(self, conn: Connection, data: bytes, closing: bool) -> None:
        """Write ``data`` to ``conn`` (close it after, if ``closing``); drop a non-reader."""
        # A native connection's transport is at hand: its bytes are written to it
        # directly (its stream writer's ``write`` would only pass them on).
        native: asyncio.WriteTransport | None = None
        transport: Transport
        if isinstance(conn, Conn):
            native = transport = conn.transport
        else:
            transport = conn.writer.transport
        if transport.is_closing():
            # The peer is gone (or going): nothing more can reach it. (uvloop even
            # raises on such a write, which must never stop the other outboxes.)
            conn.outbox.clear()
            return
        if data:
            try:
                if native is not None:
                    native.write(data)
                else:
                    conn.writer.write(data)
            except Exception:  # one broken transport must never stop the others
                log.exception("cannot write to %s; disconnecting", conn.peer)
                transport.abort()
                return
        if closing:  # after a last word, a refusal, or the end of its stream
            conn.writer.close()
            # A peer that never reads (or never answers TLS's close_notify)
            # would keep the connection, and its sessions, forever: drop it.
            loop = asyncio.get_running_loop()
            loop.call_later(self.config.shutdown_grace, reset, transport)
        elif transport.get_write_buffer_size() > self.config.max_unread:
            log.warning("%s does not read its replies; disconnecting", conn.peer)
            reset(transport)


def _take(conn: Connection) -> bytes:
    """What ``conn`` is owed, taken from its outbox."""
    if not conn.outbox:
        return b""
    data = conn.outbox[0] if len(conn.outbox) == 1 else b"".join(conn.outbox)
    conn.outbox.clear()
    return data
