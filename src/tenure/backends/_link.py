"""One connection to one tenure server at a time, made again whenever it is lost.

A :class:`Link` is the I/O shell around :class:`~tenure._protocol.ClientConnection`:
it connects (TCP or TLS), says Hello, pipelines requests on the one connection,
hands pushes to its owner, pings within the server's idle timeout, and, when the
connection is lost, reconnects with jittered exponential backoff for as long as it
is open.

It also keeps the one number the client's safety rests on: :attr:`confirmed_at`,
the monotonic time at which the client *sent* the latest request or ping that the
server has answered on the current connection. The server received that frame
after that instant, so it cannot have detached (and then expired) a session of
this connection before it. Sessions count their recovery window from there
(docs/guarantees.md, "the client never believes in a lease longer than the server
could").

The owner (:mod:`tenure.backends.remote`) gets three calls: ``push(effect)`` for
each Push, ``connected(welcome)``, awaited after each handshake before any waiting
request may go out (it re-attaches sessions with :meth:`Link.call_now`), and
``disconnected()`` when a connection is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import random
import re
import socket
import ssl
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar

from tenure._core import Command, Effect
from tenure._protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    NEED_DATA,
    ClientConnection,
    ConnectionClosed,
    Failure,
    GoingAway,
    Hello,
    LocalProtocolError,
    Ping,
    Pong,
    Push,
    Refused,
    Reply,
    Request,
    ServerMessage,
    Welcome,
)
from tenure._protocol.messages import PROTOCOL_VERSION, SINCE_VERSION_2
from tenure.errors import (
    ClientClosedError,
    InvalidArgumentError,
    ProtocolError,
    TenureError,
    UnavailableError,
    UnsupportedError,
    error_from_code,
)

R = TypeVar("R")

log = logging.getLogger("tenure.client")

#: The shortest and longest pause between keep-alive checks, in seconds.
MIN_PING_INTERVAL: Final = 0.02
DEFAULT_PING_INTERVAL: Final = 5.0
#: A Ping unanswered for this long (at least) means the connection is dead.
MIN_PING_PATIENCE: Final = 2.0


class DisconnectedError(UnavailableError):
    """The connection was lost before the answer came: the request may or may not have run."""


def describe_error(error: BaseException) -> str:
    """What went wrong, in words, never empty.

    The str of an OSError names the call that failed ("Connect call failed
    ('127.0.0.1', 6388)"), and that of a timeout is empty: say what happened
    instead, and fall back on the str, or the type's name, only for the rest.
    """
    if isinstance(error, TenureError):
        return str(error) or type(error).__name__
    if isinstance(error, ConnectionRefusedError):
        return "connection refused (nothing listens there)"
    if isinstance(error, ConnectionResetError):
        return "connection reset by peer"
    if isinstance(error, ConnectionAbortedError):
        return "connection aborted"
    if isinstance(error, BrokenPipeError):
        return "broken pipe (the peer closed the connection)"
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed ({error.reason}): {error.verify_message}"
    if isinstance(error, ssl.SSLError):
        return f"TLS error: {error.reason or str(error) or type(error).__name__}"
    if isinstance(error, socket.gaierror):
        return f"cannot resolve the host name: {error.strerror or error}"
    if isinstance(error, TimeoutError) and error.errno == errno.ETIMEDOUT:
        return "connection timed out (the host did not answer)"
    if isinstance(error, TimeoutError) and not str(error):
        return "timed out"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror[:1].lower() + error.strerror[1:]
    return str(error) or type(error).__name__


#: "cannot encode Request.command(Acquire).count: -1 is outside ...": the codec's words.
_CODEC_FIELD: Final = re.compile(r"cannot encode Request\.command\((\w+)\)\.")


def refused_locally(error: LocalProtocolError) -> InvalidArgumentError:
    """The codec would not send an argument: an InvalidArgumentError naming the field.

    The client checks every argument before it gets here (tenure.client._args);
    this keeps anything it missed a plain InvalidArgumentError, in the user's terms.
    """
    text = str(error)
    match = _CODEC_FIELD.match(text)
    if match is not None:
        text = f"{text[match.end() :]} (the wire cannot carry it in {match.group(1)})"
    return InvalidArgumentError(text)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where one server listens, and how to reach it."""

    host: str
    port: int
    ssl: ssl.SSLContext | None = None
    server_hostname: str | None = None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class LinkOptions:
    """How a link behaves; the same for every server of a client."""

    token: str | None = None
    client_name: str = "tenure-python"
    connect_timeout: float = 5.0
    backoff_initial: float = 0.05
    backoff_max: float = 2.0
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE


class LinkOwner(Protocol):
    """What a link tells its owner (see the module docstring)."""

    def push(self, effect: Effect) -> None:
        """An effect for one of the sessions of this link."""

    async def connected(self, welcome: Welcome) -> None:
        """A connection is up; re-attach sessions (with call_now) before returning."""

    def disconnected(self) -> None:
        """The connection was lost; :attr:`Link.confirmed_at` is now frozen."""


@dataclass(eq=False)
class _Connection:
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    protocol: _LinkProtocol
    codec: ClientConnection
    pending: dict[int, tuple[asyncio.Future[Any], float]] = field(default_factory=dict)
    pings: dict[int, float] = field(default_factory=dict)  # nonce -> sent at
    going_away: bool = False
    #: Frames held back until the end of this turn of the loop (see :meth:`send`).
    unsent: list[bytes] = field(default_factory=list)
    #: Whether a frame was written in this turn (reset at its end).
    wrote: bool = False

    def send(self, data: bytes) -> None:
        """Write ``data``: the turn's first frame at once, later ones at the turn's end.

        Many tasks sharing a client ask in the same turn (each woken by an answer
        of one read): the first request leaves at once (a lone caller never waits
        for a write), the others together in one write at the end of the turn, one
        system call instead of one each. Order is kept.
        """
        if self.wrote:
            self.unsent.append(data)
            return
        self.wrote = True
        self.loop.call_soon(self._end_turn)
        self.transport.write(data)

    def _end_turn(self) -> None:
        self.wrote = False
        if self.unsent:
            data, self.unsent = b"".join(self.unsent), []
            if not self.transport.is_closing():  # (lost meanwhile: its requests failed)
                self.transport.write(data)


class _LinkProtocol(asyncio.Protocol):
    """Bytes in, events out, straight from the event loop's callback (no reader task).

    Until :meth:`start`, it only waits for the handshake's answer (``handshake``).
    Afterwards it hands each event to the link as it is decoded, with one rule: a
    Push that follows a Reply or Failure of the same read waits one turn of the
    loop, so that the caller of that request acts on its answer (arms a watch,
    records a grant) before later pushes are delivered.
    """

    def __init__(self, link: Link, codec: ClientConnection) -> None:
        self._link = link
        self.codec = codec
        loop = asyncio.get_running_loop()
        self.handshake: asyncio.Future[Welcome] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self._conn: _Connection | None = None
        self._held: ServerMessage | None = None  # a Push waiting for its turn
        self._waiting = False  # a drain is scheduled (or the handshake is not done)

    def start(self, conn: _Connection) -> None:
        """The handshake is done: deliver events to the link from now on."""
        self._conn = conn
        self._drain()

    def data_received(self, data: bytes) -> None:
        self.codec.receive_data(data)
        if not self._waiting:
            self._drain()

    def eof_received(self) -> bool:
        self.codec.receive_data(b"")
        if not self._waiting:
            self._drain()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        if not self.handshake.done():
            why = f"{self._link.endpoint} closed the connection during the handshake"
            self.handshake.set_exception(exc if exc is not None else UnavailableError(why))
            self.handshake.exception()  # (no warning if the connect gave up waiting)
        elif self._conn is not None:
            why = f"{self._link.endpoint} closed the connection"
            self._link._lost(self._conn, exc if exc is not None else DisconnectedError(why))

    def _drain(self) -> None:
        self._waiting = False
        try:
            if self._conn is None:
                self._greet()
                return
            conn, answered = self._conn, False
            while True:
                event, self._held = self._held or self.codec.next_event(), None
                if event is NEED_DATA:
                    return
                if isinstance(event, ConnectionClosed):
                    raise DisconnectedError(f"{self._link.endpoint} closed the connection")
                if answered and isinstance(event, Push):
                    self._held, self._waiting = event, True
                    asyncio.get_running_loop().call_soon(self._drain)
                    return
                self._link._dispatch(conn, event)
                if self._link._conn is not conn:
                    return  # given up while dispatching (GoingAway answered in full)
                answered = answered or type(event) is Reply or type(event) is Failure
        except (ProtocolError, DisconnectedError) as error:
            if self._conn is not None:
                self._link._lost(self._conn, error)
            elif not self.handshake.done():  # a broken answer to Hello: the connect fails
                self.handshake.set_exception(error)
                self.handshake.exception()

    def _greet(self) -> None:
        event = self.codec.next_event()
        if event is NEED_DATA or self.handshake.done():
            return
        if isinstance(event, Welcome):
            self._waiting = True  # what follows waits for start()
            self.handshake.set_result(event)
        elif isinstance(event, Refused):
            error = error_from_code(event.code, f"{self._link.endpoint} refused: {event.message}")
            self.handshake.set_exception(error)
            self.handshake.exception()  # (no warning if the connect gave up waiting)
        else:
            why = f"{self._link.endpoint} closed the connection during the handshake"
            self.handshake.set_exception(UnavailableError(why))
            self.handshake.exception()


class Link:
    """See the module docstring."""

    def __init__(self, endpoint: Endpoint, options: LinkOptions, owner: LinkOwner) -> None:
        self.endpoint = endpoint
        self.options = options
        self._owner = owner
        self._loop = asyncio.get_running_loop()
        self._conn: _Connection | None = None
        self._ready = asyncio.Event()  # a connection is up and its sessions re-attached
        self._is_ready = False  # _ready.is_set(), read on every request without a call
        self._wake_keepalive = asyncio.Event()
        self._closing = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_id = 0
        #: Which connection this is (1 for the first); grows with each handshake.
        self.epoch = 0
        #: See the module docstring; frozen while disconnected.
        self.confirmed_at = self._loop.time()
        #: The Welcome of the current (or last) connection.
        self.welcome: Welcome | None = None
        #: The protocol version this link speaks (1 once a server refused the newest).
        self._version = PROTOCOL_VERSION
        self.last_error: BaseException | None = None
        self.ping_interval = DEFAULT_PING_INTERVAL
        self._wanted_interval = DEFAULT_PING_INTERVAL
        self._reconnector: asyncio.Task[None] | None = None

    @property
    def closing(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._closing

    @property
    def connected(self) -> bool:
        """Whether requests can go out now."""
        return self._ready.is_set()

    # -- life -----------------------------------------------------------------------

    async def open(self) -> None:
        """Connect the first time; raises what stopped it (nothing is retried)."""
        try:
            await self._connect()
        except BaseException as error:
            await self.aclose()
            if isinstance(error, OSError) and not isinstance(error, TenureError):
                why = describe_error(error)
                raise UnavailableError(f"cannot connect to {self.endpoint}: {why}") from error
            raise
        self._spawn(self._keepalive())

    async def aclose(self) -> None:
        """Stop reconnecting, close the connection, fail what still waits."""
        self._closing = True
        self._ready.clear()
        self._is_ready = False
        for task in list(self._tasks):
            task.cancel()
        conn, self._conn = self._conn, None
        if conn is not None:
            self._fail(conn, ClientClosedError("the client was closed before the answer came"))
            conn.transport.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await conn.protocol.closed
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def need_pings_every(self, seconds: float) -> None:
        """Confirm the connection at least this often (the shortest wish wins)."""
        self._wanted_interval = min(self._wanted_interval, seconds)
        self._apply_ping_interval()

    def _apply_ping_interval(self) -> None:
        seconds = self._wanted_interval
        idle = self.welcome.idle_timeout if self.welcome else 0.0
        if idle > 0:
            seconds = min(seconds, idle / 3)
        self.ping_interval = max(MIN_PING_INTERVAL, seconds)
        self._wake_keepalive.set()

    def drop(self) -> None:
        """Abort the current connection (it is then made again): for tests and errors."""
        if self._conn is not None:
            self._lost(self._conn, DisconnectedError("the connection was dropped"))

    # -- requests -------------------------------------------------------------------

    def call(self, command: Command[R], *, wait_until: float | None = None) -> Awaitable[R]:
        """Send ``command`` once a connection is ready; await its reply, or its error.

        Waits for a connection until ``wait_until`` (loop time; None: forever), then
        raises UnavailableError. Raises :class:`DisconnectedError` if the connection is
        lost before the answer: the command may or may not have been applied.

        With a connection ready (nearly always) the request is written at once and
        the awaitable is its answer's future: a request costs no coroutine here.
        """
        conn = self._conn
        if conn is None or conn.going_away or not self._is_ready:
            return self._call_when_ready(command, wait_until)
        return self._request(conn, command)

    async def _call_when_ready(self, command: Command[R], wait_until: float | None) -> R:
        conn = await self._ready_connection(wait_until)
        return await self._request(conn, command)

    async def wait_ready(self, wait_until: float | None = None) -> None:
        """Until a connection is up and set up (its sessions re-attached): see :meth:`call`."""
        await self._ready_connection(wait_until)

    async def _ready_connection(self, wait_until: float | None) -> _Connection:
        while not self._ready.is_set() or self._conn is None or self._conn.going_away:
            if self._closing:
                raise ClientClosedError("the client is closed")
            try:
                async with asyncio.timeout_at(wait_until):
                    await self._ready.wait()
            except TimeoutError:
                last = self.last_error
                why = "still connecting" if last is None else f"last error: {describe_error(last)}"
                raise UnavailableError(f"no connection to {self.endpoint} ({why})") from None
        return self._conn

    async def call_now(self, command: Command[R]) -> R:
        """Send on the connection being set up (for ``LinkOwner.connected``)."""
        if self._conn is None:
            raise DisconnectedError("the connection was lost")
        return await self._request(self._conn, command)

    def _request(self, conn: _Connection, command: Command[R]) -> asyncio.Future[R]:
        """Send ``command`` on ``conn`` now; the future of its answer.

        A plain function: the request is written before the caller awaits anything,
        and awaiting costs one future (no coroutine of its own). If the caller is
        cancelled, the entry stays until the answer comes.
        """
        if type(command) in SINCE_VERSION_2 and conn.codec.version == 1:
            raise UnsupportedError(
                f"{self.endpoint} speaks protocol version 1, which has no "
                f"{type(command).__name__}: upgrade the server to list or kill sessions"
            )
        self._last_id += 1
        request_id = self._last_id
        try:
            data = conn.codec.send(Request(request_id, command))  # raises before anything is sent
        except LocalProtocolError as error:
            raise refused_locally(error) from None
        loop = self._loop
        future: asyncio.Future[R] = loop.create_future()
        conn.pending[request_id] = (future, loop.time())
        conn.send(data)
        return future

    # -- connecting -----------------------------------------------------------------

    async def _connect(self) -> None:
        try:
            await self._connect_speaking(self._version)
        except UnsupportedError:
            if self._version == 1:
                raise
            # A server older than this client refuses its version: speak the server's
            # (from then on, for this link: what version 2 added is then UnsupportedError).
            log.info("%s does not speak protocol version %d; using 1", self.endpoint, self._version)
            self._version = 1
            await self._connect_speaking(1)

    async def _connect_speaking(self, version: int) -> None:
        endpoint, options = self.endpoint, self.options
        codec = ClientConnection(max_frame_size=options.max_frame_size)
        protocol = _LinkProtocol(self, codec)
        transport: asyncio.BaseTransport | None = None
        try:
            async with asyncio.timeout(options.connect_timeout) as deadline:
                transport, _ = await self._loop.create_connection(
                    lambda: protocol,
                    endpoint.host,
                    endpoint.port,
                    ssl=endpoint.ssl,
                    server_hostname=endpoint.server_hostname if endpoint.ssl else None,
                )
                try:
                    hello = Hello(
                        version=version,
                        client_name=options.client_name,
                        token=options.token,
                        max_frame_size=options.max_frame_size,
                    )
                    sent_at = self._loop.time()
                    transport.write(codec.send(hello))
                    welcome = await protocol.handshake
                except BaseException:
                    transport.abort()
                    raise
        except LocalProtocolError as error:
            raise refused_locally(error) from None
        except OSError as error:  # TimeoutError included
            if isinstance(error, TenureError):
                raise
            seconds = f"{options.connect_timeout:g} s"
            if not (isinstance(error, TimeoutError) and deadline.expired()):
                why = describe_error(error)  # (an OS timeout too: ETIMEDOUT)
            elif transport is None:
                tls = " (TCP and TLS handshake)" if endpoint.ssl else ""
                why = f"the connection{tls} was not established within {seconds}"
            else:
                why = f"connected, but no answer to Hello within {seconds}"
            raise UnavailableError(f"cannot connect to {endpoint}: {why}") from error
        conn = _Connection(self._loop, transport, protocol, codec)
        self._conn = conn
        self.epoch += 1
        self.confirmed_at = sent_at
        self.welcome = welcome
        self.last_error = None
        protocol.start(conn)
        if self._conn is not conn:  # lost at once (what followed the Welcome said so)
            why = "closed at once" if self.last_error is None else describe_error(self.last_error)
            raise DisconnectedError(f"lost the connection to {endpoint}: {why}")
        try:
            await self._owner.connected(welcome)
        except BaseException as error:
            self._lost(conn, error)
            raise
        if self._conn is conn:
            self._ready.set()
            self._is_ready = True
            self._apply_ping_interval()

    async def _reconnect(self) -> None:
        delay = self.options.backoff_initial
        while not self._closing:
            try:
                await self._connect()
                return
            except (OSError, TimeoutError, TenureError) as error:
                self.last_error = error
                log.debug("reconnecting to %s failed: %s", self.endpoint, error)
            await asyncio.sleep(random.uniform(delay / 2, delay))
            delay = min(delay * 2, self.options.backoff_max)

    # -- the connection's life ------------------------------------------------------

    def _dispatch(self, conn: _Connection, event: ServerMessage) -> None:
        if isinstance(event, Push):
            self._owner.push(event.effect)
        elif type(event) is Reply or type(event) is Failure:
            future, sent_at = conn.pending.pop(event.request_id)
            self.confirmed_at = max(self.confirmed_at, sent_at)
            if not future.done():
                if isinstance(event, Reply):
                    future.set_result(event.value)
                else:
                    future.set_exception(error_from_code(event.code, event.message))
            if conn.going_away and not conn.pending:
                self._lost(conn, DisconnectedError(f"{self.endpoint} went away"))
        elif isinstance(event, Pong):
            pinged_at = conn.pings.pop(event.nonce, None)
            if pinged_at is not None:
                self.confirmed_at = max(self.confirmed_at, pinged_at)
        elif isinstance(event, GoingAway):
            # No new requests here; those in flight are still answered, then it closes.
            log.info("%s is going away: %s", self.endpoint, event.reason)
            conn.going_away = True
            self._ready.clear()
            self._is_ready = False
            if not conn.pending:  # else once the last answer is in
                self._lost(conn, DisconnectedError(f"{self.endpoint} went away: {event.reason}"))

    def _lost(self, conn: _Connection, error: BaseException) -> None:
        if self._conn is not conn:
            return
        self._conn = None
        self._ready.clear()
        self._is_ready = False
        self.last_error = error
        conn.transport.abort()
        why = describe_error(error)
        self._fail(conn, DisconnectedError(f"lost the connection to {self.endpoint}: {why}"))
        log.info("lost the connection to %s: %s", self.endpoint, why)
        self._owner.disconnected()
        if not self._closing and (self._reconnector is None or self._reconnector.done()):
            self._reconnector = asyncio.ensure_future(self._reconnect())
            self._tasks.add(self._reconnector)
            self._reconnector.add_done_callback(self._tasks.discard)

    def _fail(self, conn: _Connection, error: TenureError) -> None:
        for future, _sent_at in conn.pending.values():
            if not future.done():
                future.set_exception(type(error)(*error.args))
                future.exception()  # retrieved, so an abandoned one does not warn
        conn.pending.clear()

    async def _keepalive(self) -> None:
        nonce = 0
        while not self._closing:
            self._wake_keepalive.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.ping_interval):
                    await self._wake_keepalive.wait()
            conn, now = self._conn, self._loop.time()
            if conn is None or not self._ready.is_set():
                continue
            patience = max(2 * self.ping_interval, MIN_PING_PATIENCE)
            if conn.pings and now - min(conn.pings.values()) > patience:
                self._lost(
                    conn, DisconnectedError(f"no Pong from {self.endpoint} in {patience:g}s")
                )
            elif not conn.pings and now - self.confirmed_at >= self.ping_interval:
                nonce += 1
                conn.pings[nonce] = now
                conn.send(conn.codec.send(Ping(nonce)))

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
