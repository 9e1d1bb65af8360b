"""The host: what drives an engine on an event loop, shared by ``memory://`` and ``tenure serve``.

The host owns one :class:`~tenure._core.Engine`, a
:class:`~tenure._runtime.clock.Clock` and one timer. ``execute`` applies a command
at the clock's current time and returns the reply; afterwards (and whenever the
timer fires) the engine's effects are handed to the sink registered for the
session each one is addressed to. The host adds no semantics of its own: it only
moves commands in, time forward and effects out.

Who advances time: before a command, the engine does (``Engine.apply`` ticks to
the command's time itself, so the rule that a command never sees what its time has
ended holds for every caller, not only for hosts that remember to tick). The host
ticks only from its timer, for time that passes while no command comes.

Slices. With a ``step_budget`` (the server's ``--step-budget``), the timer ticks in
slices of at most that many items of work (``Engine.tick``'s budget) and, while due
work is left (:meth:`Host.behind`), ticks again at the next turn of the loop: a
timer at a time already past, which the loop runs after the I/O it polled, so ten
thousand sessions ending at one instant are ended a slice per turn and everybody
else is heard between slices. A command still sees none of what its time ended
(the engine ticks to it first, whole); the server's own face holds its clients'
commands back until the host has caught up (:meth:`Host.when_caught_up`).

Three commands are given a time of the host's besides: ReserveUnits (a rate
limiter's reservation), ClaimName and ReleaseClaim (a claim's record) carry the
host's wall clock, UNIX seconds, which the host sets (``_WALL_TIMED``).

Times leave in UNIX seconds: the engine keeps them on the monotonic clock, and the
host moves those it shows (grant and queue times, sessions' creation times) by the
difference between its wall clock and that clock when it hands them out
(:mod:`tenure._core.stamps`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Final, TypeVar

from tenure._core import (
    ClaimName,
    Command,
    DescribeResult,
    Effect,
    Engine,
    NodeDescription,
    ReleaseClaim,
    ReserveUnits,
    SessionPage,
)
from tenure._core.stamps import stamp_effects, stamp_reply
from tenure._runtime.clock import Clock, TimerHandle

R = TypeVar("R")

#: Receives the effects addressed to one session.
EffectSink = Callable[[Effect], None]
#: The commands whose ``at`` is the host's wall clock (module docstring).
_WALL_TIMED: Final = frozenset({ReserveUnits, ClaimName, ReleaseClaim})


class Host:
    """Drives an engine on a clock and routes its effects to per-session sinks.

    ``memory://`` runs one as is; the server runs a durable one, whose hooks journal
    every change (:class:`tenure.server._durable_host.DurableHost`).
    """

    def __init__(
        self,
        clock: Clock,
        engine: Engine | None = None,
        *,
        wall_clock: Callable[[], float] = time.time,
        step_budget: int | None = None,
    ) -> None:
        """``step_budget``: items of deadline work per turn of the timer (None: a tick
        does everything due at once)."""
        self.clock = clock
        self.step_budget = step_budget
        #: The most items of deadline work one step (a command, a slice of the timer)
        #: has done: what the budget bounds, shown by a count, for tests and metrics.
        self.most_deadline_work = 0
        self._caught_up: list[Callable[[], None]] = []
        self.wall_clock = wall_clock
        self.engine = engine if engine is not None else Engine()
        self._sinks: dict[int, EffectSink] = {}
        self._timer: TimerHandle | None = None
        self._timer_at: float | None = None

    def execute(self, command: Command[R]) -> R:
        """Apply ``command`` now; deliver the effects it caused; re-arm the timer.

        Effects are delivered even when the command fails, so that nothing the
        engine queued is ever held back.
        """
        now = self.clock.now()
        if type(command) in _WALL_TIMED:
            # A rate limiter's time, and a claim's record's, is the wall clock, passed
            # in here (whatever the client sent) and so logged with the command: see
            # tenure._core.rates and tenure._core.claims.
            command = dataclasses.replace(command, at=self.wall_clock())  # type: ignore[type-var]
        engine = self.engine
        handled, work = engine.deadlines_handled, engine.deadline_work
        try:
            try:
                value = engine.apply(command, now)
            finally:
                self._count_work(engine.deadline_work - work)
                # apply ticked to ``now`` first (the engine's job, not ours: see the
                # module docstring). If that changed the state, report it before the
                # command, and even when the command then failed: a failed command is
                # not logged, so a durable host must log the tick on its own.
                if engine.deadlines_handled != handled:
                    self._ticked(now)
            self._applied(command, now)
            kind = type(value)
            if kind is DescribeResult or kind is SessionPage or kind is NodeDescription:
                value = stamp_reply(value, self.wall_shift())
            return value
        finally:
            self._after_step()

    def behind(self) -> bool:
        """Whether deadlines due by now are left for the timer's next slices (a command
        applied now would do them all in its own step). Never without a step budget
        (the timer does everything due at once), nor when the timer may not run."""
        return (
            self.step_budget is not None
            and self.engine.deadlines.any_due(self.clock.now())
            and self._timer_allowed()
        )

    def when_caught_up(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once nothing due is left (after the step that ends it)."""
        self._caught_up.append(callback)

    def wall_shift(self) -> float:
        """What to add to an engine time to make it UNIX seconds (wall clock minus clock)."""
        return self.wall_clock() - self.clock.now()

    def subscribe(self, session_id: int, sink: EffectSink) -> None:
        """Send the effects addressed to ``session_id`` to ``sink`` (replacing any other)."""
        self._sinks[session_id] = sink

    def unsubscribe(self, session_id: int, sink: EffectSink | None = None) -> None:
        """Stop delivering to the session's sink (only if it is ``sink``, when given)."""
        if sink is None or self._sinks.get(session_id) is sink:
            self._sinks.pop(session_id, None)

    def close(self) -> None:
        """Cancel the timer; the engine's state is left as it is."""
        self._cancel_timer()

    # -- hooks for a durable host (tenure.server's DurableHost) ---------------------------

    def _ticked(self, now: float) -> None:
        """A tick at ``now`` changed the state (called before ``_applied`` of a command
        that ticked on its way in)."""

    def _applied(self, command: Command[R], now: float) -> None:
        """``command`` succeeded at ``now``."""

    def _deliver(self, effects: list[Effect]) -> None:
        """Hand effects to the sinks of their sessions."""
        for effect in effects:
            sink = self._sinks.get(effect.session_id)
            if sink is not None:
                sink(effect)

    def _timer_allowed(self) -> bool:
        """Whether the timer may run (a durable host stops it when it shuts down)."""
        return True

    # -- inside -----------------------------------------------------------------------

    def _after_step(self) -> None:
        if self.engine.effects:  # (most steps cause none: then nothing to take or deliver)
            effects = stamp_effects(self.engine.take_effects(), self.wall_shift())
            self._deliver(effects)
        self._arm_timer()
        if self._caught_up and not (self._timer_allowed() and self.behind()):
            self._wake_caught_up()

    def _count_work(self, work: int) -> None:
        if work > self.most_deadline_work:
            self.most_deadline_work = work

    def _wake_caught_up(self) -> None:
        """Call what waits for the host to catch up (it may wait again: a new list)."""
        waiting, self._caught_up = self._caught_up, []
        for callback in waiting:
            callback()

    def _arm_timer(self) -> None:
        if not self._timer_allowed():
            return
        when = self.engine.next_deadline()
        if when == self._timer_at:
            return
        self._cancel_timer()
        self._timer_at = when
        self._timer = None if when is None else self.clock.call_at(when, self._on_timer)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_at = None

    def _on_timer(self) -> None:
        self._timer = self._timer_at = None
        if not self._timer_allowed():
            return
        now = self.clock.now()
        # The host's only tick: time passed with no command to carry it in (a slice of
        # it, with a step budget: the timer is armed again at once if work is left).
        work = self.engine.deadline_work
        handled = self.engine.tick(now, self.step_budget)
        self._count_work(self.engine.deadline_work - work)
        if handled:
            self._ticked(now)
        self._after_step()
