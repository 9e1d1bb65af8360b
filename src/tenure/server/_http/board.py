"""What the dashboard shows: a bounded view of the engine, as JSON-ready data.

:func:`board` reads the engine the server runs, on its event loop between two steps
(as ``/metrics`` does), never through a client connection. Every part is bounded by
a :class:`BoardLimits` (the ``--dashboard-max-*`` settings): the first nodes by name,
the first semaphores of each by name, the first sessions by id, the first owners and
waiters of each semaphore in grant and queue order; each list comes with its total,
so the page says "20 of 3000". Only the nodes ``may_see`` allows are shown (a token
limited to some nodes does not learn the others' names, as with ListNodes).

Times leave as UNIX seconds (the engine keeps them on the monotonic clock:
:mod:`tenure._core.stamps`), as instants rather than ages, so that a view of an
unchanged state is the same bytes: the server pushes a view only when it changed,
and the page works out "held for" and "expires in" from its own clock.

:class:`RateMeter` turns the server's own counters (grants made, sessions ended by
expiry) into rates per second over the last :data:`RATE_WINDOW` seconds.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Final, TypeVar

from prometheus_client.metrics_core import Metric

from tenure._core import Engine
from tenure._core.semaphore import Owner, Semaphore, Waiter
from tenure._core.session import Session
from tenure._core.values import MAX_COUNT, ClientIdentity
from tenure.server._config.serve_config import ServeConfig

__all__ = ["RATE_SAMPLE_INTERVAL", "RATE_WINDOW", "BoardLimits", "RateMeter", "board", "counters"]

#: The rates shown are averages over this many seconds.
RATE_WINDOW: Final = 10.0
#: How often the counters are sampled for the rates, in seconds.
RATE_SAMPLE_INTERVAL: Final = 1.0
#: Samples a :class:`RateMeter` keeps at most (old ones drop out before: a window's worth).
MAX_RATE_SAMPLES: Final = 1024

T = TypeVar("T")

#: JSON-ready data: what :func:`board` returns.
Json = dict[str, object]


@dataclass(frozen=True, slots=True)
class BoardLimits:
    """How much of the engine one view shows (the ``--dashboard-max-*`` settings)."""

    max_nodes: int = 50
    max_semaphores: int = 100
    max_sessions: int = 100
    max_holders: int = 20

    @classmethod
    def of(cls, config: ServeConfig) -> BoardLimits:
        """The limits ``config`` sets."""
        return cls(
            max_nodes=config.dashboard_max_nodes,
            max_semaphores=config.dashboard_max_semaphores,
            max_sessions=config.dashboard_max_sessions,
            max_holders=config.dashboard_max_holders,
        )


def board(
    engine: Engine,
    *,
    now: float,
    shift: float,
    limits: BoardLimits,
    may_see: Callable[[str], bool],
    may_kill: Callable[[str], bool],
) -> Json:
    """The view of ``engine`` (module docstring).

    ``now`` is the engine's clock now, ``shift`` what makes an engine time UNIX
    seconds (:meth:`tenure._runtime.host.EngineHost.wall_shift`); ``may_kill(node)``
    says whether the viewer may end the node's sessions (the page offers it then).
    """
    visible = [name for name in engine.nodes if may_see(name)]
    nodes = []
    for name in heapq.nsmallest(limits.max_nodes, visible):
        node = engine.nodes[name]
        semaphores = node.semaphores
        sem_names = heapq.nsmallest(limits.max_semaphores, semaphores)
        session_ids = heapq.nsmallest(limits.max_sessions, node.sessions)
        nodes.append(
            {
                "name": name,
                "can_kill": may_kill(name),
                "semaphores_total": len(semaphores),
                "semaphores": [
                    _semaphore(semaphores[s], engine, shift, limits.max_holders) for s in sem_names
                ],
                "sessions_total": len(node.sessions),
                "sessions": [_session(engine.sessions[i], now, shift) for i in session_ids],
            }
        )
    return {"nodes_total": len(visible), "nodes": nodes}


def _semaphore(sem: Semaphore, engine: Engine, shift: float, max_holders: int) -> Json:
    owners = sem.owners
    waiters = sem.waiters
    return {
        "name": sem.name,
        # A mutex (and an election) takes every token of a semaphore of limit MAX_COUNT:
        # shown as "exclusive", held or free, not as a count near 2**64.
        "exclusive": sem.limit == MAX_COUNT,
        "limit": sem.limit,
        "count": sem.count,
        "ephemeral": sem.ephemeral,
        "owners_total": len(owners),
        "owners": [
            _holder(o, engine, shift, token=o.token) for o in _first(owners.values(), max_holders)
        ],
        "waiters_total": len(waiters),
        "waiters": [_holder(w, engine, shift) for w in _first(waiters.values(), max_holders)],
    }


def _holder(held: Owner | Waiter, engine: Engine, shift: float, token: int | None = None) -> Json:
    session = engine.sessions.get(held.session_id)
    info: Json = {
        "session_id": held.session_id,
        "count": held.count,
        "description": session.description if session is not None else "",
        "identity": _identity(session.identity if session is not None else None),
        "since": held.since + shift,
    }
    if token is not None:
        info["token"] = token
    return info


def _session(session: Session, now: float, shift: float) -> Json:
    expires_at = session.expires_at
    return {
        "session_id": session.session_id,
        "description": session.description,
        "identity": _identity(session.identity),
        "timeout": session.timeout,
        "created_at": session.created_at + shift,
        # None while a connection keeps it; else when the server will end it (UNIX s).
        "expires_at": None if expires_at is None else max(expires_at, now) + shift,
        "holds": sum(1 for name in session.held for _ in session.holds_on(name)),
        "waits": sum(1 for name in session.waits for _ in session.waits_on(name)),
    }


def _identity(identity: ClientIdentity | None) -> Json:
    if identity is None:
        return {"host": "", "pid": 0, "name": ""}
    return {"host": identity.host, "pid": identity.pid, "name": identity.name}


def _first(items: Iterable[T], count: int) -> Iterator[T]:
    for index, item in enumerate(items):
        if index >= count:
            return
        yield item


def counters(families: Iterable[Metric]) -> tuple[float, float]:
    """(grants made, sessions ended by expiry) so far, from the server's own metrics
    (:meth:`tenure.server._http.metrics.ServerMetrics.collect`)."""
    grants = expired = 0.0
    for family in families:
        for sample in family.samples:
            if sample.name == "tenure_grant_wait_seconds_count":
                grants = sample.value
            elif (
                sample.name == "tenure_sessions_ended_total"
                and sample.labels.get("reason") == "session_expired"
            ):
                expired = sample.value
    return grants, expired


class RateMeter:
    """Rates per second of counters sampled every :data:`RATE_SAMPLE_INTERVAL` (by the
    dashboard's sampler, from the server's start), averaged over :data:`RATE_WINDOW`."""

    def __init__(self, window: float = RATE_WINDOW) -> None:
        self.window = window
        self._samples: deque[tuple[float, float, float]] = deque(maxlen=MAX_RATE_SAMPLES)

    def sample(self, at: float, grants: float, expired: float) -> None:
        """Record the counters at monotonic time ``at`` (forgetting samples that no
        longer count: one at or before the window's start is kept, so that the
        rates span the whole window once they can)."""
        samples = self._samples
        samples.append((at, grants, expired))
        while len(samples) > 1 and samples[1][0] <= at - self.window:
            samples.popleft()

    def rates(self) -> tuple[float, float]:
        """(grants, expiries) per second from the oldest sample kept to the newest
        (0 before there are two)."""
        if len(self._samples) < 2:
            return 0.0, 0.0
        first_at, first_grants, first_expired = self._samples[0]
        at, grants, expired = self._samples[-1]
        span = at - first_at
        if span <= 0:
            return 0.0, 0.0
        return (grants - first_grants) / span, (expired - first_expired) / span
