"""Cross-checks of the engine's state, for tests and for debugging a replayed log.

Nothing here changes state; each check raises AssertionError naming what broke.
"""

from __future__ import annotations

from tenure._core.engine import Engine


def check_invariants(engine: Engine) -> None:
    """Assert every structural invariant the engine relies on."""
    tokens: set[int] = set()
    for node in engine.nodes.values():
        for sid in node.sessions:
            assert engine.sessions[sid].node == node.name, f"session {sid} in the wrong node"
        for name, sem in node.semaphores.items():
            assert sem.name == name
            total = sum(o.count for o in sem.owners.values())
            assert total == sem.count, f"{name}: count {sem.count} != owners' sum {total}"
            assert sem.count <= sem.limit, f"{name}: {sem.count} over the limit {sem.limit}"
            for sid, owner in sem.owners.items():
                assert owner.session_id == sid
                assert name in engine.sessions[sid].held, f"{name}: owner {sid} not tracked"
                assert owner.token <= engine.last_token, f"{name}: token from the future"
                assert owner.token not in tokens, f"token {owner.token} held twice"
                tokens.add(owner.token)
                assert (owner.lease_ttl is None) == (owner.lease_deadline is None)
            for sid, waiter in sem.waiters.items():
                assert waiter.session_id == sid
                assert name in engine.sessions[sid].waits, f"{name}: waiter {sid} not tracked"
            if sem.waiters:
                head = next(iter(sem.waiters.values()))
                # Right after settling, a head that fits would have been granted.
                blocked = sem.blocked_until > 0
                assert (
                    blocked or sem.count - _held(sem, head.session_id) + head.count > sem.limit
                ), f"{name}: head waiter fits but was not granted"
            if sem.ephemeral:
                assert sem.owners or sem.waiters or sem.blocked_until > 0, (
                    f"{name}: idle ephemeral semaphore was kept"
                )
    for sid, session in engine.sessions.items():
        node = engine.nodes[session.node]
        assert sid in node.sessions
        for name in session.held:
            assert sid in node.semaphores[name].owners, f"session {sid} thinks it holds {name}"
        for name in session.waits:
            assert sid in node.semaphores[name].waiters, f"session {sid} thinks it waits on {name}"


def _held(sem: object, session_id: int) -> int:
    from tenure._core.semaphore import Semaphore

    assert isinstance(sem, Semaphore)
    owner = sem.owner(session_id)
    return 0 if owner is None else owner.count
