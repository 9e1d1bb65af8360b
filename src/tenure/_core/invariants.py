"""Cross-checks of the engine's state, for tests and for debugging a replayed log.

Nothing here changes state; each check raises AssertionError naming what broke.
"""

from __future__ import annotations

from typing import Any

from tenure._core.engine import Engine
from tenure._core.ownership import counted_usage
from tenure._core.quotas import TRACKED
from tenure._core.semaphore import holder_key
from tenure._core.values import MAX_ANNEX_BYTES, MAX_ANNEX_KEYS


def check_invariants(engine: Engine) -> None:
    """Assert every structural invariant the engine relies on."""
    _check_usage(engine)
    tokens: set[int] = set()
    assert engine.node_index.keys == sorted(engine.nodes), "node index out of step"
    for node in engine.nodes.values():
        assert node.semaphore_index.keys == sorted(node.semaphores), f"{node.name}: index"
        assert node.session_index.keys == sorted(node.sessions), f"{node.name}: session index"
        for sid in node.sessions:
            assert engine.sessions[sid].node == node.name, f"session {sid} in the wrong node"
        if node.annex is not None:  # None, or 1 to MAX_ANNEX_KEYS keys of non-empty bytes
            assert 0 < len(node.annex) <= MAX_ANNEX_KEYS, f"{node.name}: annex of {node.annex}"
            for annex_key, value in node.annex.items():
                assert type(value) is bytes, f"{node.name}: annex {annex_key!r} is not bytes"
                assert 0 < len(value) <= MAX_ANNEX_BYTES, f"{node.name}: {annex_key!r} size"
        for name, sem in node.semaphores.items():
            assert sem.name == name
            total = sum(o.count for o in sem.owners.values())
            assert total == sem.count, f"{name}: count {sem.count} != owners' sum {total}"
            assert sem.count <= sem.limit, f"{name}: {sem.count} over the limit {sem.limit}"
            for key, owner in sem.owners.items():
                assert owner.key == key
                held = engine.sessions[owner.session_id].holds_on(name)
                assert owner.hold in held, f"{name}: owner {key} not tracked"
                assert owner.token <= engine.last_token, f"{name}: token from the future"
                assert owner.token not in tokens, f"token {owner.token} held twice"
                tokens.add(owner.token)
                # A lease deadline iff a TTL or a max_hold, never after the max_hold's end.
                timed = owner.lease_ttl is not None or owner.ends is not None
                assert timed == (owner.lease_deadline is not None)
                if owner.ends is not None and owner.lease_deadline is not None:
                    assert owner.lease_deadline <= owner.ends, f"{name}: lease past max_hold"
            arrived = 0
            for key, waiter in sem.waiters.items():
                assert waiter.key == key
                waits = engine.sessions[waiter.session_id].waits_on(name)
                assert waiter.hold in waits, f"{name}: waiter {key} not tracked"
                if waiter.task:
                    by_task = engine.sessions[waiter.session_id].task_waits(waiter.task)
                    assert (name, waiter.hold) in by_task, f"{name}: task of {key} not tracked"
                # Served in arrival order: the queue's arrival numbers ascend.
                assert arrived < waiter.order <= engine.last_order, f"{name}: order {waiter.order}"
                arrived = waiter.order
            if sem.waiters:
                head = next(iter(sem.waiters.values()))
                # Right after settling, a head that fits would have been granted (unless
                # it is a set's member, which waits for the set's other queues too).
                blocked = sem.blocked_until > 0 or head.order in node.sets
                assert blocked or sem.count - _held(sem, head.key) + head.count > sem.limit, (
                    f"{name}: head waiter fits but was not granted"
                )
            if sem.ephemeral:
                assert sem.owners or sem.waiters or sem.blocked_until > 0, (
                    f"{name}: idle ephemeral semaphore was kept"
                )
        _check_sets(node)
        for name, timer in node.claims.items():
            assert timer.token <= engine.last_token, f"{name}: claim token from the future"
            assert timer.ends_at >= timer.least_until, f"{name}: claim ends before at_least"
            assert timer.ends_at > engine.now, f"{name}: claim ended but was kept"
    by_client: dict[object, list[int]] = {}
    for sid, session in engine.sessions.items():
        if session.identity.pid:
            by_client.setdefault(session.identity, []).append(sid)
    kept = {identity: list(engine.sessions_of(identity)) for identity in engine.client_sessions}
    assert kept == {identity: sorted(sids) for identity, sids in by_client.items()}, (
        "client_sessions is not the sessions' (in the order they were made)"
    )
    assert all(
        isinstance(same, int) or len(same) > 1 for same in engine.client_sessions.values()
    ), "a set of one in client_sessions"
    for sid, session in engine.sessions.items():
        node = engine.nodes[session.node]
        assert sid in node.sessions
        for name in session.held:
            for hold in session.holds_on(name):
                key = holder_key(sid, hold)
                assert key in node.semaphores[name].owners, f"{sid}/{hold} thinks it holds {name}"
        for name in session.waits:
            for hold in session.waits_on(name):
                key = holder_key(sid, hold)
                assert key in node.semaphores[name].waiters, f"{sid}/{hold} thinks it waits {name}"
        for task, places in session.waiting_tasks.items():
            assert task, f"session {sid}: task 0 indexed"
            assert places, f"session {sid}: task {task} indexed with no wait"
            assert len(set(places)) == len(places), f"session {sid}: task {task} twice"
            for name, hold in places:
                queued = node.semaphores[name].waiter(holder_key(sid, hold))
                assert queued is not None, f"session {sid}: {task} thinks it waits {name}/{hold}"
                assert queued.task == task, f"session {sid}: {name}/{hold} of {queued.task}"
    _check_watches(engine)


def _check_watches(engine: Engine) -> None:
    """A session's watch ids are exactly the armed watches of that live session (its
    prefix watches counted right), and every armed watch is found where a firing looks
    for it (its name, or its prefix)."""
    watches = engine.watches
    watches.check_index()
    armed: dict[int, set[int]] = {}
    prefix: dict[int, int] = {}
    for watch in watches.armed():
        session = engine.sessions.get(watch.session_id)
        assert session is not None, f"watch {watch.watch_id} of a session that ended"
        assert session.node == watch.node, f"watch {watch.watch_id} on another node"
        armed.setdefault(watch.session_id, set()).add(watch.watch_id)
        if watch.prefix:
            prefix[watch.session_id] = prefix.get(watch.session_id, 0) + 1
    for sid, session in engine.sessions.items():
        assert set(session.watches) == armed.get(sid, set()), f"session {sid}'s watches"
        assert session.prefix_watches == prefix.get(sid, 0), f"session {sid}'s prefix watches"


def _check_sets(node: Any) -> None:
    """Each all-or-none set's members wait in their queues with its arrival number,
    and a set whose members all head their queues and fit would have been granted."""
    for order, members in node.sets.items():
        assert len(members) >= 2, f"set {order} of {len(members)}"
        ready = True
        for name, key in members:
            sem = node.semaphores[name]
            waiter = sem.waiter(key)
            assert waiter is not None, f"set {order}: {name}/{key} is not queued"
            assert waiter.order == order, f"set {order}: {name}/{key} has order {waiter.order}"
            head = next(iter(sem.waiters.values()))
            fits = sem.blocked_until == 0 and (  # (a lock-delay: conservatively not)
                sem.count - _held(sem, key) + waiter.count <= sem.limit
            )
            ready = ready and head is waiter and fits
        assert not ready, f"set {order} could be granted but was not"
    for sem in node.semaphores.values():
        for waiter in sem.waiters.values():
            if waiter.order in node.sets:
                assert (sem.name, waiter.key) in node.sets[waiter.order]


def _held(sem: object, key: int) -> int:
    from tenure._core.semaphore import Semaphore

    assert isinstance(sem, Semaphore)
    owner = sem.owner(key)
    return 0 if owner is None else owner.count


def _check_usage(engine: Engine) -> None:
    """Every owner's running usage is what counting the whole state gives, and the
    total is their sum (:mod:`tenure._core.quotas`); a paused ledger's are not kept,
    but every usage says so (its ``live``)."""
    ledger = engine.ledger
    if not ledger.counting:
        assert not any(usage.live for usage in ledger.usage.values()), "a paused ledger counts"
        return
    counted = counted_usage(engine)
    for owner, usage in ledger.usage.items():
        expected = counted.get(owner, [0] * len(TRACKED))
        assert usage.counts == expected, f"usage of {owner!r}: {usage.counts} != {expected}"
    assert set(counted) <= set(ledger.usage), "an owner the ledger does not know"
    owners = ledger.usage.values()
    total = [sum(usage.counts[i] for usage in owners) for i in range(len(TRACKED))]
    assert ledger.total.counts == total, f"total usage {ledger.total.counts} != {total}"
