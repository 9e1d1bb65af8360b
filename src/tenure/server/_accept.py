"""What each accepted connection on the main port is: native frames or dflockd lines.

The first byte tells (a native Hello's length prefix starts with a zero byte; a
dflockd command with a letter). A dflockd connection is served through asyncio
streams, as every line protocol is. A native one is read straight from the event
loop's ``data_received`` callback instead: its bytes go to the server's handler as
they arrive, with no reader task to wake and no stream buffer in between, which is
a good part of what one request costs the server.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Coroutine
from typing import Any, Final

#: The most a stream reader buffers before it stops reading (dflockd connections).
READ_LIMIT: Final = 65536


class Kind(enum.Enum):
    """What the first bytes of a connection said."""

    NATIVE = "native"
    DFLOCKD = "dflockd"
    CLOSED = "closed"  # the peer closed (or the connection broke) before a byte


class AcceptedProtocol(asyncio.StreamReaderProtocol):
    """A connection whose protocol is decided by its first byte (module docstring).

    ``kind`` resolves at the first byte (or the end). A dflockd connection goes on as
    a plain stream protocol. For a native one, bytes are kept until :meth:`feed_to`
    names the handler, then passed to it as they come (``b""`` at the end), and
    ``done`` resolves when the connection is lost. Writes that back up pause reading
    until they drain (the streams' ``drain()``, done here by the transport).
    """

    def __init__(
        self,
        serve: Callable[
            [asyncio.StreamReader, asyncio.StreamWriter, AcceptedProtocol],
            Coroutine[Any, Any, None],
        ],
    ) -> None:
        loop = asyncio.get_running_loop()
        super().__init__(
            asyncio.StreamReader(limit=READ_LIMIT, loop=loop),
            lambda reader, writer: serve(reader, writer, self),
            loop=loop,
        )
        self.kind: asyncio.Future[Kind] = loop.create_future()
        self.done: asyncio.Future[None] = loop.create_future()
        self._native = False
        self._held: list[bytes] = []  # native bytes before feed_to
        self._handler: Callable[[bytes], None] | None = None
        self._transport: asyncio.Transport | None = None
        self._over_tls = False

    def feed_to(self, handler: Callable[[bytes], None]) -> None:
        """Native: pass every byte to ``handler`` from now on (what came so far first)."""
        self._handler = handler
        held, self._held = self._held, []
        for data in held:
            if self.done.done():
                break  # the handler said its last word (finish)
            handler(data)

    def finish(self) -> None:
        """Native: stop reading (the handler has seen its last byte); ``done`` resolves."""
        self._handler = None
        self._held = []
        if self.done.done():
            return
        self.done.set_result(None)
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._transport = transport  # type: ignore[assignment]
        self._over_tls = transport.get_extra_info("sslcontext") is not None

    def data_received(self, data: bytes) -> None:
        if not self.kind.done():
            self._native = data[:1] == b"\x00"
            self.kind.set_result(Kind.NATIVE if self._native else Kind.DFLOCKD)
        if not self._native:
            super().data_received(data)
        elif self._handler is not None:
            self._handler(data)
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
        if not self.done.done():
            self.done.set_result(None)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._native and self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._native and self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()
