"""What each kind of deadline does when it comes due, and whether it still should. [compiled]

Deadlines are cancelled lazily (:mod:`tenure._core.deadlines`): an entry stays in
the heap when its plans change, so :func:`is_live` first asks whether the state
still matches it (the same session still detached with the same expiry, the same
waiter request, the same grant token, the same lock-delay end, the same claim and
end). Only a live
deadline reaches :func:`on_deadline`, which dispatches on the key's type.
"""

from __future__ import annotations

from typing import assert_never

from tenure._core.deadlines import (
    ClaimDeadline,
    DeadlineKey,
    LeaseDeadline,
    LockDelayDeadline,
    SessionDeadline,
    WaiterDeadline,
)
from tenure._core.effects import AcquireFailed, LeaseLost
from tenure._core.handlers.claims import claim_ended
from tenure._core.handlers.sessions import expire_session
from tenure._core.semaphore import Semaphore
from tenure._core.shared_steps import settle, start_lock_delay, tell_missed, withdraw_set
from tenure._core.state import EngineState
from tenure._core.watches import NOTHING, OWNERS, WAITERS
from tenure.errors import ErrorCode


def is_live(state: EngineState, when: float, key: DeadlineKey) -> bool:
    """Does a deadline scheduled for ``when`` still match the state (or did plans change)?

    None of a node frozen for a move is (``state.moving``): its deadlines are made
    afresh when it thaws or arrives (:mod:`tenure._core.node_moves`).
    """
    if state.moving and _of_frozen(state, key):
        return False
    match key:
        case SessionDeadline():
            session = state.sessions.get(key.session_id)
            return session is not None and session.expires_at == when
        case LockDelayDeadline():
            sem = _semaphore(state, key.node, key.semaphore)
            return sem is not None and sem.blocked_until == when
        case WaiterDeadline():
            sem = _semaphore(state, key.node, key.semaphore)
            waiter = None if sem is None else sem.waiter(key.holder)
            return waiter is not None and (waiter.request_id, waiter.deadline) == (
                key.request_id,
                when,
            )
        case LeaseDeadline():
            sem = _semaphore(state, key.node, key.semaphore)
            owner = None if sem is None else sem.owner(key.holder)
            return owner is not None and (owner.token, owner.lease_deadline) == (key.token, when)
        case ClaimDeadline():
            node = state.nodes.get(key.node)
            timer = None if node is None else node.claims.get(key.semaphore)
            return timer is not None and (timer.token, timer.ends_at) == (key.token, when)
        case _:
            assert_never(key)


def cost(state: EngineState, key: DeadlineKey) -> int:
    """Items of work a live deadline is, for a tick's budget: one, and for a session's
    end one more per semaphore it holds or waits for and per watch it has armed (what
    its end lets go, grants and tells).

    A measure, not a time (the engine is deterministic): it bounds how much of a mass
    expiry one slice of the host's event loop does (``Engine.tick``'s budget).
    """
    if type(key) is SessionDeadline:
        session = state.sessions[key.session_id]
        return 1 + len(session.held) + len(session.waits) + len(session.watches)
    return 1


def on_deadline(state: EngineState, key: DeadlineKey, now: float) -> None:
    """Handle a live deadline at its own time ``now``."""
    match key:
        case SessionDeadline():
            expire_session(state, state.sessions[key.session_id], now)
        case LockDelayDeadline():
            _end_lock_delay(state, key, now)
        case WaiterDeadline():
            _time_out_waiter(state, key, now)
        case LeaseDeadline():
            _expire_lease(state, key, now)
        case ClaimDeadline():
            claim_ended(state, key, now)
        case _:
            assert_never(key)


def _end_lock_delay(state: EngineState, key: LockDelayDeadline, now: float) -> None:
    node = state.nodes[key.node]
    sem = node.semaphores[key.semaphore]
    sem.blocked_until = 0.0
    settle(state, node, sem, now, NOTHING)


def _time_out_waiter(state: EngineState, key: WaiterDeadline, now: float) -> None:
    node = state.nodes[key.node]
    sem = node.semaphores[key.semaphore]
    waiter = sem.remove_waiter(key.holder)
    assert waiter is not None
    state.sessions[waiter.session_id].discard_wait(sem.name, waiter.hold, waiter.task)
    state.wait_ended(node, sem.name, waiter, ErrorCode.TIMEOUT, now)
    tell_missed(
        state,
        AcquireFailed(
            waiter.session_id,
            waiter.request_id,
            sem.name,
            ErrorCode.TIMEOUT,
            f"timed out waiting for {sem.name!r}",
            waiter.hold,
        ),
    )
    withdraw_set(
        state,
        node,
        waiter,
        ErrorCode.TIMEOUT,
        f"timed out waiting for {sem.name!r}",
        now,
        missed=True,
    )
    settle(state, node, sem, now, WAITERS)


def _expire_lease(state: EngineState, key: LeaseDeadline, now: float) -> None:
    node = state.nodes[key.node]
    sem = node.semaphores[key.semaphore]
    owner = sem.remove_owner(key.holder)
    assert owner is not None
    state.sessions[owner.session_id].discard_hold(sem.name, owner.hold)
    state.hold_ended(node, sem.name, owner, True, now)
    tell_missed(
        state,
        LeaseLost(
            owner.session_id,
            sem.name,
            owner.token,
            ErrorCode.LEASE_LOST,
            (
                f"lease on {sem.name!r} ended: held for its max_hold"
                if owner.ends is not None and now >= owner.ends
                else f"lease on {sem.name!r} expired without renewal"
            ),
            owner.hold,
        ),
    )
    start_lock_delay(state, node, sem, now)  # its holder may not know it lost it
    settle(state, node, sem, now, OWNERS)


def _of_frozen(state: EngineState, key: DeadlineKey) -> bool:
    """Whether ``key`` is a deadline of a node frozen for a move."""
    if isinstance(key, SessionDeadline):
        session = state.sessions.get(key.session_id)
        return session is not None and session.node in state.moving
    return key.node in state.moving


def _semaphore(state: EngineState, node_name: str, name: str) -> Semaphore | None:
    node = state.nodes.get(node_name)
    return None if node is None else node.semaphores.get(name)
