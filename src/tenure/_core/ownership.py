"""Who owns what, kept in a snapshot, and every owner's usage counted afresh.

The engine counts each owner's usage as its state changes (:mod:`tenure._core.quotas`);
these are the slow, whole-state counterparts, for the rare moments that need them: a
snapshot keeps each session's, semaphore's and node's owner (:func:`dump_owners`,
:func:`load_owners`, which counts everything once after a load, unless its caller
pauses the counting), and the invariant
checks compare the running counts with :func:`counted_usage`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tenure._core.node import Node, semaphore_bytes
from tenure._core.quotas import (
    Q_DATA_BYTES,
    Q_HOLDS,
    Q_MISSED_BYTES,
    Q_NODES,
    Q_PREFIX_WATCHES,
    Q_SEMAPHORES,
    Q_SESSIONS,
    Q_WAITERS,
    Q_WATCHES,
    TRACKED,
    Usage,
    text_bytes,
)
from tenure._core.session import Session
from tenure._core.state import EngineState


def owner_of(usage: Usage | None) -> str:
    """The owner a usage counts for ("" for none)."""
    return "" if usage is None else usage.owner


def counted_usage(state: EngineState) -> dict[str, list[int]]:
    """Every owner's usage, counted from the whole state (O(state): not for commands)."""
    counts: dict[str, list[int]] = {}

    def count(usage: Usage | None, index: int, amount: int) -> None:
        if usage is not None:
            counts.setdefault(usage.owner, [0] * len(TRACKED))[index] += amount

    for session in state.sessions.values():
        usage = session.usage
        count(usage, Q_SESSIONS, 1)
        count(usage, Q_DATA_BYTES, session.counted_bytes())
        count(usage, Q_WATCHES, len(session.watches))
        count(usage, Q_WAITERS, session.wait_count())
        count(usage, Q_MISSED_BYTES, session.kept_missed_bytes())
    for watch in state.watches.armed():  # (the index's, not what each session counted)
        watcher = state.sessions[watch.session_id].usage
        count(watcher, Q_DATA_BYTES, text_bytes(watch.name))
        if watch.prefix:
            count(watcher, Q_PREFIX_WATCHES, 1)
    for node in state.nodes.values():
        count(node.usage, Q_NODES, 1)
        count(node.usage, Q_DATA_BYTES, node.counted_bytes())
        for sem in node.semaphores.values():
            count(sem.usage, Q_SEMAPHORES, 1)
            count(sem.usage, Q_DATA_BYTES, semaphore_bytes(sem))
            for owner in sem.each_owner():
                count(owner.usage, Q_HOLDS, 1)
                count(owner.usage, Q_DATA_BYTES, len(owner.data))
            for waiter in sem.waiters.values():
                count(waiter.usage, Q_DATA_BYTES, len(waiter.data))
    return counts


def dump_owners(
    state: EngineState,
    of_nodes: Iterable[Node] | None = None,
    of_sessions: Iterable[Session] | None = None,
) -> dict[str, list[Any]]:
    """The owners a snapshot keeps (only of what has one): flat lists of ``sessions``
    (id, owner), ``nodes`` (name, owner) and ``semaphores`` (node, name, owner); of
    ``of_nodes`` and ``of_sessions`` alone where given (one node's part)."""
    sessions: list[Any] = []
    nodes: list[Any] = []
    semaphores: list[Any] = []
    for session in state.sessions.values() if of_sessions is None else of_sessions:
        if owner_of(session.usage):
            sessions += (session.session_id, owner_of(session.usage))
    for node in state.nodes.values() if of_nodes is None else of_nodes:
        if owner_of(node.usage):
            nodes += (node.name, owner_of(node.usage))
        for sem in node.semaphores.values():
            if owner_of(sem.usage):
                semaphores += (node.name, sem.name, owner_of(sem.usage))
    return {"sessions": sessions, "nodes": nodes, "semaphores": semaphores}


def load_owners(
    state: EngineState, plain: dict[str, list[Any]] | None, *, counted: bool = True
) -> None:
    """Give every session, node and semaphore its owner (``plain`` as
    :func:`dump_owners` made it; absent: nobody's), then count every owner's usage
    (``counted=False``: pause the ledger instead; it counts once resumed)."""
    ledger = state.ledger
    nobody = ledger.of("")
    for session in state.sessions.values():
        session.usage = nobody
    for node in state.nodes.values():
        node.usage = nobody
        for sem in node.semaphores.values():
            sem.usage = nobody
    if plain is not None:
        sessions, nodes, semaphores = plain["sessions"], plain["nodes"], plain["semaphores"]
        for sid, owner in zip(sessions[::2], sessions[1::2], strict=True):
            state.sessions[sid].usage = ledger.of(_owner(owner))
        for name, owner in zip(nodes[::2], nodes[1::2], strict=True):
            state.nodes[name].usage = ledger.of(_owner(owner))
        for node, name, owner in zip(
            semaphores[::3], semaphores[1::3], semaphores[2::3], strict=True
        ):
            state.nodes[node].semaphores[name].usage = ledger.of(_owner(owner))
    live = state.sessions
    for each in state.nodes.values():  # (a holder's data: its session's owner's)
        for sem in each.semaphores.values():
            for holder in sem.each_owner():
                holder.usage = live[holder.session_id].usage
            for waiter in sem.waiters.values():
                waiter.usage = live[waiter.session_id].usage
    if counted:
        ledger.recount(counted_usage(state))
    else:  # (the whole state counted: 2-5 s at a million holds, the most of a restart)
        ledger.pause_counting()


def _owner(owner: object) -> str:
    if not isinstance(owner, str):
        raise ValueError(f"an owner must be a token's name, not {owner!r}")
    return owner
