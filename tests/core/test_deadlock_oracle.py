"""The engine's deadlock decision against a brute-force oracle, on small random states.

Random sessions' tasks take, upgrade, release and lock_all mutexes and counting
semaphores, one request at a time per task (as a client's task awaits). Before each
request that must wait, the oracle decides from the engine's state alone, by
exhaustive search: it tries every order in which the free tasks release their holds
(the engine then grants what its FIFO rule grants, and a granted task is free in
turn) and finds the requests no order ever grants; the request is a deadlock iff it
is one of them and closes a cycle of them (it waits for a holder or for a request
ahead of it in a queue, and so on back to itself). The engine must refuse exactly
those requests (with DeadlockError, changing nothing) and let every other wait:
random waits mostly form no cycle (no false positive), and sometimes do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tenure._core import AcquireAll, AcquireStatus, Engine, Release
from tenure._core.invariants import check_invariants
from tenure._core.semaphore import holder_key
from tenure._core.snapshot import dump
from tenure.errors import DeadlockError

from .support import acquire, create_semaphore, make_engine, open_session

NAMES = ("a", "b", "c")
_ids = count(1)

#: A task: (session id, task number).
Task = tuple[int, int]


@dataclass(frozen=True)
class Hold:
    name: str
    key: int
    count: int
    task: Task | None  # None: its task is free (or not known)


@dataclass
class Request:
    order: int
    task: Task | None
    members: list[tuple[str, int, int]]  # (name, key, count)


@dataclass
class Model:
    """What the oracle reads of the engine: limits, holds, queues, requests."""

    limits: dict[str, int]
    holds: list[Hold]
    queues: dict[str, list[int]]  # name -> orders, in service order
    requests: dict[int, Request] = field(default_factory=dict)


def model_of(engine: Engine, asker: Task, asked: list[tuple[str, int, int]]) -> Model:
    """The node's state with the asked request queued at the back of its queues."""
    node = engine.nodes["n"]
    waiting: dict[Task, set[int]] = {}
    model = Model({}, [], {})
    for name, sem in node.semaphores.items():
        model.limits[name] = sem.limit
        model.queues[name] = []
        for waiter in sem.waiters.values():
            model.queues[name].append(waiter.order)
            request = model.requests.setdefault(waiter.order, Request(waiter.order, None, []))
            request.members.append((name, waiter.key, waiter.count))
            if waiter.task:
                tid = (waiter.session_id, waiter.task)
                waiting.setdefault(tid, set()).add(waiter.order)
                request.task = tid
    last = 1 << 70
    model.requests[last] = Request(last, asker, asked)
    waiting.setdefault(asker, set()).add(last)
    for name, _, _ in asked:
        model.queues[name].append(last)
    for name, sem in node.semaphores.items():
        for owner in sem.each_owner():
            tid = (owner.session_id, owner.task)
            known = owner.task != 0 and len(waiting.get(tid, ())) == 1
            model.holds.append(Hold(name, owner.key, owner.count, tid if known else None))
    return model


def never_granted(model: Model) -> set[int]:
    """The requests granted in no order of releases (an exhaustive search)."""
    seen: set[tuple[frozenset[Hold], frozenset[int]]] = set()
    ever: set[int] = set()
    todo = [settle(model, frozenset(model.holds), frozenset())]
    while todo:
        state = todo.pop()
        if state in seen:
            continue
        seen.add(state)
        holds, granted = state
        ever |= granted
        for hold in holds:
            if hold.task is None or _request_of(model, hold.task) in granted:
                todo.append(settle(model, holds - {hold}, granted))
    return set(model.requests) - ever


def _request_of(model: Model, task: Task) -> int:
    return next(r.order for r in model.requests.values() if r.task == task)


def settle(
    model: Model, holds: frozenset[Hold], granted: frozenset[int]
) -> tuple[frozenset[Hold], frozenset[int]]:
    """Grant, as the engine does, every request heading its queues that fits, until none."""
    changed = True
    while changed:
        changed = False
        for request in sorted(model.requests.values(), key=lambda r: r.order):
            if request.order in granted or not all(
                _heads(model, granted, name, request.order)
                and sum(h.count for h in holds if h.name == name and h.key != key) + n
                <= model.limits[name]
                for name, key, n in request.members
            ):
                continue
            for name, key, n in request.members:
                holds = frozenset(h for h in holds if not (h.name == name and h.key == key))
                # Granted, its task is free: the new hold may go at any time.
                holds |= {Hold(name, key, n, None)}
            granted |= {request.order}
            changed = True
    return holds, granted


def _heads(model: Model, granted: frozenset[int], name: str, order: int) -> bool:
    return next(o for o in model.queues[name] if o not in granted) == order


def oracle_deadlock(model: Model) -> bool:
    """Whether the asked request is stuck for good and closes a cycle of stuck requests."""
    stuck = never_granted(model)
    asking = 1 << 70
    if asking not in stuck:
        return False
    edges: dict[int, set[int]] = {}
    for request in model.requests.values():
        out = edges.setdefault(request.order, set())
        for name, key, _ in request.members:
            for hold in model.holds:
                if hold.name == name and hold.key != key and hold.task is not None:
                    out.add(_request_of(model, hold.task))
            queue = model.queues[name]
            out.update(queue[: queue.index(request.order)])
    reached, todo = set(), [asking]
    while todo:
        for target in edges[todo.pop()] & stuck:
            if target == asking:
                return True
            if target not in reached:
                reached.add(target)
                todo.append(target)
    return False


# -- the random runs ------------------------------------------------------------------

step = st.tuples(
    st.sampled_from(["take", "take", "lock_all", "release", "upgrade", "upgrade"]),
    st.integers(0, 2),  # session
    st.integers(1, 2),  # task
    st.sampled_from(NAMES),
    st.integers(1, 3),  # tokens
    st.sampled_from(NAMES),
)


@settings(max_examples=500, deadline=None)
@given(limits=st.tuples(*[st.integers(1, 3)] * 3), steps=st.lists(step, max_size=14))
def test_the_engine_refuses_exactly_what_the_oracle_calls_a_deadlock(
    limits: tuple[int, int, int], steps: list[tuple[str, int, int, str, int, str]]
) -> None:
    play(limits, steps, None)


@pytest.mark.parametrize("search_limit", [3, 6])
def test_a_search_cut_short_never_refuses_what_is_no_deadlock(search_limit: int) -> None:
    # A small deadlock_search_limit stops many checks (the look at the holders and
    # the search share it): each may then let a deadlock wait, never refuse a wait
    # that is none (issue 47: a DeadlockError in the soak's elections was the
    # client's, a release sent after the same task's next acquire).
    @settings(max_examples=150, deadline=None)
    @given(limits=st.tuples(*[st.integers(1, 3)] * 3), steps=st.lists(step, max_size=14))
    def run(limits: tuple[int, int, int], steps: list[tuple[str, int, int, str, int, str]]) -> None:
        play(limits, steps, search_limit)

    run()


def play(
    limits: tuple[int, int, int],
    steps: list[tuple[str, int, int, str, int, str]],
    search_limit: int | None,
) -> None:
    """Run ``steps``, checking each request that must wait against the oracle; with a
    ``search_limit`` (a check may stop short), only that no refusal is a false one."""
    engine = make_engine()
    if search_limit is not None:
        engine.deadlock_search_limit = search_limit
    sids = [open_session(engine) for _ in range(3)]
    for name, limit in zip(NAMES, limits, strict=True):
        create_semaphore(engine, sids[0], name, limit)
    busy: set[Task] = set()  # tasks with a request pending
    for op, s, task, name, n, other in steps:
        sid = sids[s]
        tid = (sid, task)
        node = engine.nodes["n"]
        busy = {tid for tid in busy if engine.sessions[tid[0]].task_waits(tid[1])}
        mine = [
            o for o in node.semaphores[name].each_owner() if o.session_id == sid and o.task == task
        ]
        if tid in busy:
            continue  # a task awaits one request at a time
        if op == "release":
            if mine:
                engine.apply(Release(sid, name, mine[0].hold), 0.0)
            continue
        names = [name] if op != "lock_all" or other == name else [name, other]
        if op == "upgrade" and mine:
            hold, n = mine[0].hold, min(mine[0].count + n, limits[NAMES.index(name)])
        else:  # a new hold of the session on each name
            used = {
                key >> 64
                for nm in names
                for key in (*node.semaphores[nm].owners, *node.semaphores[nm].waiters)
                if key & ((1 << 64) - 1) == sid
            }
            hold = next(h for h in range(10) if h not in used)
        n = min(n, *(limits[NAMES.index(nm)] for nm in names))
        asked = [(nm, holder_key(sid, hold), n) for nm in names]
        before = dump(engine)
        expected = oracle_deadlock(model_of(engine, tid, asked))
        event("a deadlock" if expected else "no deadlock")
        try:
            if len(names) == 1:
                status = acquire(engine, sid, name, n, hold=hold, task=task).status
            else:
                ids = tuple(next(_ids) for _ in names)
                command = AcquireAll(sid, tuple(names), (hold,) * 2, ids, n, task=task)
                status = engine.apply(command, 0.0).status
        except DeadlockError:
            assert expected, f"refused, but the oracle finds no deadlock: {asked}"
            assert dump(engine) == before
            continue
        queued = status is AcquireStatus.QUEUED
        if search_limit is None:
            assert not (queued and expected), f"let wait, but the oracle finds a deadlock: {asked}"
        if queued:
            busy.add(tid)
        check_invariants(engine)
