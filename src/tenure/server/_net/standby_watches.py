"""A cluster standby's watches (protocol version 13): armed in its own engine, fired as
it applies the leader's log.

A watch is no part of the replicated state (:mod:`tenure._core.stale_reads`): the
leader keeps its own, and so may a standby. A client that allows some staleness
arms a watch on a standby (a DescribeSemaphore with a watch, or a WatchPrefix, with
``max_staleness``), once the standby has confirmed its state fresh enough, as for a
read (:mod:`tenure.server._net.stale_reads`); the answer describes the semaphore as
the standby's state has it, and carries the log entry it held (``index``). From
then on, as the standby applies the leader's records, the engine fires the watch
as the leader's would fire its own, and its WatchFired is pushed to the connection
that armed it (:meth:`StandbyWatches.fired`, the follower's ``on_effects``). No
session is attached to a standby's connection: a watch's route is its connection.

**Within the bound.** A firing comes when the standby applies the change: as late as
the standby is behind. While it keeps watches, the standby confirms its state
(:meth:`~tenure.server._cluster.freshness.Freshness.within`) every half of the
smallest ``max_staleness`` they were armed with (at most every :data:`GUARD_FLOOR`
seconds), so that what it has applied is never older than that bound by more than
one read of etcd; one that cannot confirm within ``--stale-read-wait`` gives its
watches up: each connection that armed one is told ``GoingAway(UNAVAILABLE)`` and
closed, and its client arms them again elsewhere (another standby, or the leader).

**Their ends.** A CancelWatch with ``max_staleness`` disarms a watch the same
connection armed here. A connection that closes has its watches disarmed. A
session that ends (the leader's records) takes its watches with it in the engine,
silently, as on the leader: its client learns of the end from the leader; the
routes left are swept as they grow (:meth:`_sweep`). The standby's term ending
(:meth:`end`: it steps down, to lead or to stop) disarms every watch, so that a new
leader's engine keeps none of them; a state loaded afresh (:meth:`reloaded`: the
log was trimmed past this standby) has none, so their connections are given up.

Layer (CONTRIBUTING.md): this module may also import tenure._runtime.host.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Final

from tenure._core import CancelWatch, Command, Effect, Engine, WatchFired, WatchPrefix
from tenure._core.commands import DescribeSemaphore
from tenure._core.stale_reads import arm_watch
from tenure._core.stamps import stamp_effect
from tenure._protocol import GoingAway, LocalProtocolError
from tenure._protocol.fanout import FiredPushes
from tenure._runtime.host import Host
from tenure.errors import ErrorCode, TenureError
from tenure.server._net.gate import Conn, Gate
from tenure.server._net.outbox import Outboxes

__all__ = ["GUARD_FLOOR", "StandbyWatches"]

log = logging.getLogger("tenure.server")

#: The shortest pause between two confirmations of a standby's state while it keeps
#: watches, in seconds (a ``max_staleness`` of 0 confirms this often).
GUARD_FLOOR: Final = 0.1


@dataclass(slots=True)
class _Route:
    """Where one watch armed here fires: its connection, and what it was armed with."""

    conn: Conn
    session_id: int
    repeat: bool
    staleness: float


class StandbyWatches:
    """The watches a standby armed in its engine, and their routes (module docstring)."""

    def __init__(self, host: Host, gate: Gate, out: Outboxes, wait: float) -> None:
        """``wait``: ``--stale-read-wait``, how long a confirmation may take."""
        self.host = host
        self.gate = gate
        self.out = out
        self.wait = wait
        self._routes: dict[int, _Route] = {}
        self._by_conn: dict[Conn, set[int]] = {}
        #: How many watches were armed with each ``max_staleness`` (the smallest: how
        #: often the guard confirms).
        self._bounds: Counter[float] = Counter()
        self._engine: Engine | None = None  # the engine they are armed in
        self._swept_at = 0  # how many routes there were after the last sweep
        self._guard: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._routes)

    def arm(self, conn: Conn, command: Command[object], staleness: float) -> object:
        """Apply ``command`` (:func:`~tenure._core.stale_reads.is_standby_watch`) for
        ``conn`` in this standby's engine: its answer (a CancelWatch of a watch another
        connection armed, or none: False).

        Raises:
            The command's own error (NotFoundError, LimitExceededError, ...).
        """
        engine = self.host.engine
        if engine is not self._engine:
            self.reloaded()  # (a state loaded afresh: the watches armed before are gone)
            self._engine = engine
        if type(command) is CancelWatch:
            route = self._routes.get(command.watch_id)
            if route is None or route.conn is not conn or route.session_id != command.session_id:
                return False
            self._forget(command.watch_id)
            return arm_watch(engine, command)
        value = arm_watch(engine, command)
        watch_id = value.watch_id  # type: ignore[attr-defined]
        repeat = type(command) is WatchPrefix or (
            type(command) is DescribeSemaphore and command.watch_repeat
        )
        session_id = command.session_id  # type: ignore[attr-defined]
        self._routes[watch_id] = _Route(conn, session_id, repeat, staleness)
        self._by_conn.setdefault(conn, set()).add(watch_id)
        self._bounds[staleness] += 1
        if len(self._routes) >= 2 * max(self._swept_at, 64):
            self._sweep()
        if self._guard is None or self._guard.done():
            self._guard = asyncio.get_running_loop().create_task(self._guarded())
        return value

    def fired(self, effects: list[Effect]) -> None:
        """The effects of one log entry this standby applied: each WatchFired of a watch
        armed here is pushed to its connection (a fan-out past a turn's room over the
        next turns, as the leader's: :mod:`tenure.server._net.later`)."""
        routes = self._routes
        if not routes:
            return
        routed: list[tuple[Conn, Effect]] = []
        shift = self.host.wall_shift()
        for effect in effects:
            if type(effect) is not WatchFired:
                continue
            route = routes.get(effect.watch_id)
            if route is None or route.session_id != effect.session_id:
                continue
            if not route.repeat:  # (a one-shot watch: the engine disarmed it as it fired)
                self._forget(effect.watch_id)
            routed.append((route.conn, stamp_effect(effect, shift)))
        out = self.out
        later = out.later
        fired = FiredPushes()  # one firing's encoding, shared by its watchers
        if later.waiting:
            later.bound(len(routed))
        room = later.room_per_turn
        waiting = later.waiting
        for conn, effect in routed:
            if room > 0 and conn not in waiting:
                out.push(conn, effect, fired)
                room -= 1
            else:
                later.defer(conn, effect)

    def closed(self, conn: Conn) -> None:
        """``conn`` closed: the watches it armed are disarmed."""
        for watch_id in list(self._by_conn.get(conn, ())):
            session_id = self._routes[watch_id].session_id
            self._forget(watch_id)
            self._disarm(session_id, watch_id)

    def end(self) -> None:
        """The standby's term ends: every watch is disarmed (a new leader's engine
        keeps none of them); their connections are closed by the step-down."""
        if self._guard is not None:
            self._guard.cancel()
        for watch_id, route in self._routes.items():
            self._disarm(route.session_id, watch_id)
        self._clear()

    def reloaded(self) -> None:
        """The standby's state was loaded afresh: the watches armed in the old one are
        gone; each connection that armed one is given up (its client arms them again)."""
        self.give_up("this standby loaded its state afresh: watch again")

    def give_up(self, why: str) -> None:
        """Tell each connection with a watch here ``GoingAway(UNAVAILABLE, why)`` and
        close it; its watches are disarmed."""
        conns = list(self._by_conn)
        for watch_id, route in self._routes.items():
            self._disarm(route.session_id, watch_id)
        self._clear()
        for conn in conns:
            with contextlib.suppress(LocalProtocolError):  # (closing already)
                self.out.emit(conn, GoingAway(ErrorCode.UNAVAILABLE, why))
            self.out.finish(conn)
        if conns:
            fields = {"connections": len(conns), "why": why}
            log.warning("standby watches given up", extra={"fields": fields})

    # -- inside -------------------------------------------------------------------------

    async def _guarded(self) -> None:
        """While watches are armed here: confirm the state every half of their smallest
        bound; give them up when it cannot be (module docstring)."""
        while self._bounds:
            pause = max(GUARD_FLOOR, min(self._bounds) / 2)
            fresh = self.gate.role.freshness
            try:
                if fresh is None:
                    raise TenureError("this server no longer follows the log")
                await fresh.within(pause, timeout=self.wait)
            except TenureError as error:
                self.give_up(f"this standby cannot keep its watches within their bound: {error}")
                return
            await asyncio.sleep(pause)

    def _disarm(self, session_id: int, watch_id: int) -> None:
        """Disarm one watch in the engine it was armed in (gone with its session: done)."""
        engine = self._engine
        if engine is not None and engine is self.host.engine:
            with contextlib.suppress(TenureError):
                arm_watch(engine, CancelWatch(session_id, watch_id))

    def _forget(self, watch_id: int) -> None:
        """Drop one route (its watch disarmed, or about to be)."""
        route = self._routes.pop(watch_id)
        self._bounds[route.staleness] -= 1
        if not self._bounds[route.staleness]:
            del self._bounds[route.staleness]
        armed = self._by_conn.get(route.conn)
        if armed is not None:
            armed.discard(watch_id)
            if not armed:
                del self._by_conn[route.conn]

    def _sweep(self) -> None:
        """Drop the routes of watches the engine disarmed by itself (their sessions
        ended): amortized, as the routes double."""
        engine = self._engine
        if engine is not None:
            for watch_id in [w for w, r in self._routes.items() if not _armed(engine, r, w)]:
                self._forget(watch_id)
        self._swept_at = len(self._routes)

    def _clear(self) -> None:
        self._routes.clear()
        self._by_conn.clear()
        self._bounds.clear()
        self._swept_at = 0


def _armed(engine: Engine, route: _Route, watch_id: int) -> bool:
    """Whether ``watch_id`` of ``route``'s session is still armed in ``engine``."""
    session = engine.sessions.get(route.session_id)
    return session is not None and watch_id in session.watches
