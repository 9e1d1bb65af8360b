"""Which server a link connects to: the doors of one service, and the leader they name.

A ``tenure://`` URL that lists several servers without ``?sharded=true`` names one
service with several *doors*: the servers of one ``tenure serve --cluster``, of which
one leads and the others are standbys (docs/protocol.md section 16). A link
(:mod:`tenure.backends._link`) holds one :class:`Doors` and connects through one
:class:`DoorRound` at a time; a URL of one server is a link with one door, which
behaves as a link always did.

The order of one attempt:

1. the leader an earlier answer named (the *hint*: a standby's Welcome or Refused,
   a GoingAway(NOT_LEADER) of the leader that stepped down), if any;
2. the endpoint connected last, if it is not a door (a leader the URL does not list,
   reached through a hint);
3. every door in turn, from the one connected last (the first door at first).

An endpoint that stopped answering (a Ping unanswered, :meth:`Doors.went_silent`)
is left out of the attempts for as long as a greeting would have waited for it
(the connect timeout), when the link has other doors: a paused leader accepts TCP
into its backlog but answers no Hello, and a client that waited there would stay
on it until it wakes, though a standby may lead by then. Its turn comes once that
time has passed (a server that was only slow is reached again).

When a server answers that it is a standby and names the leader, that leader is
tried next, before the rest. Only an endpoint tried in its own right grants such a
hop: a leader reached through a hint that turns out to be a standby too is not
followed further, and no endpoint is tried twice in one attempt, so two standbys
naming each other cost two connections, never a loop. One attempt tries at most
twice as many endpoints as there are doors, plus the hint's two. Between attempts
the link waits (its jittered backoff), never within one.
"""

from __future__ import annotations

import ssl
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["DoorRound", "Doors", "Door"]


@dataclass(frozen=True, slots=True)
class Door:
    """Where one server listens, and how to reach it."""

    host: str
    port: int
    ssl: ssl.SSLContext | None = None
    server_hostname: str | None = None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


class Doors:
    """The doors of one service, the endpoint connected last, and the leader named last.

    ``server_hostname``: the name every server's certificate must carry, when the
    URL says one (else each endpoint's own host: a leader named by a hint is checked
    against the host of its advertised address).
    """

    def __init__(self, doors: Sequence[Door], *, server_hostname: str | None = None) -> None:
        if not doors:
            raise ValueError("a link needs at least one door")
        #: The endpoints the URL lists, in its order.
        self.doors: tuple[Door, ...] = tuple(doors)
        self._server_hostname = server_hostname
        #: The endpoint connected now, or last (the first door before any connection).
        self.current = self.doors[0]
        #: The leader an answer named since the last connection (tried first).
        self.hint: Door | None = None
        self._at = 0  # the door each attempt starts its round of the doors from
        #: The endpoint that stopped answering, and the loop time until which
        #: attempts leave it out (module docstring).
        self.silent: Door | None = None
        self.silent_until = 0.0

    def __str__(self) -> str:
        return ",".join(map(str, self.doors))

    def endpoint_of(self, address: str) -> Door | None:
        """The endpoint of an advertised ``HOST:PORT`` (None if it is not one).

        A door's own address is that door; any other is reached as the doors are
        (the same TLS context), its certificate checked against the configured
        server name or else the address's host.
        """
        try:
            parts = urlsplit(f"//{address.strip()}")
            host, port = parts.hostname, parts.port
        except ValueError:
            return None
        if not host or port is None or parts.path or parts.query or parts.username:
            return None
        found = Door(host, port)
        for door in self.doors:
            if str(door) == str(found):
                return door
        context = self.doors[0].ssl
        if context is None:
            return found
        return Door(host, port, context, self._server_hostname or host)

    def of(self, doors: Sequence[Door]) -> Doors:
        """Other doors of the same service, reached as these are (the same server name
        checked): a cell's members (:mod:`tenure.backends._cells`)."""
        return Doors(doors, server_hostname=self._server_hostname)

    def heard(self, leader: str | None) -> None:
        """An answer named ``leader`` (None: no leader is known): go there first next time."""
        self.hint = None if leader is None else self.endpoint_of(leader)

    def connected(self, endpoint: Door) -> None:
        """A connection to ``endpoint`` is up: the next attempt starts from it."""
        self.current = endpoint
        self.hint = None
        if endpoint in self.doors:
            self._at = self.doors.index(endpoint)
        if self.silent is not None and str(self.silent) == str(endpoint):
            self.silent = None

    def went_silent(self, endpoint: Door, until: float) -> None:
        """``endpoint`` stopped answering: leave it out of attempts until loop time
        ``until`` (module docstring; not on a link of one door)."""
        if len(self.doors) > 1:
            self.silent, self.silent_until = endpoint, until

    def attempt(self, now: float = 0.0) -> DoorRound:
        """A new round over the doors (the module docstring says in which order);
        ``now``: the loop time, to tell whether a silent endpoint is still left out."""
        first = [self.hint] if self.hint is not None else []
        if self.current not in self.doors:
            first.append(self.current)
        order = [*first, *self.doors[self._at :], *self.doors[: self._at]]
        silent = self.silent
        if silent is None or now >= self.silent_until:
            self.silent = None
            return DoorRound(self, order)
        return DoorRound(self, [door for door in order if str(door) != str(silent)], str(silent))


class DoorRound:
    """One round over the doors: what to try next, and why each endpoint failed."""

    def __init__(self, doors: Doors, order: Sequence[Door], silent: str = "") -> None:
        """``silent``: an endpoint left out of this round, even when a standby names it."""
        self._doors = doors
        # (endpoint, reached through a hint): such an endpoint grants no further hop.
        self._queue: deque[tuple[Door, bool]] = deque((e, False) for e in order)
        self._tried: set[str] = {silent} if silent else set()
        self._hinted = False  # whether the endpoint being tried was reached through a hint
        #: Each endpoint tried and why it failed, in the order tried.
        self.failures: list[tuple[Door, str]] = []
        #: Whether a standby answered in this round (the service is up: a leader is
        #: being elected, or the one named cannot be reached from here).
        self.heard_standby = False

    def next(self) -> Door | None:
        """The next endpoint to try; None once every one was."""
        while self._queue:
            endpoint, self._hinted = self._queue.popleft()
            if str(endpoint) not in self._tried:
                self._tried.add(str(endpoint))
                return endpoint
        return None

    def failed(self, endpoint: Door, why: str, *, standby: bool = False) -> None:
        """``endpoint`` (the last :meth:`next` gave) could not be used, for ``why``.

        ``standby``: it is a standby; the leader it named (:meth:`Doors.heard`, called
        first) is tried next, unless ``endpoint`` was itself reached through a hint.
        """
        self.failures.append((endpoint, why))
        hint = self._doors.hint
        self.heard_standby = self.heard_standby or standby
        if not standby:
            if hint is not None and str(hint) == str(endpoint):
                self._doors.hint = None  # a leader that cannot be reached is no hint
            return
        if hint is not None and not self._hinted and str(hint) not in self._tried:
            self._queue.appendleft((hint, True))

    @property
    def hopped(self) -> bool:
        """Whether more than one endpoint was tried (so the error must name each)."""
        return len(self.failures) > 1
