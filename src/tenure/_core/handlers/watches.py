"""Watch commands: describe a semaphore (arming a watch, if asked), watch a prefix,
cancel a watch.

What a watch is and when it fires is :mod:`tenure._core.watches`; firing happens in
:func:`tenure._core.shared_steps.fire_watches`, after every change.
"""

from __future__ import annotations

from tenure._core import commands as c
from tenure._core.quotas import Q_PREFIX_WATCHES, Q_WATCHES, text_bytes
from tenure._core.state import EngineState
from tenure._core.values import SemaphoreDescription, check_name, check_prefix
from tenure._core.watches import Watch
from tenure.errors import LimitExceededError, NotFoundError


def describe_semaphore(
    state: EngineState, cmd: c.DescribeSemaphore, now: float
) -> c.DescribeResult:
    """Describe a semaphore and, if asked, arm a watch on it (a missing one too).

    A watch is bounded by the session's node (``max_watches_per_session``), its
    quota owner's quota (``watches``) and the engine's ``max_watches_per_semaphore``,
    per quota owner: every watch on the name fires on each change of it, whoever
    changes it.
    """
    session, node = state.lookup_session_node(cmd.session_id)
    name = check_name("semaphore", cmd.name)
    sem = node.semaphores.get(name)
    if sem is None and not cmd.watches:
        raise NotFoundError(f"semaphore {name!r} does not exist")
    limit = node.config.max_watches_per_session
    if cmd.watches and len(session.watches) >= limit:
        raise LimitExceededError(f"max_watches_per_session ({limit}) reached")
    usage = session.usage
    owner = "" if usage is None else usage.owner
    if cmd.watches:
        per_name = state.max_watches_per_semaphore
        if state.watches.target_count(node.name, name, owner) >= per_name:
            # Counted per quota owner: another token's watches never use up its room.
            state.ledger.refused("max_watches_per_semaphore", owner)
            raise LimitExceededError.by_quota(
                "max_watches_per_semaphore",
                f"max_watches_per_semaphore ({per_name}) reached on {name!r} of node "
                f"{node.name!r}" + (f" for token {owner!r}" if owner else ""),
            )
        state.check_made(usage, Q_WATCHES, text_bytes(name))  # (with its name)
    if sem is None:
        description = SemaphoreDescription.missing(name)
    else:
        description = sem.describe(owners=cmd.owners, waiters=cmd.waiters, sessions=state.sessions)
    if not cmd.watches:
        return c.DescribeResult(description)
    state.last_watch_id += 1
    watch = Watch(
        state.last_watch_id,
        session.session_id,
        node.name,
        name,
        cmd.watch_data,
        cmd.watch_owners,
        cmd.watch_waiters,
        with_owners=cmd.owners,
        with_waiters=cmd.waiters,
        repeat=cmd.watch_repeat,
        quota_owner=owner,
    )
    state.watches.arm(watch)
    session.add_watch(watch)
    return c.DescribeResult(description, watch.watch_id)


def watch_prefix(state: EngineState, cmd: c.WatchPrefix, now: float) -> c.WatchArmed:
    """Arm a repeating watch of every semaphore whose name starts with the prefix.

    Bounded by the session's node (``max_watches_per_session``), its owner's quotas
    (``watches``, ``prefix_watches``) and the engine's ``max_prefix_watches_per_node``:
    every one of a node's prefix watches may fire on each of its changes.
    """
    session, node = state.lookup_session_node(cmd.session_id)
    prefix = check_prefix(cmd.prefix)
    limit = node.config.max_watches_per_session
    if len(session.watches) >= limit:
        raise LimitExceededError(f"max_watches_per_session ({limit}) reached")
    per_node = state.max_prefix_watches_per_node
    if state.watches.prefix_count(node.name) >= per_node:
        # (Shown with the quotas' refusals, by token: who keeps hitting the bound.)
        usage = session.usage
        state.ledger.refused("max_prefix_watches_per_node", "" if usage is None else usage.owner)
        raise LimitExceededError.by_quota(
            "max_prefix_watches_per_node",
            f"max_prefix_watches_per_node ({per_node}) reached on node {node.name!r}",
        )
    state.check_made(session.usage, Q_WATCHES, text_bytes(prefix))  # (with its prefix)
    state.check_quota(session.usage, Q_PREFIX_WATCHES)
    state.last_watch_id += 1
    watch = Watch(
        state.last_watch_id,
        session.session_id,
        node.name,
        prefix,
        bool(cmd.watch_data),
        bool(cmd.watch_owners),
        bool(cmd.watch_waiters),
        with_owners=bool(cmd.watch_owners),
        with_waiters=bool(cmd.watch_waiters),
        repeat=True,
        prefix=True,
        quota_owner="" if session.usage is None else session.usage.owner,
    )
    state.watches.arm(watch)
    session.add_watch(watch)
    return c.WatchArmed(watch.watch_id)


def cancel_watch(state: EngineState, cmd: c.CancelWatch, now: float) -> bool:
    """Disarm one of the session's watches; False if it is not armed."""
    session = state.lookup_session(cmd.session_id)
    if cmd.watch_id not in session.watches:
        return False
    watch = state.watches.disarm(cmd.watch_id)
    assert watch is not None, "a session's watch is armed"
    session.discard_watch(watch)
    return True
