"""The steps command handlers share: grants, queues served, watches fired. [compiled]

Each is a function of an :class:`~tenure._core.state.EngineState`, as the handlers
that call it are (:mod:`tenure._core.handlers`), and is where a rule of the engine
(:mod:`tenure._core.engine`) is kept: :func:`grant` gives every grant a fresh fencing
token (rule 3); :func:`settle`, after any change to a semaphore, serves its queue,
drops it if it is ephemeral and idle, and fires the watches the change hit
(:func:`fire_watches`), in that order (rule 5). Besides: :func:`withdraw_set` (an
all-or-none set leaves its queues whole), :func:`tell_missed` (an ending a session did
not cause, kept for a re-attach) and :func:`start_lock_delay` (a lost holder's
semaphore held back).
"""

from __future__ import annotations

from tenure._core.deadlines import LeaseDeadline, LockDelayDeadline
from tenure._core.effects import AcquireFailed, Granted, WatchFired
from tenure._core.node import Node
from tenure._core.semaphore import Owner, Semaphore, Waiter
from tenure._core.session import Missed
from tenure._core.state import EngineState
from tenure._core.values import SemaphoreDescription
from tenure._core.watches import EXISTENCE, OWNERS, WAITERS, Change
from tenure.errors import ErrorCode


def grant(
    state: EngineState,
    node: Node,
    sem: Semaphore,
    session_id: int,
    count: int,
    data: bytes,
    lease_ttl: float | None,
    now: float,
    hold: int = 0,
    task: int = 0,
    max_hold: float | None = None,
    replaced: Owner | None = None,
    known: bool = False,
    waited: float = 0.0,
) -> Owner:
    """Give tokens to a session's hold (asked by its client's ``task``) with a fresh
    fencing token (rule 3).

    The grant ends at the earlier of its ``max_hold`` and the node's after ``now``
    (its :attr:`~tenure._core.holders.Owner.ends`), and never after the end of the
    hold it replaces (an upgrade); its lease deadline is never after that end.
    ``replaced`` is that hold if the caller looked it up (``known``), else it is
    looked up here. ``waited``: how long it was queued (0: granted at once), for the
    statistics per name.
    """
    state.last_token += 1
    ttl = node.config.default_lease if lease_ttl is None else lease_ttl
    deadline = None if ttl is None else now + ttl
    bound = node.config.max_hold
    if max_hold is not None and (bound is None or max_hold < bound):
        bound = max_hold  # (an acquire's own may only shorten the node's)
    ends = None if bound is None else now + bound
    if not known:
        replaced = sem.owner(session_id | hold << 64 if hold else session_id)
    if (
        replaced is not None
        and replaced.ends is not None
        and (ends is None or replaced.ends < ends)
    ):
        ends = replaced.ends  # an upgrade: the hold's end stays (never extended)
    if ends is not None and (deadline is None or ends < deadline):
        deadline = ends
    # A time equal to the engine's shares its float: a burst of grants in one
    # instant (a server's clock moves in steps) then costs no float object each.
    since = state.now if now == state.now else now
    node.grants += 1
    node.granted_at = since
    stats = state.name_stats
    kept = stats.nodes.get(node.name)
    if kept is not None and sem.name in kept:
        stats.granted(node.name, sem.name, waited, since)
    else:  # (NameStats.granted's totals, inline: no call for a name not kept, the usual)
        stats.grants += 1
        stats.wait_total += waited
    session = state.sessions[session_id]
    # The session's own id object, not the command's: a decoded request brings a
    # new int each time (above 256), which a hold would otherwise keep (32 bytes).
    sid = session.session_id
    usage = state.sessions[sid].usage  # (its data counts against its session's owner)
    owner = Owner(
        sid, count, data, state.last_token, ttl, deadline, hold, since, task, usage=usage, ends=ends
    )
    sem.set_owner(owner)
    session.add_hold(sem.name, hold)
    if deadline is not None:
        key = LeaseDeadline(node.name, sem.name, owner.key, owner.token)
        state.deadlines.schedule(deadline, key)
    return owner


def settle(state: EngineState, node: Node, sem: Semaphore, now: float, change: Change) -> None:
    """Rule 5: serve the queue, drop an idle ephemeral semaphore, fire watches.

    The head is granted while it fits; a head that is a member of an all-or-none
    set (AcquireAll) is granted only if every member is the head of its queue and
    fits there, and then all are at once; else it waits, and holds back its queue
    as any head does. Since a set joins every queue in one step, queues agree
    on the order of requests: the earliest request waiting anywhere is the head
    of all its queues, so it is granted once its tokens are free (no deadlock).
    """
    sets = node.sets
    others: list[Semaphore] = []
    while (head := sem.head()) is not None and sem.fits(head.key, head.count, now):
        if sets and head.order in sets:
            members = _ready_set(node, sets[head.order], now)
            if members is None:
                break
            del sets[head.order]
            for member_sem, member in members:
                member_sem.remove_waiter(member.key)
                _grant_waiter(state, node, member_sem, member, now)
                if member_sem is not sem:
                    others.append(member_sem)
        else:
            sem.remove_waiter(head.key)
            _grant_waiter(state, node, sem, head, now)
        change |= OWNERS | WAITERS
    if sem.vanishes(now):
        node.drop_semaphore(sem.name)
        change = EXISTENCE
    if change:
        fire_watches(state, node, sem.name, change)
    for other in others:  # (their heads changed: serve them too)
        settle(state, node, other, now, OWNERS | WAITERS)


def _grant_waiter(
    state: EngineState, node: Node, sem: Semaphore, waiter: Waiter, now: float
) -> None:
    """Grant ``waiter``, already out of ``sem``'s queue, and tell its session."""
    sid, hold = waiter.session_id, waiter.hold
    state.sessions[sid].discard_wait(sem.name, hold, waiter.task)
    owner = grant(
        state,
        node,
        sem,
        sid,
        waiter.count,
        waiter.data,
        waiter.lease_ttl,
        now,
        hold,
        waiter.task,
        waiter.max_hold,
        waited=max(0.0, now - waiter.since),
    )
    state.effects.append(
        Granted(sid, waiter.request_id, sem.name, owner.token, owner.count, owner.lease_ttl, hold)
    )


def _ready_set(
    node: Node, members: tuple[tuple[str, int], ...], now: float
) -> list[tuple[Semaphore, Waiter]] | None:
    """The set's members with their semaphores if each heads its queue and fits."""
    ready: list[tuple[Semaphore, Waiter]] = []
    for name, key in members:
        member_sem = node.semaphores[name]
        member = member_sem.head()
        if member is None or member.key != key or not member_sem.fits(key, member.count, now):
            return None
        ready.append((member_sem, member))
    return ready


def withdraw_set(
    state: EngineState,
    node: Node,
    waiter: Waiter,
    code: ErrorCode,
    message: str,
    now: float,
    *,
    missed: bool = False,
) -> None:
    """``waiter`` has left its queue: if it was a member of a set, the others leave
    theirs too, each ending with AcquireFailed(``code``, ``message``) (kept for a
    re-attach to read when ``missed``), and their queues are served."""
    members = node.sets.pop(waiter.order, None) if node.sets else None
    if members is None:
        return
    # Every member leaves before any queue is served: served one by one, a queue
    # could grant a member still waiting elsewhere (its set already forgotten).
    left: list[Semaphore] = []
    for name, key in members:
        member_sem = node.semaphores.get(name)
        member = None if member_sem is None else member_sem.waiter(key)
        if member_sem is None or member is None or member.order != waiter.order:
            continue  # (``waiter`` itself, already out of its queue)
        member_sem.remove_waiter(key)
        state.sessions[member.session_id].discard_wait(name, member.hold, member.task)
        state.wait_ended(node, name, member, code, now)
        failed = AcquireFailed(
            member.session_id, member.request_id, name, code, message, member.hold
        )
        if missed:
            tell_missed(state, failed)
        else:
            state.effects.append(failed)
        left.append(member_sem)
    for member_sem in left:
        settle(state, node, member_sem, now, WAITERS)


def fire_watches(state: EngineState, node: Node, name: str, change: Change) -> None:
    """Queue a WatchFired for every watch on ``name`` that ``change`` hits.

    A firing that would list more than ``state.max_listed_per_firing`` owners and
    waiters carries no description (its watcher describes the semaphore itself):
    this step is another's change, and its listing work is bounded so.
    """
    # One description per shape asked for, shared by every watch that asked for it.
    # (A shape is an int, owners 2 + waiters 1: a tuple per watch would be one more
    # object per firing for the cyclic collector, 100,000 of them for a fleet's watch.)
    shapes: dict[int, SemaphoreDescription | None] = {}
    sem = node.semaphores.get(name)
    effects = state.effects
    for watch in state.watches.fire(node.name, name, change):
        if not watch.repeat:
            state.sessions[watch.session_id].discard_watch(watch)
        shape = (2 if watch.with_owners else 0) + (1 if watch.with_waiters else 0)
        if shape in shapes:
            description = shapes[shape]
        else:
            pair = (watch.with_owners, watch.with_waiters)
            description = shapes[shape] = _fired_description(state, name, sem, pair)
        effects.append(WatchFired(watch.session_id, watch.watch_id, name, description))


def _fired_description(
    state: EngineState, name: str, sem: Semaphore | None, shape: tuple[bool, bool]
) -> SemaphoreDescription | None:
    """What a firing of ``shape`` (owners listed, waiters listed) carries: the state,
    or None past ``max_listed_per_firing`` (counted in O(1), before any listing)."""
    if sem is None:
        return SemaphoreDescription.missing(name)
    owners, waiters = shape
    listed = (len(sem.owners) if owners else 0) + (sem.queue_length() if waiters else 0)
    if listed > state.max_listed_per_firing:
        return None
    return sem.describe(owners=owners, waiters=waiters, sessions=state.sessions)


def tell_missed(state: EngineState, effect: Missed) -> None:
    """Queue an ending the session did not cause, and keep it for a re-attach to read."""
    state.effects.append(effect)
    session = state.sessions[effect.session_id]
    session.note_missed(effect, state.nodes[session.node].config.max_missed_per_session)


def start_lock_delay(state: EngineState, node: Node, sem: Semaphore, now: float) -> None:
    """A holder was lost (not released): nobody may take ``sem`` for the node's lock-delay."""
    delay = node.config.lock_delay
    if delay > 0 and now + delay > sem.blocked_until:
        sem.blocked_until = now + delay
        state.deadlines.schedule(sem.blocked_until, LockDelayDeadline(node.name, sem.name))
