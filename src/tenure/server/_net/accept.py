"""What a connection accepted on the main port is: native frames or the accepted face's. [compiled]

The first byte tells (a native Hello's length prefix starts with a zero byte; an
accepted face's request with any other). An accepted face's connection
(:class:`tenure.server.plug.AcceptedFace`) is served through asyncio streams, as every
line protocol is. A native one is read straight from the event
loop's ``data_received`` callback instead: its bytes go to the server's handler as
they arrive, with no reader task to wake and no stream buffer in between, which is
a good part of what one request costs the server.

**Fair turns.** A native connection is served in turns of at most ``turn``
messages. One that has more (a client pipelining thousands of requests) is not
read meanwhile, and its next turn comes after every other connection's in the
event loop (``call_soon``): a flood costs its sender's throughput, not everybody's
latency. And one whose answers pile up unsent (a client that does not read) is
neither read nor served until they are down to a quarter of ``pause_unread``: its
requests wait in its own socket, unread, instead of in the server's memory.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, Final, cast

log = logging.getLogger("tenure.server")

#: The most a stream reader buffers before it stops reading (an accepted face's connections).
READ_LIMIT: Final = 65536


class Kind(enum.Enum):
    """What the first bytes of a connection said."""

    NATIVE = "native"
    OTHER = "other"  # any other first byte: the accepted face's, if any
    CLOSED = "closed"  # the peer closed (or the connection broke) before a byte


class AcceptedProtocol(asyncio.StreamReaderProtocol):
    """A connection whose protocol is decided by its first byte (module docstring).

    ``kind`` resolves at the first byte (or the end). Another goes on as a plain
    stream protocol. For a native one, bytes are kept until :meth:`feed_to`
    names the handler, then passed to it as they come (``b""`` at the end) and
    served in fair turns (module docstring); ``done`` resolves when the connection
    is lost. Writes pause once ``pause_unread`` bytes wait to be sent (an accepted
    face's connection waits for them with the streams' ``drain()``).
    """

    def __init__(
        self,
        serve: Callable[
            [asyncio.StreamReader, asyncio.StreamWriter, AcceptedProtocol],
            Coroutine[Any, Any, None],
        ],
        *,
        turn: int,
        pause_unread: int,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        """``on_lost``: called once the connection is lost (its socket closed)."""
        loop = asyncio.get_running_loop()
        # The stream callback finds this protocol through its writer's transport: a
        # callback holding ``self`` would make every connection a reference cycle,
        # left for the cyclic collector's walks once the connection is closed.
        super().__init__(
            asyncio.StreamReader(limit=READ_LIMIT, loop=loop),
            partial(_serve_with_protocol, serve),
            loop=loop,
        )
        self.kind: asyncio.Future[Kind] = loop.create_future()
        #: The connection's first byte (b"" until it came): an accepted face's
        #: connection relayed by another member starts with a mark of its own
        #: (tenure.server._net.relay).
        self.first = b""
        self.done: asyncio.Future[None] = loop.create_future()
        self._loop = loop
        self._turn = turn
        self._pause_unread = pause_unread
        self._native = False
        self._held: list[bytes] = []  # native bytes before feed_to
        self._feed: Callable[[bytes], None] | None = None
        self._step: Callable[[], bool] | None = None
        self._transport: asyncio.Transport | None = None
        self._over_tls = False
        # Native serving: messages may wait in the handler (fed, not yet served);
        # the next turn is scheduled; answers wait unsent; reading is paused.
        self._waiting = False
        self._next_turn: asyncio.Handle | None = None
        self._unsent = False
        self._reading_paused = False
        self._throttled = False  # logged once per connection
        self._on_lost = on_lost

    def __del__(self) -> None:
        _finalize(self)

    def feed_to(self, feed: Callable[[bytes], None], step: Callable[[], bool]) -> None:
        """Native: pass every byte to ``feed`` from now on (what came so far first), and
        serve by calling ``step``, which handles one message and says whether another
        may follow (False: it needs more bytes, or the connection is over)."""
        self._feed, self._step = feed, step
        held, self._held = self._held, []
        for data in held:
            if self._feed is None:
                break  # the handler said its last word (finish)
            self._received(data)

    def serve_later(self) -> None:
        """Native: serve again at the loop's next turn (a message held back by the
        handler may be served now), and read no more until then."""
        if self._step is None or self.done.done():
            return
        self._waiting = True
        if self._next_turn is None and not self._unsent:
            self._next_turn = self._loop.call_soon(self._serve_turn)
        self._update_reading()

    def finish(self) -> None:
        """Native: stop reading (the handler has seen its last byte); ``done`` resolves."""
        self._feed = self._step = None
        self._held = []
        if self._next_turn is not None:
            self._next_turn.cancel()
            self._next_turn = None
        if self.done.done():
            return
        self.done.set_result(None)
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        # (uvloop's transports are not asyncio.Transport subclasses, only alike.)
        self._transport = cast(asyncio.Transport, transport)
        self._over_tls = transport.get_extra_info("sslcontext") is not None
        self._transport.set_write_buffer_limits(high=self._pause_unread)  # low: a quarter

    def data_received(self, data: bytes) -> None:
        if not self.kind.done():
            self.first = data[:1]
            self._native = data[:1] == b"\x00"
            self.kind.set_result(Kind.NATIVE if self._native else Kind.OTHER)
        if not self._native:
            super().data_received(data)
        elif self._feed is not None:
            self._received(data)
        elif not self.done.done():
            self._held.append(data)

    def eof_received(self) -> bool:
        if not self.kind.done():
            self.kind.set_result(Kind.CLOSED)
        if not self._native:
            return bool(super().eof_received())
        self.data_received(b"")
        # Keep the transport open for the answers still owed (not possible over TLS).
        return not self._over_tls

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.kind.done():
            self.kind.set_result(Kind.CLOSED)
        super().connection_lost(exc)
        if self._next_turn is not None:
            self._next_turn.cancel()
            self._next_turn = None
        if not self.done.done():
            self.done.set_result(None)
        if self._on_lost is not None:
            self._on_lost()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._native:
            self._unsent = True
            if not self._throttled and self._transport is not None:
                self._throttled = True
                peer = str(self._transport.get_extra_info("peername"))
                fields = {"peer": peer, "pause_unread": self._pause_unread}
                log.info("answers unread; not reading the client", extra={"fields": fields})
            self._update_reading()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._native:
            self._unsent = False
            if self._waiting and self._next_turn is None and not self.done.done():
                self._next_turn = self._loop.call_soon(self._serve_turn)
            self._update_reading()

    # -- native serving ---------------------------------------------------------------

    def _received(self, data: bytes) -> None:
        assert self._feed is not None
        self._feed(data)
        self._waiting = True
        if self._next_turn is None and not self._unsent:
            self._serve_turn()  # at once, in this callback: the common case costs nothing

    def _serve_turn(self) -> None:
        """Serve up to ``turn`` messages; if more wait, serve them in a later turn."""
        self._next_turn = None
        if not self._unsent:
            for _ in range(self._turn):
                if self._step is None or not self._step():
                    self._waiting = False
                    break
            else:
                # Its share is used: every other connection goes first, then it goes on.
                self._next_turn = self._loop.call_soon(self._serve_turn)
        self._update_reading()

    def _update_reading(self) -> None:
        """Read only when everything fed was served and no answers wait unsent."""
        transport = self._transport
        if transport is None or transport.is_closing() or self.done.done():
            return
        pause = self._waiting or self._unsent
        if pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                transport.pause_reading()
            else:
                transport.resume_reading()


def _finalize(protocol: asyncio.StreamReaderProtocol) -> None:
    """What ``StreamReaderProtocol.__del__`` does (it marks the close future's exception,
    a reset peer's, as seen), called from each class's own ``__del__``: a class mypyc
    compiles runs no finalizer it inherits from an interpreted base, only its own, and
    without it each connection a peer reset logs "Future exception was never
    retrieved" once freed (by reference counting, now that it is in no cycle)."""
    asyncio.StreamReaderProtocol.__del__(protocol)


def _serve_with_protocol(
    serve: Callable[
        [asyncio.StreamReader, asyncio.StreamWriter, AcceptedProtocol],
        Coroutine[Any, Any, None],
    ],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> Coroutine[Any, Any, None]:
    """``serve`` the connection of ``writer``, with its :class:`AcceptedProtocol`
    (over TLS too: the TLS layer's transport gives the protocol above it)."""
    return serve(reader, writer, cast(AcceptedProtocol, writer.transport.get_protocol()))


class FaceProtocol(asyncio.StreamReaderProtocol):
    """A connection of an accepted face's own port (a plain stream protocol): calls
    ``on_made`` once it is made (after any TLS handshake), ``on_lost`` once it is lost."""

    def __init__(
        self,
        serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Coroutine[Any, Any, None]],
        *,
        on_made: Callable[[], None],
        on_lost: Callable[[], None],
    ) -> None:
        loop = asyncio.get_running_loop()
        super().__init__(asyncio.StreamReader(limit=READ_LIMIT, loop=loop), serve, loop=loop)
        self._on_made = on_made
        self._on_lost = on_lost

    def __del__(self) -> None:
        _finalize(self)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._on_made()
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._on_lost()
