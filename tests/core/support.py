"""Shared helpers of the engine tests: building engines, sessions, and snapshots."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from tenure._core import (
    Acquire,
    AcquireFailed,
    AcquireResult,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeNode,
    DescribeSemaphore,
    Effect,
    Engine,
    Granted,
    LeaseLost,
    NodeConfig,
    OwnerInfo,
    SemaphoreDescription,
    SessionEnded,
    WatchFired,
)
from tenure._core.invariants import check_invariants

KEY = b"protection-key"
NODE = "n"

_request_ids = itertools.count(1000)


def make_engine(
    config: NodeConfig | None = None, *, node: str = NODE, max_nodes: int = 10_000
) -> Engine:
    """An engine with one node called ``node``."""
    engine = Engine(max_nodes=max_nodes)
    engine.apply(CreateNode(node, config if config is not None else NodeConfig()), 0.0)
    return engine


def open_session(
    engine: Engine,
    node: str = NODE,
    *,
    now: float = 0.0,
    timeout: float | None = None,
    key: bytes = KEY,
) -> int:
    """Create an attached session and return its id."""
    return engine.apply(CreateSession(node, key, timeout=timeout), now).session_id


def create_semaphore(
    engine: Engine, session_id: int, name: str, limit: int, *, data: bytes = b"", now: float = 0.0
) -> None:
    engine.apply(CreateSemaphore(session_id, name, limit, data), now)


def acquire(
    engine: Engine,
    session_id: int,
    name: str,
    count: int = 1,
    *,
    now: float = 0.0,
    request_id: int | None = None,
    data: bytes = b"",
    timeout: float | None = None,
    ephemeral: bool = False,
    lease_ttl: float | None = None,
    keep_place: bool = False,
    hold: int = 0,
    task: int = 0,
    max_hold: float | None = None,
) -> AcquireResult:
    """Apply an Acquire (with a fresh request id unless one is given)."""
    rid = next(_request_ids) if request_id is None else request_id
    return engine.apply(
        Acquire(
            session_id,
            name,
            count,
            rid,
            data=data,
            timeout=timeout,
            ephemeral=ephemeral,
            lease_ttl=lease_ttl,
            keep_place=keep_place,
            hold=hold,
            task=task,
            max_hold=max_hold,
        ),
        now,
    )


def describe(
    engine: Engine, session_id: int, name: str, *, now: float = 0.0
) -> SemaphoreDescription:
    """Full description (owners and waiters), arming no watch."""
    return engine.apply(
        DescribeSemaphore(session_id, name, owners=True, waiters=True), now
    ).description


def owners_of(engine: Engine, session_id: int, name: str) -> list[tuple[int, int]]:
    """(session_id, count) of every owner, in the order the engine lists them."""
    return [(o.session_id, o.count) for o in describe(engine, session_id, name).owners]


def owner(engine: Engine, observer: int, name: str, session_id: int) -> OwnerInfo:
    """The OwnerInfo of ``session_id`` on ``name``."""
    (info,) = [o for o in describe(engine, observer, name).owners if o.session_id == session_id]
    return info


def waiters_of(engine: Engine, session_id: int, name: str) -> list[tuple[int, int]]:
    """(session_id, count) of every waiter, in service order."""
    return [(w.session_id, w.count) for w in describe(engine, session_id, name).waiters]


def granted(effects: Iterable[Effect]) -> list[Granted]:
    return [e for e in effects if isinstance(e, Granted)]


def failed(effects: Iterable[Effect]) -> list[AcquireFailed]:
    return [e for e in effects if isinstance(e, AcquireFailed)]


def lost(effects: Iterable[Effect]) -> list[LeaseLost]:
    return [e for e in effects if isinstance(e, LeaseLost)]


def ended(effects: Iterable[Effect]) -> list[SessionEnded]:
    return [e for e in effects if isinstance(e, SessionEnded)]


def fired(effects: Iterable[Effect]) -> list[WatchFired]:
    return [e for e in effects if isinstance(e, WatchFired)]


def settled(engine: Engine) -> list[Effect]:
    """Check the invariants, then take the pending effects."""
    check_invariants(engine)
    return engine.take_effects()


def snapshot(engine: Engine) -> Any:
    """Everything observable about the engine, for before/after comparisons.

    Uses the public describes where they exist, and the state objects for what no
    command reports (deadlines, seq numbers, holds and waits bookkeeping).
    """
    nodes = {}
    for name, node in sorted(engine.nodes.items()):
        node_desc = engine.apply(DescribeNode(name), 0.0)
        sems = {}
        for sem_name, sem in sorted(node.semaphores.items()):
            sems[sem_name] = (
                sem.describe(owners=True, waiters=True),
                sem.blocked_until,
                tuple(
                    (o.hold, o.token, o.lease_ttl, o.lease_deadline, o.offer)
                    for o in sem.owners.values()
                ),
                tuple(
                    (w.session_id, w.hold, w.request_id, w.deadline, w.lease_ttl)
                    for w in sem.waiters.values()
                ),
            )
        claims = sorted((claim, repr(timer)) for claim, timer in node.claims.items())
        nodes[name] = (node_desc, sems, sorted(node.sessions), claims)
    sessions = {
        sid: (
            s.node,
            s.timeout,
            s.description,
            s.seq_no,
            s.expires_at,
            sorted((name, list(s.holds_on(name))) for name in s.held),
            sorted((name, list(s.waits_on(name))) for name in s.waits),
            sorted(s.watches),
            list(s.missed.items()),
        )
        for sid, s in sorted(engine.sessions.items())
    }
    return (
        nodes,
        sessions,
        engine.last_token,
        engine.last_session_id,
        engine.last_watch_id,
        engine.next_deadline(),
    )
