"""Semaphore commands: create, acquire, release, cancel, renew, update, delete.

Rule 1 of the engine shows most here: each handler checks everything it can fail
on before it changes anything.
"""

from __future__ import annotations

from tenure._core import commands as c
from tenure._core.deadlines import LeaseDeadline, WaiterDeadline
from tenure._core.deadlocks import refuse_deadlock
from tenure._core.effects import AcquireFailed, LeaseLost
from tenure._core.quotas import Q_DATA_BYTES, Q_HOLDS, Q_SEMAPHORES, Q_WAITERS, text_bytes
from tenure._core.semaphore import Owner, Semaphore, Waiter, holder_key
from tenure._core.state import EngineState, Node
from tenure._core.values import (
    MAX_COUNT,
    check_count,
    check_data,
    check_duration,
    check_hold,
    check_name,
    check_task,
    check_timeout,
)
from tenure._core.watches import DATA, EXISTENCE, NOTHING, OWNERS, WAITERS
from tenure.errors import (
    AlreadyExistsError,
    ErrorCode,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)


def create_semaphore(state: EngineState, cmd: c.CreateSemaphore, now: float) -> None:
    """Create a (persistent) semaphore with a limit and data."""
    session, node = state.lookup_session_node(cmd.session_id)
    name = check_name("semaphore", cmd.name)
    limit = check_count(cmd.limit, what="limit")
    data = check_data("semaphore data", cmd.data, node.config.max_data_size)
    if name in node.semaphores:
        raise AlreadyExistsError(f"semaphore {name!r} already exists")
    state.check_room(node)
    usage = session.usage  # (its owner: its session's)
    state.check_made(usage, Q_SEMAPHORES, text_bytes(name) + len(data))  # (its name too)
    sem = node.add_semaphore(Semaphore(name, limit, data, ephemeral=False, usage=usage))
    state.fire_watches(node, sem.name, EXISTENCE)


def acquire(state: EngineState, cmd: c.Acquire, now: float) -> c.AcquireResult:
    """Take ``count`` tokens now, queue for them, or answer BUSY (``timeout`` 0)."""
    session, node = state.lookup_session_node(cmd.session_id)
    name = check_name("semaphore", cmd.name)
    count = check_count(cmd.count)
    data = check_data("owner data", cmd.data, node.config.max_data_size)
    timeout = check_timeout(cmd.timeout)
    hold = check_hold(cmd.hold)
    task = check_task(cmd.task)
    if cmd.lease_ttl is not None:
        check_duration("lease_ttl", cmd.lease_ttl)
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
        made, made_bytes = 1, text_bytes(name)  # (with its name)
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
    ledger = state.ledger  # (no quota and no budget, the usual case: no list made)
    if (ledger.quotas or ledger.budget) and (made or waits or holds or made_bytes > 0):
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
            return _restate_waiter(state, node, sem, waiting, cmd, count, data, timeout, now)
    change = NOTHING
    if sem is None:
        sem = node.add_semaphore(
            Semaphore(name, MAX_COUNT, b"", ephemeral=True, usage=session.usage)
        )
        change = EXISTENCE
    superseded = sem.remove_waiter(key)
    if superseded is not None:
        session.discard_wait(name, hold, superseded.task)
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
        state.withdraw_set(
            node, superseded, ErrorCode.CANCELLED, "superseded by a newer acquire", now
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
            )
            sem.set_owner(updated)
            result = c.AcquireResult(c.AcquireStatus.GRANTED, owner.token, count, owner.lease_ttl)
            moved = (owner.count, owner.data) != (count, data)
        else:
            granted = state.grant(node, sem, sid, count, data, cmd.lease_ttl, now, hold, task)
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
                usage=session.usage,
            )
        )
        # The semaphore's own name object, not the command's: a wait on a long name
        # would otherwise keep one more copy of it (twice, with its deadline).
        session.add_wait(sem.name, hold, task)
        if deadline is not None:
            state.deadlines.schedule(
                deadline, WaiterDeadline(node.name, sem.name, key, cmd.request_id)
            )
        result = c.AcquireResult(c.AcquireStatus.QUEUED)
        change |= WAITERS
    state.settle(node, sem, now, change)
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
    now: float,
) -> c.AcquireResult:
    """``cmd`` restates the queued request ``waiting`` in place (``keep_place``).

    It keeps its place and its arrival (``since``, ``order``); it takes the new
    count, data, timeout, lease TTL and request id. The request it replaces ends
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
        granted = state.grant(node, sem, sid, count, data, cmd.lease_ttl, now, hold, restated.task)
        state.settle(node, sem, now, OWNERS | WAITERS)
        return c.AcquireResult(c.AcquireStatus.GRANTED, granted.token, count, granted.lease_ttl)
    if deadline is not None:
        state.deadlines.schedule(
            deadline, WaiterDeadline(node.name, sem.name, waiting.key, cmd.request_id)
        )
    changed = (waiting.count, waiting.data) != (count, data)
    state.settle(node, sem, now, WAITERS if changed else NOTHING)
    return c.AcquireResult(c.AcquireStatus.QUEUED)


def release(state: EngineState, cmd: c.Release, now: float) -> bool:
    """Give back the hold's tokens and drop its waiter; False if it had neither."""
    session, node = state.lookup_session_node(cmd.session_id)
    name = check_name("semaphore", cmd.name)
    hold = check_hold(cmd.hold)
    session.forget_missed(name, hold)  # its client is done with it, however it ended
    sem = node.semaphores.get(name)
    if sem is None:
        return False
    sid = session.session_id
    key = holder_key(sid, hold)
    waiter = sem.remove_waiter(key)
    if waiter is not None:
        session.discard_wait(sem.name, hold, waiter.task)
        state.effects.append(
            AcquireFailed(
                sid,
                waiter.request_id,
                sem.name,
                ErrorCode.CANCELLED,
                "released while waiting",
                hold,
            )
        )
        state.withdraw_set(node, waiter, ErrorCode.CANCELLED, "released while waiting", now)
    owner = sem.remove_owner(key)
    if owner is not None:
        session.discard_hold(sem.name, hold)
    change = (NOTHING if owner is None else OWNERS) | (NOTHING if waiter is None else WAITERS)
    state.settle(node, sem, now, change)
    return owner is not None or waiter is not None


def cancel_acquire(state: EngineState, cmd: c.CancelAcquire, now: float) -> bool:
    """Withdraw the hold's queued acquire ``request_id``; False if it is not queued."""
    session, node = state.lookup_session_node(cmd.session_id)
    sem = node.semaphores.get(check_name("semaphore", cmd.name))
    hold = check_hold(cmd.hold)
    key = holder_key(session.session_id, hold)
    waiter = None if sem is None else sem.waiter(key)
    if sem is None or waiter is None or waiter.request_id != cmd.request_id:
        return False
    sem.remove_waiter(key)
    session.discard_wait(sem.name, hold, waiter.task)
    state.effects.append(
        AcquireFailed(
            session.session_id,
            cmd.request_id,
            sem.name,
            ErrorCode.CANCELLED,
            "acquire cancelled",
            hold,
        )
    )
    state.withdraw_set(node, waiter, ErrorCode.CANCELLED, "acquire cancelled", now)
    state.settle(node, sem, now, WAITERS)
    return True


def renew(state: EngineState, cmd: c.Renew, now: float) -> float:
    """Restart the lease of the hold's grant (optionally with a new TTL); reply the TTL."""
    session, node = state.lookup_session_node(cmd.session_id)
    sem = node.semaphores.get(check_name("semaphore", cmd.name))
    key = holder_key(session.session_id, check_hold(cmd.hold))
    owner = None if sem is None else sem.owner(key)
    if owner is None:
        raise NotFoundError(f"session {session.session_id} holds no tokens of {cmd.name!r}")
    if owner.lease_ttl is None:
        # A grant without a TTL lasts as long as its session; renewing must not
        # silently turn it into a timed one.
        raise PreconditionFailedError(f"the grant of {cmd.name!r} has no lease TTL to renew")
    ttl = owner.lease_ttl
    if cmd.lease_ttl is not None:
        ttl = check_duration("lease_ttl", cmd.lease_ttl)
    owner.lease_ttl, owner.lease_deadline = ttl, now + ttl
    state.deadlines.schedule(
        owner.lease_deadline, LeaseDeadline(node.name, cmd.name, key, owner.token)
    )
    return ttl


def update_semaphore(state: EngineState, cmd: c.UpdateSemaphore, now: float) -> None:
    """Replace the semaphore's data (watches on data fire if it changed)."""
    _, node = state.lookup_session_node(cmd.session_id)
    sem = state.lookup_semaphore(node, cmd.name)
    data = check_data("semaphore data", cmd.data, node.config.max_data_size)
    if data != sem.data:
        state.check_quota(sem.usage, Q_DATA_BYTES, len(data) - len(sem.data))
        sem.set_data(data)
        state.fire_watches(node, sem.name, DATA)


def swap_semaphore_data(state: EngineState, cmd: c.SwapSemaphoreData, now: float) -> bool:
    """Replace the semaphore's data if it is ``expected`` now; whether it did.

    The new data is checked even when the swap does not happen: a bad argument is
    an error whatever the state, not a False that a retry loop would repeat.
    """
    _, node = state.lookup_session_node(cmd.session_id)
    sem = state.lookup_semaphore(node, cmd.name)
    data = check_data("semaphore data", cmd.data, node.config.max_data_size)
    if sem.data != cmd.expected:
        return False
    if data != sem.data:
        state.check_quota(sem.usage, Q_DATA_BYTES, len(data) - len(sem.data))
        sem.set_data(data)
        state.fire_watches(node, sem.name, DATA)
    return True


def delete_semaphore(state: EngineState, cmd: c.DeleteSemaphore, now: float) -> None:
    """Remove a semaphore; with ``force``, fail its waiters and take its grants."""
    _, node = state.lookup_session_node(cmd.session_id)
    sem = state.lookup_semaphore(node, cmd.name)
    if not sem.is_idle() and not cmd.force:
        raise PreconditionFailedError(
            f"semaphore {sem.name!r} has {len(sem.owners)} owner(s) and "
            f"{len(sem.waiters)} waiter(s); use force=True"
        )
    node.claims.pop(sem.name, None)  # (a claim's semaphore deleted: the claim is over)
    remove_semaphore(state, node, sem, f"semaphore {sem.name!r} was deleted", now)


def remove_semaphore(
    state: EngineState, node: Node, sem: Semaphore, message: str, now: float
) -> None:
    """Delete ``sem`` as a forced delete does: its waiters fail with NOT_FOUND and its
    owners lose their grants (each told ``message``), then its watches fire."""
    gone = list(sem.waiters.values())
    for w in gone:
        sem.remove_waiter(w.key)
        state.sessions[w.session_id].discard_wait(sem.name, w.hold, w.task)
        state.tell_missed(
            AcquireFailed(
                w.session_id, w.request_id, sem.name, ErrorCode.NOT_FOUND, message, w.hold
            )
        )
    # Every waiter has left first: an all-or-none request with a member here ends
    # whole, and serving another queue meanwhile must not grant one that still waits.
    for w in gone:
        state.withdraw_set(node, w, ErrorCode.NOT_FOUND, message, now, missed=True)
    for o in list(sem.owners.values()):
        state.sessions[o.session_id].discard_hold(sem.name, o.hold)
        state.tell_missed(
            LeaseLost(o.session_id, sem.name, o.token, ErrorCode.LEASE_LOST, message, o.hold)
        )
    node.drop_semaphore(sem.name)
    state.fire_watches(node, sem.name, EXISTENCE)
