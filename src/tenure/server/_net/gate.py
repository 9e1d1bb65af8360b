"""Who gets in, what they may do, and how long they may stay silent. [compiled]

:class:`Gate` holds the connection-level policy of :class:`~tenure.server._serve.Server`:

* **the handshake** (docs/protocol.md section 4): a Hello of a version this server
  speaks, with a known token when an auth file is configured, is answered Welcome
  (announcing ``idle_timeout``); anything else Refused, and the connection closes.
  Without an auth file, Hello tokens are ignored.
* **authorization**: with an auth file, each command is checked against the
  connection's token (:mod:`tenure.server._net.auth`); a denied one is answered
  ``Failure(PERMISSION_DENIED)`` and the connection stays usable.
* **timeouts** (section 12): a connection that has not sent Hello within
  ``handshake_timeout`` is Refused(PROTOCOL). An OPEN one that has received no
  frame for ``idle_timeout``, or for the shortest recovery window of the sessions
  attached to it, gets GoingAway(UNAVAILABLE) and is closed; its sessions are
  detached at once, their windows counted from its last frame (ZooKeeper's rule:
  a partition that keeps the connection open must not keep a lock from the next
  waiter; the client gave up on its own clock by then, docs/guarantees.md 6a).
  One timer per connection, re-armed lazily: a frame only records the time, the
  timer checks it when it fires. Silence is counted in time the server could hear
  (:mod:`tenure.server._net.pauses`): a stall of the server's own loop is not the
  client's silence (docs/guarantees.md 6e).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from tenure._core import AttachSession, Command, ResumeSession
from tenure._protocol import (
    GoingAway,
    Hello,
    LocalProtocolError,
    Refused,
    Request,
    ServerConnection,
    ServerMessage,
    State,
    Welcome,
    version_refusal,
)
from tenure.errors import ErrorCode, NotLeaderError
from tenure.server._config.serve_config import ServeConfig
from tenure.server._net.auth import (
    KeptSession,
    Token,
    Tokens,
    command_node,
    denial,
    load_tokens,
    take_back_denial,
)
from tenure.server._net.listen import Admitted
from tenure.server._net.pauses import PauseWatch
from tenure.server._net.throttle import Throttle, peer_host
from tenure.server._net.tls import server_context
from tenure.server._role import STANDALONE_ROLE, Role

log = logging.getLogger("tenure.server")

SERVER_NAME: Final = "tenure"
#: The first protocol version whose Welcome says the server's role: an older client's
#: Hello to a standby is refused NOT_LEADER instead.
STANDBY_VERSION: Final = 3
#: The server counts a client's silence this much slower than its own clock runs
#: (2%): the client, which gives up one window after it *sent* its last answered
#: frame (docs/guarantees.md 6a), must do so before the server acts, even if the
#: server's clock runs a little fast or the client's timer fires a little late.
SILENCE_MARGIN: Final = 0.02


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
    deaf_at_frame: float = 0.0  # the server's deafness (PauseWatch.deaf) at that frame
    watched: bool = False  # whether the PauseWatch counts for it
    opened_at: float = 0.0  # loop time the connection was accepted
    timer: asyncio.TimerHandle | None = None  # the handshake, idle or silence deadline
    timer_at: float = 0.0  # when ``timer`` fires
    # The shortest recovery window of the sessions attached here (None: none); it
    # may be stale and too short (a session left), never too long: checked when due.
    window: float | None = None
    #: The writer's transport, read once (the outboxes write a native connection's
    #: bytes to it directly: the stream writer's ``write`` would only pass them on).
    transport: asyncio.WriteTransport = field(init=False)
    peer: str = field(init=False)  # the client's address and port, for the log
    host: str = field(init=False)  # the client's address (what limits count by)
    hello_head: bytes = b""  # the Hello's length prefix, as far as received
    #: How the listener counts it (``--max-handshaking`` until its Welcome; None: not counted).
    entry: Admitted | None = None
    #: A request read while the host was behind with due deadlines: served once it
    #: has caught up (``tenure.server._net.native``), the connection's later ones after it.
    held_back: Request | None = None
    awaits_host: bool = False  # a wake-up is asked of the host (when_caught_up)
    #: A request answered in a task of its own (a reload: its files load in a thread):
    #: the connection's later frames are read once it is answered, so that an end of
    #: stream read meanwhile cannot close the connection with its answer owed. Its
    #: Pings are read and answered meanwhile: a reload of 100,000 tokens took over the
    #: client's ping patience (10 s) on a busy machine, and the client gave it up.
    answering: asyncio.Task[None] | None = None
    awaits_answer: bool = False  # a wake-up is asked of ``answering``
    #: A scoped ListNodes answered in slices: its request, the names found so far, the
    #: name to go on after (``tenure.server._net.native``).
    listing: tuple[Request, list[str], str] | None = None

    def __post_init__(self) -> None:
        self.transport = self.writer.transport
        # Read once, now: a closed uvloop transport raises instead of answering.
        try:
            peer = self.writer.get_extra_info("peername")
        except (AttributeError, OSError):
            peer = None
        self.peer = str(peer) if peer else "?"
        self.host = peer_host(peer) if peer else "?"


class Gate:
    """The handshake, authorization and timeouts of every connection (module docstring).

    Raises (at construction):
        ConfigError: the TLS or auth files cannot be loaded.
    """

    def __init__(
        self,
        config: ServeConfig,
        instance_id: bytes,
        emit: Callable[[Conn, ServerMessage], None],
        *,
        window_of: Callable[[Conn], float | None],
        detach: Callable[[Conn], None],
        role: Role = STANDALONE_ROLE,
        pauses: PauseWatch,
        loaded: tuple[ssl.SSLContext | None, Tokens | None] | None = None,
    ) -> None:
        """``window_of(conn)``: the shortest recovery window of the sessions attached to
        ``conn`` now (None: none); ``detach(conn)``: detach them, counting their windows
        from its last frame; ``role``: whether this server leads its cluster (a
        standby's Welcome says so, and an older client's Hello is refused NOT_LEADER);
        ``pauses``: the server's own stalls, which its host's clock leaves out too;
        ``loaded``: the TLS context and tokens a previous term's gate had (a cluster
        member's next term keeps what it last loaded or reloaded: docs/operations.md,
        "Reload"), instead of loading ``config``'s files again."""
        self.config = config
        self.instance_id = instance_id
        self.role = role
        if loaded is not None:
            self.tls, self.tokens = loaded
        else:
            self.tls = server_context(config.tls_cert, config.tls_key, config.tls_client_ca)
            self.tokens = load_tokens(config.auth_file) if config.auth_file is not None else None
        if self.tokens is not None and loaded is None:
            self.tokens.throttle = Throttle(
                config.auth_failures_per_minute,
                config.auth_block_time,
                max_addresses=config.auth_max_tracked,
                names=frozenset(self.tokens.names),
            )
        self._emit = emit
        self._window_of = window_of
        self._detach = detach
        self._loop = asyncio.get_running_loop()
        #: The server's own stalls, not counted as anybody's silence.
        self.pauses = pauses

    # -- the handshake --------------------------------------------------------------------

    def accepted(self, conn: Conn) -> None:
        """A new connection: its handshake clock starts."""
        conn.last_frame = conn.opened_at = self.pauses.look()
        conn.deaf_at_frame = self.pauses.deaf
        if not conn.watched:
            conn.watched = True
            self.pauses.watch()
        self._arm(conn, conn.last_frame + self.config.handshake_timeout)

    def hello(self, conn: Conn, hello: Hello, *, stopping: bool) -> None:
        """Answer ``hello`` with Welcome, or with Refused (and mark the connection closing)."""
        refusal = version_refusal(hello)
        if refusal is None and stopping:
            refusal = Refused(ErrorCode.UNAVAILABLE, "the server is shutting down")
        role = self.role
        if refusal is None and not role.leading and hello.version < STANDBY_VERSION:
            # An older client knows no standby (Welcome.role): it is told where to go.
            standby = NotLeaderError.pointing_to(role.leader(), "this server is a standby")
            refusal = Refused(ErrorCode.NOT_LEADER, str(standby))
        if refusal is None and self.tokens is not None:
            refusal = self._authenticate(conn, hello, self.tokens)
        if refusal is not None:
            self.refuse(conn, refusal)
            return
        welcome = Welcome(
            version=hello.version,
            server_name=SERVER_NAME,
            instance_id=self.instance_id,
            max_frame_size=self.config.max_frame_size,
            idle_timeout=self.config.idle_timeout,
            role=role.name,
            leader=role.leader(),
            deadlock_detection=self.config.deadlock_search_limit > 0,
            cell=role.places.cell if role.places is not None else "",
        )
        self._emit(conn, welcome)
        opened: dict[str, object] = {
            "peer": conn.peer,
            "protocol": "native",
            "client_name": hello.client_name,
            "version": hello.version,
            "token": conn.token.name if conn.token is not None else None,
            **({"role": role.name} if role.name else {}),
        }
        log.info("connection opened", extra={"event": "connection_opened", "fields": opened})
        if conn.entry is not None:
            conn.entry.passed()  # (another connection may be accepted now)
        self._cancel(conn)
        self._arm_open(conn)

    def _authenticate(self, conn: Conn, hello: Hello, tokens: Tokens) -> Refused | None:
        """Who ``hello``'s token is (``conn.token``), or why it is refused.

        Failures are throttled per address (:mod:`tenure.server._net.throttle`): a
        blocked address is refused unheard, whatever its token, and not logged (the
        throttle logs the block once).
        """
        throttle, addr = tokens.throttle, conn.host
        now = time.monotonic()  # (the throttle is shared: one clock for every listener)
        if not throttle.check(addr, now):
            return Refused(
                ErrorCode.AUTHENTICATION,
                "too many authentication failures from this address; try again later",
            )
        conn.token = tokens.authenticate(hello.token)
        if conn.token is not None:
            return None  # (its address's failures are not forgotten: see the throttle)
        if tokens.is_retired(hello.token):
            # A client a reload left behind, reconnecting: no guess, not counted (its
            # retries would block its address, other clients' good tokens with it).
            why = "token removed or rotated in the auth file"
        else:
            throttle.failed(addr, now)
            why = "a token is required" if hello.token is None else "unknown token"
        fields = {"peer": conn.peer, "client_name": hello.client_name, "why": why}
        log.warning("authentication failed", extra={"event": "auth_failed", "fields": fields})
        return Refused(ErrorCode.AUTHENTICATION, why)

    def refuse(self, conn: Conn, refusal: Refused) -> None:
        """Send ``refusal`` as the connection's last word."""
        with contextlib.suppress(LocalProtocolError):  # e.g. after Welcome: nothing to say
            self._emit(conn, refusal)
        conn.closing = True

    def frame(self, conn: Conn) -> None:
        """A frame arrived: the connection is not idle (the timer reads this when due).

        The clock is looked at first, so that a stall before this frame (frames wait
        in the socket while the loop is stalled) is counted before it, never after.
        """
        conn.last_frame = self.pauses.look()
        conn.deaf_at_frame = self.pauses.deaf

    def attached(self, conn: Conn, window: float) -> None:
        """A session with recovery window ``window`` was attached to ``conn``."""
        if conn.window is None or window < conn.window:
            conn.window = window
            if conn.codec.state is State.OPEN:
                self._arm_open(conn)

    def closed(self, conn: Conn) -> None:
        """The connection is over: its clock stops."""
        self._cancel(conn)
        if conn.watched:
            conn.watched = False
            self.pauses.unwatch()

    def heard_since(self, conn: Conn, now: float) -> float:
        """Seconds since the last frame of ``conn`` that the server could hear (at ``now``)."""
        return max(0.0, now - conn.last_frame - (self.pauses.deaf - conn.deaf_at_frame))

    def silent_for(self, conn: Conn) -> float:
        """How long the client of ``conn`` has been silent, as its sessions' windows count it.

        From the receipt of its last frame, in time the server could hear, less the
        margin (:data:`SILENCE_MARGIN`).
        """
        return self.heard_since(conn, self.pauses.look()) / (1 + SILENCE_MARGIN)

    # -- authorization --------------------------------------------------------------------

    def denial(
        self, conn: Conn, command: Command[object], sessions: Mapping[int, KeptSession]
    ) -> str | None:
        """Why the connection's token may not send ``command``, or None if it may: its
        rights (:func:`~tenure.server._net.auth.denial`) and, to take a session back,
        the session's (:func:`~tenure.server._net.auth.take_back_denial`)."""
        token = conn.token
        if token is None:
            return None
        why = denial(token, command, command_node(command, sessions))
        if why is None and isinstance(command, AttachSession | ResumeSession):
            session = sessions.get(command.session_id)
            why = take_back_denial(token, command, session, self.tokens)
        return why

    # -- timeouts -------------------------------------------------------------------------

    def _on_timer(self, conn: Conn) -> None:
        conn.timer = None
        if conn.closing:
            return
        state = conn.codec.state
        if state is State.OPEN:
            self._check_silence(conn)
        elif state in (State.HANDSHAKE, State.GREETING):
            limit = self.config.handshake_timeout
            log.info("no handshake; closing", extra={"fields": {"peer": conn.peer}})
            self.refuse(conn, Refused(ErrorCode.PROTOCOL, f"no Hello within {limit:g} s"))

    def _check_silence(self, conn: Conn) -> None:
        """Close an OPEN connection silent for too long (module docstring), or look again."""
        # Look first: if this timer fired late because the loop stalled, the stall
        # is counted now, and the frames waiting in the socket are read before the
        # connection is judged again (the timer is re-armed past them).
        now = self.pauses.look()
        silent = self.heard_since(conn, now)
        if conn.window is not None and now >= self._silence_due(conn, conn.window):
            conn.window = self._window_of(conn)  # the cached one may be stale
        idle = self.config.idle_timeout
        if conn.window is not None and now >= self._silence_due(conn, conn.window):
            fields = {"peer": conn.peer, "silent_for": round(silent, 3), "window": conn.window}
            log.info("silent for a recovery window; closing", extra={"fields": fields})
            why = f"silent for {silent:.3g} s, past the recovery window of a session here"
        elif idle > 0 and silent >= idle:
            log.info("idle; closing", extra={"fields": {"peer": conn.peer, "idle_timeout": idle}})
            why = f"idle for {idle:g} s"
        else:  # a frame came meanwhile (or a session left): look again when due
            self._arm_open(conn)
            return
        self.send_away(conn, ErrorCode.UNAVAILABLE, why)

    def send_away(self, conn: Conn, code: ErrorCode, why: str) -> None:
        """Close an OPEN connection: its sessions detached now (their windows counted
        from its last frame), then GoingAway(``code``, ``why``) as its last word."""
        self._detach(conn)
        self._emit(conn, GoingAway(code, why))
        conn.closing = True

    def _arm_open(self, conn: Conn) -> None:
        """Arm the timer of an OPEN connection for its idle or silence deadline."""
        idle = self.config.idle_timeout
        due = [self._heard_from(conn) + idle] if idle > 0 else []
        if conn.window is not None:
            due.append(self._silence_due(conn, conn.window))
        if due:
            self._arm(conn, min(due))
        else:
            self._cancel(conn)

    def _silence_due(self, conn: Conn, window: float) -> float:
        """When ``conn`` will have been silent for ``window``, as the server counts it
        (if the loop does not stall meanwhile: a stall moves it, checked when due)."""
        return self._heard_from(conn) + window * (1 + SILENCE_MARGIN)

    def _heard_from(self, conn: Conn) -> float:
        """The loop time its heard silence started from: its last frame, moved on by
        the server's deafness since."""
        return conn.last_frame + (self.pauses.deaf - conn.deaf_at_frame)

    def _arm(self, conn: Conn, when: float) -> None:
        if conn.timer is not None:
            if conn.timer_at == when:
                return
            conn.timer.cancel()
        conn.timer_at = when
        conn.timer = self._loop.call_at(when, self._on_timer, conn)

    def _cancel(self, conn: Conn) -> None:
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None
