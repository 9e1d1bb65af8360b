"""One connection of a link: bytes in, events out, frames out in few writes. [compiled]

:class:`LinkProtocol` is the asyncio protocol of a link's connection: it waits for
the handshake's answer, then hands each decoded event to its link (a
:class:`Receiver`: :class:`tenure.backends._link.Link`) straight from the event
loop's callback. :class:`LinkConnection` is the connection once it is the link's:
its transport, codec, requests in flight and pings.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Protocol

from tenure._core import Command, Effect
from tenure._protocol import (
    NEED_DATA,
    ClientConnection,
    ConnectionClosed,
    Failure,
    Push,
    Refused,
    Reply,
    ServerMessage,
    Welcome,
)
from tenure.backends._doors import Door
from tenure.backends._link_errors import DisconnectedError
from tenure.errors import ProtocolError, TenureError, UnavailableError, error_from_code

__all__ = ["DisconnectedError", "LinkConnection", "LinkHome", "LinkProtocol", "Receiver"]


class LinkHome(Protocol):
    """What a link tells its home, the object that made it (``tenure.backends._link``)."""

    def push(self, effect: Effect) -> None:
        """An effect for one of the sessions of this link."""

    async def connected(self, welcome: Welcome) -> None:
        """A connection is up; re-attach sessions (with call_now) before returning."""

    def disconnected(self) -> None:
        """The connection was lost; :attr:`Link.confirmed_at` is now frozen."""


class Receiver(Protocol):
    """What a connection's protocol tells its link."""

    def receive(self, conn: LinkConnection, event: ServerMessage) -> bool:
        """Handle one event of ``conn``; whether ``conn`` is still the link's after it."""
        ...

    def lost(self, conn: LinkConnection, error: BaseException) -> None:
        """``conn`` is lost (``error`` says why); nothing if it is no longer the link's."""
        ...


@dataclass(eq=False)
class LinkConnection:
    """One connection of a link, past its handshake: its transport, codec and requests.

    ``pending``: request id -> (its answer's future, when it was sent, the command),
    in the order sent; ``pings``: Ping nonce -> when it was sent; ``going_away``: the
    server said GoingAway (no new request goes out on it); ``watchdog``: the timer of
    its oldest request's deadline (:mod:`tenure.backends._link_deadline`).
    """

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    protocol: LinkProtocol
    codec: ClientConnection
    pending: dict[int, tuple[asyncio.Future[Any], float, Command[Any]]] = field(
        default_factory=dict
    )
    pings: dict[int, float] = field(default_factory=dict)  # nonce -> sent at
    #: The requests whose future gets the whole Reply, not its value (a read of a
    #: standby's: its ``index`` too, :meth:`Link.call_indexed`).
    whole: set[int] = field(default_factory=set)
    going_away: bool = False
    watchdog: asyncio.TimerHandle | None = None
    #: Frames held back until the end of this turn of the loop (see :meth:`send`).
    unsent: list[bytes] = field(default_factory=list)
    #: Whether a frame was written in this turn (reset at its end).
    wrote: bool = False
    #: Whether this turn's frames so far were all deferred (none written yet).
    deferred_only: bool = False

    def send(self, data: bytes, *, defer: bool = False) -> None:
        """Write ``data``: the turn's first frame at once, later ones at the turn's end.

        Many tasks sharing a client ask in the same turn (each woken by an answer
        of one read): the first request leaves at once (a lone caller never waits
        for a write), the others together in one write at the end of the turn, one
        system call instead of one each. Order is kept. ``defer``: this frame waits
        for the turn's end even if it is the first, for a request nobody waits on
        (a release on leaving ``async with``): the request the caller sends next in
        this turn then leaves with it at once, in one write the server reads at
        once (it is not held to the turn's end behind other clients' requests).
        """
        if self.wrote:
            self.unsent.append(data)
            if self.deferred_only and not defer:
                self.deferred_only = False
                data, self.unsent = b"".join(self.unsent), []
                self.transport.write(data)
            return
        self.wrote = True
        self.loop.call_soon(self._end_turn)
        if defer:
            self.deferred_only = True
            self.unsent.append(data)
        else:
            self.transport.write(data)

    def unwatch(self) -> None:
        """Stop the timer of its requests' deadlines (the connection is given up)."""
        if self.watchdog is not None:
            self.watchdog.cancel()
            self.watchdog = None

    def fail_all(self, error: TenureError) -> None:
        """Fail every request waiting on it with (a copy of) ``error``: it is given up."""
        self.unwatch()
        for future, _sent_at, _command in self.pending.values():
            if not future.done():
                future.set_exception(type(error)(*error.args))
                future.exception()  # retrieved, so an abandoned one does not warn
        self.pending.clear()
        self.whole.clear()

    def flush(self) -> None:
        """Write what waits for the turn's end now (before the connection is closed)."""
        self._end_turn()

    def _end_turn(self) -> None:
        self.wrote = self.deferred_only = False
        if self.unsent:
            data, self.unsent = b"".join(self.unsent), []
            if not self.transport.is_closing():  # (lost meanwhile: its requests failed)
                self.transport.write(data)


class LinkProtocol(asyncio.Protocol):
    """Bytes in, events out, straight from the event loop's callback (no reader task).

    Until :meth:`start`, it only waits for the handshake's answer (``handshake``).
    Afterwards it hands each event to the link as it is decoded, with one rule: a
    Push that follows a Reply or Failure of the same read waits one turn of the
    loop, so that the caller of that request acts on its answer (arms a watch,
    records a grant) before later pushes are delivered.
    """

    def __init__(self, link: Receiver, codec: ClientConnection, endpoint: Door) -> None:
        self._link = link
        self.codec = codec
        self.endpoint = endpoint  # (the link's may be another door's while this one greets)
        loop = asyncio.get_running_loop()
        self.handshake: asyncio.Future[Welcome] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self._conn: LinkConnection | None = None
        self._held: ServerMessage | None = None  # a Push waiting for its turn
        self._waiting = False  # a drain is scheduled (or the handshake is not done)

    def start(self, conn: LinkConnection) -> None:
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
            why = f"{self.endpoint} closed the connection during the handshake"
            self.handshake.set_exception(exc if exc is not None else UnavailableError(why))
            self.handshake.exception()  # (no warning if the connect gave up waiting)
        elif self._conn is not None:
            why = f"{self.endpoint} closed the connection"
            self._link.lost(self._conn, exc if exc is not None else DisconnectedError(why))

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
                    raise DisconnectedError(f"{self.endpoint} closed the connection")
                if answered and isinstance(event, Push):
                    self._held, self._waiting = event, True
                    asyncio.get_running_loop().call_soon(self._drain)
                    return
                if not self._link.receive(conn, event):
                    return  # given up while dispatching (GoingAway answered in full)
                answered = answered or type(event) is Reply or type(event) is Failure
        except (ProtocolError, DisconnectedError) as error:
            if self._conn is not None:
                self._link.lost(self._conn, error)
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
            error = error_from_code(event.code, f"{self.endpoint} refused: {event.message}")
            self.handshake.set_exception(error)
            self.handshake.exception()  # (no warning if the connect gave up waiting)
        else:
            why = f"{self.endpoint} closed the connection during the handshake"
            self.handshake.set_exception(UnavailableError(why))
            self.handshake.exception()
