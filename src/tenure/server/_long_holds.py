"""``--long-hold-seconds S``: a hold held past S seconds is told once, in the log and the audit.

A lock held for an hour is sometimes a leader (an election's hold lasts as long as its
leader), and sometimes a job stuck with its lock: only the operator knows which names
should never be held long. With ``--long-hold-seconds`` set, the server walks its holds
every ``S / 4`` seconds (at least 1, at most 60) and, for each hold held ``S`` seconds or
more that it has not told of yet, writes one ``long_hold`` line in its log (a warning,
with the node, the name, the session and its description, the fencing token and how
long it has been held), records one ``long_hold`` act in the audit log (``--audit-log``:
the hold's token, the session's owner), and counts it (``tenure_long_holds_total``:
what ``deploy/prometheus/alerts.yaml``'s ``TenureLongHold`` fires on). A hold is told of
once: its fencing token is remembered while it is held, and forgotten once it ends.

**Bounded.** The walk reads the engine's sorted indexes ``--step-budget`` semaphores a
turn of the loop, letting every other connection be served between (as ``/metrics``'
count does), so a million held mutexes cost a few hundred short turns each walk, never
one long one. A semaphore's holds are in grant order: the first is the oldest, so a
semaphore whose first hold is younger than S costs one look. What is remembered is the
holds told of and still held.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from tenure._core import Engine
from tenure._core.name_stats import owner_name
from tenure.server._audit import AuditLog

log = logging.getLogger("tenure.server")

__all__ = ["LongHolds", "walk_period"]

#: Names read from an index at once in a walk (what one lookup of a page costs).
_NAME_PAGE: Final = 1000


def walk_period(seconds: float) -> float:
    """How often the holds are walked for ``--long-hold-seconds`` ``seconds``: a quarter
    of it, at least 1 s and at most 60 s (a hold is told at most that late)."""
    return min(max(seconds / 4, 1.0), 60.0)


class LongHolds:
    """Tells of the holds held past :attr:`seconds` (module docstring).

    ``engine()`` is the running engine (None: none yet), ``now()`` its clock (engine
    time), ``audit`` the audit log (None: off).
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
        #: The fencing tokens of the holds told of and still held (as of the last walk).
        self._known: set[int] = set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Walk every :func:`walk_period` until :meth:`stop`."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    def stop(self) -> None:
        """Walk no more."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()

    async def _run(self) -> None:
        period = walk_period(self.seconds)
        while True:
            await asyncio.sleep(period)
            await self.walk()

    async def walk(self) -> int:
        """One walk of every hold; how many it told of (module docstring)."""
        engine = self._engine()
        if engine is None:
            return 0
        known, seen = self._known, set()
        told = looked = 0
        node_names = engine.node_index.page("", _NAME_PAGE)
        while node_names:
            for node_name in node_names:
                after = ""
                while True:
                    node = engine.nodes.get(node_name)
                    if node is None:
                        break  # dropped meanwhile
                    names = node.semaphore_index.page(after, min(self._budget, _NAME_PAGE))
                    now = self._now()
                    for name in names:
                        sem = node.semaphores[name]
                        for owner in sem.each_owner():
                            held = now - owner.since
                            if held < self.seconds:
                                break  # (grant order: the rest are younger)
                            seen.add(owner.token)
                            if owner.token not in known:
                                told += 1
                                self._tell(engine, node_name, name, owner.session_id,
                                           owner.token, held)  # fmt: skip
                    looked += len(names) + 1
                    if looked >= self._budget:
                        looked = 0
                        await asyncio.sleep(0)  # everybody else's turn
                        engine = self._engine() or engine
                    if len(names) < min(self._budget, _NAME_PAGE):
                        break
                    after = names[-1]
            node_names = engine.node_index.page(node_names[-1], _NAME_PAGE)
        # (Tokens told of during the walk stay known: a hold granted meanwhile is in it.)
        self._known = seen
        self.told += told
        return told

    def _tell(
        self, engine: Engine, node: str, name: str, session_id: int, token: int, held: float
    ) -> None:
        """One hold past the limit: its log line and its audit record."""
        session = engine.sessions.get(session_id)
        description = "" if session is None else session.description
        fields = {
            "node": node,
            "name": name,
            "session_id": session_id,
            "description": description,
            "fencing_token": token,
            "held_for": round(held, 3),
            "long_hold_seconds": self.seconds,
        }
        log.warning("long hold", extra={"event": "long_hold", "fields": fields})
        if self._audit is not None:
            owner = "" if session is None else owner_name(session.usage)
            self._audit.record(
                "long_hold", token=owner or None, address=None, outcome="ok", **fields
            )
