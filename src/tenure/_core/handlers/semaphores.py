"""Semaphore commands: create, release, cancel, renew, update, delete.

Each handler checks everything it can fail on before it changes anything (rule 1 of
the engine). Acquiring, the command with the most to check, is
:mod:`tenure._core.handlers.acquire`'s.
"""

from __future__ import annotations

from tenure._core import commands as c
from tenure._core.checks import check_place
from tenure._core.deadlines import LeaseDeadline
from tenure._core.effects import AcquireFailed, LeaseLost
from tenure._core.node import Node
from tenure._core.quotas import Q_DATA_BYTES, Q_SEMAPHORES, text_bytes
from tenure._core.semaphore import Semaphore, holder_key
from tenure._core.shared_steps import fire_watches, settle, tell_missed, withdraw_set
from tenure._core.state import EngineState
from tenure._core.values import check_count, check_data, check_duration, check_hold, check_name
from tenure._core.watches import DATA, EXISTENCE, NOTHING, OWNERS, WAITERS
from tenure.errors import AlreadyExistsError, ErrorCode, NotFoundError, PreconditionFailedError


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
    fire_watches(state, node, sem.name, EXISTENCE)


def release(state: EngineState, cmd: c.Release, now: float) -> bool:
    """Give back the hold's tokens and drop its waiter; False if it had neither."""
    session, node = state.lookup_session_node(cmd.session_id)
    name, hold = check_place(cmd.name, cmd.hold)
    sem = node.semaphores.get(name)
    if sem is None:
        # Nothing to release: how the hold ended stays kept for a re-attach (the
        # answer, False, may be lost with its connection, and a release sent again
        # is answered False too, however the first ended).
        return False
    sid = session.session_id
    key = holder_key(sid, hold)
    waiter = sem.remove_waiter(key)
    if waiter is not None:
        session.discard_wait(sem.name, hold, waiter.task)
        state.wait_ended(node, sem.name, waiter, ErrorCode.CANCELLED, now)
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
        withdraw_set(state, node, waiter, ErrorCode.CANCELLED, "released while waiting", now)
    owner = sem.remove_owner(key)
    if owner is not None:
        session.discard_hold(sem.name, hold)
        stats = state.name_stats
        kept = stats.nodes.get(node.name)
        held = max(0.0, now - owner.since)
        if kept is not None and sem.name in kept:
            stats.hold_ended(node.name, sem.name, held, False, now)
        else:  # (NameStats.hold_ended's totals, inline: no call for a name not kept)
            stats.releases += 1
            stats.hold_total += held
    change = (NOTHING if owner is None else OWNERS) | (NOTHING if waiter is None else WAITERS)
    settle(state, node, sem, now, change)
    if owner is None and waiter is None:
        return False  # (how it ended stays kept, as above)
    session.forget_missed(name, hold)  # its client is done with it
    return True


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
    state.wait_ended(node, sem.name, waiter, ErrorCode.CANCELLED, now)
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
    withdraw_set(state, node, waiter, ErrorCode.CANCELLED, "acquire cancelled", now)
    settle(state, node, sem, now, WAITERS)
    return True


def renew(state: EngineState, cmd: c.Renew, now: float) -> float:
    """Restart the lease of the hold's grant (optionally with a new TTL); reply the TTL.

    A grant with a max_hold is renewed up to its end, never past it
    (:attr:`tenure._core.holders.Owner.ends`)."""
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
    deadline = now + ttl
    ends = owner.ends
    if ends is not None and ends < deadline:
        deadline = ends  # a max_hold: no renewal takes the lease past its end
    owner.lease_ttl, owner.lease_deadline = ttl, deadline
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
        fire_watches(state, node, sem.name, DATA)


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
        fire_watches(state, node, sem.name, DATA)
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
        state.wait_ended(node, sem.name, w, ErrorCode.NOT_FOUND, now)
        tell_missed(
            state,
            AcquireFailed(
                w.session_id, w.request_id, sem.name, ErrorCode.NOT_FOUND, message, w.hold
            ),
        )
    # Every waiter has left first: an all-or-none request with a member here ends
    # whole, and serving another queue meanwhile must not grant one that still waits.
    for w in gone:
        withdraw_set(state, node, w, ErrorCode.NOT_FOUND, message, now, missed=True)
    for o in list(sem.owners.values()):
        state.sessions[o.session_id].discard_hold(sem.name, o.hold)
        state.hold_ended(node, sem.name, o, True, now)
        tell_missed(
            state, LeaseLost(o.session_id, sem.name, o.token, ErrorCode.LEASE_LOST, message, o.hold)
        )
    node.drop_semaphore(sem.name)
    fire_watches(state, node, sem.name, EXISTENCE)
