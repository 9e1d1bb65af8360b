"""PauseWatch's count: what it calls a stall, and that it never forgives more than one.

On a hand-driven clock: no sleeping, no timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from tenure.server._net.pauses import BEAT, DEAF_AFTER, HeardClock, PauseWatch


class Timer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class HandLoop:
    """The two things PauseWatch asks of a loop, with a clock moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0
        self.timers: list[tuple[float, Callable[[], None], Timer]] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = Timer()
        self.timers.append((when, callback, timer))
        return timer

    def live(self) -> list[tuple[float, Callable[[], None], Timer]]:
        return [entry for entry in self.timers if not entry[2].cancelled]

    def run_due(self) -> None:
        """Run the timers due now (as a loop would when it next turns)."""
        for entry in [e for e in self.live() if e[0] <= self.now]:
            self.timers.remove(entry)
            entry[1]()


def watch_on(loop: HandLoop) -> PauseWatch:
    return PauseWatch(cast(asyncio.AbstractEventLoop, loop))


def test_gaps_up_to_the_threshold_are_no_stall() -> None:
    loop = HandLoop()
    watch = watch_on(loop)
    for _ in range(10):
        loop.now += DEAF_AFTER  # a busy loop that still turns
        watch.look()
    assert (watch.deaf, watch.stalls) == (0.0, 0)


def test_a_stall_counts_its_excess_and_never_more_than_the_gap() -> None:
    loop = HandLoop()
    watch = watch_on(loop)
    loop.now += 5.0
    watch.look()
    assert watch.stalls == 1
    assert watch.deaf == 5.0 - DEAF_AFTER
    loop.now += 1.0  # a second stall adds up
    watch.look()
    assert watch.stalls == 2
    assert watch.deaf == (5.0 - DEAF_AFTER) + (1.0 - DEAF_AFTER)
    assert watch.deaf < 6.0


def test_the_heartbeat_runs_only_while_something_is_watched() -> None:
    loop = HandLoop()
    watch = watch_on(loop)
    assert loop.live() == []
    watch.watch()
    watch.watch()
    (beat,) = loop.live()
    assert beat[0] == loop.now + BEAT
    loop.now += BEAT
    loop.run_due()
    (beat,) = loop.live()  # re-armed, once
    assert beat[0] == loop.now + BEAT
    watch.unwatch()
    assert len(loop.live()) == 1  # one is still watched
    watch.unwatch()
    assert loop.live() == []
    # Idle time while nothing was watched is no stall.
    loop.now += 60.0
    watch.watch()
    loop.now += BEAT
    loop.run_due()
    assert (watch.deaf, watch.stalls) == (0.0, 0)


def test_heard_time_leaves_stalls_out_and_never_runs_back() -> None:
    loop = HandLoop()
    clock = HeardClock(watch_on(loop))
    start = clock.now()
    loop.now += 0.1  # a turn: heard as it is
    assert clock.now() == start + 0.1
    loop.now += 10.0  # a stall: only DEAF_AFTER of it is heard
    assert clock.now() == start + 0.1 + DEAF_AFTER
    readings = [clock.now()]
    for step in (0.0, 0.2, 3.0, 0.05):
        loop.now += step
        readings.append(clock.now())
    assert readings == sorted(readings)


def test_a_heard_timer_waits_out_a_stall_before_it_runs() -> None:
    loop = HandLoop()
    clock = HeardClock(watch_on(loop))
    fired: list[float] = []
    clock.call_at(clock.now() + 1.0, lambda: fired.append(clock.now()))
    due = clock.now() + 1.0
    loop.now += 5.0  # a stall: the loop's timer is late, and runs
    loop.run_due()
    assert fired == []  # heard time is short of it: re-armed for the rest
    ((when, _, _),) = loop.live()
    assert when == loop.now + (due - clock.now())
    clock.start()  # the heartbeat, as the host runs it: a free loop's turns
    while loop.now < when:
        loop.now = min(when, loop.now + BEAT)
        loop.run_due()
    assert len(fired) == 1
    assert fired[0] >= due


def test_a_cancelled_heard_timer_never_runs_even_when_re_armed() -> None:
    loop = HandLoop()
    clock = HeardClock(watch_on(loop))
    fired: list[bool] = []
    timer = clock.call_at(clock.now() + 1.0, lambda: fired.append(True))
    loop.now += 5.0
    loop.run_due()  # re-armed past the stall
    timer.cancel()
    loop.now += 5.0
    loop.run_due()
    assert fired == []
    assert loop.live() == []


def test_a_started_heard_clock_keeps_the_heartbeat_until_stopped() -> None:
    loop = HandLoop()
    clock = HeardClock(watch_on(loop))
    clock.start()
    clock.start()  # (idempotent)
    assert len(loop.live()) == 1
    clock.stop()
    clock.stop()
    assert loop.live() == []
