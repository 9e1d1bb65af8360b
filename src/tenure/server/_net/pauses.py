"""The server's own pauses: how long its event loop could not hear anybody. [compiled]

A client's silence is counted in time the server was able to hear it (issue 37;
docs/guarantees.md 6e). While the loop is stalled (a long synchronous step, a GC
pause, a slow disk, a SIGSTOP of the whole process) frames pile up unread in the
sockets, and when the loop runs again its timers fire before those frames are
read: measured on the plain clock, a client that kept pinging would look silent.

:class:`PauseWatch` measures the stalls. While anything is watched (a
connection; the server's host, through its :class:`HeardClock`, for as long as it
serves), a heartbeat looks at the clock every :data:`BEAT` seconds; every look (the
heartbeat's, a frame's receipt, a silence timer's) compares the clock with the
previous look, and a gap longer than :data:`DEAF_AFTER` is a stall: the part of it
beyond :data:`DEAF_AFTER` is added to :attr:`PauseWatch.deaf` (seconds, only ever
growing). A connection remembers ``deaf`` at its last frame; its heard silence is
the time since that frame less the deafness added since.

The count errs one way only: a gap is at most :data:`DEAF_AFTER` longer than the
stall in it (the loop, when free, looks at least every :data:`BEAT`), so the
server never forgives more than it was deaf, and a client that truly went silent
is still closed one window of heard time after its last frame (a stall only
postpones that, by at most its own length).

:class:`HeardClock` is the engine's clock in a server: the loop's time less the
deafness counted so far (*heard time*). The engine's deadlines (a detached
session's recovery window, lease TTLs, acquire timeouts, lock-delays, claims) run
on it, so a stall of the server moves them all on by its length: the frames that
waited in the sockets (a reconnecting client's attach, a renewal, a release) are
read before any of them is judged (docs/guarantees.md 6e says which deadlines
forgive and why). It only ever runs forward, and never faster than the loop's
clock: the engine's time, journaled and replayed, stays monotonic.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

log = logging.getLogger("tenure.server")

#: Seconds between two looks of the heartbeat while connections are watched.
BEAT: Final = 0.05
#: A gap between two looks longer than this is a stall; the excess counts as deaf.
#: (A busy but turning loop looks every BEAT plus one turn: its gaps stay below.)
DEAF_AFTER: Final = 0.25
#: A stall at least this long is logged (a warning: the operator should know).
LOGGED_STALL: Final = 1.0
#: A heard timer whose loop time has come within this many seconds is due, though heard
#: time may read a rounding short of its deadline (``(when + deaf) - deaf < when``
#: for some floats), or the loop ran it within its clock's resolution before its time.
#: (Found by the simulation, tenure.testing.sim: re-armed at the same loop time, such
#: a timer fired again and again at one instant.)
DUE_WITHIN: Final = 1e-6


class PauseWatch:
    """Counts the seconds the event loop could not run (module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._seen = self._loop.time()  # the loop time of the last look
        self._beat: asyncio.TimerHandle | None = None
        self._watched = 0
        #: Seconds the loop was seen unable to run, in all (only ever grows).
        self.deaf = 0.0
        #: How many stalls were counted (for tests and the log).
        self.stalls = 0

    def look(self) -> float:
        """Look at the clock now (count a stall since the last look); the loop time."""
        now = self._loop.time()
        gap = now - self._seen
        self._seen = now
        if gap > DEAF_AFTER:
            stall = gap - DEAF_AFTER
            self.deaf += stall
            self.stalls += 1
            if gap >= LOGGED_STALL:
                fields = {"stalled_for": round(gap, 3), "forgiven": round(stall, 3)}
                log.warning(
                    "the event loop stalled; clients' silence not counted meanwhile",
                    extra={"event": "loop_stalled", "fields": fields},
                )
        return now

    def watch(self) -> None:
        """One more connection needs the count: the heartbeat runs while any does."""
        self._watched += 1
        if self._beat is None:
            self._seen = self._loop.time()  # (the loop was idle, not deaf, until now)
            self._beat = self._loop.call_at(self._seen + BEAT, self._on_beat)

    def unwatch(self) -> None:
        """A connection no longer needs the count (the heartbeat stops after the last)."""
        self._watched -= 1
        if self._watched <= 0:
            self._watched = 0
            if self._beat is not None:
                self._beat.cancel()
                self._beat = None

    def _on_beat(self) -> None:
        now = self.look()
        self._beat = self._loop.call_at(now + BEAT, self._on_beat)


class HeardClock:
    """The engine's clock in a server: loop time less :attr:`PauseWatch.deaf`
    (module docstring). A :class:`tenure._runtime.clock.Clock`.

    While started (:meth:`start`, by the server's host, while its deadlines run) it
    keeps the pause watch's heartbeat running, so that a stall is told from idle time
    even with no connection open (a detached session's window runs then too).
    """

    def __init__(self, pauses: PauseWatch) -> None:
        self._pauses = pauses
        self._loop = pauses._loop
        self._started = False
        self._reached = 0.0  # the deadline of the last heard timer that came due

    def now(self) -> float:
        """Heard time: the loop's time less the server's deafness so far (never short
        of a deadline whose timer came due: :data:`DUE_WITHIN`)."""
        heard = self._pauses.look() - self._pauses.deaf
        return heard if heard >= self._reached else self._reached

    def reach(self, when: float) -> None:
        """A heard timer of ``when`` came due: heard time is at least ``when`` now."""
        if when > self._reached:
            self._reached = when

    def call_at(self, when: float, callback: Callable[[], None]) -> _HeardTimer:
        """Run ``callback`` once heard time reaches ``when`` (a stall postpones it)."""
        return _HeardTimer(self, when, callback)

    def loop_time_of(self, when: float) -> float:
        """The loop time at which heard time reaches ``when`` if no stall comes first."""
        return when + self._pauses.deaf

    def start(self) -> None:
        """Keep the heartbeat running (idempotent)."""
        if not self._started:
            self._started = True
            self._pauses.watch()

    def stop(self) -> None:
        """Let the heartbeat stop (idempotent)."""
        if self._started:
            self._started = False
            self._pauses.unwatch()


class _HeardTimer:
    """One callback at a heard time: re-armed when a stall moved that time on."""

    def __init__(self, clock: HeardClock, when: float, callback: Callable[[], None]) -> None:
        self._clock, self._when, self._callback = clock, when, callback
        self._handle: asyncio.TimerHandle | None = None
        self._arm()

    def _arm(self) -> None:
        clock = self._clock
        self._handle = clock._loop.call_at(clock.loop_time_of(self._when), self._fire)

    def _fire(self) -> None:
        # Looking at the clock counts a stall that delayed this call: heard time may
        # be short of the deadline still (the stall moved it on): wait for the rest,
        # so that what waited in the sockets is read first.
        clock = self._clock
        if clock.now() < self._when:
            if clock._loop.time() + DUE_WITHIN < clock.loop_time_of(self._when):
                self._arm()  # (the stall moved the deadline on: wait for the rest)
                return
            clock.reach(self._when)  # (due: its loop time has come)
        self._handle = None
        self._callback()

    def cancel(self) -> None:
        """Stop the callback from running, if it has not run yet."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
