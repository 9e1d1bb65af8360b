"""The coordination engine: nodes, sessions, semaphores, fencing tokens and watches. [compiled]

Theory of operation
-------------------
The engine is a deterministic state machine. The host feeds it commands
(``apply(command, now)``) and the passage of time (``tick(now)``); it answers each
command with a reply or a :mod:`tenure.errors` exception, and queues *effects* for
everybody else (``take_effects()``). It never reads a clock, sleeps, or does I/O,
so the same inputs always give the same state: that is what makes it testable
without sleeping and replayable from a log.

The rules are data: :data:`HANDLERS` maps each command type to the function that
applies it (:mod:`tenure._core.handlers`, one module per topic), and every such
function works on an :class:`~tenure._core.state.EngineState` alone. The
:class:`Engine` is that state plus the three verbs below.

Rules (each enforced in exactly one place):

1. A command either fails with no change of state, or succeeds (each handler).
2. A grant never takes a semaphore beyond its limit, and waiters are served FIFO
   (:mod:`tenure._core.semaphore`).
3. Every grant gets a fencing token greater than every earlier token of this
   engine (one counter for all nodes, so a dropped and re-created node cannot
   reuse old tokens either; ``shared_steps.grant``). The counter is state: persist
   it with the rest.
4. An attached session never expires. A detached one expires ``timeout`` seconds
   after its client was last heard from (the detach, less its ``silent_for``)
   unless it is re-attached first; expiry releases all it holds (starting
   lock-delay) and cancels all it waits for (:mod:`tenure._core.handlers.sessions`).
5. After any change to a semaphore, ``shared_steps.settle`` serves its queue,
   removes it if it is ephemeral and idle, and fires the watches the change hit,
   in that order.
6. A command at ``now`` never sees a session, lease or waiter that ``now`` has
   already ended: :meth:`Engine.apply` ticks to ``now`` first (see there).

Steps: a host may tick in slices (``tick(now, budget)``: at most ``budget`` items of
work, :func:`~tenure._core.handlers.expiry.cost`), so that ten thousand sessions
ending at one instant do not hold its event loop for the whole of their ends; it
ticks again on its next turn while :meth:`Engine.behind`. Slices change nothing of
the outcome: deadlines are handled one at a time, in the heap's fixed order, each
at its own time, so a tick cut anywhere and resumed ends in the state one tick
would (a journal replays each slice's record as a whole tick: the same state).
Rule 6 still holds: ``apply`` ticks to its time unbudgeted, so a host that applies
a command while behind pays for the rest there (the server holds its clients'
commands back until it has caught up instead: ``tenure.server._net.native``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any, Final, TypeVar

from tenure._core import commands as c
from tenure._core.deadlines import DeadlineKey
from tenure._core.effects import Effect
from tenure._core.handlers import (
    acquire,
    claims,
    expiry,
    handoffs,
    limiters,
    listing,
    nodes,
    semaphores,
    sessions,
    sets,
    watches,
)
from tenure._core.handlers.sessions import MAX_PROTECTION_KEY_BYTES
from tenure._core.moving import refuse_if_moving
from tenure._core.ownership import counted_usage
from tenure._core.state import EngineState
from tenure.errors import InvalidArgumentError

__all__ = ["DEFAULT_STEP_BUDGET", "HANDLERS", "MAX_PROTECTION_KEY_BYTES", "Engine", "Handler"]

#: Items of deadline work one slice of a tick does at most (``tenure serve
#: --step-budget``): a deadline is one item, plus one per hold, wait and watch that a
#: session's end lets go. 1,000 items are about 5 ms of the pure engine on the
#: bench's machine (bench/micro/steps.py); a deadline is never cut in two, so one
#: session of more items than this is a slice of its own.
DEFAULT_STEP_BUDGET: Final = 1_000

R = TypeVar("R")

#: A command handler: ``handler(state, command, now) -> reply`` (or a tenure error).
#: The command and reply types differ per entry, so the table holds them as Any.
Handler = Callable[[EngineState, Any, float], Any]

#: Command type -> its handler. Built once; ``apply`` looks the exact type up (a
#: subclass of a command is not that command: it could carry fields no rule knows).
HANDLERS: Final[Mapping[type[c.Command[Any]], Handler]] = MappingProxyType(
    {
        c.CreateNode: nodes.create_node,
        c.DescribeNode: nodes.describe_node,
        c.AlterNode: nodes.alter_node,
        c.DropNode: nodes.drop_node,
        c.SetNodeAnnex: nodes.set_node_annex,
        c.GetNodeAnnex: nodes.get_node_annex,
        c.CreateSession: sessions.create_session,
        c.AttachSession: sessions.attach_session,
        c.ResumeSession: sessions.resume_session,
        c.DetachSession: sessions.detach_session,
        c.CloseSession: sessions.close_session,
        c.DescribeSession: sessions.describe_session,
        c.KillSession: sessions.kill_session,
        c.ListNodes: listing.list_nodes,
        c.ListSemaphores: listing.list_semaphores,
        c.ListSessions: listing.list_sessions,
        c.WhyName: listing.why_name,
        c.TopNames: listing.top_names,
        c.CreateSemaphore: semaphores.create_semaphore,
        c.Acquire: acquire.acquire,
        c.AcquireAll: sets.acquire_all,
        c.Release: semaphores.release,
        c.CancelAcquire: semaphores.cancel_acquire,
        c.Renew: semaphores.renew,
        c.UpdateSemaphore: semaphores.update_semaphore,
        c.SwapSemaphoreData: semaphores.swap_semaphore_data,
        c.ReserveUnits: limiters.reserve_units,
        c.OfferHold: handoffs.offer_hold,
        c.AdoptHold: handoffs.adopt_hold,
        c.ClaimName: claims.claim_name,
        c.ReleaseClaim: claims.release_claim,
        c.DeleteSemaphore: semaphores.delete_semaphore,
        c.DescribeSemaphore: watches.describe_semaphore,
        c.CancelWatch: watches.cancel_watch,
        c.WatchPrefix: watches.watch_prefix,
    }
)

# The plain dict behind HANDLERS, for the hot path (a proxy's .get costs a little more).
_HANDLERS: Final[dict[type[c.Command[Any]], Handler]] = dict(HANDLERS)


class Engine(EngineState):
    """The sans-I/O coordination engine. See the module docstring for its rules."""

    def __init__(self, *, max_nodes: int = 10_000) -> None:
        super().__init__(max_nodes=max_nodes)
        #: Deadlines handled since this engine was made (not state: not persisted). A
        #: host compares it around :meth:`apply` to learn whether time changed the
        #: state before the command did.
        self.deadlines_handled = 0
        #: Items of deadline work done since this engine was made (not state): what a
        #: tick's budget counts (:func:`~tenure._core.handlers.expiry.cost`).
        self.deadline_work = 0
        # What a paused ledger counts afresh when asked (tenure._core.quotas).
        self.ledger.fresh_counts = partial(counted_usage, self)

    # -- the three verbs ------------------------------------------------------------

    def apply(self, command: c.Command[R], now: float) -> R:
        """Apply ``command`` at time ``now``; return its reply or raise its error.

        Deadlines due by ``now`` are handled first (rule 6): a command never sees a
        session, lease or waiter that its time has already ended, however late the
        host's timer is.
        """
        handler = _HANDLERS.get(type(command))
        if handler is None:
            raise InvalidArgumentError(f"unknown command {type(command).__name__}")
        # This is the one place where time catches up before a command. It is the
        # engine's job, not the host's, because rule 6 is a property of the state
        # machine: a test, a journal replay or any other caller of apply gets it
        # without having to remember to tick. A host ticks only on its timer, for
        # time that passes with no command (tenure._runtime.host); a durable host
        # learns from ``deadlines_handled`` whether this tick must be logged.
        if self.deadlines.any_due(now):
            self.tick(now)
        elif now > self.now:  # (tick's own first step, inline: most commands find nothing due)
            self.now = now
        if self.moving:  # (a node frozen for a move takes no command: tenure._core.moving)
            refuse_if_moving(self, command)
        reply: R = handler(self, command, now)
        if self.deadlines.crowded():  # (dead entries a client's renews left: O(1) to ask)
            self.deadlines.compact(self._is_live)
        return reply

    def tick(self, now: float, budget: int | None = None) -> int:
        """Let time pass up to ``now``: expire sessions, waiters and leases; end lock-delays.

        With a ``budget``, stop once that many items of work are done (module
        docstring: a slice); :meth:`behind` then says that due work is left for the
        next slice. Returns how many deadlines it handled (0: the state did not
        change), so a durable host knows when a tick must be logged.
        """
        if now > self.now:
            self.now = now
        if not self.deadlines.any_due(now):
            return 0  # the common case, on every command: O(1)
        handled = spent = 0
        for when, key in self.deadlines.pop_due(now):
            if expiry.is_live(self, when, key):
                spent += expiry.cost(self, key)
                # Each deadline is handled at its own time, so one coarse tick ends in
                # the same state as ticking at every deadline on the way.
                expiry.on_deadline(self, key, when)
                handled += 1
            else:
                spent += 1  # (a dead entry costs its pop)
            if budget is not None and spent >= budget:
                break  # the rest stays in the heap, in order, for the next slice
        self.deadlines_handled += handled
        self.deadline_work += spent
        return handled

    def behind(self) -> bool:
        """Whether deadlines due by the engine's time are left (a budgeted tick stopped
        short of them): the host ticks again before anything else changes."""
        return self.deadlines.any_due(self.now)

    def take_effects(self) -> list[Effect]:
        """Effects queued since the last call, in the order they happened."""
        effects, self.effects = self.effects, []
        return effects

    def next_deadline(self) -> float | None:
        """When ``tick`` next has work to do, or None if nothing is timed."""
        return self.deadlines.next_live(self._is_live)

    def _is_live(self, when: float, key: DeadlineKey) -> bool:
        return expiry.is_live(self, when, key)
