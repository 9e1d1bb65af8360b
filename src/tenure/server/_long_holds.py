"""Long holds: a hold held past its node's threshold is told once, in the log and the audit.

A lock held for an hour is sometimes a leader (an election's hold lasts as long as its
leader), and sometimes a job stuck with its lock: only the operator knows which names
should never be held long. Each node's threshold is its own ``long_hold`` setting
(:class:`~tenure._core.values.NodeConfig`: seconds, higher or lower than the
server's; ``0``: none of its holds is ever told of, as for a node of elections), or,
where it sets none, the server's ``--long-hold-seconds`` (0: off). The leader walks
its holds every :func:`walk_period` of the smallest threshold in force (the
server's, if set, and each node's own), recomputed after each walk, whether
``--long-hold-seconds`` is set or not: a node may set its own. While none is in
force, no hold is walked: a look at the nodes' settings (at once when the leader
starts, as a restart keeps them; then once a minute, :data:`IDLE_PERIOD`) searches
for one, and a walk follows at once when it finds one; so a node's setting made or
changed is in force at most a minute later (the first walk with the flag set comes a
period after the start). For each hold held its node's threshold or more that it
has not told of yet, it writes one ``long_hold``
line in its log (a warning, with the node, the name, the session and its
description, the fencing token, how long it has been held and the threshold that
applied, ``long_hold_seconds``), records one ``long_hold`` act in the audit log
(``--audit-log``: the hold's token, the session's owner), and counts it
(``tenure_long_holds_total``: what ``deploy/prometheus/alerts.yaml``'s
``TenureLongHold`` fires on). A hold is told of once: its fencing token is remembered
while it is held past its threshold, and forgotten once it ends. A walk that fails
(a bug) is logged with its traceback (``long_hold_walk_failed``), and the next one
comes a period later.

**Bounded.** The walk reads the engine's sorted indexes ``--step-budget`` semaphores a
turn of the loop, letting every other connection be served between (as ``/metrics``'
count does), so a million held mutexes cost a few hundred short turns each walk, never
one long one; the look at the nodes' settings is made in slices of as many nodes,
in plain callbacks (no task: a server where nothing is set runs none). A node whose
threshold is off costs one look. A semaphore's holds are
in grant order: the first is the oldest, so a semaphore whose first hold is younger
than its threshold costs one look. What is remembered is the holds told of and
still held.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from tenure._core import Engine
from tenure._core.name_stats import owner_name
from tenure._core.node import Node
from tenure.server._audit import AuditLog
from tenure.server._state_walk import NAME_PAGE, semaphore_pages

log = logging.getLogger("tenure.server")

__all__ = ["LongHolds", "walk_period"]


#: Seconds between walks while no threshold is in force (no node sets one, and no
#: ``--long-hold-seconds``): the longest :func:`walk_period`, so a node's setting is
#: seen at most that late.
IDLE_PERIOD: Final = 60.0


def walk_period(seconds: float) -> float:
    """How often the holds are walked for a threshold of ``seconds``: a quarter of it,
    at least 1 s and at most 60 s (a hold is told at most that late)."""
    return min(max(seconds / 4, 1.0), IDLE_PERIOD)


def threshold_of(long_hold: float | None, server: float) -> float:
    """A node's threshold: its ``long_hold`` setting if it has one, else the server's
    ``--long-hold-seconds``; 0 (or less) is off."""
    return server if long_hold is None else long_hold


class LongHolds:
    """Tells of the holds held past each node's threshold (module docstring).

    ``seconds`` is the server's ``--long-hold-seconds`` (0: off, for the nodes that
    set no ``long_hold`` of their own), ``engine()`` the running engine (None: none
    yet), ``now()`` its clock (engine time), ``audit`` the audit log (None: off).
    """

    def __init__(
        self,
        seconds: float,
        engine: Callable[[], Engine | None],
        now: Callable[[], float],
        audit: AuditLog | None,
        budget: int,
    ) -> None:
        self.seconds = seconds
        self._engine = engine
        self._now = now
        self._audit = audit
        self._budget = max(1, budget)
        #: Holds told of since the server started (``tenure_long_holds_total``).
        self.told = 0
        #: The smallest threshold in force at the last walk, the server's included
        #: (None: none was); before the first walk, the server's.
        self.smallest: float | None = seconds if seconds > 0 else None
        #: The fencing tokens of the holds told of and still held (as of the last walk).
        self._known: set[int] = set()
        #: The walk under way (None: none), and the timer or callback that comes next.
        self._task: asyncio.Task[None] | None = None
        self._next: asyncio.Handle | None = None
        self._running = False

    @property
    def period(self) -> float:
        """Seconds until the next walk: :func:`walk_period` of the smallest threshold
        in force at the last walk, or :data:`IDLE_PERIOD` while none is."""
        return IDLE_PERIOD if self.smallest is None else walk_period(self.smallest)

    def start(self) -> None:
        """Walk every :attr:`period` until :meth:`stop`: with ``--long-hold-seconds``,
        the first a period from now; without, once a look at the nodes' settings
        finds a threshold in force (at once, after a restart that kept one)."""
        if self._running:
            return
        self._running = True
        if self.seconds > 0:
            self._after(self.period)
        else:
            self._look("")

    def stop(self) -> None:
        """Walk no more."""
        self._running = False
        task, self._task = self._task, None
        handle, self._next = self._next, None
        if handle is not None:
            handle.cancel()
        if task is not None:
            task.cancel()

    def _after(self, delay: float) -> None:
        self._next = asyncio.get_running_loop().call_later(delay, self._due)

    def _due(self) -> None:
        """A period passed: walk, or, while no threshold was in force, look first."""
        self._next = None
        if self.smallest is None:
            self._look("")
        else:
            self._task = asyncio.ensure_future(self._walk_then_wait())

    def _look(self, after: str) -> None:
        """While no threshold is in force (no ``--long-hold-seconds``, no node's own):
        the settings of the nodes after ``after``, ``--step-budget`` of them a turn
        of the loop, in plain callbacks. A node with a threshold in force starts a
        walk at once; none at all, the next look comes :data:`IDLE_PERIOD` later. So
        a server where nothing is set makes no task and walks no hold: one look at
        each node a minute."""
        self._next = None
        try:
            engine = self._engine()
            if engine is None:
                self._after(IDLE_PERIOD)
                return
            page = min(self._budget, NAME_PAGE)
            names = engine.node_index.page(after, page)
            for name in names:
                node = engine.nodes.get(name)
                if node is not None and threshold_of(node.config.long_hold, self.seconds) > 0:
                    self._task = asyncio.ensure_future(self._walk_then_wait())
                    return
        except Exception:  # (a bug, as a walk's: said, and looked again a minute later)
            self._failed(IDLE_PERIOD)
            self._after(IDLE_PERIOD)
            return
        if len(names) < page:
            self._after(IDLE_PERIOD)
        else:  # (everybody else's turn, then the next slice)
            self._next = asyncio.get_running_loop().call_soon(self._look, names[-1])

    async def _walk_then_wait(self) -> None:
        try:
            await self.walk()
        except Exception:  # (a bug: said, and walked again, never a silent end)
            self._failed(self.period)
        self._task = None
        if self._running:
            self._after(self.period)

    def _failed(self, again_in: float) -> None:
        """Log the exception being handled, with its traceback (``long_hold_walk_failed``)."""
        log.exception(
            "the walk of long holds failed; walking again in %g s",
            again_in,
            extra={"event": "long_hold_walk_failed"},
        )

    async def walk(self) -> int:
        """One walk of every hold; how many it told of (module docstring)."""
        engine = self._engine()
        if engine is None:
            return 0
        known, seen = self._known, set()
        told = 0
        # (The server's is in force even with no node yet: a node made without a
        # setting of its own has it from the start.)
        smallest = self.seconds if self.seconds > 0 else None
        seconds = self.seconds

        def wanted(node: Node) -> bool:  # (off here: the one look)
            return threshold_of(node.config.long_hold, seconds) > 0

        async for node, names in semaphore_pages(self._engine, self._budget, wanted):
            threshold = threshold_of(node.config.long_hold, seconds)
            if smallest is None or threshold < smallest:
                smallest = threshold
            now = self._now()
            semaphores = node.semaphores
            for name in names:
                for owner in semaphores[name].each_owner():
                    held = now - owner.since
                    if held < threshold:
                        break  # (grant order: the rest are younger)
                    seen.add(owner.token)
                    if owner.token not in known:
                        told += 1
                        self._tell(self._engine() or engine, node.name, name,
                                   owner.session_id, owner.token, held, threshold)  # fmt: skip
        # (Tokens told of during the walk stay known: a hold granted meanwhile is in it.)
        self._known = seen
        self.told += told
        self.smallest = smallest
        return told

    def _tell(
        self,
        engine: Engine,
        node: str,
        name: str,
        session_id: int,
        token: int,
        held: float,
        threshold: float,
    ) -> None:
        """One hold past its node's threshold: its log line and its audit record."""
        session = engine.sessions.get(session_id)
        description = "" if session is None else session.description
        fields = {
            "node": node,
            "name": name,
            "session_id": session_id,
            "description": description,
            "fencing_token": token,
            "held_for": round(held, 3),
            "long_hold_seconds": threshold,
        }
        log.warning("long hold", extra={"event": "long_hold", "fields": fields})
        if self._audit is not None:
            owner = "" if session is None else owner_name(session.usage)
            self._audit.record(
                "long_hold", token=owner or None, address=None, outcome="ok", **fields
            )
