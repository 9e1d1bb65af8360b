"""A gRPC stream as the server's outboxes see a connection.

The server writes every answer and push only after the commit that covers it
(:mod:`tenure.server._net.outbox`); it writes to a connection's ``writer``. A
:class:`Pipe` is that writer for one ``CoordinationService/Session`` stream: what
the outbox writes (length-prefixed encoded messages, see :func:`frame`) is queued
here, and :meth:`Pipe.drain` writes it to the gRPC call in order. So a YDB stream
gets the same guarantees as a native connection (durable before sent, in order)
and the same treatment of a client that does not read (dropped past
``--max-unread``).
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from typing import Any, Final

_LENGTH: Final = struct.Struct(">I")


def frame(message: Any) -> bytes:
    """``message`` (a protobuf message) encoded and length-prefixed, for a pipe."""
    body: bytes = message.SerializeToString()
    return _LENGTH.pack(len(body)) + body


class Pipe:
    """The outbox's writer (and its transport) for one gRPC stream."""

    def __init__(self) -> None:
        self._messages: deque[bytes] = deque()
        self._unsent = 0  # bytes queued and not yet handed to gRPC
        self._wake = asyncio.Event()
        self._closing = False  # close once what is queued is sent
        self.aborted = False  # dropped: what is queued is discarded
        self.gone = False  # the call is over: nothing can reach the client any more

    # -- the writer, as the outbox uses it ----------------------------------------------

    @property
    def transport(self) -> Pipe:
        """Itself: the outbox asks the transport how much is unsent, and aborts it."""
        return self

    def write(self, data: bytes) -> None:
        """Queue the framed messages in ``data`` (one or more :func:`frame`-s)."""
        view, at = memoryview(data), 0
        while at < len(view):
            (size,) = _LENGTH.unpack_from(view, at)
            at += _LENGTH.size
            self._messages.append(bytes(view[at : at + size]))
            at += size
        self._unsent += len(data)
        self._wake.set()

    def close(self) -> None:
        """End the stream once what is queued is sent."""
        self._closing = True
        self._wake.set()

    # -- the transport -------------------------------------------------------------------

    def is_closing(self) -> bool:
        """Whether nothing more may be written (closed, dropped, or the call is over)."""
        return self._closing or self.aborted or self.gone

    def get_write_buffer_size(self) -> int:
        """Bytes queued that gRPC has not taken yet (the client is not reading them)."""
        return self._unsent

    def abort(self) -> None:
        """Drop the stream now, discarding what is queued."""
        self.aborted = True
        self._messages.clear()
        self._wake.set()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """No socket behind a stream: ``default`` for every name."""
        return default

    # -- the call side ---------------------------------------------------------------------

    async def drain(self, context: Any) -> None:
        """Write what is queued to the call, in order, until closed or aborted.

        Returns when the stream should end: closed with everything sent, or aborted.

        Raises:
            Whatever ``context.write`` raises when the call broke.
        """
        while True:
            while self._messages and not self.aborted:
                message = self._messages.popleft()
                self._unsent -= len(message) + _LENGTH.size
                await context.write(message)
            if self.aborted or self._closing:
                return
            self._wake.clear()
            await self._wake.wait()
