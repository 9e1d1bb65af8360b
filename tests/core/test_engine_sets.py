"""AcquireAll: several semaphores, all or none, queued in every queue at once."""

from __future__ import annotations

import random
from itertools import count

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireAll,
    AcquireAllResult,
    AcquireFailed,
    AcquireStatus,
    CancelAcquire,
    CloseSession,
    DeleteSemaphore,
    Engine,
    Granted,
    NodeConfig,
    Release,
)
from tenure._core.invariants import check_invariants
from tenure._core.snapshot import dump, load
from tenure._core.values import MAX_SET_NAMES
from tenure.errors import (
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)

from .support import acquire, create_semaphore, make_engine, open_session, waiters_of

_ids = count(1000)


def lock_all(
    engine: Engine,
    sid: int,
    names: tuple[str, ...],
    *,
    now: float = 0.0,
    timeout: float | None = None,
    holds: tuple[int, ...] | None = None,
    count_: int = MAX_COUNT,
) -> tuple[AcquireAllResult, tuple[int, ...]]:
    """An AcquireAll of ``names`` (fresh request ids), its reply and its request ids."""
    ids = tuple(next(_ids) for _ in names)
    command = AcquireAll(sid, names, holds or (0,) * len(names), ids, count_, timeout=timeout)
    return engine.apply(command, now), ids


def granted(engine: Engine) -> list[tuple[int, str, int]]:
    """The Granted effects queued: (session, name, request id), in order."""
    return [
        (e.session_id, e.name, e.request_id) for e in engine.take_effects() if type(e) is Granted
    ]


def test_free_names_are_granted_at_once_with_a_token_each() -> None:
    engine = make_engine()
    s = open_session(engine)
    reply, _ = lock_all(engine, s, ("acct/1", "acct/7"))
    assert reply.status is AcquireStatus.GRANTED
    assert reply.tokens == (1, 2)  # in the order of the names
    assert (
        acquire(engine, open_session(engine), "acct/7", MAX_COUNT, ephemeral=True, timeout=0).status
        is AcquireStatus.BUSY
    )
    check_invariants(engine)


def test_none_is_taken_until_all_are_free_then_all_at_once() -> None:
    engine = make_engine()
    holder, s = open_session(engine), open_session(engine)
    acquire(engine, holder, "b", MAX_COUNT, ephemeral=True)
    reply, ids = lock_all(engine, s, ("a", "b"))
    assert reply.status is AcquireStatus.QUEUED
    # Not even the free one is held: both wait, in their queues.
    assert waiters_of(engine, s, "a") == [(s, MAX_COUNT)]
    assert waiters_of(engine, s, "b") == [(s, MAX_COUNT)]
    engine.take_effects()
    check_invariants(engine)
    engine.apply(Release(holder, "b"), 1.0)
    assert granted(engine) == [(s, "a", ids[0]), (s, "b", ids[1])]
    check_invariants(engine)


def test_overlapping_sets_in_opposite_orders_never_deadlock() -> None:
    engine = make_engine()
    holder, one, two = (open_session(engine) for _ in range(3))
    acquire(engine, holder, "a", MAX_COUNT, ephemeral=True)
    _, first = lock_all(engine, one, ("a", "b"))
    _, second = lock_all(engine, two, ("b", "a"))
    engine.take_effects()
    engine.apply(Release(holder, "a"), 1.0)
    assert granted(engine) == [(one, "a", first[0]), (one, "b", first[1])]
    engine.apply(Release(one, "a"), 2.0)
    assert granted(engine) == []  # b is still one's
    engine.apply(Release(one, "b"), 3.0)
    assert sorted(granted(engine)) == sorted([(two, "b", second[0]), (two, "a", second[1])])
    check_invariants(engine)


def test_a_waiting_set_holds_back_later_requests_of_each_of_its_queues() -> None:
    engine = make_engine()
    holder, asking, later = (open_session(engine) for _ in range(3))
    acquire(engine, holder, "a", MAX_COUNT, ephemeral=True)
    lock_all(engine, asking, ("a", "b"))
    # b is free, but the set came first and heads b's queue: no barging.
    assert acquire(engine, later, "b", 1, ephemeral=True, timeout=0).status is AcquireStatus.BUSY
    assert acquire(engine, later, "b", 1, ephemeral=True).status is AcquireStatus.QUEUED
    engine.take_effects()
    engine.apply(Release(holder, "a"), 1.0)
    assert [g[:2] for g in granted(engine)] == [(asking, "a"), (asking, "b")]
    engine.apply(Release(asking, "b"), 2.0)
    assert [g[:2] for g in granted(engine)] == [(later, "b")]
    check_invariants(engine)


@pytest.mark.parametrize("how", ["cancel", "release", "timeout", "close", "delete"])
def test_a_member_leaving_its_queue_takes_the_others_with_it(how: str) -> None:
    engine = make_engine()
    holder, s, other = (open_session(engine) for _ in range(3))
    create_semaphore(engine, holder, "c", 1)
    acquire(engine, holder, "c", 1)
    acquire(engine, holder, "a", MAX_COUNT, ephemeral=True)
    reply, ids = lock_all(engine, s, ("a", "b", "c"), timeout=5.0, count_=1)
    assert reply.status is AcquireStatus.QUEUED
    acquire(engine, other, "b", 1, ephemeral=True)  # queued behind the set on b
    engine.take_effects()
    if how == "cancel":
        assert engine.apply(CancelAcquire(s, "b", ids[1]), 1.0)
    elif how == "release":
        assert engine.apply(Release(s, "c"), 1.0)
    elif how == "timeout":
        engine.tick(5.0)
    elif how == "close":
        engine.apply(CloseSession(s), 1.0)
    else:
        engine.apply(DeleteSemaphore(holder, "c", force=True), 1.0)
    effects = engine.take_effects()
    failed = sorted(
        (e.name, e.request_id) for e in effects if type(e) is AcquireFailed and e.session_id == s
    )
    assert failed == [("a", ids[0]), ("b", ids[1]), ("c", ids[2])]
    # b's queue moved on at once: the later request has it.
    assert [(e.session_id, e.name) for e in effects if type(e) is Granted] == [(other, "b")]
    assert engine.nodes["n"].sets == {}
    check_invariants(engine)


def test_busy_and_bad_requests_change_nothing() -> None:
    engine = make_engine(NodeConfig(max_waiters=1))
    holder, s, t = (open_session(engine) for _ in range(3))
    acquire(engine, holder, "a", MAX_COUNT, ephemeral=True)
    before = dump(engine)
    assert lock_all(engine, s, ("b", "a"), timeout=0)[0].status is AcquireStatus.BUSY
    assert "b" not in engine.nodes["n"].semaphores  # not even made
    for names, error in (
        ((), InvalidArgumentError),
        (("x", "x"), InvalidArgumentError),
        (tuple(f"n{i}" for i in range(MAX_SET_NAMES + 1)), InvalidArgumentError),
        (("x", ""), InvalidArgumentError),
    ):
        with pytest.raises(error):
            lock_all(engine, s, names)
    with pytest.raises(InvalidArgumentError, match="one entry per name"):
        engine.apply(AcquireAll(s, ("x", "y"), (0,), (1, 2), 1), 0.0)
    with pytest.raises(NotFoundError):
        engine.apply(AcquireAll(s, ("x", "y"), (0, 0), (1, 2), 1, ephemeral=False), 0.0)
    acquire(engine, s, "y", 1, ephemeral=True)
    with pytest.raises(PreconditionFailedError, match="already holds or waits for 'y'"):
        lock_all(engine, s, ("x", "y"))
    lock_all(engine, t, ("a", "z"))  # queued on a: a's queue is full now
    with pytest.raises(LimitExceededError, match="max_waiters"):
        lock_all(engine, s, ("a", "q"), holds=(1, 1))
    del before
    check_invariants(engine)


def test_a_snapshot_keeps_sets_and_serves_them_the_same() -> None:
    engine = make_engine()
    holder, s = open_session(engine), open_session(engine)
    acquire(engine, holder, "a", MAX_COUNT, ephemeral=True)
    _, ids = lock_all(engine, s, ("a", "b"), holds=(2, 3), timeout=30.0)
    engine.take_effects()
    twin = load(dump(engine))
    assert twin.nodes["n"].sets == engine.nodes["n"].sets
    for e in (engine, twin):
        e.apply(Release(holder, "a"), 1.0)
        assert granted(e) == [(s, "a", ids[0]), (s, "b", ids[1])]
        check_invariants(e)


@pytest.mark.parametrize("seed", range(30))
def test_random_schedules_keep_the_invariants_and_always_drain(seed: int) -> None:
    """Sessions asking for random sets (all-or-none sets and single names, any order): after
    every step the invariants hold; then, with holders letting go as they are served,
    every request is granted in turn (nothing waits for ever: no deadlock)."""
    rng = random.Random(seed)
    engine = make_engine()
    sessions = [open_session(engine) for _ in range(5)]
    names = ["a", "b", "c", "d"]
    now = 0.0
    for i in range(60):
        now += rng.choice([0.0, 0.1])
        sid = rng.choice(sessions)
        hold = rng.randint(0, 3)
        roll = rng.random()
        try:
            if roll < 0.5:
                chosen = tuple(rng.sample(names, rng.randint(2, 4)))
                lock_all(
                    engine,
                    sid,
                    chosen,
                    holds=(hold,) * len(chosen),
                    now=now,
                    count_=rng.choice([1, 2, MAX_COUNT]),
                )
            elif roll < 0.75:
                engine.apply(
                    Acquire(
                        sid,
                        rng.choice(names),
                        rng.choice([1, MAX_COUNT]),
                        50_000 + i,
                        ephemeral=True,
                        hold=hold,
                    ),
                    now,
                )
            else:
                engine.apply(Release(sid, rng.choice(names), hold), now)
        except (PreconditionFailedError, LimitExceededError):
            pass
        engine.take_effects()
        check_invariants(engine)
    # Let holders go as they are served: each round frees every hold, which must
    # grant at least the earliest request waiting anywhere.
    node = engine.nodes["n"]
    for _ in range(200):
        waiting = sum(sem.queue_length() for sem in node.semaphores.values())
        if not waiting:
            break
        now += 0.1
        holds = [
            (o.session_id, sem.name, o.hold)
            for sem in list(node.semaphores.values())
            for o in sem.owners.values()
        ]
        assert holds, "requests wait while nothing is held: a deadlock"
        for sid, name, hold in holds:
            engine.apply(Release(sid, name, hold), now)
        engine.take_effects()
        check_invariants(engine)
    assert not any(sem.queue_length() for sem in node.semaphores.values())
    assert node.sets == {}


def test_a_forced_delete_ends_every_set_waiting_on_the_name_whole() -> None:
    """Two sets wait on x behind a held w; deleting x ends both, in all their queues
    (serving z's queue while the first set leaves must not grant the second)."""
    engine = make_engine()
    holder, one, two = (open_session(engine) for _ in range(3))
    acquire(engine, holder, "w", MAX_COUNT, ephemeral=True)
    lock_all(engine, one, ("w", "x", "z"))
    lock_all(engine, two, ("x", "z"))
    engine.take_effects()
    engine.apply(DeleteSemaphore(holder, "x", force=True), 1.0)
    effects = engine.take_effects()
    assert [e for e in effects if type(e) is Granted] == []
    failed = sorted((e.session_id, e.name) for e in effects if type(e) is AcquireFailed)
    assert failed == [(one, "w"), (one, "x"), (one, "z"), (two, "x"), (two, "z")]
    assert "z" not in engine.nodes["n"].semaphores  # nobody holds or waits for it
    assert engine.nodes["n"].sets == {}
    check_invariants(engine)
