"""The server's own accept loop, which can stop accepting (issue 28).

``--max-handshaking`` caps the connections not yet past their handshake (a TLS
handshake, then the Hello, or an accepted face's first byte). Past it the server
**stops accepting** instead of closing what it accepted: new connections wait in
the kernel's listen backlog, where they cost the server nothing, and are accepted
as handshakes end (nginx's ``worker_connections``, uvicorn's
``limit_concurrency``). A burst of honest clients starting at once is served a
little later instead of failing; a flood of idle ones still cannot make the
server hold more than the cap (times ``--max-hello-size``) in their handshakes.

asyncio's ``Server`` cannot pause accepting, and taking the reader of the socket
it serves (``loop.remove_reader``) works only on the selector loops, not on
uvloop's, whose listener is libuv's own. So :class:`Listener` owns the accept
loop: it watches the listening socket with ``loop.add_reader`` (which both
loops support on any descriptor), accepts in batches while :class:`Admission`
allows it, and hands each accepted socket to ``loop.connect_accepted_socket``
(both loops, with TLS and its handshake timeout). Pausing is removing the
reader; resuming, adding it back. A connection is counted from ``accept()``:
during a TLS handshake too (bounded by ``--handshake-timeout``), against the
handshaking cap and the per-address cap alike.

When accept fails for want of descriptors or memory (``EMFILE``, ``ENFILE``,
``ENOBUFS``, ``ENOMEM``), the listener stops for :data:`RETRY_DELAY` seconds,
as asyncio's own does, instead of spinning on a socket that stays readable.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections import Counter
from collections.abc import Callable
from typing import Final

log = logging.getLogger("tenure.server")

#: The listen backlog: connections past the handshaking cap wait there.
BACKLOG: Final = 1024
#: The most connections accepted in one callback (others' events go between batches).
BATCH: Final = 64
#: Seconds a listener rests after accept failed for want of descriptors or memory.
RETRY_DELAY: Final = 1.0
_SCARCE: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def bind(host: str | None, port: int, backlog: int = BACKLOG) -> list[socket.socket]:
    """Listening sockets on every address of ``host`` (empty or None: every
    interface), as ``loop.create_server`` binds them (``SO_REUSEADDR``; IPv6
    sockets IPv6 only).

    Raises:
        OSError: an address cannot be bound (then none is left open).
    """
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as error:
                raise OSError(
                    error.errno,
                    f"error while attempting to bind on address {address!r}: {error.strerror}",
                ) from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class Listener:
    """Accepts on listening sockets and hands each accepted socket to ``admit`` (the
    module docstring); reads them only while :meth:`resume`\\ d and not closed."""

    def __init__(
        self, sockets: list[socket.socket], admit: Callable[[socket.socket], None]
    ) -> None:
        self.sockets = sockets
        self._admit = admit
        self._loop = asyncio.get_running_loop()
        self._wanted = False  # accepting is allowed (the cap is not reached)
        self._reading = False  # the readers are registered
        self._resting: asyncio.TimerHandle | None = None  # after EMFILE and the like
        self._closed = False
        for sock in sockets:
            sock.setblocking(False)

    def resume(self) -> None:
        """Accept again."""
        self._wanted = True
        self._update()

    def pause(self) -> None:
        """Stop accepting (new connections wait in the backlog)."""
        self._wanted = False
        self._update()

    def close(self) -> None:
        """Stop accepting, for good, and close the sockets."""
        self._wanted = False
        self._update()
        self._closed = True
        if self._resting is not None:
            self._resting.cancel()
            self._resting = None
        for sock in self.sockets:
            sock.close()

    def _update(self) -> None:
        read = self._wanted and self._resting is None and not self._closed
        if read == self._reading:
            return
        self._reading = read
        for sock in self.sockets:
            if read:
                self._loop.add_reader(sock.fileno(), self._on_readable, sock)
            else:
                self._loop.remove_reader(sock.fileno())

    def _on_readable(self, sock: socket.socket) -> None:
        for _ in range(BATCH):
            if not self._reading:
                return  # the cap was reached by the last one admitted
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                if error.errno in _SCARCE:
                    fields = {"error": error.strerror, "retry_in": RETRY_DELAY}
                    log.warning(
                        "cannot accept connections; resting",
                        extra={"event": "accept_failed", "fields": fields},
                    )
                    self._resting = self._loop.call_later(RETRY_DELAY, self._rested)
                    self._update()
                    return
                continue  # (ECONNABORTED and the like: that one is gone)
            conn.setblocking(False)
            self._admit(conn)

    def _rested(self) -> None:
        self._resting = None
        self._update()


class Admitted:
    """One accepted connection, as :class:`Admission` counts it."""

    __slots__ = ("_admission", "handshaking", "host", "open", "served")

    def __init__(self, admission: Admission, host: str) -> None:
        self._admission = admission
        self.host = host
        self.handshaking = True
        self.open = True
        self.served = True  # counted against --max-connections

    def passed(self) -> None:
        """Its handshake is over (welcomed, or handed to a face): no longer counted as
        handshaking. Idempotent."""
        if self.handshaking:
            self.handshaking = False
            self._admission.handshake_ended()

    def unserved(self) -> None:
        """It is turned away: no longer counted against ``--max-connections`` (its
        handshaking still bounds it)."""
        if self.served:
            self.served = False
            self._admission.served -= 1

    def closed(self) -> None:
        """Its socket is closed. Idempotent."""
        self.passed()
        self.unserved()
        if self.open:
            self.open = False
            self._admission.left(self.host)


class Admission:
    """The counts of the connections the server accepted on its listeners (the main
    port, the accepted face's own): handshaking (``--max-handshaking``: at the cap, every
    listener pauses), per address (``--max-connections-per-address``; 0: no cap),
    and served (what ``--max-connections`` caps)."""

    def __init__(self, max_handshaking: int, per_address: int) -> None:
        self.max_handshaking = max_handshaking
        self.per_address_cap = per_address
        self.handshaking = 0
        #: The most connections ever in their handshake at once (at most the cap).
        self.most_handshaking = 0
        self.served = 0
        self.per_address: Counter[str] = Counter()
        self.listeners: list[Listener] = []
        self._paused = False
        self._logged = False  # the pause was logged (once per burst)

    def over_address_cap(self, host: str) -> bool:
        """Whether one more connection from ``host`` is one too many."""
        cap = self.per_address_cap
        return bool(cap) and self.per_address[host] >= cap

    def enter(self, host: str) -> Admitted:
        """Count a connection just accepted (in its handshake)."""
        self.handshaking += 1
        self.most_handshaking = max(self.most_handshaking, self.handshaking)
        self.served += 1
        if self.per_address_cap:
            self.per_address[host] += 1
        if self.handshaking >= self.max_handshaking and not self._paused:
            self._paused = True
            if not self._logged:  # once per burst: until the handshakes are down to half
                self._logged = True
                fields = {"max_handshaking": self.max_handshaking}
                log.info(
                    "too many connections in their handshake; accepting paused",
                    extra={"event": "accepting_paused", "fields": fields},
                )
            for listener in self.listeners:
                listener.pause()
        return Admitted(self, host)

    def hold(self, host: str) -> None:
        """Count a connection from ``host`` against the per-address cap only (one the
        server relays to a listener it does not own: :mod:`tenure.server._net.front`)."""
        if self.per_address_cap:
            self.per_address[host] += 1

    def release(self, host: str) -> None:
        """The connection :meth:`hold` counted is closed."""
        self.left(host)

    def handshake_ended(self) -> None:
        self.handshaking -= 1
        if self.handshaking <= self.max_handshaking // 2:
            self._logged = False
        if self._paused and self.handshaking < self.max_handshaking:
            self._paused = False
            for listener in self.listeners:
                listener.resume()

    def left(self, host: str) -> None:
        if self.per_address_cap:
            self.per_address[host] -= 1
            if self.per_address[host] <= 0:
                del self.per_address[host]

    def add(self, listener: Listener) -> None:
        """Accept on ``listener`` whenever the cap allows."""
        self.listeners.append(listener)
        if not self._paused:
            listener.resume()
