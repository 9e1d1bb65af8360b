"""Engine snapshots, and resuming an engine in a new process.

:func:`dump` turns the engine's state into plain data (dicts, lists, str, bytes,
int, float, bool, None: msgpack and the like carry it as it is); :func:`load`
builds an equal engine from it. :func:`dump_node` takes one node's part alone (what a
move between cells carries: :mod:`tenure._core.node_moves`). Watches are not part of
a snapshot: they belong to connections, and a client re-arms them (reading the latest
state) when it re-attaches.

Times inside an engine are on its host's monotonic clock, which starts afresh in a
new process. :func:`resume` moves a loaded engine onto the new clock, keeping the
promises a restart must keep:

* the fencing counter continues (rule 3: tokens never repeat or go backwards);
* every session gets a fresh recovery window from the restart, detached until its
  client re-attaches (nobody's session ends because the server was down);
* every lease TTL starts afresh (a holder could not renew while the server was down);
* acquire timeouts, lock-delays, claims and max_holds keep the time they had left (a
  claim's ``at_least`` and its end both move by the downtime, as a lock-delay's end
  and a grant's max_hold end do; a lease's new deadline is never after that end);
* sessions' creation times and owners' and waiters' since-times move with the
  clock, as if no time passed while the server was down (a monotonic clock cannot
  tell how long that was), so an age shown after a restart leaves the downtime out.

The layout and its versions are :mod:`tenure._core.snapshot_layout`'s; loading,
every version of it, :mod:`tenure._core.snapshot_load`'s (re-exported here).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from tenure._core.deadlines import (
    ClaimDeadline,
    Deadlines,
    LeaseDeadline,
    LockDelayDeadline,
    SessionDeadline,
    WaiterDeadline,
)
from tenure._core.effects import AcquireFailed
from tenure._core.engine import Engine
from tenure._core.node import Node
from tenure._core.ownership import dump_owners
from tenure._core.session import Session
from tenure._core.snapshot_layout import (
    CLAIM_FIELDS,
    MISSED_FAILED,
    MISSED_FIELDS,
    MISSED_LOST,
    OWNER_FIELDS,
    SEMAPHORE_FIELDS,
    SESSION_FIELDS,
    SNAPSHOT_VERSION,
    V4_OWNER_FIELDS,
    V4_SESSION_FIELDS,
    V4_WAITER_FIELDS,
    V6_WAITER_FIELDS,
    WAITER_FIELDS,
    Plain,
)
from tenure._core.snapshot_load import load
from tenure._core.stored_config import config_to_stored

#: The bits of a holder key that are its session id (holder_key).
_SESSION_BITS = (1 << 64) - 1


def dump(engine: Engine) -> Plain:
    """The engine's state as plain data (see the module docstring)."""
    plain = _dump(
        engine, engine.nodes.values(), engine.sessions.values(), dump_owners(engine), engine.now
    )
    if engine.moving:  # (the nodes frozen for a move: none in most snapshots)
        plain["moving"] = [[node, cell, since] for node, (cell, since) in engine.moving.items()]
    return plain


def dump_node(engine: Engine, name: str, at: float | None = None) -> Plain:
    """A snapshot of the node ``name`` alone: the node, its sessions, what they hold
    and wait for, their owners, and the engine's counters (its fencing counter: a
    mark above every token the node has had), as :func:`load` reads it; its time is
    ``at`` (None: the engine's), from which a :func:`resume` counts what each timer
    has left (a frozen node's: the time it froze).

    Raises:
        NotFoundError: there is no node ``name``.
    """
    node = engine.lookup_node(name)
    sessions = [engine.sessions[sid] for sid in sorted(node.sessions)]
    now = engine.now if at is None else at
    return _dump(engine, (node,), sessions, dump_owners(engine, (node,), sessions), now)


def _dump(
    engine: Engine,
    nodes: Iterable[Node],
    of_sessions: Iterable[Session],
    owners: Plain,
    now: float,
) -> Plain:
    sessions: list[object] = []
    missed: list[object] = []
    for s in of_sessions:
        sessions += (
            s.session_id,
            s.node,
            s.timeout,
            s.description,
            s.key_digest,
            s.seq_no,
            s.expires_at,
            s.identity.host,
            s.identity.pid,
            s.identity.name,
            s.created_at,
        )
        for e in s.missed.values():
            if isinstance(e, AcquireFailed):
                missed += (
                    e.session_id,
                    MISSED_FAILED,
                    e.name,
                    e.request_id,
                    int(e.code),
                    e.message,
                    e.hold,
                )
            else:
                missed += (
                    e.session_id,
                    MISSED_LOST,
                    e.name,
                    e.token,
                    int(e.code),
                    e.message,
                    e.hold,
                )
    return {
        "version": SNAPSHOT_VERSION,
        "now": now,
        "max_nodes": engine.max_nodes,
        "last_token": engine.last_token,
        "last_session_id": engine.last_session_id,
        "last_watch_id": engine.last_watch_id,
        "last_order": engine.last_order,
        "nodes": [_dump_node(node) for node in nodes],
        "sessions": sessions,
        "missed": missed,
        "owners": owners,
    }


def _dump_node(node: Node) -> Plain:
    semaphores: list[object] = []
    owners: list[object] = []
    waiters: list[object] = []
    owner_tasks: list[int] = []
    waiter_tasks: list[int] = []
    offers: list[object] = []
    for sem in node.semaphores.values():
        held, queued = sem.owners, sem.waiters
        semaphores += (
            sem.name,
            sem.limit,
            sem.data,
            sem.ephemeral,
            sem.blocked_until,
            len(held),
            len(queued),
        )
        for o in held.values():
            owners += (
                o.session_id,
                o.count,
                o.data,
                o.token,
                o.lease_ttl,
                o.lease_deadline,
                o.hold,
                o.since,
            )
            owner_tasks.append(o.task)
            if o.offer is not None:  # (a hand-off offered: rare, so a list of its own)
                offers += (sem.name, o.session_id, o.hold, o.offer)
        for w in queued.values():
            waiters += (
                w.session_id,
                w.request_id,
                w.count,
                w.data,
                w.deadline,
                w.lease_ttl,
                w.hold,
                w.since,
                w.order,
                w.timeout,
            )
            waiter_tasks.append(w.task)
    plain: Plain = {
        "name": node.name,
        "config": config_to_stored(node.config),  # the names snapshots always had
        "semaphores": semaphores,
        "owners": owners,
        "waiters": waiters,
    }
    if any(owner_tasks) or any(waiter_tasks):  # (else every task 0: no key at all)
        plain["tasks"] = [owner_tasks, waiter_tasks]
    if offers:
        plain["offers"] = offers
    bounds = _bounds(node)
    if bounds is not None:
        plain["max_holds"] = bounds
    if node.annex:  # (most nodes have none: no key at all for them)
        plain["annex"] = dict(node.annex)
    if node.sets:
        # (a holder key of a hold above 0 is wider than msgpack's 64 bits: the
        # session id, then each member's name and hold number). "groups": the sets'
        # old name, kept for the snapshots written with it.
        plain["groups"] = [
            [order, members[0][1] & _SESSION_BITS, [p for n, k in members for p in (n, k >> 64)]]
            for order, members in node.sets.items()
        ]
    if node.claims:
        plain["claims"] = [
            value
            for name, t in node.claims.items()
            for value in (name, t.claim_id, t.token, t.least_until, t.ends_at)
        ]
    return plain


def _bounds(node: Node) -> list[list[float | None]] | None:
    """The node's max_holds (version 11): each owner's end (engine time) and each
    waiter's max_hold (seconds), None where there is none, in the order ``owners``
    and ``waiters`` list them; None where there is none at all (no key)."""
    owner_ends: list[float | None] = []
    waiter_bounds: list[float | None] = []
    for sem in node.semaphores.values():
        owner_ends += (o.ends for o in sem.owners.values())
        waiter_bounds += (w.max_hold for w in sem.waiters.values())
    if all(end is None for end in owner_ends) and all(b is None for b in waiter_bounds):
        return None
    return [owner_ends, waiter_bounds]


def resume(engine: Engine, now: float) -> None:
    """Move a loaded engine onto a new process's clock, whose time is ``now``.

    See the module docstring for what each kind of deadline becomes; the statistics
    per name (not state) start afresh. The deadline
    heap is rebuilt in the same walk that moves the times (as
    :meth:`~tenure._core.state.EngineState.reschedule_all` would, in its order):
    a restart walks a hundred thousand semaphores once, not twice.
    """
    shift = now - engine.now
    engine.name_stats.clear()  # (not state: counted afresh on the new clock)
    deadlines = Deadlines()
    moved_from, moved_to = None, 0.0
    for session in engine.sessions.values():
        session.expires_at = now + session.timeout
        session.created_at += shift
        deadlines.schedule(session.expires_at, SessionDeadline(session.session_id))
    for node in engine.nodes.values():
        if node.granted_at is not None:  # (a replay's grants: the clock moves under them)
            node.granted_at += shift
        for name, timer in node.claims.items():
            timer.least_until += shift
            timer.ends_at += shift
            deadlines.schedule(timer.ends_at, ClaimDeadline(node.name, name, timer.token))
        for sem in node.semaphores.values():
            sem.blocked_until = sem.blocked_until + shift if sem.blocked_until > engine.now else 0.0
            if sem.blocked_until:
                deadlines.schedule(sem.blocked_until, LockDelayDeadline(node.name, sem.name))
            if sem.queue_length():
                for waiter in sem.waiters.values():
                    waiter.since += shift
                    if waiter.deadline is not None:
                        waiter.deadline += shift
                        key = WaiterDeadline(node.name, sem.name, waiter.key, waiter.request_id)
                        deadlines.schedule(waiter.deadline, key)
            for owner in sem.each_owner():
                if owner.since is not moved_from:  # (a run of one instant stays one float)
                    moved_from, moved_to = owner.since, owner.since + shift
                owner.since = moved_to
                ttl, ends = owner.lease_ttl, owner.ends
                if ends is not None:  # (a max_hold keeps the time it had left)
                    ends = owner.ends = ends + shift
                if ttl is not None or ends is not None:
                    deadline = min(
                        now + ttl if ttl is not None else math.inf,
                        ends if ends is not None else math.inf,
                    )
                    owner.lease_deadline = deadline
                    lease = LeaseDeadline(node.name, sem.name, owner.key, owner.token)
                    deadlines.schedule(deadline, lease)
    if engine.moving:  # (a frozen node's time of freezing, on the new clock too)
        engine.moving = {
            node: (cell, since + shift) for node, (cell, since) in engine.moving.items()
        }
    engine.now = now
    engine.deadlines = deadlines


__all__ = [
    "CLAIM_FIELDS",
    "MISSED_FAILED",
    "MISSED_FIELDS",
    "MISSED_LOST",
    "OWNER_FIELDS",
    "Plain",
    "SEMAPHORE_FIELDS",
    "SESSION_FIELDS",
    "SNAPSHOT_VERSION",
    "V4_OWNER_FIELDS",
    "V4_SESSION_FIELDS",
    "V4_WAITER_FIELDS",
    "V6_WAITER_FIELDS",
    "WAITER_FIELDS",
    "dump",
    "dump_node",
    "load",
    "resume",
]
