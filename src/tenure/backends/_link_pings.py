"""When a link pings its server, and what it makes of a Ping left unanswered.

A link (:mod:`tenure.backends._link`) confirms its connection with a Ping once it
has heard nothing for a ping interval. :func:`next_step` is what its keepalive
does each time it wakes, and when it wakes next: not on a fixed tick, but when the
next step is due, so that

* a Ping leaves one ping interval after the last answer (not up to two: a tick
  that found the connection just confirmed would otherwise wait a whole interval
  more), and
* a Ping unanswered for one interval is noticed then (``LOOK``: the link asks the
  other doors of a cluster who leads), looked at again each interval (a late Pong
  and the next Ping), and given up at its patience (``GIVE_UP``: the connection is
  lost).

So a client whose leader stopped (SIGSTOP) starts asking at most two ping
intervals after the leader's last answer: plain arithmetic on loop times.

:class:`Keepalive` is the link's task that takes these steps: it pings, asks the
other doors who leads (leaving for the leader one names), and gives the connection
up, each when due. The interval is the shortest its sessions wish for (each asks for
a few pings per recovery window), and at most a third of the server's idle timeout
(its Welcome). What it asks of its link is :class:`PingsHome`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, Final, Protocol

from tenure._protocol import Ping
from tenure.backends._doors import Door, Doors
from tenure.backends._link_conn import DisconnectedError, LinkConnection

__all__ = [
    "DEFAULT_PING_INTERVAL",
    "FOLLOW_PAUSE",
    "GIVE_UP",
    "LOOK",
    "MIN_PING_INTERVAL",
    "MIN_PING_PATIENCE",
    "PING",
    "WAIT",
    "Keepalive",
    "PingsHome",
    "next_step",
]

#: The shortest and longest pause between keep-alive checks, in seconds.
MIN_PING_INTERVAL: Final = 0.02
DEFAULT_PING_INTERVAL: Final = 5.0
#: A Ping unanswered for this long (at least) means the connection is dead.
MIN_PING_PATIENCE: Final = 2.0
#: The longest pause between attempts while standbys answer and no leader does, and
#: between two askings of the other doors while a Ping is unanswered (s).
FOLLOW_PAUSE: Final = 0.5

#: Nothing to do yet.
WAIT: Final = "wait"
#: Send a Ping.
PING: Final = "ping"
#: A Ping is unanswered for an interval: look for a leader elsewhere.
LOOK: Final = "look"
#: A Ping is unanswered past its patience: the connection is dead.
GIVE_UP: Final = "give up"
#: How much later than due a step may be taken, at least (timers' slack), in seconds.
SLACK: Final = 0.02


def next_step(
    now: float, confirmed_at: float, pinged_at: float | None, interval: float, patience: float
) -> tuple[str, float]:
    """What the keepalive does at loop time ``now``, and the loop time to wake next.

    ``confirmed_at``: when the latest request or Ping answered was sent;
    ``pinged_at``: when the oldest unanswered Ping was sent (None: none is);
    ``interval``: the ping interval; ``patience``: how long a Ping may go unanswered.
    """
    if pinged_at is None:
        due = confirmed_at + interval
        if now >= due - SLACK:
            return PING, now + interval
        return WAIT, due
    if now - pinged_at > patience:
        return GIVE_UP, now + interval
    if now >= pinged_at + interval - SLACK:  # (again an interval on: its Pong may come)
        return LOOK, min(now + interval, pinged_at + patience + SLACK)
    return WAIT, pinged_at + interval


class PingsHome(Protocol):
    """What a :class:`Keepalive` asks of its home, the link (a
    :class:`~tenure.backends._link.Link`, which imports this module)."""

    #: The service's doors: the one gone silent is marked, a leader named is hinted.
    doors: Doors
    #: When the latest request or Ping answered was sent (loop time).
    confirmed_at: float

    @property
    def endpoint(self) -> Door:
        """The server connected now, or last."""
        ...

    @property
    def closing(self) -> bool:
        """Whether the link is closing (the keepalive then stops)."""
        ...

    @property
    def connected(self) -> bool:
        """Whether the connection is up and set up."""
        ...

    @property
    def current(self) -> LinkConnection | None:
        """The link's connection now (None while it has none)."""
        ...

    def lost(self, conn: LinkConnection, error: BaseException) -> None:
        """Give ``conn`` up: fail what waits on it, connect again."""
        ...

    async def leader_elsewhere(self, silent: Door) -> Door | None:
        """The leader another door names, when it is not ``silent``; None if none does."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` in a task the link ends when it closes."""
        ...


class Keepalive:
    """A link's pings (module docstring): :meth:`run` is its task."""

    def __init__(self, link: PingsHome, connect_timeout: float) -> None:
        self._link = link
        self._connect_timeout = connect_timeout
        #: Seconds between pings (see :meth:`need_every`).
        self.interval = DEFAULT_PING_INTERVAL
        self._wanted = DEFAULT_PING_INTERVAL
        self._idle_timeout = 0.0
        self._wake = asyncio.Event()
        self._looking: asyncio.Task[None] | None = None  # asking the other doors

    def need_every(self, seconds: float) -> None:
        """Confirm the connection at least this often (the shortest wish wins)."""
        self._wanted = min(self._wanted, seconds)
        self._apply()

    def welcomed(self, idle_timeout: float) -> None:
        """A connection is set up whose server closes one idle ``idle_timeout`` seconds
        (0: never): ping at least three times within it."""
        self._idle_timeout = idle_timeout
        self._apply()

    def _apply(self) -> None:
        seconds = self._wanted
        if self._idle_timeout > 0:
            seconds = min(seconds, self._idle_timeout / 3)
        self.interval = max(MIN_PING_INTERVAL, seconds)
        self._wake.set()

    async def run(self) -> None:
        """Ping, look for a leader elsewhere, give up: each when due (:func:`next_step`)."""
        link = self._link
        loop = asyncio.get_running_loop()
        nonce, wake = 0, loop.time() + self.interval
        while not link.closing:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(wake):
                    await self._wake.wait()
            conn, now = link.current, loop.time()
            wake = now + self.interval
            if conn is None or not link.connected:
                continue
            patience = max(2 * self.interval, MIN_PING_PATIENCE)
            pinged = min(conn.pings.values()) if conn.pings else None
            step, wake = next_step(now, link.confirmed_at, pinged, self.interval, patience)
            if step == GIVE_UP:
                link.doors.went_silent(link.endpoint, now + self._connect_timeout)
                link.lost(conn, DisconnectedError(f"no Pong from {link.endpoint} in {patience:g}s"))
            elif step == LOOK and len(link.doors.doors) > 1:
                if self._looking is None or self._looking.done():
                    self._looking = link.spawn(self._leave_if_elsewhere(conn))
            elif step == PING:
                nonce += 1
                conn.pings[nonce] = now
                conn.send(conn.codec.send(Ping(nonce)))

    async def _leave_if_elsewhere(self, conn: LinkConnection) -> None:
        """Leave ``conn`` (a Ping unanswered) for the leader another door names, if one does."""
        link = self._link
        silent = link.endpoint
        while link.current is conn and conn.pings:
            leader = await link.leader_elsewhere(silent)
            if leader is not None and link.current is conn and conn.pings:
                now = asyncio.get_running_loop().time()
                link.doors.went_silent(silent, now + self._connect_timeout)
                link.doors.hint = leader
                link.lost(conn, DisconnectedError(f"{silent} answers no Ping; {leader} leads now"))
            await asyncio.sleep(FOLLOW_PAUSE)
