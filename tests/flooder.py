"""A client that floods a server: it writes and never reads (issue 10's abuser).

:class:`Flooder` writes a byte stream on a blocking socket from a thread of its own,
as fast as the server's side takes it, and reads nothing. It stops when the
connection breaks (the server dropped it: a failed send, or a reset noticed once
everything is written) or when told to; every wait is bounded. Sockets are made
with small buffers, so that a server that stops reading is noticed after little
data (the kernel would buffer megabytes).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Final

#: Bytes per send, and the socket buffer sizes of a flooding connection.
CHUNK: Final = 65536
BUFFER: Final = 8192
#: Seconds a single send may block before the flooder looks whether to stop.
POLL: Final = 0.1


def flooding_socket(port: int, *, small: bool = True) -> socket.socket:
    """A blocking TCP connection to 127.0.0.1:``port``, with small kernel buffers
    unless ``small`` is False (then the kernel buffers what the server sends)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if small:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)  # before connect
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER)
    sock.settimeout(10.0)
    sock.connect(("127.0.0.1", port))
    return sock


class Flooder(threading.Thread):
    """Writes ``data`` on ``sock`` and never reads; see the module docstring."""

    def __init__(self, sock: socket.socket, data: bytes) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.data = data
        #: Bytes the kernel accepted so far.
        self.sent = 0
        #: The connection broke under the writes (the server dropped it).
        self.broken = False
        self._halt = threading.Event()

    def run(self) -> None:
        view = memoryview(self.data)
        self.sock.settimeout(POLL)
        while self.sent < len(self.data) and not self._halt.is_set():
            try:
                self.sent += self.sock.send(view[self.sent : self.sent + CHUNK])
            except TimeoutError:
                continue  # the server is not reading: try again until told to stop
            except OSError:
                self.broken = True
                return
        # All written: still not reading, but watching for the server's reset.
        while not self._halt.wait(POLL):
            if self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self.broken = True
                return

    def wait_dropped(self, timeout: float = 10.0) -> bool:
        """Wait (bounded) until the flooder stops by itself; whether the server dropped it."""
        self.join(timeout)
        return self.broken

    @property
    def all_sent(self) -> bool:
        """Whether every byte was written."""
        return self.sent == len(self.data)

    def finish(self) -> None:
        """Stop writing and close the socket (waits for the thread, bounded)."""
        self._halt.set()
        self.join(10.0)
        assert not self.is_alive(), "the flooder did not stop"
        with contextlib.suppress(OSError):
            self.sock.close()
