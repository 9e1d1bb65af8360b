"""The host: what drives an engine on an event loop, for ``memory://`` and every server.

The host owns one :class:`~tenure._core.Engine`, a
:class:`~tenure._runtime.clock.Clock` and one timer. ``execute`` applies a command
at the clock's current time and returns the reply; afterwards (and whenever the
timer fires) the engine's effects are routed: to the sink registered for the
session each one is addressed to, or wherever a server routes them
(:attr:`Host.route`). The host adds no semantics of its own: it only moves commands
in, time forward and effects out.

Composition. Besides its engine and clock a host is given two plain objects, or
none: its *journal* (:class:`HostJournal`), to which it logs every change before
anybody hears of it, and its *writer* (:class:`HostWriter`), which admits commands
(or refuses them: a server shutting down, a standby, a leader whose etcd is too far
behind), says whether deadlines run here, and commits what each step logged (a
server's group commit, :mod:`tenure.server._group_commit`, over the data
directory's log or a cluster's appender to etcd). The host calls them at fixed
points of a step and nothing of it is overridden. ``memory://`` has neither: its
engine lives in this process, a change is as durable as it will ever be once
applied, and the host says so by having no journal and no writer, rather than
objects whose methods would do nothing. A server's host has both; a standby's only
a writer, which admits nothing (only the log in etcd changes its engine).

Who advances time: before a command, the engine does (``Engine.apply`` ticks to
the command's time itself, so the rule that a command never sees what its time has
ended holds for every caller, not only for hosts that remember to tick). The host
ticks only from its timer, for time that passes while no command comes. A tick that
changed the state is logged before the command that carried it in, and even when
that command then fails: a failed command is not logged, the tick must be.

Slices. With a ``step_budget`` (the server's ``--step-budget``), the timer ticks in
slices of at most that many items of work (``Engine.tick``'s budget) and, while due
work is left (:meth:`Host.behind`), ticks again at the next turn of the loop: a
timer at a time already past, which the loop runs after the I/O it polled, so ten
thousand sessions ending at one instant are ended a slice per turn and everybody
else is heard between slices. A command still sees none of what its time ended
(the engine ticks to it first, whole); the server's own face holds its clients'
commands back until the host has caught up (:meth:`Host.when_caught_up`).

The cyclic collector is paused while a step's many effects are routed (at least
:data:`MANY_EFFECTS`: one change a fleet watches makes a firing per watcher, which
its walks would promote and then pay full collections for;
:mod:`tenure._runtime.collector`). Only then: a pause costs calls, which every
lone request would pay.

Three commands are given a time of the host's besides: ReserveUnits (a rate
limiter's reservation), ClaimName and ReleaseClaim (a claim's record) carry the
host's wall clock, UNIX seconds, which the host sets (``_WALL_TIMED``); such a
command is logged as the host made it, never as the bytes a client sent.

Times leave in UNIX seconds: the engine keeps them on the monotonic clock, and the
host moves those it shows (grant and queue times, sessions' creation times) by the
difference between its wall clock and that clock when it hands them out
(:mod:`tenure._core.stamps`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Final, Protocol, TypeVar

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
from tenure._runtime import collector
from tenure._runtime.clock import Clock, TimerHandle
from tenure.errors import UnavailableError

R = TypeVar("R")

#: Receives the effects addressed to one session.
EffectSink = Callable[[Effect], None]
#: Receives the effects of one step, stamped (a server's routing, or the sessions' sinks).
Route = Callable[[list[Effect]], None]
#: A step's effects from which the cyclic collector is paused while they are routed
#: (module docstring): a change that 1,000 sessions watch.
MANY_EFFECTS: Final = 1_000
#: The commands whose ``at`` is the host's wall clock (module docstring).
_WALL_TIMED: Final = frozenset({ReserveUnits, ClaimName, ReleaseClaim})


class HostJournal(Protocol):
    """What a host logs every change to, before anybody hears of it: a server's
    journal (the data directory's, or a cluster leader's in etcd)."""

    def log_command(
        self, command: Command[object], now: float, actor: str, raw: bytes | None
    ) -> None:
        """Queue the record of ``command``, which succeeded at ``now``, sent by ``actor``
        (its token's name; "": nobody's). ``raw``: the command's bytes as the client
        encoded them, to be logged as they are (None: the journal encodes it)."""

    def log_tick(self, now: float) -> None:
        """Queue the record of a tick at ``now`` that changed the state."""

    def log_record(self, record: bytes) -> None:
        """Queue a record the host made whole (a step of a node's move between cells)."""


class HostWriter(Protocol):
    """What a host's steps answer to: who may step, and the commit of what they logged
    (a server's group commit)."""

    @property
    def ticking(self) -> bool:
        """Whether the host's timer may run (not once stopped or failed, never on a
        standby)."""
        ...

    @property
    def dead(self) -> bool:
        """Whether the journal failed: nothing more is applied or acknowledged."""
        ...

    def admit(self, command: Command[object], actor: str, now: float) -> None:
        """Raise the error ``command`` is refused with, if it is (before it is applied)."""

    def admit_request(self, actor: str, now: float) -> None:
        """Raise the error a request of token ``actor`` at ``now`` is refused with, if
        it is: its ``requests_per_second`` (:meth:`Host.admit_request`)."""

    def stepped(self, logged: bool) -> None:
        """A step (a command, a tick) is done; ``logged``: it logged a change (a command
        that succeeded, a tick that changed the state), to be committed with its turn."""

    def failed(self, what: str, error: BaseException) -> None:
        """Logging a change failed (``what`` was being done): nothing more may be
        acknowledged."""

    async def committed(self) -> None:
        """Until what was applied so far is durable (or :attr:`dead`)."""


class StepObserver(Protocol):
    """Who is told of each step (a server's metrics)."""

    def applied(self, command: Command[object], value: object) -> None:
        """The engine applied ``command`` (from any protocol) and it returned ``value``."""

    def effects(self, effects: list[Effect]) -> None:
        """The engine's effects of one step."""


class Host:
    """Drives an engine on a clock and routes its effects (see the module docstring)."""

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        journal: HostJournal | None = None,
        writer: HostWriter | None = None,
        *,
        wall_clock: Callable[[], float] = time.time,
        step_budget: int | None = None,
        observer: StepObserver | None = None,
    ) -> None:
        """``journal`` needs a ``writer`` (what commits what it logs); ``step_budget``:
        items of deadline work per turn of the timer (None: a tick does everything
        due at once); ``observer``: told of each command applied and each step's
        effects (None: nobody measures).

        Raises:
            ValueError: a journal without a writer.
        """
        if journal is not None and writer is None:
            raise ValueError("a host's journal needs a writer to commit what it logs")
        self.engine = engine
        self.clock = clock
        self.journal = journal
        self.writer = writer
        self.wall_clock = wall_clock
        self.step_budget = step_budget
        self.observer = observer
        #: The most items of deadline work one step (a command, a slice of the timer)
        #: has done: what the budget bounds, shown by a count, for tests and metrics.
        self.most_deadline_work = 0
        #: Where each step's effects go: the sessions' sinks (:meth:`subscribe`), or a
        #: server's routing, which it sets once it is built around this host.
        self.route: Route = self._to_sinks
        self._sinks: dict[int, EffectSink] = {}
        self._caught_up: list[Callable[[], None]] = []
        self._timer: TimerHandle | None = None
        self._timer_at: float | None = None

    @property
    def dead(self) -> bool:
        """Whether the writer's journal failed: nothing more is applied or acknowledged."""
        return self.writer is not None and self.writer.dead

    def admit_request(self, actor: str) -> None:
        """Count one request a client of token ``actor`` sent ("": nobody's, not counted)
        against the token's ``requests_per_second``, before any of its work.

        A request is counted once, at its face's door, however many commands it makes
        (a dflockd ``l`` is three, a native request one, a ping none), so that the
        quota means requests on every face; :meth:`execute` counts nothing.

        Raises:
            LimitExceededError: the token is over its quota (the message names it and
                the token).
        """
        writer = self.writer
        if actor and writer is not None:
            writer.admit_request(actor, self.clock.now())

    def execute(self, command: Command[R], actor: str = "", raw: bytes | None = None) -> R:
        """Apply ``command`` now, logged; deliver the effects it caused; re-arm the timer.

        ``actor`` is who sends it: the name of its connection's token ("" without an
        auth file). What it makes is that token's, and counts against its quotas
        (:mod:`tenure._core.quotas`); the engine knows it only while it applies it.
        (Its rate is not counted here: the request that carries the command was, at
        its door, :meth:`admit_request`.)
        ``raw``: the command's bytes as decoded from its client's frame, which the
        journal logs as they are (None: it encodes the command).

        Effects are delivered even when the command fails, so that nothing the
        engine queued is ever held back.

        Raises:
            The command's error; the writer's refusal; UnavailableError if the
            journal could not log it.
        """
        writer, engine = self.writer, self.engine
        now = self.clock.now()
        if writer is not None:
            writer.admit(command, actor, now)
        if type(command) in _WALL_TIMED:
            # A rate limiter's time, and a claim's record's, is the wall clock, passed
            # in here (whatever the client sent) and so logged with the command: see
            # tenure._core.rates and tenure._core.claims.
            command = dataclasses.replace(command, at=self.wall_clock())  # type: ignore[type-var]
            raw = None  # (the client's bytes carry the client's time)
        handled, work = engine.deadlines_handled, engine.deadline_work
        logged = False
        try:
            if actor:
                engine.actor = actor
            try:
                value = engine.apply(command, now)
            finally:
                if actor:
                    engine.actor = ""
                work = engine.deadline_work - work
                if work > self.most_deadline_work:
                    self.most_deadline_work = work
                # apply ticked to ``now`` first (the engine's job, not ours: see the
                # module docstring). If that changed the state, log it before the
                # command, and even when the command then failed.
                if engine.deadlines_handled != handled:
                    self._log_tick(now)
                    logged = True
            journal = self.journal
            if journal is not None:
                try:
                    journal.log_command(command, now, actor, raw)
                except Exception as error:
                    self._failed(error)
            logged = True
            kind = type(value)
            if kind is DescribeResult or kind is SessionPage or kind is NodeDescription:
                value = stamp_reply(value, self.wall_shift())
        finally:
            self._after_step(logged)
        if self.observer is not None:
            self.observer.applied(command, value)
        return value

    def change(
        self, step: Callable[[Engine, float], None], record: Callable[[float], bytes]
    ) -> None:
        """Apply ``step(engine, now)`` now, a change no command makes (a step of a
        node's move between cells), logged as ``record(now)``; deliver its effects.
        Deadlines due by now are handled first, and logged (rule 6).

        Raises:
            ``step``'s error (nothing changed); UnavailableError if the journal could
            not log it.
        """
        engine, now = self.engine, self.clock.now()
        logged = False
        try:
            if engine.deadlines.any_due(now) and engine.tick(now):
                self._log_tick(now)
                logged = True
            step(engine, now)
            journal = self.journal
            if journal is not None:
                try:
                    journal.log_record(record(now))
                except Exception as error:
                    self._failed(error)
            logged = True
        finally:
            self._after_step(logged)

    def start(self) -> None:
        """Arm the timer (for the deadlines a recovered engine carries)."""
        self._arm_timer()

    def behind(self) -> bool:
        """Whether deadlines due by now are left for the timer's next slices (a command
        applied now would do them all in its own step). Never without a step budget
        (the timer does everything due at once), nor when the timer may not run."""
        return (
            self.step_budget is not None
            and self.engine.deadlines.any_due(self.clock.now())
            and (self.writer is None or self.writer.ticking)
        )

    def when_caught_up(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once nothing due is left (after the step that ends it), or
        once the host closes."""
        self._caught_up.append(callback)

    async def caught_up(self) -> None:
        """Until no due deadline is left for the timer's slices (at once if none is),
        or the host stops ticking (see :class:`tenure.server.plug.HostCalls`)."""
        while self.behind():
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

            def wake(done: asyncio.Future[None] = done) -> None:
                if not done.done():
                    done.set_result(None)

            self.when_caught_up(wake)
            await done

    async def committed(self) -> None:
        """Until what was applied so far is durable (at once without a writer)."""
        if self.writer is not None:
            await self.writer.committed()

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
        """Cancel the timer, and wake whoever waits for the host to catch up (they find
        it stopped); the engine's state is left as it is."""
        self._cancel_timer()
        self._wake_caught_up()

    # -- inside -----------------------------------------------------------------------

    def _to_sinks(self, effects: list[Effect]) -> None:
        """Hand effects to the sinks of their sessions."""
        for effect in effects:
            sink = self._sinks.get(effect.session_id)
            if sink is not None:
                sink(effect)

    def _log_tick(self, now: float) -> None:
        journal = self.journal
        if journal is not None:
            try:
                journal.log_tick(now)
            except Exception as error:
                self._failed(error)

    def _failed(self, error: Exception) -> None:
        """The journal could not log a change: the writer stops acknowledging anything.

        Raises:
            UnavailableError: always (the change happened, and will never be told).
        """
        assert self.writer is not None  # (a journal has one: __init__)
        self.writer.failed("writing to the journal", error)
        raise UnavailableError("the server failed to log a change") from None

    def _after_step(self, logged: bool) -> None:
        engine = self.engine
        if engine.effects:  # (most steps cause none: then nothing to take or deliver)
            many = len(engine.effects) >= MANY_EFFECTS
            if many:
                collector.pause()  # (the module docstring)
            try:
                effects = stamp_effects(engine.take_effects(), self.wall_shift())
                if self.observer is not None:
                    self.observer.effects(effects)
                self.route(effects)
            finally:
                if many:
                    collector.resume()
        # (_arm_timer's first look, here: most steps leave the next deadline where it
        # was, and a call per step to learn that costs more than the look.)
        writer = self.writer
        if writer is None or writer.ticking:
            when = engine.next_deadline()
            if when != self._timer_at:
                self._rearm_timer(when)
        if self._caught_up and not self.behind():
            self._wake_caught_up()
        if writer is not None:
            writer.stepped(logged)

    def _wake_caught_up(self) -> None:
        """Call what waits for the host to catch up (it may wait again: a new list)."""
        waiting, self._caught_up = self._caught_up, []
        for callback in waiting:
            callback()

    def _arm_timer(self) -> None:
        if self.writer is not None and not self.writer.ticking:
            return
        when = self.engine.next_deadline()
        if when != self._timer_at:
            self._rearm_timer(when)

    def _rearm_timer(self, when: float | None) -> None:
        """Arm the timer for ``when`` (None: none), in place of the one armed."""
        self._cancel_timer()
        self._timer_at = when
        self._timer = None if when is None else self.clock.call_at(when, self._on_timer)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_at = None

    def _on_timer(self) -> None:
        self._timer = self._timer_at = None
        if self.writer is not None and not self.writer.ticking:
            return
        now = self.clock.now()
        # The host's only tick: time passed with no command to carry it in (a slice of
        # it, with a step budget: the timer is armed again at once if work is left).
        engine = self.engine
        work = engine.deadline_work
        handled = engine.tick(now, self.step_budget)
        work = engine.deadline_work - work
        if work > self.most_deadline_work:
            self.most_deadline_work = work
        if handled:
            try:
                self._log_tick(now)
            except UnavailableError:
                return  # the journal failed: the writer stopped everything already
        self._after_step(bool(handled))
