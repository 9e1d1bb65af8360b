"""AcquireAll: several semaphores, all or none, in one step.

The request is an all-or-none *set*: it joins every queue at once, with one arrival
number (``order``) that its member waiters share and that ``node.sets`` maps to the
members; the queues are served by :func:`tenure._core.shared_steps.settle`,
which grants a set only when each member heads its queue and fits, and all at once.
Members leave together (:func:`tenure._core.shared_steps.withdraw_set`).
"""

from __future__ import annotations

from tenure._core import commands as c
from tenure._core.deadlines import WaiterDeadline
from tenure._core.deadlocks import Asked, refuse_deadlock
from tenure._core.name_stats import owner_name
from tenure._core.quotas import Q_DATA_BYTES, Q_HOLDS, Q_SEMAPHORES, Q_WAITERS, text_bytes
from tenure._core.semaphore import Semaphore, Waiter, holder_key
from tenure._core.shared_steps import grant, settle
from tenure._core.state import EngineState
from tenure._core.values import (
    MAX_COUNT,
    MAX_SET_NAMES,
    check_count,
    check_data,
    check_duration,
    check_hold,
    check_name,
    check_task,
    check_timeout,
)
from tenure._core.watches import EXISTENCE, WAITERS
from tenure.errors import (
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)


def acquire_all(state: EngineState, cmd: c.AcquireAll, now: float) -> c.AcquireAllResult:
    """Grant every name now, queue for all of them, or answer BUSY (``timeout`` 0)."""
    session, node = state.lookup_session_node(cmd.session_id)
    names, holds, request_ids = _members(cmd)
    count = check_count(cmd.count)
    data = check_data("owner data", cmd.data, node.config.max_data_size)
    timeout = check_timeout(cmd.timeout)
    task = check_task(cmd.task)
    if cmd.lease_ttl is not None:
        check_duration("lease_ttl", cmd.lease_ttl)
    sid = session.session_id
    keys = [holder_key(sid, hold) for hold in holds]
    sems: list[Semaphore | None] = [node.semaphores.get(name) for name in names]
    missing = sum(sem is None for sem in sems)
    for name, key, hold, sem in zip(names, keys, holds, sems, strict=True):
        if sem is None:
            if not cmd.ephemeral:
                raise NotFoundError(
                    f"semaphore {name!r} does not exist (create it or use ephemeral)"
                )
            continue
        if count > sem.limit:
            raise LimitExceededError(f"count {count} exceeds the limit {sem.limit} of {name!r}")
        if sem.owner(key) is not None or sem.waiter(key) is not None:
            raise PreconditionFailedError(
                f"session {sid} already holds or waits for {name!r} as hold {hold}"
            )
    if missing and len(node.semaphores) + missing > node.config.max_semaphores:
        raise LimitExceededError(
            f"max_semaphores ({node.config.max_semaphores}) reached on node {node.name!r}"
        )
    made_bytes = sum(text_bytes(name) for name, sem in zip(names, sems, strict=True) if sem is None)
    at_once = all(
        sem is None or sem.can_grant_now(key, count, now)
        for sem, key in zip(sems, keys, strict=True)
    )
    waits = 0
    if not at_once and timeout != 0:
        for name, sem in zip(names, sems, strict=True):
            if sem is not None and sem.queue_length() >= node.config.max_waiters:
                raise LimitExceededError(
                    f"max_waiters ({node.config.max_waiters}) reached on semaphore {name!r}"
                )
        waits = len(names)
    # Each quota asked apart, the memory budget for all it makes at once (asked one by
    # one, each would pass where all do not).
    state.check_all(
        session.usage,
        [
            (Q_SEMAPHORES, missing),
            (Q_HOLDS, len(names)),  # (the memory budget's)
            (Q_WAITERS, waits),
            (Q_DATA_BYTES, made_bytes + len(data) * len(names)),  # (names made, data)
        ],
    )
    if waits and task:  # (one request, in every queue; a name it makes waits for nobody)
        asked: list[Asked] = [
            (sem, key, count) for sem, key in zip(sems, keys, strict=True) if sem is not None
        ]
        refuse_deadlock(state, node, sid, task, asked, None, now)
    # Validated: from here on the command succeeds (rule 1).
    for name, hold in zip(names, holds, strict=True):
        session.forget_missed(name, hold)  # asking again: the client settled the last one
    if not at_once and timeout == 0:
        return c.AcquireAllResult(c.AcquireStatus.BUSY)
    made = []
    for i, name in enumerate(names):
        if sems[i] is None:
            sems[i] = node.add_semaphore(
                Semaphore(name, MAX_COUNT, b"", ephemeral=True, usage=session.usage)
            )
            made.append(name)
    if at_once:
        tokens, ttl = [], None
        for name, hold, sem in zip(names, holds, sems, strict=True):
            assert sem is not None
            owner = grant(state, node, sem, sid, count, data, cmd.lease_ttl, now, hold, task)
            tokens.append(owner.token)
            ttl = owner.lease_ttl
            settle(state, node, sem, now, EXISTENCE if name in made else WAITERS)
        return c.AcquireAllResult(c.AcquireStatus.GRANTED, tuple(tokens), ttl)
    deadline = None if timeout is None else now + timeout
    state.last_order += 1
    order = state.last_order
    members: list[tuple[str, int]] = []
    for name, hold, request_id, sem in zip(names, holds, request_ids, sems, strict=True):
        assert sem is not None
        waiter = Waiter(
            sid,
            request_id,
            count,
            data,
            deadline,
            cmd.lease_ttl,
            hold,
            now,
            order,
            timeout,
            task,
            usage=session.usage,
        )
        sem.enqueue(waiter)
        # The semaphore's own name object, not the command's (no copy kept of it).
        session.add_wait(sem.name, hold, task)
        state.name_stats.queued_on(node.name, sem.name, owner_name(session.usage), now)
        members.append((sem.name, waiter.key))
        if deadline is not None and name == names[0]:  # (one for the set: the first's)
            state.deadlines.schedule(
                deadline, WaiterDeadline(node.name, sem.name, waiter.key, request_id)
            )
    if len(names) > 1:
        node.sets[order] = tuple(members)
    for name, sem in zip(names, sems, strict=True):
        assert sem is not None
        settle(state, node, sem, now, EXISTENCE if name in made else WAITERS)
    return c.AcquireAllResult(c.AcquireStatus.QUEUED)


def _members(cmd: c.AcquireAll) -> tuple[list[str], list[int], list[int]]:
    """The command's names, holds and request ids, checked: as many of each, the names
    distinct, 1 to MAX_SET_NAMES of them."""
    if not isinstance(cmd.names, tuple | list) or not 1 <= len(cmd.names) <= MAX_SET_NAMES:
        raise InvalidArgumentError(
            f"names must be 1 to {MAX_SET_NAMES} semaphore names, got {cmd.names!r:.80}"
        )
    names = [check_name("semaphore", name) for name in cmd.names]
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"names must be distinct, got {names!r:.80}")
    if not (
        isinstance(cmd.holds, tuple | list)
        and isinstance(cmd.request_ids, tuple | list)
        and len(cmd.holds) == len(cmd.request_ids) == len(names)
    ):
        raise InvalidArgumentError("holds and request_ids must have one entry per name")
    holds = [check_hold(hold) for hold in cmd.holds]
    request_ids = []
    for request_id in cmd.request_ids:
        if type(request_id) is not int or request_id < 0:
            raise InvalidArgumentError(f"request ids must be ints of 0 or more, got {request_id!r}")
        request_ids.append(request_id)
    return names, holds, request_ids
