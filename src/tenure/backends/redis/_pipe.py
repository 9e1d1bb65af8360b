"""One connection to Redis that carries every function call, pipelined.

Each call is one packed command written to the connection, and its answer the
next one Redis sends back (Redis answers a connection's commands in order), so a
call costs one write and one parsed reply: no pool checkout, no per-call timer, no
stream reader. Calls made in the same turn of the event loop go out in one write
(sessions that call at once share a system call), and their order is the order
they were made in, which is the order Redis applies them.

**Deadlines.** A call's answer must come within ``request_timeout``; one timer per
connection watches the oldest call waiting (answers come in order, so it is the
one to time out first). When it times out, the connection is closed and every call
on it fails with ``TimeoutError``; the next call connects afresh.

**Failures.** A lost connection fails every call waiting on it
(``ConnectionError``); a call cancelled while its answer is on the way leaves the
connection as it is (the answer, when it comes, is dropped). An error answer is
raised to its own call only, as redis-py's ``ResponseError`` (``NoPermissionError``
for ``NOPERM``).

The connection is made as redis-py makes one (TLS with the same files, ``AUTH``,
``SELECT``), and the replies are parsed by hiredis.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from typing import Any, Final

import hiredis
from redis import exceptions as rexc

from tenure.backends.redis._url import RedisOptions

__all__ = ["RedisPipe"]

#: hiredis's command packer (hiredis 2.1 and newer), else None.
_PACK: Final = getattr(hiredis, "pack_command", None)


def _pack(args: tuple[str | bytes | int, ...]) -> bytes:
    """RESP for ``args`` (hiredis's packer when it has one, which is C)."""
    if _PACK is not None:
        return bytes(_PACK(args))
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        raw = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(raw), raw))
    return b"".join(out)


def _error(message: str) -> rexc.ResponseError:
    """An error answer as redis-py would raise it (the classes tenure tells apart)."""
    if message.startswith("NOPERM"):
        return rexc.NoPermissionError(message)
    return rexc.ResponseError(message)


class _Protocol(asyncio.Protocol):
    """The connection's bytes: answers parsed and handed to the calls in order."""

    def __init__(self, pipe: RedisPipe) -> None:
        self.pipe = pipe
        self.reader = hiredis.Reader(replyError=Exception)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream's: a Transport

    def data_received(self, data: bytes) -> None:
        pipe = self.pipe
        if pipe.protocol is not self:  # failed already: its calls were told
            return
        reader = self.reader
        reader.feed(data)
        waiting = pipe.waiting
        while True:
            answer = reader.gets()
            if answer is False:
                return
            if not waiting:  # an answer nobody asked for: the stream is broken
                pipe.fail(self, rexc.ConnectionError("Redis sent an answer nobody asked for"))
                return
            future, _ = waiting.popleft()
            if not future.done():  # else cancelled: its answer is dropped
                if isinstance(answer, Exception):
                    future.set_exception(_error(str(answer)))
                else:
                    future.set_result(answer)

    def connection_lost(self, exc: Exception | None) -> None:
        self.pipe.fail(self, rexc.ConnectionError(f"Connection to Redis lost: {exc or 'closed'}"))


class RedisPipe:
    """See the module docstring."""

    def __init__(self, options: RedisOptions) -> None:
        self.options = options
        #: The calls whose answers are awaited, in the order sent: (future, deadline).
        self.waiting: collections.deque[tuple[asyncio.Future[Any], float]] = collections.deque()
        #: The connection in use (None: the next call connects).
        self.protocol: _Protocol | None = None
        self._connecting: asyncio.Future[_Protocol] | None = None
        self._timer: asyncio.TimerHandle | None = None
        #: Commands of this turn of the loop, written together when it ends.
        self._unsent: list[bytes] = []
        self._closed = False

    # -- calls -------------------------------------------------------------------------

    async def exchange(self, *args: str | bytes | int) -> Any:
        """Send one command, return its answer (redis-py's errors raised as they are)."""
        protocol = self.protocol
        if protocol is None:
            protocol = await self._connect()
        return await self._send(protocol, args)

    def send_now(self, *args: str | bytes | int) -> asyncio.Future[Any] | None:
        """Send one command now (it goes out before any later one): its answer's
        future, or None if the pipe is not connected (then use :meth:`exchange`)."""
        protocol = self.protocol
        if protocol is None or protocol.transport is None:
            return None
        return self._send(protocol, args)

    def _send(
        self, protocol: _Protocol, args: tuple[str | bytes | int, ...]
    ) -> asyncio.Future[Any]:
        """Write one command on ``protocol``'s connection: the future of its answer."""
        if protocol is not self.protocol or protocol.transport is None:
            raise rexc.ConnectionError("Connection to Redis lost")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self.waiting.append((future, loop.time() + self.options.request_timeout))
        if not self._unsent:  # the first of this turn: written when the turn ends
            loop.call_soon(self._flush, protocol)
        self._unsent.append(_pack(args))
        if self._timer is None:
            self._timer = loop.call_at(self.waiting[0][1], self._check)
        return future

    def _flush(self, protocol: _Protocol) -> None:
        """Write the commands of this turn of the loop at once (one system call)."""
        if protocol is not self.protocol or protocol.transport is None:
            return  # failed meanwhile: its commands went with it (a newer one's stay)
        unsent, self._unsent = self._unsent, []
        if unsent:
            protocol.transport.write(b"".join(unsent) if len(unsent) > 1 else unsent[0])

    def _check(self) -> None:
        """The oldest waiting call's deadline came: fail the connection if it is still
        waiting, else watch the next one's."""
        self._timer = None
        if not self.waiting or self.protocol is None:
            return
        loop = asyncio.get_running_loop()
        due = self.waiting[0][1]
        if loop.time() >= due:
            host = f"{self.options.host}:{self.options.port}"
            self.fail(self.protocol, rexc.TimeoutError(f"Timeout reading from {host}"))
        else:
            self._timer = loop.call_at(due, self._check)

    def fail(self, protocol: _Protocol, error: BaseException) -> None:
        """Close ``protocol``'s connection and fail every call waiting on it."""
        if protocol is not self.protocol:
            return
        self.protocol = None
        self._unsent = []  # their calls fail below
        if protocol.transport is not None:
            protocol.transport.abort()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiting, self.waiting = self.waiting, collections.deque()
        for future, _ in waiting:
            if not future.done():
                future.set_exception(error)

    # -- connecting ---------------------------------------------------------------------

    async def _connect(self) -> _Protocol:
        if self._closed:
            raise rexc.ConnectionError("the client is closed")
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._open())
        # Shielded: one caller cancelled must not stop the connect the others await.
        return await asyncio.shield(self._connecting)

    async def _open(self) -> _Protocol:
        options = self.options
        where = f"{options.host}:{options.port}"
        loop = asyncio.get_running_loop()
        protocol = _Protocol(self)
        context = _tls(options) if options.tls else None
        try:
            async with asyncio.timeout(options.connect_timeout):
                transport, _ = await loop.create_connection(
                    lambda: protocol, options.host, options.port, ssl=context
                )
        except TimeoutError:
            raise rexc.TimeoutError(f"Timeout connecting to {where}") from None
        except OSError as error:
            raise rexc.ConnectionError(f"Error connecting to {where}: {error}") from None
        # uvloop may tell connection_made only after create_connection returned.
        protocol.transport = transport
        self.protocol = protocol
        if self._closed:
            self.fail(protocol, rexc.ConnectionError("the client is closed"))
            raise rexc.ConnectionError("the client is closed")
        # The handshake is written at once, before any call's command can be: a
        # connection's commands are applied in the order written.
        handshake = []
        if options.password:
            login = (
                (options.username, options.password) if options.username else (options.password,)
            )
            handshake.append(self._send(protocol, ("AUTH", *login)))
        if options.db:
            handshake.append(self._send(protocol, ("SELECT", options.db)))
        try:
            for answer in handshake:
                await answer
        except rexc.ResponseError as error:
            self.fail(protocol, error)
            for answer in handshake:  # told already: read, so none is left unread
                if answer.done() and not answer.cancelled():
                    answer.exception()
            raise rexc.AuthenticationError(f"Redis refused the login or the db: {error}") from None
        return protocol

    async def close(self) -> None:
        """Close the connection (calls waiting fail)."""
        self._closed = True
        if self.protocol is not None:
            self.fail(self.protocol, rexc.ConnectionError("the client is closed"))


def _tls(options: RedisOptions) -> ssl.SSLContext:
    """The TLS context redis-py makes from the same files (the server's name checked)."""
    context = ssl.create_default_context(cafile=options.ca)
    if options.cert:
        context.load_cert_chain(options.cert, options.key)
    return context
