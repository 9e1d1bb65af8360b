"""A node moved from one engine to another (tenure._core.node_moves): it behaves as the
same node after a restart would, its tokens and queue order carry on, its owners'
usage moves with it, the engine it left forgets it telling nobody, and every refused
import changes nothing."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tenure._core import (
    AttachSession,
    CreateNode,
    CreateSession,
    DescribeSession,
    DetachSession,
    Engine,
    NodeConfig,
    Release,
)
from tenure._core.invariants import check_invariants
from tenure._core.node_moves import SESSION_ID_BLOCK, forget_moved_node, import_node
from tenure._core.quota_values import Quota
from tenure._core.snapshot import dump, dump_node, load, resume
from tenure._core.values import ClientIdentity
from tenure.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)

from .support import KEY, NODE, acquire, create_semaphore, describe, make_engine, open_session
from .test_snapshot import random_command, random_run, step

OTHER = "o"


def cell_engine(block: int, *, node: str = "x") -> Engine:
    """An engine whose sessions' ids are of ``block`` (a cell's), with a node ``node``
    and one session of it."""
    engine = Engine()
    engine.last_session_id = block * SESSION_ID_BLOCK
    engine.apply(CreateNode(node), 0.0)
    open_session(engine, node)
    return engine


def with_other_node(engine: Engine, now: float) -> int:
    """Give ``engine`` a node :data:`OTHER` whose session holds ``h``: what a move of
    node ``n`` must leave alone."""
    engine.apply(CreateNode(OTHER), now)
    other = open_session(engine, OTHER, now=now)
    assert acquire(engine, other, "h", ephemeral=True, now=now).token is not None
    return other


def holds_and_waits(engine: Engine, sid: int, name: str, now: float) -> Any:
    """What ``name`` is as its holders and waiters see it, its times left out (they
    move to the engine's clock)."""
    seen = describe(engine, sid, name, now=now)
    return (
        seen.limit,
        seen.count,
        seen.data,
        [(o.session_id, o.count, o.data, o.token) for o in seen.owners],
        [(w.session_id, w.count, w.data) for w in seen.waiters],
    )


@pytest.mark.parametrize("seed", range(30))
def test_a_moved_node_behaves_as_the_same_node_after_a_restart(seed: int) -> None:
    rng = random.Random(seed)
    source, now = random_run(rng, lock_delay=2.0, lease_ttls=seed % 2 == 1)
    source.take_effects()
    other = with_other_node(source, now)
    source.take_effects()
    restarted = load(dump(source))  # (the same node, moved in time only)
    moved_at = now + 50.0
    resume(restarted, moved_at)
    restarted.apply(AttachSession(other, KEY, 2), moved_at)  # (its node stays behind)
    target = cell_engine(1)
    plain = dump_node(source, NODE)
    assert import_node(target, plain, moved_at) == NODE
    forget_moved_node(source, NODE)
    # The engine it left forgets it, tells nobody, and keeps its other node.
    assert source.take_effects() == []
    assert NODE not in source.nodes
    assert sorted(source.sessions) == [other]
    check_invariants(source)
    check_invariants(target)
    assert target.take_effects() == []
    # Every session came along, each detached with a whole window from the move.
    moved = sorted(restarted.nodes[NODE].sessions)
    assert sorted(target.nodes[NODE].sessions) == moved
    for sid in moved:
        assert target.sessions[sid].expires_at == moved_at + target.sessions[sid].timeout
    # From here on the moved node answers as the restarted one does, step for step.
    now = moved_at
    for request_id in range(500, 560):
        now += rng.choice([0.0, 0.1, 0.4, 1.5])
        command = random_command(rng, target, request_id)
        if getattr(command, "session_id", None) not in target.nodes[NODE].sessions:
            continue  # (a session the random run closed)
        assert step(target, command, now) == step(restarted, command, now), command
        check_invariants(target)
        for sid in sorted(target.nodes[NODE].sessions):
            ask = DescribeSession(sid)
            assert target.apply(ask, now) == restarted.apply(ask, now)
    target.tick(now + 100.0)
    restarted.tick(now + 100.0)
    assert target.take_effects() == restarted.take_effects()


@pytest.mark.parametrize("target_tokens", [0, 3, 500])
def test_every_token_after_a_move_is_above_every_token_before(target_tokens: int) -> None:
    source = make_engine()
    a, b = open_session(source), open_session(source)
    create_semaphore(source, a, "p", 1)
    before = []
    for i in range(40):
        holder = (a, b)[i % 2]
        got = acquire(source, holder, "p", now=float(i))
        assert got.token is not None
        before.append(got.token)
        source.apply(Release(holder, "p"), float(i))
    target = cell_engine(1)
    target.last_token = target_tokens  # (its own nodes' grants, fewer or more)
    import_node(target, dump_node(source, NODE), 100.0)
    target.apply(AttachSession(a, KEY, 2), 100.0)
    after = acquire(target, a, "p", now=100.0)
    assert after.token is not None
    assert after.token > max(before)
    assert after.token > target_tokens


def test_holders_keep_their_holds_and_waiters_their_order() -> None:
    source = make_engine(NodeConfig(recovery_window=30.0))
    holder, *waiters = (open_session(source) for _ in range(4))
    create_semaphore(source, holder, "p", 1, data=b"cfg")
    held = acquire(source, holder, "p", data=b"me")
    for at, sid in enumerate(waiters, 1):
        acquire(source, sid, "p", now=float(at), data=b"w%d" % sid)
    seen = holds_and_waits(source, holder, "p", 3.0)
    target = cell_engine(1)
    import_node(target, dump_node(source, NODE), 7.0)
    forget_moved_node(source, NODE)
    assert holds_and_waits(target, holder, "p", 7.0) == seen
    # A request made after the move queues behind those that moved.
    newcomer = open_session(target, NODE, now=8.0)
    assert newcomer > SESSION_ID_BLOCK  # (an id of the target's block)
    acquire(target, newcomer, "p", now=8.0)
    for sid in (holder, *waiters):
        target.apply(AttachSession(sid, KEY, 2), 8.0)
    served = []
    current = holder
    for _ in range(4):
        target.apply(Release(current, "p"), 9.0)
        owners = describe(target, newcomer, "p", now=9.0).owners
        assert len(owners) == 1
        current = owners[0].session_id
        served.append(current)
    assert served == [*waiters, newcomer]
    assert held.token is not None
    assert all(
        o.token is not None and o.token > held.token
        for o in describe(target, newcomer, "p", now=9.0).owners
    )


def test_a_moved_sessions_window_runs_on_the_new_engine() -> None:
    source = make_engine(NodeConfig(recovery_window=5.0))
    a = open_session(source)
    create_semaphore(source, a, "p", 1)
    acquire(source, a, "p")
    source.apply(DetachSession(a), 1.0)  # its window would end at 6 there
    target = cell_engine(1)
    import_node(target, dump_node(source, NODE), 100.0)
    # Detached, with a whole window from the move: it holds until 105, then ends.
    target.tick(104.9)
    assert [o.session_id for o in describe(target, a, "p", now=104.9).owners] == [a]
    target.tick(105.0)
    assert a not in target.sessions
    check_invariants(target)


def test_an_owners_usage_and_a_clients_sessions_move_with_its_node() -> None:
    source = make_engine()
    source.actor = "team"
    who = ClientIdentity("host-a", 4242, "worker")
    a = source.apply(CreateSession(NODE, KEY, identity=who), 0.0).session_id
    create_semaphore(source, a, "p", 2, data=b"x" * 100)
    acquire(source, a, "p", data=b"y" * 50)
    source.actor = ""
    owned = list(source.ledger.of("team").counts)
    target = cell_engine(1)
    import_node(target, dump_node(source, NODE), 10.0)
    forget_moved_node(source, NODE)
    assert target.ledger.of("team").counts == owned
    assert not any(source.ledger.of("team").counts)
    # (the sessions of one client process: whom its tasks may block, WhyName's chains)
    assert list(target.sessions_of(who)) == [a]
    assert list(source.sessions_of(who)) == []
    check_invariants(source)
    check_invariants(target)


def test_what_ends_by_the_import_ends_before_it_is_counted() -> None:
    target = cell_engine(1)
    target.actor = "team"
    leaving = open_session(target, "x", timeout=5.0)
    target.actor = ""
    target.apply(DetachSession(leaving), 0.0)  # (its window ends at 5)
    target.ledger.quotas = {"team": Quota(sessions=1)}
    import_node(target, dump_node(moving_engine(), NODE), 10.0)  # (no tick since 0)
    assert leaving not in target.sessions
    check_invariants(target)


def refused(target: Engine, plain: dict[str, Any], error: type[Exception], said: str) -> None:
    """Import ``plain`` into ``target``: refused with ``error``, nothing changed."""
    before = dump(target)
    usage = {owner: list(u.counts) for owner, u in target.ledger.usage.items() if any(u.counts)}
    with pytest.raises(error, match=said):
        import_node(target, plain, 10.0)
    assert dump(target) == before
    assert {o: list(u.counts) for o, u in target.ledger.usage.items() if any(u.counts)} == usage
    check_invariants(target)


def moving_engine() -> Engine:
    """A node ``n`` of a session that holds ``p``, as a default cell's engine has it."""
    source = make_engine()
    source.actor = "team"
    a = open_session(source)
    source.actor = ""
    acquire(source, a, "p", ephemeral=True)
    return source


def test_an_import_is_refused_where_the_name_is_taken() -> None:
    refused(cell_engine(1, node=NODE), dump_node(moving_engine(), NODE), AlreadyExistsError, "n")


def test_an_import_is_refused_where_a_session_id_is_taken_or_to_be_given() -> None:
    plain = dump_node(moving_engine(), NODE)
    same_block = Engine()  # (both engines give ids from 1: the moved session's is 1)
    same_block.apply(CreateNode("x"), 0.0)
    refused(same_block, plain, PreconditionFailedError, "gives out later")
    open_session(same_block, "x")
    refused(same_block, plain, AlreadyExistsError, "session 1")


def test_an_import_is_refused_past_max_nodes_a_quota_or_the_memory_budget() -> None:
    plain = dump_node(moving_engine(), NODE)
    full = cell_engine(1)
    full.max_nodes = 1
    refused(full, plain, LimitExceededError, "max_nodes")
    quota = cell_engine(1)
    quota.ledger.quotas = {"team": Quota(sessions=0)}
    refused(quota, plain, LimitExceededError, "quota sessions")
    budget = cell_engine(1)
    budget.ledger.budget = budget.ledger.estimate() + 10
    refused(budget, plain, LimitExceededError, "memory budget")


@pytest.mark.parametrize(
    "plain",
    [{}, {"version": 13, "nodes": []}, "n"],
)
def test_an_import_is_refused_unless_it_is_one_nodes_snapshot(plain: Any) -> None:
    refused(cell_engine(1), plain, InvalidArgumentError, "one node's snapshot")


def test_a_snapshot_of_two_nodes_is_not_a_move() -> None:
    source = moving_engine()
    source.apply(CreateNode("m"), 0.0)
    refused(cell_engine(1), dump(source), InvalidArgumentError, "one node's snapshot")


def test_only_a_node_that_is_there_moves() -> None:
    engine = moving_engine()
    with pytest.raises(NotFoundError):
        dump_node(engine, "nowhere")
    with pytest.raises(NotFoundError):
        forget_moved_node(engine, "nowhere")
