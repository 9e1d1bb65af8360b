"""The simulated network: hosts, listening addresses, connections, and their faults.

Every connection is a pair of :class:`~tenure.testing.sim._sockets.SimSocket`-s, one
per host. What one side sends arrives at the other after the link's latency (a
seeded draw between ``latency`` and ``latency + jitter``), in the order it was sent
(TCP's: an arrival is scheduled strictly after the one sent before it). Faults, each
from the network's methods, so that a run's schedule decides them:

* :meth:`SimNetwork.cut` stops one direction between two hosts (``both``: both):
  what is sent meanwhile waits, as TCP retransmits it, and arrives after
  :meth:`SimNetwork.heal`; a connection across the cut stays open on both ends and
  hears nothing (no reset), as the kernel's blackhole rule in tools/faults/lin_cuts.py;
* :meth:`SimNetwork.reset` resets every connection between two hosts: both ends'
  next call fails with ``ECONNRESET``, what was in flight is lost;
* :meth:`SimNetwork.slow` adds a delay to everything between two hosts (a slow or
  congested link) until :meth:`SimNetwork.heal`;
* a socket closed with ``SO_LINGER`` 0 resets its connection too (the server's way of
  dropping a client that does not read, :func:`tenure.server._net.outbox.reset`).

A modelled service with no sockets of its own (the simulated etcd, whose clients'
calls are gRPC's) sends its messages through :meth:`SimNetwork.carry`: the cuts and
slow links between its host and its clients' reach them too.

Nothing here reads a clock or draws a number except through the loop and the
network's own seeded :class:`random.Random`, so one seed gives one schedule.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import math
import random
import socket
import struct
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Protocol

from tenure.testing.sim._sockets import WINDOW, Address, OneWay, SimSocket

__all__ = ["FIRST_PORT", "Scheduler", "SimNetwork"]

#: The first port given to a connecting socket (listening ones name their own).
FIRST_PORT: Final = 40_000
#: The first number given to a simulated socket (above any descriptor of the process).
FIRST_FD: Final = 1 << 20
_LINGER_RESET: Final = struct.pack("ii", 1, 0)


class Scheduler(Protocol):
    """What the network needs of its loop (:class:`~tenure.testing.sim._loop.SimLoop`)."""

    def now(self) -> float:
        """Simulated time (not a host's clock)."""
        ...

    def is_closed(self) -> bool:
        """Whether the loop was closed."""
        ...

    def call_at(
        self, when: float, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        """``callback`` at simulated time ``when`` (``context``: of no process)."""
        ...


class SimNetwork:
    """Hosts by name and the connections between them (module docstring).

    ``latency`` and ``jitter`` are seconds of simulated time; ``rng`` draws the jitter.
    """

    def __init__(
        self,
        loop: Scheduler,
        rng: random.Random,
        *,
        latency: float = 0.0002,
        jitter: float = 0.0003,
        window: int = WINDOW,
    ) -> None:
        self.loop = loop
        self.rng = rng
        self.latency = latency
        self.jitter = jitter
        self.window = window
        self._next_fd = FIRST_FD
        self._next_port: dict[str, int] = {}
        self._listening: dict[Address, list[SimSocket]] = {}
        self._backlogs: dict[Address, deque[SimSocket]] = {}
        self._cut: set[tuple[str, str]] = set()
        self._slow: dict[frozenset[str], float] = {}
        #: What waits at a cut, per direction (host from, host to): (socket, bytes or
        #: None for the end), in the order sent.
        self._held: dict[tuple[str, str], deque[tuple[SimSocket, bytes | None]]] = {}
        #: The time of the latest arrival scheduled per sending socket (TCP's order).
        self._last_arrival: dict[int, float] = {}
        #: What a modelled service sent that waits at a cut, per direction: (lane,
        #: callback, its arguments), in the order sent (:meth:`carry`).
        self._held_messages: dict[
            tuple[str, str], deque[tuple[object, Callable[..., object], tuple[Any, ...]]]
        ] = {}
        #: The latest arrival scheduled per direction and lane (:meth:`carry`'s order).
        self._lanes: dict[tuple[str, str], weakref.WeakKeyDictionary[object, float]] = {}
        self.connections: list[tuple[SimSocket, SimSocket]] = []
        #: Told the number of a socket whose readiness may have changed (the loop's
        #: selector looks only at those, and at those it found ready).
        self.on_touch: Callable[[int], None] = lambda fd: None
        #: Every socket not closed yet, by number (what the loop's selector looks up).
        self.sockets: dict[int, SimSocket] = {}

    # -- sockets ------------------------------------------------------------------------

    def _socket(self, local: Address) -> SimSocket:
        self._next_fd += 1
        sock = SimSocket(self, self._next_fd, local)
        self.sockets[sock.number] = sock
        return sock

    def listen(self, host: str, port: int) -> SimSocket:
        """A listening socket on ``host:port`` (``OSError`` EADDRINUSE if taken)."""
        address = (host, port)
        if address in self._listening:
            raise OSError(errno.EADDRINUSE, f"{host}:{port} is in use")
        sock = self._socket(address)
        backlog: deque[SimSocket] = deque()
        sock.backlog = backlog
        self._listening[address] = [sock]
        self._backlogs[address] = backlog
        return sock

    def dup_listener(self, sock: SimSocket) -> SimSocket:
        """Another socket on ``sock``'s listening queue (:meth:`SimSocket.dup`)."""
        twin = self._socket(sock.local)
        twin.backlog = sock.backlog
        self._listening[sock.local].append(twin)
        return twin

    def connect(self, host: str, to: Address) -> SimSocket:
        """A socket of ``host`` connected to the listener at ``to``: the other end waits
        in its backlog (``ConnectionRefusedError`` if nobody listens there; a cut
        between the hosts refuses as well: the handshake cannot pass)."""
        backlog = self._backlogs.get(to)
        if backlog is None or (host, to[0]) in self._cut or (to[0], host) in self._cut:
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"nothing answers at {to[0]}:{to[1]}")
        port = self._next_port.get(host, FIRST_PORT)
        self._next_port[host] = port + 1
        mine, theirs = self._socket((host, port)), self._socket(to)
        mine.peer, theirs.peer = theirs, mine
        mine.outgoing = theirs.incoming = OneWay(self.window)
        theirs.outgoing = mine.incoming = OneWay(self.window)
        backlog.append(theirs)
        self.connections.append((mine, theirs))
        for twin in self._listening.get(to, []):
            self.touch(twin)
        return mine

    def touch(self, sock: SimSocket) -> None:
        """``sock``'s readiness may have changed (:attr:`on_touch`)."""
        self.on_touch(sock.number)

    # -- traffic ------------------------------------------------------------------------

    def transmit(self, sock: SimSocket, data: bytes) -> None:
        """``data``, sent by ``sock``, arrives at its peer after the link's latency."""
        assert sock.outgoing is not None
        sock.outgoing.in_flight += len(data)
        self._send(sock, data)

    def transmit_eof(self, sock: SimSocket) -> None:
        """``sock`` shut its side: the peer reads to the end, then ``b""``."""
        self._send(sock, None)

    def _send(self, sock: SimSocket, data: bytes | None) -> None:
        peer = sock.peer
        if peer is None or self.loop.is_closed():
            return  # (a transport collected after its loop closed closes its socket)
        direction = (sock.local[0], peer.local[0])
        if direction in self._cut:
            self._held.setdefault(direction, deque()).append((sock, data))
            return
        now = self.loop.now()  # (simulated time, not the sender's clock)
        when = now + self.latency + self.rng.uniform(0.0, self.jitter)
        when += self._slow.get(frozenset(direction), 0.0)
        last = self._last_arrival.get(sock.number)
        if last is not None and when <= last:
            # Strictly after: two arrivals at one instant are popped from asyncio's
            # timer heap in no set order, and the later bytes could overtake (the cells
            # target's seed 245: a push overtaken by the answer written after it).
            when = math.nextafter(last, math.inf)
        self._last_arrival[sock.number] = when
        # (in no process's context: what was sent arrives while its sender is paused)
        self.loop.call_at(when, self._arrive, sock, data, context=contextvars.Context())

    def _arrive(self, sock: SimSocket, data: bytes | None) -> None:
        stream = sock.outgoing
        if stream is None or sock.peer is None:
            return  # reset meanwhile: what was in flight is lost
        if data is None:
            stream.eof = True
        else:
            stream.arrive(data)
        self.touch(sock.peer)  # (something to read)
        self.touch(sock)  # (less in flight: room to send)

    def carry(
        self,
        source: str,
        target: str,
        lane: object | None,
        when: float,
        deliver: Callable[..., object],
        *args: Any,
    ) -> None:
        """One message of a modelled service from host ``source`` to host ``target``:
        ``deliver(*args)`` once it arrives, at ``when`` (simulated time: the service's
        own latency drawn) plus a slow link's delay, and after every message before it
        on ``lane`` (an object a stream's messages share, held weakly; None: none). At
        a cut it waits, and leaves again at :meth:`heal`, after the network's latency.
        It arrives in no process's context, as a socket's bytes do."""
        direction = (source, target)
        if direction in self._cut:
            self._held_messages.setdefault(direction, deque()).append((lane, deliver, args))
            return
        when = max(when, self.loop.now()) + self._slow.get(frozenset(direction), 0.0)
        if lane is not None:
            lanes = self._lanes.setdefault(direction, weakref.WeakKeyDictionary())
            last = lanes.get(lane)
            if last is not None and when <= last:  # (strictly after: no tie in the heap)
                when = math.nextafter(last, math.inf)
            lanes[lane] = when
        self.loop.call_at(when, deliver, *args, context=contextvars.Context())

    # -- ends -----------------------------------------------------------------------------

    def closed(self, sock: SimSocket) -> None:
        """``sock`` was closed: a listener stops listening (when its last twin is
        closed); a connection's peer reads to the end, or is reset (``SO_LINGER`` 0)."""
        self.sockets.pop(sock.number, None)
        if sock.backlog is not None:
            twins = self._listening.get(sock.local, [])
            if sock in twins:
                twins.remove(sock)
            if not twins:
                self._listening.pop(sock.local, None)
                backlog = self._backlogs.pop(sock.local, None)
                for waiting in backlog or ():
                    self._reset_pair(waiting)
            return
        linger = sock.options.get((socket.SOL_SOCKET, socket.SO_LINGER))
        if linger == _LINGER_RESET:
            self._reset_pair(sock)
        elif not sock.shut_write:
            sock.shut_write = True
            self._send(sock, None)

    def reset(self, host: str, other: str) -> int:
        """Reset every connection between ``host`` and ``other``; how many."""
        pairs = [
            (a, b)
            for a, b in self.connections
            if {a.local[0], b.local[0]} == {host, other} and not (a.closed and b.closed)
        ]
        for a, _ in pairs:
            self._reset_pair(a)
        return len(pairs)

    def _reset_pair(self, sock: SimSocket) -> None:
        for end in (sock, sock.peer):
            if end is None:
                continue
            self.touch(end)
            if not end.closed:
                end.error = errno.ECONNRESET
            for stream in (end.incoming, end.outgoing):
                if stream is not None:
                    stream.eof = True
        peer = sock.peer
        sock.peer = None
        if peer is not None:
            peer.peer = None

    def crash(self, host: str) -> int:
        """``host``'s process died: its listeners close (a connect is refused), its
        connections are reset (what was in flight is lost); how many sockets it had."""
        mine = [sock for sock in self.sockets.values() if sock.local[0] == host]
        for sock in mine:
            if sock.backlog is None:
                self._reset_pair(sock)
            sock.closed = True
            self.closed(sock)
        return len(mine)

    # -- cuts -----------------------------------------------------------------------------

    def cut(self, host: str, other: str, *, both: bool = True) -> None:
        """Stop what ``host`` sends ``other`` (and back, with ``both``) until healed."""
        self._cut.add((host, other))
        if both:
            self._cut.add((other, host))

    def slow(self, host: str, other: str, delay: float) -> None:
        """Delay what passes between ``host`` and ``other`` by ``delay`` more seconds
        (both ways; what is under way keeps its time) until healed."""
        self._slow[frozenset((host, other))] = delay

    def heal(self, host: str | None = None, other: str | None = None) -> None:
        """End the cuts and slow links between ``host`` and ``other`` (both directions;
        no arguments: every one); what waited at a cut is sent on, in order."""
        for pair in list(self._slow):
            if host is None or pair == {host, other}:
                del self._slow[pair]
        for direction in sorted(self._cut):
            if host is None or set(direction) == {host, other}:
                self._cut.discard(direction)
                for sock, data in self._held.pop(direction, deque()):
                    self._send(sock, data)
                for lane, deliver, args in self._held_messages.pop(direction, deque()):
                    when = self.loop.now() + self.latency + self.rng.uniform(0.0, self.jitter)
                    self.carry(*direction, lane, when, deliver, *args)
