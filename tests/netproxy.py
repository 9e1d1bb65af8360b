"""A TCP proxy for tests that breaks the network on demand: drop, stall, refuse, delay.

``NetProxy`` listens on 127.0.0.1 and forwards every connection to an upstream
address, one task per connection and one pump per direction. The faults:

* :meth:`NetProxy.drop` resets every current connection, both sides (``SO_LINGER``
  0, then abort: the peers see a reset, or the end of the stream);
* :meth:`NetProxy.stall` is a partition: nothing is forwarded either way (not even
  the end of a stream), nothing is lost; :meth:`NetProxy.resume` lets the held
  bytes through first, in order. A connection accepted while stalled is stalled
  too: it reaches upstream only after the resume;
* :meth:`NetProxy.refuse` resets new connections as soon as they are accepted;
* :meth:`NetProxy.lose_downstream` reads what upstream sends and throws it away:
  bytes in flight on a connection about to die (then :meth:`NetProxy.drop` it);
* ``delay`` holds each chunk that many seconds before forwarding it (per
  direction, in order);
* ``upstream_port`` may be changed: connections that reach upstream after the
  change go to the new port.

Every task is tracked: :meth:`NetProxy.aclose` resets everything and returns once
every task has ended and every socket is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Coroutine
from typing import Final

__all__ = ["NetProxy"]

#: Bytes read from one side at a time.
_CHUNK: Final = 65536
#: Bound of the upstream connect and of a graceful close, in seconds.
_WAIT: Final = 10.0
_LINGER_RESET: Final = struct.pack("ii", 1, 0)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close ``writer``'s socket with a reset (RST) instead of an orderly FIN."""
    transport = writer.transport
    if not transport.is_closing():
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    transport.abort()


class _Link:
    """One proxied connection: the client's streams and, once connected, upstream's."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.upstream: asyncio.StreamWriter | None = None
        self.task: asyncio.Task[None] | None = None
        self.reset = False  # dropped or broken: both sides are reset, not closed

    def writers(self) -> list[asyncio.StreamWriter]:
        return [self.writer] if self.upstream is None else [self.writer, self.upstream]

    def abort(self) -> None:
        """Reset both sides (idempotent)."""
        self.reset = True
        for writer in self.writers():
            _reset(writer)


class NetProxy:
    """A fault-injecting TCP proxy to ``upstream_host:upstream_port`` (see the module)."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        """Nothing listens until :meth:`start`."""
        self.upstream_host = upstream_host
        #: Where connections reaching upstream from now on go (settable).
        self.upstream_port = upstream_port
        #: Seconds each chunk waits before it is forwarded (settable any time).
        self.delay = 0.0
        #: Where clients connect (known after :meth:`start`).
        self.host = "127.0.0.1"
        self.port = 0
        #: Connections accepted since start, refused ones included.
        self.total_connections = 0
        #: Bytes upstream sent that :meth:`lose_downstream` threw away, since start.
        self.lost_downstream_bytes = 0
        self._links: set[_Link] = set()  # open, not dropped
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()  # every socket not known closed
        self._flowing = asyncio.Event()  # clear while stalled
        self._flowing.set()
        self._refusing = False
        self._losing_downstream = False
        self._closed = False
        self._listener: asyncio.Server | None = None

    @property
    def connections(self) -> int:
        """Proxied connections open now (stalled ones too; not refused, dropped or over)."""
        return len(self._links)

    async def start(self) -> None:
        """Listen on ``self.host`` (127.0.0.1 unless set), on ``self.port`` if set
        before, else on a port the OS picks (then ``self.port``)."""
        loop = asyncio.get_running_loop()

        def protocol() -> asyncio.StreamReaderProtocol:
            # A plain callback, not a coroutine: the link is registered (and its task
            # tracked) in connection_made, with no untracked task in between.
            return asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._accepted, loop=loop)

        self._listener = await loop.create_server(protocol, self.host, self.port)
        self.port = int(self._listener.sockets[0].getsockname()[1])

    async def __aenter__(self) -> NetProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- faults -------------------------------------------------------------------------

    def drop(self) -> None:
        """Reset every current connection, both sides; new ones are still accepted."""
        links, self._links = self._links, set()
        for link in links:
            link.abort()
            if link.task is not None:
                link.task.cancel()

    def stall(self) -> None:
        """Forward nothing, either way, until :meth:`resume`; bytes are held, not lost."""
        self._flowing.clear()

    def resume(self) -> None:
        """Forward again: what was held goes first, in order."""
        self._flowing.set()

    def lose_downstream(self, on: bool = True) -> None:
        """Throw away what upstream sends to clients from now on (``on=False``: forward it).

        Nothing tells either side: upstream believes it was sent, the client never
        reads it, as with bytes in flight when a connection dies.
        """
        self._losing_downstream = on

    def refuse(self, on: bool = True) -> None:
        """Reset new connections at once (``on=False``: accept them again)."""
        self._refusing = on

    async def aclose(self) -> None:
        """Stop listening, reset every connection; returns when all is closed."""
        self._closed = True
        if self._listener is not None:
            self._listener.close()
        self.drop()
        for writer in list(self._writers):  # links closing gracefully: no more grace
            _reset(writer)
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in list(self._writers):
            await self._settle(writer)
        if self._listener is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_WAIT):
                    await self._listener.wait_closed()

    # -- the work -----------------------------------------------------------------------

    def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A client connected (called from connection_made)."""
        if self._closed:
            _reset(writer)
            return
        self.total_connections += 1
        self._writers.add(writer)
        if self._refusing:
            _reset(writer)
            self._spawn(self._settle(writer))
            return
        link = _Link(reader, writer)
        self._links.add(link)
        link.task = self._spawn(self._serve(link))

    def _spawn(self, coro: Coroutine[object, object, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _serve(self, link: _Link) -> None:
        try:
            await self._flowing.wait()  # a partition lets no connection through either
            try:
                async with asyncio.timeout(_WAIT):
                    up_reader, link.upstream = await asyncio.open_connection(
                        self.upstream_host, self.upstream_port
                    )
            except (OSError, TimeoutError):
                link.abort()  # upstream is unreachable: so is the proxy
                return
            self._writers.add(link.upstream)
            if link.reset:  # dropped while connecting
                link.abort()
                return
            async with asyncio.TaskGroup() as group:
                group.create_task(self._pump(link, link.reader, link.upstream))
                group.create_task(self._pump(link, up_reader, link.writer))
        finally:
            self._links.discard(link)
            for writer in link.writers():
                if link.reset:
                    _reset(writer)
                else:
                    writer.close()
            for writer in link.writers():
                await self._settle(writer)

    async def _pump(
        self, link: _Link, source: asyncio.StreamReader, sink: asyncio.StreamWriter
    ) -> None:
        """Forward one direction until its end of stream (forwarded too) or a reset."""
        try:
            while True:
                data = await source.read(_CHUNK)
                if self.delay > 0:
                    await asyncio.sleep(self.delay)
                await self._flowing.wait()
                if link.reset or sink.is_closing():
                    return
                if not data:
                    if sink.can_write_eof():
                        sink.write_eof()
                    return
                if self._losing_downstream and sink is link.writer:
                    self.lost_downstream_bytes += len(data)
                    continue  # lost in flight
                sink.write(data)
                await sink.drain()
        except OSError:  # one side was reset: so is the other, as if the RST passed through
            link.abort()

    async def _settle(self, writer: asyncio.StreamWriter) -> None:
        """Wait (bounded) until ``writer``'s socket is closed; reset it if that takes long."""
        for _ in range(2):
            try:
                async with asyncio.timeout(_WAIT):
                    await writer.wait_closed()
                break
            except TimeoutError:  # a graceful close stuck behind a peer that does not read
                _reset(writer)
            except OSError:
                break
        self._writers.discard(writer)
