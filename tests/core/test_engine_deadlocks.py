"""Deadlock detection in the engine: an acquire that would close a cycle of tasks
waiting on each other is refused at once, naming the cycle; nothing else is."""

from __future__ import annotations

from itertools import count

import pytest

from tenure._core import (
    MAX_COUNT,
    AcquireAll,
    AcquireStatus,
    DescribeNode,
    DropNode,
    Engine,
    Granted,
    Release,
    ResumeSession,
)
from tenure._core.invariants import check_invariants
from tenure._core.snapshot import SNAPSHOT_VERSION, dump, load
from tenure._core.values import DEADLOCK_SEARCH_LIMIT, MAX_DEADLOCKS_SHOWN
from tenure.errors import DeadlockError, InvalidArgumentError

from .support import KEY, NODE, acquire, create_semaphore, make_engine, open_session, waiters_of

_ids = count(5000)

GRANTED, QUEUED, BUSY = AcquireStatus.GRANTED, AcquireStatus.QUEUED, AcquireStatus.BUSY


def lock(engine: Engine, sid: int, task: int, name: str, **kw: object) -> AcquireStatus:
    """A mutex acquire (every token of an ephemeral semaphore) by ``task`` of ``sid``."""
    return acquire(engine, sid, name, MAX_COUNT, ephemeral=True, task=task, **kw).status  # type: ignore[arg-type]


def take(engine: Engine, sid: int, task: int, name: str, n: int, hold: int = 0) -> AcquireStatus:
    """``n`` tokens of the persistent semaphore ``name``."""
    return acquire(engine, sid, name, n, task=task, hold=hold).status


def lock_all(engine: Engine, sid: int, task: int, *names: str) -> AcquireStatus:
    ids = tuple(next(_ids) for _ in names)
    command = AcquireAll(sid, names, (0,) * len(names), ids, MAX_COUNT, task=task)
    return engine.apply(command, 0.0).status


def refused(engine: Engine, call: object, *args: object, **kw: object) -> str:
    """Run ``call(engine, *args)``, which must raise DeadlockError and change nothing;
    the error's message."""
    before = dump(engine)
    with pytest.raises(DeadlockError) as caught:
        call(engine, *args, **kw)  # type: ignore[operator]
    assert dump(engine) == before, "a refused acquire changed the engine's state"
    assert engine.take_effects() == []
    check_invariants(engine)
    return str(caught.value)


def granted_to(engine: Engine) -> list[tuple[int, str]]:
    return [(e.session_id, e.name) for e in engine.take_effects() if isinstance(e, Granted)]


def crossing(first_task: int = 1, second_task: int = 1) -> tuple[Engine, int, int]:
    """Two sessions crossing two mutexes, one acquire short of a cycle: the first
    (its task ``first_task``) holds 'a' and waits for 'b', which the second (its task
    ``second_task``) holds. The engine and the two session ids."""
    engine = make_engine()
    s1, s2 = open_session(engine), open_session(engine)
    assert lock(engine, s1, first_task, "a") is GRANTED
    assert lock(engine, s2, second_task, "b") is GRANTED
    assert lock(engine, s1, first_task, "b") is QUEUED  # no cycle yet: it waits
    return engine, s1, s2


def test_two_sessions_crossing_two_mutexes_the_closing_acquire_is_refused() -> None:
    engine, s5, s7 = crossing(3, 1)
    message = refused(engine, lock, s7, 1, "a")
    assert message == (
        f"refused: waiting would deadlock: session {s7} (task 1) waits for 'a' held by "
        f"session {s5} (task 3), which waits for 'b' held by session {s7} (task 1)"
    )
    # The other keeps waiting, and goes on once the refused one's task lets go.
    assert waiters_of(engine, s5, "b") == [(s5, MAX_COUNT)]
    engine.apply(Release(s7, "b"), 0.0)
    assert granted_to(engine) == [(s5, "b")]
    check_invariants(engine)


def test_three_sessions_the_third_acquire_closes_the_cycle() -> None:
    engine = make_engine()
    s1, s2, s3 = (open_session(engine) for _ in range(3))
    for sid, name in ((s1, "a"), (s2, "b"), (s3, "c")):
        assert lock(engine, sid, 1, name) is GRANTED
    assert lock(engine, s1, 1, "b") is QUEUED
    assert lock(engine, s2, 1, "c") is QUEUED
    message = refused(engine, lock, s3, 1, "a")
    assert message.endswith(
        f"session {s3} (task 1) waits for 'a' held by session {s1} (task 1), which waits "
        f"for 'b' held by session {s2} (task 1), which waits for 'c' held by "
        f"session {s3} (task 1)"
    )
    assert waiters_of(engine, s1, "b") == [(s1, MAX_COUNT)]
    assert waiters_of(engine, s1, "c") == [(s2, MAX_COUNT)]


def test_a_chain_that_does_not_come_back_waits() -> None:
    engine, _, _ = crossing()
    s3 = open_session(engine)
    assert lock(engine, s3, 1, "a") is QUEUED  # s3 holds nothing s1 or s2 waits for
    assert engine.apply(DescribeNode(NODE), 0.0).deadlocks == ()


def test_a_free_task_of_the_same_session_is_no_deadlock() -> None:
    # Session granularity would refuse this: s1 holds 'a' (task 1, which will release
    # it) and waits for 'b' (task 2), while s2 holds 'b' and asks for 'a'.
    engine = make_engine()
    s1, s2 = open_session(engine), open_session(engine)
    lock(engine, s1, 1, "a")
    lock(engine, s2, 1, "b")
    assert lock(engine, s1, 2, "b") is QUEUED
    assert lock(engine, s2, 1, "a") is QUEUED
    engine.apply(Release(s1, "a"), 0.0)  # task 1 was free all along
    assert granted_to(engine) == [(s2, "a")]


def test_two_tasks_of_one_session_in_a_cycle_with_another_session() -> None:
    engine = make_engine()
    s1, s2 = open_session(engine), open_session(engine)
    lock(engine, s1, 1, "a")
    lock(engine, s2, 1, "b")
    lock(engine, s1, 2, "c")
    assert lock(engine, s1, 1, "b") is QUEUED  # task 1 waits for s2
    assert lock(engine, s2, 1, "c") is QUEUED  # s2 waits for task 2
    message = refused(engine, lock, s1, 2, "a", hold=1)  # task 2 would wait for task 1
    assert message.endswith(
        f"session {s1} (task 2) waits for 'a' held by session {s1} (task 1), which waits "
        f"for 'b' held by session {s2} (task 1), which waits for 'c' held by "
        f"session {s1} (task 2)"
    )


def test_a_task_queued_behind_its_own_sessions_other_task_is_no_deadlock() -> None:
    engine = make_engine()
    s1 = open_session(engine)
    assert lock(engine, s1, 1, "m") is GRANTED
    assert acquire(engine, s1, "m", MAX_COUNT, ephemeral=True, hold=1, task=2).status is QUEUED
    # ...but the two tasks of one session crossing two mutexes are a deadlock.
    lock(engine, s1, 2, "n", hold=0)
    message = refused(engine, acquire, s1, "n", MAX_COUNT, ephemeral=True, hold=1, task=1)
    assert f"session {s1} (task 1) waits for 'n' held by session {s1} (task 2)" in message


def test_a_task_asking_for_a_mutex_it_holds_under_another_hold_is_refused() -> None:
    engine = make_engine()
    s1 = open_session(engine)
    lock(engine, s1, 4, "m")
    message = refused(engine, acquire, s1, "m", MAX_COUNT, ephemeral=True, hold=1, task=4)
    assert message.endswith(f"session {s1} (task 4) waits for 'm' held by session {s1} (task 4)")


def test_counting_semaphores_a_holder_that_can_release_breaks_no_cycle() -> None:
    engine = make_engine()
    s1, s2, s3 = (open_session(engine) for _ in range(3))
    create_semaphore(engine, s1, "pool", 2)
    assert take(engine, s1, 1, "pool", 1) is GRANTED
    assert take(engine, s2, 1, "pool", 1) is GRANTED
    lock(engine, s3, 1, "x")
    assert lock(engine, s1, 1, "x") is QUEUED  # s1 waits for s3
    # s3 needs one token of 'pool': s1 holds one and is stuck behind s3, but s2 is free
    # and will release the other. A cycle (s3 -> s1 -> s3), and no deadlock.
    assert take(engine, s3, 1, "pool", 1) is QUEUED
    engine.apply(Release(s2, "pool"), 0.0)
    assert granted_to(engine) == [(s3, "pool")]


def test_counting_semaphores_every_holder_stuck_is_a_deadlock() -> None:
    engine = make_engine()
    s1, s2, s3 = (open_session(engine) for _ in range(3))
    create_semaphore(engine, s1, "pool", 2)
    take(engine, s1, 1, "pool", 1)
    take(engine, s2, 1, "pool", 1)
    lock(engine, s3, 1, "x")
    lock(engine, s1, 1, "x")
    lock(engine, s2, 1, "x")  # both holders of 'pool' wait for s3
    message = refused(engine, take, s3, 1, "pool", 1)
    assert f"session {s3} (task 1) waits for 'pool' held by session" in message
    assert f"which waits for 'x' held by session {s3} (task 1)" in message


def test_lock_all_waiting_ahead_is_waited_for() -> None:
    engine = make_engine()
    s1, s2 = open_session(engine), open_session(engine)
    lock(engine, s2, 1, "b")
    assert lock_all(engine, s1, 1, "a", "b") is QUEUED  # waits in 'a' and 'b'
    # 'a' is free, but s1's set is ahead in its queue, and waits for s2's 'b'.
    message = refused(engine, lock, s2, 1, "a")
    assert message.endswith(
        f"session {s2} (task 1) waits for 'a' queued behind session {s1} (task 1), which "
        f"waits for 'b' held by session {s2} (task 1)"
    )


def test_lock_all_closing_the_cycle_is_refused() -> None:
    engine, s1, s2 = crossing()
    message = refused(engine, lock_all, s2, 1, "a", "c")
    assert f"session {s2} (task 1) waits for 'a' held by session {s1} (task 1)" in message
    assert waiters_of(engine, s1, "a") == []  # nothing of the set was queued


def test_two_upgrades_of_one_semaphore_deadlock() -> None:
    # Two readers of a 2-token readers-writer lock both upgrade to a writer.
    engine = make_engine()
    s1, s2 = open_session(engine), open_session(engine)
    create_semaphore(engine, s1, "rw", 2)
    take(engine, s1, 1, "rw", 1)
    take(engine, s2, 1, "rw", 1)
    assert take(engine, s1, 1, "rw", 2) is QUEUED  # restated: an upgrade
    message = refused(engine, take, s2, 1, "rw", 2)
    assert message.endswith(
        f"session {s2} (task 1) waits for 'rw' held by session {s1} (task 1), which "
        f"waits for 'rw' held by session {s2} (task 1)"
    )


def test_an_upgrade_behind_a_waiter_that_needs_its_tokens_deadlocks() -> None:
    engine = make_engine()
    s1, s2 = open_session(engine), open_session(engine)
    create_semaphore(engine, s1, "rw", 2)
    take(engine, s1, 1, "rw", 1)
    assert take(engine, s2, 1, "rw", 2) is QUEUED  # a writer, waiting for s1's token
    message = refused(engine, take, s1, 1, "rw", 2)  # s1 upgrades: behind the writer
    assert message.endswith(
        f"session {s1} (task 1) waits for 'rw' queued behind session {s2} (task 1), which "
        f"waits for 'rw' held by session {s1} (task 1)"
    )


def test_an_upgrade_is_refused_only_once_it_needs_a_stuck_holders_token() -> None:
    engine = make_engine()
    s1, s2 = open_session(engine), open_session(engine)
    create_semaphore(engine, s1, "pool", 3)
    take(engine, s1, 1, "pool", 1)
    lock(engine, s1, 1, "x")
    take(engine, s2, 1, "pool", 1)
    assert lock(engine, s2, 1, "x") is QUEUED  # s2 waits for s1
    assert take(engine, s1, 1, "pool", 2) is GRANTED  # fits beside s2's token
    # All 3 would need s2's token, and s2 waits for s1's 'x'.
    message = refused(engine, take, s1, 1, "pool", 3)
    assert message.endswith(
        f"session {s1} (task 1) waits for 'pool' held by session {s2} (task 1), which "
        f"waits for 'x' held by session {s1} (task 1)"
    )


def test_unknown_tasks_are_never_checked() -> None:
    engine, s1, s2 = crossing(0, 0)
    assert lock(engine, s2, 0, "a") is QUEUED  # an old client's deadlock: not seen
    # A known task asking is checked, but a hold of task 0 counts as free.
    s3 = open_session(engine)
    lock(engine, s3, 1, "c")
    assert lock(engine, s1, 0, "c") is QUEUED
    assert lock(engine, s3, 1, "a") is QUEUED


def test_tries_and_grants_are_never_refused() -> None:
    engine, _, s2 = crossing()
    assert lock(engine, s2, 1, "a", timeout=0) is BUSY  # a try waits for nobody
    assert acquire(engine, s2, "c", 1, ephemeral=True, task=1).status is GRANTED


def test_a_task_with_two_requests_at_once_counts_as_free() -> None:
    # Not one task awaiting one request (a client that pipelines): its holds may go.
    engine = make_engine()
    s1, s2 = open_session(engine), open_session(engine)
    lock(engine, s1, 1, "a")
    lock(engine, s2, 1, "b")
    lock(engine, s2, 1, "z")
    lock(engine, s1, 1, "b")
    lock(engine, s1, 1, "z")  # task 1 of s1 now waits twice
    assert lock(engine, s2, 1, "a") is QUEUED
    # ...and such a task asking is not checked either.
    s3 = open_session(engine)
    lock(engine, s3, 1, "y")
    assert lock(engine, s2, 2, "y") is QUEUED
    assert lock(engine, s2, 2, "w") is GRANTED


def test_a_resumed_sessions_holds_are_of_no_known_task() -> None:
    engine = make_engine()
    s1, s2 = open_session(engine), open_session(engine)
    lock(engine, s1, 1, "a")
    lock(engine, s2, 1, "b")
    engine.apply(ResumeSession(s1, KEY, NODE), 0.0)
    engine.take_effects()
    # The new owner's task 1 is not the old one's: 'a' counts as held by a free task.
    assert lock(engine, s1, 1, "b") is QUEUED
    assert lock(engine, s2, 1, "a") is QUEUED


def test_the_search_limit_bounds_what_one_check_looks_at() -> None:
    def ring(limit: int) -> AcquireStatus | str:
        engine = make_engine()
        engine.deadlock_search_limit = limit
        sids = [open_session(engine) for _ in range(6)]
        for i, sid in enumerate(sids):
            lock(engine, sid, 1, f"m{i}")
        for i, sid in enumerate(sids[:-1]):
            assert lock(engine, sid, 1, f"m{i + 1}") is QUEUED
        try:
            return lock(engine, sids[-1], 1, "m0")
        except DeadlockError as error:
            return str(error)

    assert isinstance(ring(DEADLOCK_SEARCH_LIMIT), str)
    needed = next(n for n in range(1, 100) if isinstance(ring(n), str))
    assert ring(needed - 1) is QUEUED  # past the limit: waits, no deadlock reported
    assert ring(0) is QUEUED  # 0: no check at all (a journal's replay)


def test_the_task_is_checked_like_any_argument() -> None:
    engine = make_engine()
    s1 = open_session(engine)
    with pytest.raises(InvalidArgumentError, match="task"):
        lock(engine, s1, -1, "a")
    with pytest.raises(InvalidArgumentError, match="task"):
        lock_all(engine, s1, 2**64, "a", "b")


def test_the_node_keeps_its_latest_broken_deadlocks() -> None:
    engine, _, s2 = crossing()
    for attempt in range(MAX_DEADLOCKS_SHOWN + 2):
        with pytest.raises(DeadlockError):
            lock(engine, s2, 1, "a", now=float(attempt))
    kept = engine.apply(DescribeNode(NODE), 20.0).deadlocks
    assert len(kept) == MAX_DEADLOCKS_SHOWN
    assert [d.at for d in kept] == [float(t) for t in range(2, MAX_DEADLOCKS_SHOWN + 2)]
    assert {(d.session_id, d.task) for d in kept} == {(s2, 1)}
    assert kept[0].cycle.startswith(f"session {s2} (task 1) waits for 'a' held by")
    engine.apply(DropNode(NODE, force=True), 20.0)
    assert NODE not in engine.broken_deadlocks


def test_tasks_survive_a_snapshot_and_older_snapshots_load_with_none() -> None:
    engine, _, s2 = crossing(3, 9)
    plain = dump(engine)
    assert plain["version"] == SNAPSHOT_VERSION
    copy = load(plain)
    check_invariants(copy)
    assert dump(copy) == plain
    with pytest.raises(DeadlockError):
        lock(copy, s2, 9, "a")
    older = {**plain, "version": 8, "nodes": [dict(n) for n in plain["nodes"]]}
    for node in older["nodes"]:
        node.pop("tasks", None)
    legacy = load(older)
    assert lock(legacy, s2, 9, "a") is QUEUED  # every task 0: not seen
    check_invariants(legacy)
