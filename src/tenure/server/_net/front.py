"""``--max-connections-per-address`` for a listener the server does not own (issue 28).

A listening face's server may accept on its own with no cap per client address (and
no hook at accept): gRPC's C core does. With a per-address cap set, the server accepts
on the face's own port itself instead (:class:`~tenure.server._net.listen.Listener`),
counts each connection against the cap shared with its other listeners
(:class:`~tenure.server._net.listen.Admission`, from ``accept()``), closes one too many
at once, and relays the others' bytes, untouched (TLS included), to the face's server
listening on a loopback port. That server then sees every client as the relay's
loopback address: :meth:`Front.peer` names the client behind each relayed connection,
by the relay's own port, for what the face counts by address (failed logins, a
session's client). Without a per-address cap (the default) nothing of this runs: the
face's server listens on its port itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable

from tenure.server._net.listen import Admission, Listener, bind
from tenure.server._net.throttle import peer_host


class _Half(asyncio.Protocol):
    """One side of a relayed connection: what it receives, the other side writes.

    Reading pauses while the other side's writes are backed up (its peer does not read).
    """

    def __init__(self, on_lost: Callable[[], None]) -> None:
        self.transport: asyncio.Transport | None = None
        self.other: _Half | None = None
        self._pending: list[bytes] = []  # for this side, before it is connected
        self._on_lost = on_lost
        self.ended = False  # its peer sent its EOF

    def write(self, data: bytes) -> None:
        if self.transport is None:
            self._pending.append(data)
        elif not self.transport.is_closing():
            self.transport.write(data)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # (uvloop's are alike)
        pending, self._pending = self._pending, []
        for data in pending:
            self.write(data)

    def data_received(self, data: bytes) -> None:
        if self.other is not None:
            self.other.write(data)

    def eof_received(self) -> bool:
        self.ended = True
        other = self.other
        if other is None or other.transport is None or other.ended:
            if other is not None and other.transport is not None:
                other.transport.close()
            return False  # (both ways are done: close)
        if other.transport.can_write_eof():
            other.transport.write_eof()
            return True  # (half closed: the other way still flows)
        other.transport.close()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        other = self.other
        if other is not None and other.transport is not None:
            other.transport.close()
        self._on_lost()

    def pause_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.resume_reading()


class Front:
    """Accepts for a listener on ``backend`` (a loopback port), capped per address
    (module docstring); ``refuse(sock, host)`` closes one too many (and logs it)."""

    def __init__(
        self,
        admission: Admission,
        backend: int,
        refuse: Callable[[socket.socket, str], None],
    ) -> None:
        self._admission = admission
        self._backend = backend
        self._refuse = refuse
        self._listener: Listener | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: The client behind each relayed connection, by the relay's port on loopback,
        #: as gRPC names peers (``ipv4:203.0.113.5:40000``).
        self._peers: dict[int, str] = {}
        self.port = 0

    def start(self, host: str, port: int) -> int:
        """Listen on ``host``:``port``; returns the port bound.

        Raises:
            OSError: it cannot be bound.
        """
        sockets = bind(host, port)
        self._listener = Listener(sockets, self._admit)
        self._listener.resume()
        self.port = int(sockets[0].getsockname()[1])
        return self.port

    def peer(self, seen: str) -> str:
        """The client behind the peer gRPC saw (``seen``: ``ipv4:127.0.0.1:PORT``)."""
        _, _, port = seen.rpartition(":")
        return self._peers.get(int(port), seen) if port.isdigit() else seen

    def close(self) -> None:
        """Stop accepting (relayed connections end with the gRPC server's)."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def _admit(self, sock: socket.socket) -> None:
        try:
            peer = sock.getpeername()
        except OSError:
            sock.close()
            return
        host = peer_host(peer)
        if self._admission.over_address_cap(host):
            self._refuse(sock, host)
            return
        self._admission.hold(host)
        task = asyncio.ensure_future(self._relay(sock, host, peer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _relay(self, sock: socket.socket, host: str, peer: tuple[object, ...]) -> None:
        loop = asyncio.get_running_loop()
        released = False
        relay_port = 0

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._admission.release(host)
                self._peers.pop(relay_port, None)

        lost = [False, False]

        def one_lost(side: int) -> None:
            lost[side] = True
            if all(lost):
                release()

        client = _Half(lambda: one_lost(0))
        backend = _Half(lambda: one_lost(1))
        client.other, backend.other = backend, client
        try:
            await loop.create_connection(lambda: backend, "127.0.0.1", self._backend)
            assert backend.transport is not None
            relay_port = int(backend.transport.get_extra_info("sockname")[1])
            family = "ipv6" if sock.family == socket.AF_INET6 else "ipv4"
            address = f"[{peer[0]}]" if family == "ipv6" else str(peer[0])
            self._peers[relay_port] = f"{family}:{address}:{peer[1]}"
            await loop.connect_accepted_socket(lambda: client, sock)
        except Exception:  # the gRPC server stopped, or the client is gone
            sock.close()
            if backend.transport is not None:
                backend.transport.close()
            with contextlib.suppress(Exception):
                release()
