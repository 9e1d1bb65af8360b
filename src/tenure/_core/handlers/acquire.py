"""Acquire: take a semaphore's tokens now, queue for them, or answer BUSY.

The command with the most to check, where rule 1 of the engine shows most: all it
can fail on is checked before anything changes (its arguments, the semaphore's limit
and queue, the quotas and the memory budget, asked at once for all it makes, and a
deadlock its wait would close). Then it restates its hold's queued request in place
(``keep_place``) or supersedes it, and grants, queues or answers BUSY. The other
semaphore commands are :mod:`tenure._core.handlers.semaphores`'; several names at
once, all or none, :mod:`tenure._core.handlers.sets`'.
"""

from __future__ import annotations

from tenure._core import commands as c
from tenure._core.checks import check_acquire
from tenure._core.deadlines import WaiterDeadline
from tenure._core.deadlocks import refuse_deadlock
from tenure._core.effects import AcquireFailed
from tenure._core.name_stats import owner_name
from tenure._core.node import Node
from tenure._core.quotas import Q_DATA_BYTES, Q_HOLDS, Q_SEMAPHORES, Q_WAITERS, text_bytes
from tenure._core.semaphore import Owner, Semaphore, Waiter, holder_key
from tenure._core.shared_steps import grant, settle, withdraw_set
from tenure._core.state import EngineState
from tenure._core.values import (
    MAX_COUNT,
    check_duration,
    check_max_hold,
)
from tenure._core.watches import EXISTENCE, NOTHING, OWNERS, WAITERS
from tenure.errors import ErrorCode, LimitExceededError, NotFoundError


def acquire(state: EngineState, cmd: c.Acquire, now: float) -> c.AcquireResult:
    """Take ``count`` tokens now, queue for them, or answer BUSY (``timeout`` 0)."""
    session, node = state.lookup_session_node(cmd.session_id)
    name, count, data, timeout, hold, task = check_acquire(
        cmd.name, cmd.count, cmd.data, node.config.max_data_size, cmd.timeout, cmd.hold, cmd.task
    )
    if cmd.lease_ttl is not None:
        check_duration("lease_ttl", cmd.lease_ttl)
    # (Inline for the usual None: no call more on the mutex's hot path.)
    max_hold = None if cmd.max_hold is None else check_max_hold(cmd.max_hold)
    sid = session.session_id
    key = holder_key(sid, hold)
    sem = node.semaphores.get(name)
    if sem is None and not cmd.ephemeral:
        raise NotFoundError(f"semaphore {name!r} does not exist (create it or use ephemeral)")
    # What it makes, asked of the quotas each and of the memory budget at once (asked
    # apart, a new ephemeral semaphore and its hold would each pass where both do not).
    made = made_bytes = waits = holds = 0
    if sem is None:
        state.check_room(node)
        made = 1
    elif count > sem.limit:
        raise LimitExceededError(f"count {count} exceeds the limit {sem.limit} of {name!r}")
    elif timeout != 0 and sem.waiter(key) is None and not sem.can_grant_now(key, count, now):
        if sem.queue_length() >= node.config.max_waiters:
            raise LimitExceededError(
                f"max_waiters ({node.config.max_waiters}) reached on semaphore {name!r}"
            )
        waits = 1
    held = sem.owner(key) if sem is not None else None
    if held is None and (sem is None or sem.can_grant_now(key, count, now)):
        holds = 1  # (a new hold: the memory budget counts it)
    if data:  # (its hold's or its wait's data, in place of what that replaces)
        made_bytes += len(data) - _replaced(sem, key, count, now)
    # No quota and no budget, the usual case: no list made, no name's bytes counted.
    if state.ledger.limited and (made or waits or holds or made_bytes > 0):
        made_bytes += text_bytes(name) if made else 0  # (a new one's, with its name)
        state.check_all(
            session.usage,
            [
                (Q_SEMAPHORES, made),
                (Q_WAITERS, waits),
                (Q_HOLDS, holds),
                (Q_DATA_BYTES, made_bytes),
            ],
        )
    if task and timeout != 0 and sem is not None and not cmd.keep_place:
        _refuse_deadlock(state, node, sem, sid, hold, key, count, task, now)
    # Validated: from here on the command succeeds (rule 1).
    session.forget_missed(name, hold)  # asking again: the client settled the last one
    if sem is not None and cmd.keep_place:
        waiting = sem.waiter(key)
        owner = sem.owner(key)
        if (
            waiting is not None
            and count <= waiting.count
            and (owner is None or count > owner.count)  # (else a shrink: granted below)
            # A try that cannot be granted now gives the wait up (below), as YDB's does.
            and (timeout != 0 or (sem.is_head(key) and sem.fits(key, count, now)))
            and not (node.sets and waiting.order in node.sets)  # (a set's: superseded)
        ):
            return _restate_waiter(
                state, node, sem, waiting, cmd, count, data, timeout, max_hold, now
            )
    change = NOTHING
    if sem is None:
        sem = node.add_semaphore(
            Semaphore(name, MAX_COUNT, b"", ephemeral=True, usage=session.usage)
        )
        change = EXISTENCE
    superseded = sem.remove_waiter(key)
    if superseded is not None:
        session.discard_wait(name, hold, superseded.task)
        state.wait_ended(node, name, superseded, ErrorCode.CANCELLED, now)
        state.effects.append(
            AcquireFailed(
                sid,
                superseded.request_id,
                name,
                ErrorCode.CANCELLED,
                "superseded by a newer acquire",
                hold,
            )
        )
        withdraw_set(
            state, node, superseded, ErrorCode.CANCELLED, "superseded by a newer acquire", now
        )
        change |= WAITERS
    owner = sem.owner(key)
    if sem.can_grant_now(key, count, now):
        if owner is not None and count <= owner.count:
            # Shrink or restate a hold in place: same grant, same token.
            updated = Owner(
                sid,
                count,
                data,
                owner.token,
                owner.lease_ttl,
                owner.lease_deadline,
                hold,
                owner.since,
                owner.task,  # (the same grant: asked for by the task that asked then)
                usage=session.usage,
                ends=owner.ends,  # (the same grant: its max_hold's end stays)
            )
            updated.offer = owner.offer  # (a hand-off names the hold by its token: kept)
            sem.set_owner(updated)
            result = c.AcquireResult(c.AcquireStatus.GRANTED, owner.token, count, owner.lease_ttl)
            moved = (owner.count, owner.data) != (count, data)
        else:
            granted = grant(
                state,
                node,
                sem,
                sid,
                count,
                data,
                cmd.lease_ttl,
                now,
                hold,
                task,
                max_hold,
                owner,  # (the hold it replaces, looked up already)
                True,
            )
            result = c.AcquireResult(
                c.AcquireStatus.GRANTED, granted.token, count, granted.lease_ttl
            )
            moved = True
        if moved:
            change |= OWNERS
    elif timeout == 0:
        result = c.AcquireResult(c.AcquireStatus.BUSY)
    else:
        deadline = None if timeout is None else now + timeout
        state.last_order += 1
        sem.enqueue(
            Waiter(
                sid,
                cmd.request_id,
                count,
                data,
                deadline,
                cmd.lease_ttl,
                hold,
                now,
                state.last_order,
                timeout,
                task,
                max_hold,
                usage=session.usage,
            )
        )
        # The semaphore's own name object, not the command's: a wait on a long name
        # would otherwise keep one more copy of it (twice, with its deadline).
        session.add_wait(sem.name, hold, task)
        state.name_stats.queued_on(node.name, sem.name, owner_name(session.usage), now)
        if deadline is not None:
            state.deadlines.schedule(
                deadline, WaiterDeadline(node.name, sem.name, key, cmd.request_id)
            )
        result = c.AcquireResult(c.AcquireStatus.QUEUED)
        change |= WAITERS
    settle(state, node, sem, now, change)
    return result


def _replaced(sem: Semaphore | None, key: int, count: int, now: float) -> int:
    """The data bytes an acquire's data replaces: its hold's earlier request's (which
    it supersedes or restates), and its hold's if granted at once (a queued upgrade
    keeps its hold, and its data, beside the new request's)."""
    if sem is None:
        return 0
    waiting = sem.waiter(key)
    held = sem.owner(key)
    replaced = 0 if waiting is None else len(waiting.data)
    if held is not None and sem.can_grant_now(key, count, now):
        replaced += len(held.data)  # (granted: the new hold replaces it)
    return replaced


def _refuse_deadlock(
    state: EngineState,
    node: Node,
    sem: Semaphore,
    sid: int,
    hold: int,
    key: int,
    count: int,
    task: int,
    now: float,
) -> None:
    """DeadlockError if the request would wait (as :meth:`Semaphore.can_grant_now`
    decides once its hold's earlier request is superseded) and close a deadlock."""
    owner = sem.owner(key)
    if owner is not None and count <= owner.count:
        return  # a restate in place: granted at once
    replaced = sem.waiter(key)
    if sem.queue_length() - (replaced is not None) == 0 and sem.fits(key, count, now):
        return  # granted at once
    place = None if replaced is None else (sem.name, hold)
    refuse_deadlock(state, node, sid, task, [(sem, key, count)], place, now)


def _restate_waiter(
    state: EngineState,
    node: Node,
    sem: Semaphore,
    waiting: Waiter,
    cmd: c.Acquire,
    count: int,
    data: bytes,
    timeout: float | None,
    max_hold: float | None,
    now: float,
) -> c.AcquireResult:
    """``cmd`` restates the queued request ``waiting`` in place (``keep_place``).

    It keeps its place and its arrival (``since``, ``order``); it takes the new
    count, data, timeout, lease TTL, max_hold and request id. The request it replaces ends
    superseded; at the head, it is granted at once if it now fits (nothing behind it
    is passed: the queue stays first in, first out).
    """
    sid, hold = waiting.session_id, waiting.hold
    if waiting.request_id != cmd.request_id:
        state.effects.append(
            AcquireFailed(
                sid,
                waiting.request_id,
                sem.name,
                ErrorCode.CANCELLED,
                "superseded by a newer acquire",
                hold,
            )
        )
    deadline = None if timeout is None else now + timeout
    restated = Waiter(
        sid,
        cmd.request_id,
        count,
        data,
        deadline,
        cmd.lease_ttl,
        hold,
        waiting.since,
        waiting.order,
        timeout,
        cmd.task,
        max_hold,
        usage=waiting.usage,
    )
    sem.restate_waiter(restated)
    if restated.task != waiting.task:  # (the session's index of its tasks' waits)
        session = state.sessions[sid]
        session.discard_wait(sem.name, hold, waiting.task)
        session.add_wait(sem.name, hold, restated.task)
    if sem.is_head(waiting.key) and sem.fits(waiting.key, count, now):
        sem.remove_waiter(waiting.key)
        state.sessions[sid].discard_wait(sem.name, hold, restated.task)
        granted = grant(
            state,
            node,
            sem,
            sid,
            count,
            data,
            cmd.lease_ttl,
            now,
            hold,
            restated.task,
            max_hold,
            waited=max(0.0, now - waiting.since),
        )
        settle(state, node, sem, now, OWNERS | WAITERS)
        return c.AcquireResult(c.AcquireStatus.GRANTED, granted.token, count, granted.lease_ttl)
    if deadline is not None:
        state.deadlines.schedule(
            deadline, WaiterDeadline(node.name, sem.name, waiting.key, cmd.request_id)
        )
    changed = (waiting.count, waiting.data) != (count, data)
    settle(state, node, sem, now, WAITERS if changed else NOTHING)
    return c.AcquireResult(c.AcquireStatus.QUEUED)
