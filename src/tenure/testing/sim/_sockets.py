"""Simulated TCP sockets: what asyncio's selector transports and tenure's listener call.

A :class:`SimSocket` is a non-blocking stream socket with no descriptor behind it:
asyncio's selector event loop (:class:`~tenure.testing.sim._loop.SimLoop`) registers
it with a :class:`~tenure.testing.sim._loop.SimSelector`, which asks it whether it is
readable (:meth:`SimSocket.readable`) or writable, and the transports call the
methods a real socket has: ``recv``, ``recv_into``, ``send``, ``shutdown``, ``close``,
``getsockname``, ``getpeername``, ``setsockopt``; a listening one ``accept`` and
``dup`` (the server's own accept loop, :mod:`tenure.server._net.listen`, uses both).

Each direction of a connection is a :class:`OneWay`: the bytes sent and not yet read,
bounded by its window (a send takes at most what fits, as a kernel's buffers do: a
peer that does not read makes its sender's transport buffer, then pause). The network
(:mod:`tenure.testing.sim._network`) decides when sent bytes arrive.
"""

from __future__ import annotations

import errno
import socket
from collections import deque
from typing import Any, Final, Protocol

__all__ = ["WINDOW", "Carrier", "OneWay", "SimSocket"]

#: Bytes one direction of a connection holds (sent, not yet read): a kernel's send and
#: receive buffers together.
WINDOW: Final = 1 << 20

Address = tuple[str, int]


class Carrier(Protocol):
    """What carries a socket's bytes, as the socket sees it (the network:
    :class:`~tenure.testing.sim._network.SimNetwork`)."""

    def transmit(self, sock: SimSocket, data: bytes) -> None:
        """``data``, sent by ``sock``, is on its way to the peer."""

    def transmit_eof(self, sock: SimSocket) -> None:
        """``sock`` shut its side for writing."""

    def closed(self, sock: SimSocket) -> None:
        """``sock`` was closed."""

    def dup_listener(self, sock: SimSocket) -> SimSocket:
        """Another socket on listening ``sock``'s queue."""

    def touch(self, sock: SimSocket) -> None:
        """``sock``'s readiness may have changed (its selector looks again)."""


class OneWay:
    """One direction of a connection: bytes in flight, then arrived and unread."""

    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        self.in_flight = 0  # bytes sent whose arrival is scheduled
        self.arrived: deque[bytes] = deque()
        self.unread = 0
        self.eof = False  # the sender shut it: once read to the end, recv gives b""

    def room(self) -> int:
        """Bytes a send may take now."""
        return max(0, self.window - self.in_flight - self.unread)

    def arrive(self, data: bytes) -> None:
        """``data``, in flight, has arrived."""
        self.in_flight -= len(data)
        if data:
            self.arrived.append(data)
            self.unread += len(data)

    def take(self, limit: int) -> bytes:
        """Up to ``limit`` arrived bytes, in order."""
        parts: list[bytes] = []
        wanted = limit
        while self.arrived and wanted > 0:
            head = self.arrived[0]
            if len(head) <= wanted:
                parts.append(self.arrived.popleft())
                wanted -= len(head)
            else:
                parts.append(head[:wanted])
                self.arrived[0] = head[wanted:]
                wanted = 0
        data = b"".join(parts)
        self.unread -= len(data)
        return data


class SimSocket:
    """A simulated non-blocking TCP socket (module docstring); made by the network."""

    family: Final = socket.AF_INET
    type: Final = socket.SOCK_STREAM
    proto: Final = socket.IPPROTO_TCP

    def __init__(self, network: Carrier, fd: int, local: Address) -> None:
        self.network = network
        #: Its number, for good (:meth:`fileno` says -1 once it is closed).
        self.number = fd
        self._fd = fd
        self.local = local
        self.peer: SimSocket | None = None
        self.incoming: OneWay | None = None  # what the peer sends here
        self.outgoing: OneWay | None = None  # what this one sends the peer
        self.error: int = 0  # set by a reset: raised by the next call
        self.backlog: deque[SimSocket] | None = None  # a listening socket's
        self.closed = False
        self.shut_write = False
        self.options: dict[tuple[int, int], Any] = {}

    # -- what the selector asks ---------------------------------------------------------

    def fileno(self) -> int:
        """A number of its own, never a descriptor of the process (-1 once closed)."""
        return -1 if self.closed else self._fd

    def readable(self) -> bool:
        """Whether a read (or accept) would not block."""
        if self.closed:
            return False
        if self.backlog is not None:
            return bool(self.backlog)
        if self.error:
            return True
        stream = self.incoming
        return stream is not None and (stream.unread > 0 or stream.eof)

    def writable(self) -> bool:
        """Whether a send would take something (or fail at once)."""
        if self.closed or self.backlog is not None:
            return False
        if self.error:
            return True
        return self.outgoing is not None and self.outgoing.room() > 0

    # -- the socket API -----------------------------------------------------------------

    def setblocking(self, flag: bool) -> None:
        """Simulated sockets never block: only non-blocking use is supported."""
        if flag:
            raise ValueError("a simulated socket is non-blocking")

    def settimeout(self, value: float | None) -> None:
        """Only 0 (non-blocking), as asyncio sets it."""
        if value != 0.0:
            raise ValueError("a simulated socket is non-blocking")

    def gettimeout(self) -> float:
        """Always 0: non-blocking."""
        return 0.0

    def setsockopt(self, level: int, option: int, value: Any, *rest: Any) -> None:
        """Remembered (``SO_LINGER`` with 0 makes the close a reset, as TCP's)."""
        self._check_open()
        self.options[(level, option)] = value

    def getsockopt(self, level: int, option: int, *rest: Any) -> Any:
        """``SO_ERROR``: the pending error (cleared), else what was set (0)."""
        self._check_open()
        if (level, option) == (socket.SOL_SOCKET, socket.SO_ERROR):
            error, self.error = self.error, 0
            return error
        return self.options.get((level, option), 0)

    def getsockname(self) -> Address:
        """Its own address."""
        self._check_open()
        return self.local

    def getpeername(self) -> Address:
        """The peer's address (``ENOTCONN`` for a listening socket)."""
        self._check_open()
        if self.peer is None:
            raise OSError(errno.ENOTCONN, "not connected")
        return self.peer.local

    def listen(self, backlog: int = 0) -> None:
        """A listening socket listens already (the network made it so)."""
        if self.backlog is None:
            raise OSError(errno.EINVAL, "only the network makes a simulated socket listen")

    def accept(self) -> tuple[SimSocket, Address]:
        """The next connection waiting (``BlockingIOError`` when none)."""
        self._check_open()
        if self.backlog is None:
            raise OSError(errno.EINVAL, "not listening")
        if not self.backlog:
            raise BlockingIOError(errno.EAGAIN, "no connection waiting")
        conn = self.backlog.popleft()
        if conn.peer is None:  # reset while it waited (as BSD's accept says; Linux's
            # returns it, and its first call fails: the server handles both)
            conn.close()
            raise ConnectionAbortedError(errno.ECONNABORTED, "the connection was reset")
        return conn, conn.peer.local

    def dup(self) -> SimSocket:
        """Another socket on the same listening queue (a connected one cannot be)."""
        self._check_open()
        if self.backlog is None:
            raise OSError(errno.EINVAL, "only a listening simulated socket can be dup()ed")
        return self.network.dup_listener(self)

    def recv(self, size: int, flags: int = 0) -> bytes:
        """Up to ``size`` bytes; ``b""`` at the end; ``BlockingIOError`` when none yet."""
        self._raise_error()
        stream = self.incoming
        if stream is None:
            raise OSError(errno.ENOTCONN, "not connected")
        if stream.unread:
            data = stream.take(size)
            if self.peer is not None:
                self.network.touch(self.peer)  # (room in its window again)
            return data
        if stream.eof:
            return b""
        raise BlockingIOError(errno.EAGAIN, "nothing to read yet")

    def recv_into(self, buffer: Any, size: int = 0, flags: int = 0) -> int:
        """:meth:`recv` into ``buffer``; the number of bytes."""
        view = memoryview(buffer).cast("B")
        data = self.recv(size or len(view))
        view[: len(data)] = data
        return len(data)

    def send(self, data: Any, flags: int = 0) -> int:
        """Take as much of ``data`` as the window has room for (``BlockingIOError``: none)."""
        self._raise_error()
        if self.shut_write:
            raise BrokenPipeError(errno.EPIPE, "the socket was shut for writing")
        stream = self.outgoing
        if stream is None:
            raise OSError(errno.ENOTCONN, "not connected")
        room = stream.room()
        if room == 0:
            raise BlockingIOError(errno.EAGAIN, "the window is full")
        chunk = bytes(memoryview(data).cast("B")[:room])
        if chunk:
            self.network.transmit(self, chunk)
        return len(chunk)

    def shutdown(self, how: int) -> None:
        """``SHUT_WR`` (or ``SHUT_RDWR``): the peer reads to the end, then ``b""``."""
        self._check_open()
        if how in (socket.SHUT_WR, socket.SHUT_RDWR) and not self.shut_write:
            self.shut_write = True
            self.network.transmit_eof(self)

    def close(self) -> None:
        """Close: the peer reads to the end (or, with ``SO_LINGER`` 0, is reset)."""
        if self.closed:
            return
        self.closed = True
        self.network.closed(self)

    def detach(self) -> int:
        """Not supported: a simulated socket has no descriptor to give away."""
        raise OSError(errno.EOPNOTSUPP, "a simulated socket has no descriptor")

    # -- helpers ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise OSError(errno.EBADF, "the socket is closed")

    def _raise_error(self) -> None:
        self._check_open()
        if self.error:
            error, self.error = self.error, 0
            raise ConnectionResetError(error, "the connection was reset")

    def __repr__(self) -> str:
        peer = self.peer.local if self.peer is not None else None
        return f"<SimSocket fd={self._fd} {self.local} -> {peer}>"
