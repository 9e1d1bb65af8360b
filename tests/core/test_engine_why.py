"""Who blocks whom (WhyName, tenure._core.blocking): a name's holders and waiters, what
each holder waits for, the chain to the roots, the page and the look limit."""

from __future__ import annotations

from typing import TypeVar

import pytest

from tenure._core import MAX_COUNT, Engine, WhyName
from tenure._core.commands import CreateSession
from tenure._core.values import ClientIdentity
from tenure._core.why_report import WhyReport
from tenure.errors import InvalidArgumentError, NotFoundError

from .support import KEY, NODE, acquire, create_semaphore, make_engine, open_session

T = TypeVar("T")


def lock(
    engine: Engine, sid: int, name: str, *, task: int = 0, now: float = 0.0, **kw: object
) -> None:
    """A mutex acquire (every token of an ephemeral semaphore) by ``task`` of ``sid``."""
    acquire(engine, sid, name, MAX_COUNT, ephemeral=True, task=task, now=now, **kw)  # type: ignore[arg-type]


def known(found: tuple[T, ...] | None) -> tuple[T, ...]:
    """What the engine always knows (a store that does not says None)."""
    assert found is not None
    return found


def why(engine: Engine, name: str, now: float, **kw: int) -> WhyReport:
    return engine.apply(WhyName(NODE, name, **kw), now)


def named(engine: Engine, description: str) -> int:
    """A session described as ``description``, its client identified as pid 42."""
    identity = ClientIdentity("host-a", 42, "svc")
    command = CreateSession(NODE, KEY, description=description, identity=identity)
    return int(engine.apply(command, 0.0).session_id)


def chain_of_three() -> tuple[Engine, list[int]]:
    """C's holder waits for nothing; B's holder waits on C; A's holder waits on B; and a
    fourth session waits on A. The sessions: A's, B's, C's holders, A's waiter."""
    engine = make_engine()
    a, b, c, w = (named(engine, f"job-{x}") for x in "abcw")
    lock(engine, c, "C", task=3, now=1.0)
    lock(engine, b, "B", task=2, now=2.0)
    lock(engine, b, "C", task=2, now=3.0)  # queued behind c
    lock(engine, a, "A", task=1, now=4.0)
    lock(engine, a, "B", task=1, now=5.0)  # queued behind b
    lock(engine, w, "A", task=9, now=6.0)
    return engine, [a, b, c, w]


def test_a_chain_of_three_names_the_root_and_every_link() -> None:
    engine, (a, b, c, w) = chain_of_three()
    report = why(engine, "A", 10.0)
    assert (report.node, report.name) == (NODE, "A")
    (holder,) = report.holders
    assert (holder.session_id, holder.description, holder.identity.pid) == (a, "job-a", 42)
    assert holder.address == ""  # (the engine knows no connection: the server says)
    assert holder.held_for == pytest.approx(6.0)
    assert holder.max_hold_ends_in is None
    assert [(x.node, x.name, x.position) for x in known(holder.waiting_for)] == [(NODE, "B", 1)]
    assert [(x.session_id, x.position, x.waiting_for) for x in report.waiters] == [(w, 1, 4.0)]
    assert [(x.name, x.session_id, x.waits_on) for x in known(report.chain)] == [
        ("A", a, ("B",)), ("B", b, ("C",)), ("C", c, ()),
    ]  # fmt: skip
    (root,) = known(report.roots)
    assert (root.name, root.session_id, root.description) == ("C", c, "job-c")
    assert root.held_for == pytest.approx(9.0)
    assert (report.holders_total, report.waiters_total, report.cut) == (1, 1, False)


def test_a_name_nobody_waits_behind_is_its_own_root() -> None:
    engine, (_, _, c, _) = chain_of_three()
    report = why(engine, "C", 10.0)
    assert [x.session_id for x in known(report.roots)] == [c]
    assert [x.position for x in report.waiters] == [1]  # (B's holder)


def test_a_holder_waits_with_its_own_task_only() -> None:
    # One session, two tasks: task 1 holds A; task 2 waits on B. A's hold does not
    # wait for B (the deadlock detector's rule): A's holder is a root.
    engine = make_engine()
    s, other = open_session(engine), open_session(engine)
    lock(engine, other, "B", task=7)
    lock(engine, s, "A", task=1)
    lock(engine, s, "B", task=2)
    report = why(engine, "A", 1.0)
    assert known(report.holders[0].waiting_for) == ()
    assert [x.session_id for x in known(report.roots)] == [s]


def test_a_holder_of_unknown_task_waits_with_its_session() -> None:
    # A client that numbers no task (YDB's, dflockd's): every wait of its session.
    engine = make_engine()
    s, other = open_session(engine), open_session(engine)
    lock(engine, other, "B")
    lock(engine, s, "A")
    lock(engine, s, "B")
    report = why(engine, "A", 1.0)
    assert [x.name for x in known(report.holders[0].waiting_for)] == ["B"]
    assert [x.session_id for x in known(report.roots)] == [other]


def test_a_cycle_has_no_root_and_ends() -> None:
    # Tasks unknown, so the detector let it form: a waits on B, held by b, which waits on A.
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    lock(engine, a, "A")
    lock(engine, b, "B")
    lock(engine, a, "B")
    lock(engine, b, "A")
    report = why(engine, "A", 1.0)
    assert [(x.name, x.session_id) for x in known(report.chain)] == [("A", a), ("B", b)]
    assert known(report.roots) == ()


def test_a_semaphore_lists_every_holder_and_the_queue_in_grant_order() -> None:
    engine = make_engine()
    sessions = [open_session(engine) for _ in range(5)]
    create_semaphore(engine, sessions[0], "S", 10)
    for n, sid in enumerate(sessions):
        acquire(engine, sid, "S", 2, now=float(n), max_hold=60.0 if n == 0 else None)
    report = why(engine, "S", 10.0)
    assert [x.session_id for x in report.holders] == sessions
    assert report.holders[0].max_hold_ends_in == pytest.approx(50.0)
    assert [x.session_id for x in known(report.roots)] == sessions


def test_waiters_are_paged() -> None:
    engine = make_engine()
    holder = open_session(engine)
    lock(engine, holder, "M")
    queued = [open_session(engine) for _ in range(7)]
    for sid in queued:
        lock(engine, sid, "M")
    first = why(engine, "M", 1.0, limit=3)
    assert [x.session_id for x in first.waiters] == queued[:3]
    second = why(engine, "M", 1.0, after=3, limit=3)
    assert [(x.session_id, x.position) for x in second.waiters] == [
        (sid, n) for n, sid in enumerate(queued[3:6], start=4)
    ]
    assert why(engine, "M", 1.0, after=6).waiters[0].session_id == queued[6]
    assert first.waiters_total == 7


def test_the_walk_stops_at_its_look_limit_and_says_so() -> None:
    engine, _ = chain_of_three()
    engine.why_look_limit = 2  # (A's holder's wait and place: then nothing more)
    report = why(engine, "A", 10.0)
    assert report.cut
    assert known(report.roots) == ()
    engine.why_look_limit = 10_000
    assert not why(engine, "A", 10.0).cut


def test_a_place_past_the_look_limit_reads_zero() -> None:
    engine = make_engine()
    holder, s = open_session(engine), open_session(engine)
    lock(engine, holder, "B")
    for _ in range(20):
        lock(engine, open_session(engine), "B")
    lock(engine, s, "A", task=1)
    lock(engine, s, "B", task=1)  # 21st in B's queue
    assert known(why(engine, "A", 1.0).holders[0].waiting_for)[0].position == 21
    engine.why_look_limit = 10
    assert known(why(engine, "A", 1.0).holders[0].waiting_for)[0].position == 0


@pytest.mark.parametrize(
    ("command", "error"),
    [
        (WhyName("nowhere", "A"), NotFoundError),
        (WhyName(NODE, "missing"), NotFoundError),
        (WhyName(NODE, "A", limit=0), InvalidArgumentError),
        (WhyName(NODE, "A", after=-1), InvalidArgumentError),
        (WhyName(NODE, "A", after="1"), InvalidArgumentError),  # type: ignore[arg-type]
        (WhyName(NODE, 7), InvalidArgumentError),  # type: ignore[arg-type]
    ],
)
def test_bad_input_is_refused(command: WhyName, error: type[Exception]) -> None:
    engine, _ = chain_of_three()
    with pytest.raises(error):
        engine.apply(command, 1.0)


def test_the_chain_has_at_most_a_page_of_links() -> None:
    engine, (a, b, _, _) = chain_of_three()
    report = why(engine, "A", 10.0, limit=2)
    assert [(x.name, x.session_id) for x in known(report.chain)] == [("A", a), ("B", b)]
    assert report.cut
    assert known(report.roots) == ()
