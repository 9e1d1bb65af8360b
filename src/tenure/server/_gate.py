"""Who gets in, what they may do, and how long they may stay silent.

:class:`Gate` holds the connection-level policy of :class:`~tenure.server._serve.Server`:

* **the handshake** (docs/protocol.md section 4): a Hello of a version this server
  speaks, with a known token when an auth file is configured, is answered Welcome
  (announcing ``idle_timeout``); anything else Refused, and the connection closes.
  Without an auth file, Hello tokens are ignored.
* **authorization**: with an auth file, each command is checked against the
  connection's token (:mod:`tenure.server._auth`); a denied one is answered
  ``Failure(PERMISSION_DENIED)`` and the connection stays usable.
* **timeouts** (section 12): a connection that has not sent Hello within
  ``handshake_timeout`` is Refused(PROTOCOL); an OPEN one that has received no
  frame for ``idle_timeout`` gets GoingAway(UNAVAILABLE) and is closed (its
  sessions are detached like any lost connection's). One timer per connection,
  re-armed lazily: a frame only records the time, the timer checks it when it fires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from tenure._core import Command
from tenure._protocol import (
    GoingAway,
    Hello,
    LocalProtocolError,
    Refused,
    ServerConnection,
    ServerMessage,
    State,
    Welcome,
    version_refusal,
)
from tenure.errors import ErrorCode
from tenure.server._auth import SessionLike, Token, Tokens, command_node, denial, load_tokens
from tenure.server._config import ServeConfig
from tenure.server._tls import server_context

log = logging.getLogger("tenure.server")

SERVER_NAME: Final = "tenure"


@dataclass(eq=False)
class Conn:
    """One client connection: its streams, its codec, its outbox and its clock."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    codec: ServerConnection
    outbox: list[bytes] = field(default_factory=list)
    closing: bool = False  # stop reading; close once the outbox is written
    token: Token | None = None  # who the Hello authenticated (None: no auth file)
    last_frame: float = 0.0  # loop time the last frame was received
    timer: asyncio.TimerHandle | None = None  # the handshake or idle deadline
    peer: str = field(init=False)  # the client's address, for the log

    def __post_init__(self) -> None:
        # Read once, now: a closed uvloop transport raises instead of answering.
        try:
            peer = self.writer.get_extra_info("peername")
        except (AttributeError, OSError):
            peer = None
        self.peer = str(peer) if peer else "?"


class Gate:
    """The handshake, authorization and timeouts of every connection (module docstring).

    Raises (at construction):
        ConfigError: the TLS or auth files cannot be loaded.
    """

    def __init__(
        self, config: ServeConfig, instance_id: bytes, emit: Callable[[Conn, ServerMessage], None]
    ) -> None:
        self.config = config
        self.instance_id = instance_id
        self.tls: ssl.SSLContext | None = server_context(
            config.tls_cert, config.tls_key, config.tls_client_ca
        )
        self.tokens: Tokens | None = (
            load_tokens(config.auth_file) if config.auth_file is not None else None
        )
        self._emit = emit
        self._loop = asyncio.get_running_loop()

    # -- the handshake --------------------------------------------------------------------

    def accepted(self, conn: Conn) -> None:
        """A new connection: its handshake clock starts."""
        conn.last_frame = self._loop.time()
        conn.timer = self._loop.call_later(self.config.handshake_timeout, self._on_timer, conn)

    def hello(self, conn: Conn, hello: Hello, *, stopping: bool) -> None:
        """Answer ``hello`` with Welcome, or with Refused (and mark the connection closing)."""
        refusal = version_refusal(hello)
        if refusal is None and stopping:
            refusal = Refused(ErrorCode.UNAVAILABLE, "the server is shutting down")
        if refusal is None and self.tokens is not None:
            conn.token = self.tokens.authenticate(hello.token)
            if conn.token is None:
                why = "a token is required" if hello.token is None else "unknown token"
                fields = {"peer": conn.peer, "client_name": hello.client_name, "why": why}
                log.warning("authentication failed", extra={"fields": fields})
                refusal = Refused(ErrorCode.AUTHENTICATION, why)
        if refusal is not None:
            self.refuse(conn, refusal)
            return
        welcome = Welcome(
            version=hello.version,
            server_name=SERVER_NAME,
            instance_id=self.instance_id,
            max_frame_size=self.config.max_frame_size,
            idle_timeout=self.config.idle_timeout,
        )
        self._emit(conn, welcome)
        self._cancel(conn)
        if self.config.idle_timeout > 0:
            due = conn.last_frame + self.config.idle_timeout
            conn.timer = self._loop.call_at(due, self._on_timer, conn)

    def refuse(self, conn: Conn, refusal: Refused) -> None:
        """Send ``refusal`` as the connection's last word."""
        with contextlib.suppress(LocalProtocolError):  # e.g. after Welcome: nothing to say
            self._emit(conn, refusal)
        conn.closing = True

    def frame(self, conn: Conn) -> None:
        """A frame arrived: the connection is not idle (the timer reads this when due)."""
        conn.last_frame = self._loop.time()

    def closed(self, conn: Conn) -> None:
        """The connection is over: its clock stops."""
        self._cancel(conn)

    # -- authorization --------------------------------------------------------------------

    def denial(
        self, conn: Conn, command: Command[object], sessions: Mapping[int, SessionLike]
    ) -> str | None:
        """Why the connection's token may not send ``command``, or None if it may."""
        if conn.token is None:
            return None
        return denial(conn.token, command, command_node(command, sessions))

    # -- timeouts -------------------------------------------------------------------------

    def _on_timer(self, conn: Conn) -> None:
        conn.timer = None
        if conn.closing:
            return
        state = conn.codec.state
        if state is State.OPEN:
            idle = self.config.idle_timeout
            due = conn.last_frame + idle
            if self._loop.time() < due:  # a frame came meanwhile: look again when due
                conn.timer = self._loop.call_at(due, self._on_timer, conn)
                return
            log.info("idle; closing", extra={"fields": {"peer": conn.peer, "idle_timeout": idle}})
            self._emit(conn, GoingAway(ErrorCode.UNAVAILABLE, f"idle for {idle:g} s"))
            conn.closing = True
        elif state in (State.HANDSHAKE, State.GREETING):
            limit = self.config.handshake_timeout
            log.info("no handshake; closing", extra={"fields": {"peer": conn.peer}})
            self.refuse(conn, Refused(ErrorCode.PROTOCOL, f"no Hello within {limit:g} s"))

    def _cancel(self, conn: Conn) -> None:
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None
