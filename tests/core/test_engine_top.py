"""The statistics per name (tenure._core.name_stats) and what TopNames answers from
them (tenure._core.contention): which names are kept, what each counts, the windows,
the sorts, a token's share of the sketch and what it costs the memory estimate."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tenure._core import MAX_COUNT, Acquire, Engine, TopNames
from tenure._core.commands import CloseSession, CreateSession, DetachSession, Release
from tenure._core.name_stats import (
    ENTRY_BYTES,
    SLOT_BYTES,
    SLOTS,
    NameStats,
    bucket_of,
    bucket_top,
)
from tenure._core.quotas import OBJECT_BYTES, Q_WAITERS, QuotaLedger
from tenure._core.top_report import NameStat, TopReport
from tenure.errors import InvalidArgumentError, NotFoundError, TenureError

from .support import KEY, NODE, acquire, make_engine, open_session


def lock(engine: Engine, sid: int, name: str, now: float, **kw: object) -> None:
    acquire(engine, sid, name, MAX_COUNT, ephemeral=True, now=now, **kw)  # type: ignore[arg-type]


def release(engine: Engine, sid: int, name: str, now: float) -> None:
    assert engine.apply(Release(sid, name), now)


def top(engine: Engine, now: float, **kw: object) -> TopReport:
    return engine.apply(TopNames(NODE, **kw), now)  # type: ignore[arg-type]


def row(report: TopReport, name: str) -> NameStat:
    (found,) = [stat for stat in report.names if stat.name == name]
    return found


def contend(engine: Engine, name: str, start: float, waiters: int, hold: float) -> None:
    """One holder of ``name`` from ``start``, ``waiters`` queued behind it, each
    granted in turn and holding ``hold`` seconds (the holder too)."""
    sids = [open_session(engine, now=start) for _ in range(waiters + 1)]
    lock(engine, sids[0], name, start)
    for sid in sids[1:]:
        lock(engine, sid, name, start)
    now = start
    for sid in sids:
        now += hold
        release(engine, sid, name, now)


def test_an_uncontended_name_is_not_kept_but_counts_in_the_totals() -> None:
    engine = make_engine()
    sid = open_session(engine)
    lock(engine, sid, "quiet", 1.0)
    release(engine, sid, "quiet", 3.0)
    stats = engine.name_stats
    assert stats.kept == 0
    assert top(engine, 3.0).names == ()
    assert (stats.grants, stats.releases, stats.queued) == (1, 1, 0)
    assert stats.hold_total == pytest.approx(2.0)


def test_a_contended_name_counts_its_waits_grants_and_holds() -> None:
    engine = make_engine()
    contend(engine, "busy", 100.0, waiters=3, hold=2.0)
    report = top(engine, 110.0)
    stat = row(report, "busy")
    # Waiters granted at 102, 104, 106, all queued at 100: 2 + 4 + 6 seconds.
    assert stat.wait_seconds == pytest.approx(12.0)
    assert (stat.queued, stat.grants, stat.timeouts, stat.cancelled, stat.losses) == (3, 3, 0, 0, 0)
    assert (stat.queue, stat.holders, stat.longest_hold) == (0, 0, None)
    # Kept from its first queued request: the holder's grant (at once) came before.
    assert stat.kept_for == pytest.approx(10.0)
    assert stat.hold_p50 == bucket_top(bucket_of(2.0))
    assert stat.hold_p99 == stat.hold_p50
    assert stat.wait_p99 == bucket_top(bucket_of(6.0))
    assert (report.kept, report.capacity, report.evicted) == (1, engine.name_stats.capacity, 0)


def test_the_most_waited_name_comes_first_and_each_sort_has_its_order() -> None:
    engine = make_engine()
    contend(engine, "long-waits", 100.0, waiters=2, hold=10.0)  # 10 + 20 s waited
    contend(engine, "many-grants", 100.0, waiters=5, hold=1.0)  # 1+2+3+4+5 = 15 s
    holder, waiter, late = (open_session(engine, now=100.0) for _ in range(3))
    lock(engine, holder, "held", 100.0)
    lock(engine, waiter, "held", 101.0)
    lock(engine, late, "held", 102.0, timeout=3.0)
    engine.tick(105.0)  # the late one times out after 3 s
    names = [stat.name for stat in top(engine, 120.0).names]
    assert names[:2] == ["long-waits", "many-grants"]
    assert next(s.name for s in top(engine, 120.0, sort="grants").names) == "many-grants"
    assert next(s.name for s in top(engine, 120.0, sort="queue").names) == "held"
    assert next(s.name for s in top(engine, 120.0, sort="hold").names) == "held"
    assert next(s.name for s in top(engine, 120.0, sort="timeouts").names) == "held"
    held = row(top(engine, 120.0), "held")
    assert (held.queue, held.holders, held.timeouts) == (1, 1, 1)
    assert held.longest_hold == pytest.approx(20.0)
    assert [s.name for s in top(engine, 120.0, limit=1).names] == ["long-waits"]
    for sort in ("wait", "queue", "hold", "grants", "timeouts"):  # (a page: the full order's head)
        whole = top(engine, 120.0, sort=sort).names
        assert top(engine, 120.0, sort=sort, limit=2).names == whole[:2], sort


def test_the_window_counts_only_its_slots() -> None:
    engine = make_engine()
    contend(engine, "early", 0.0, waiters=1, hold=5.0)
    contend(engine, "late", 250.0, waiters=1, hold=1.0)
    recent = top(engine, 260.0, window=60.0)
    assert [s.name for s in recent.names if s.grants] == ["late"]
    assert row(recent, "early").wait_seconds == 0.0
    assert row(top(engine, 260.0, window=300.0), "early").wait_seconds == pytest.approx(5.0)
    # Past the longest window, a name's old slots are let go (and uncounted).
    entry = engine.name_stats.entry(NODE, "late")
    assert entry is not None
    assert len(entry.slots) <= SLOTS


def test_losses_timeouts_and_cancels_are_told_apart() -> None:
    engine = make_engine()
    holder = engine.apply(CreateSession(NODE, KEY, timeout=5.0), 0.0).session_id
    waiter, closing = open_session(engine), open_session(engine)
    lock(engine, holder, "n", 0.0)
    lock(engine, closing, "n", 1.0)
    lock(engine, waiter, "n", 1.0)
    engine.apply(CloseSession(closing), 2.0)  # its wait cancelled by its close
    engine.apply(CreateSession(NODE, KEY), 3.0)

    engine.apply(DetachSession(holder), 3.0)
    engine.tick(9.0)  # the holder's session expires: its hold is lost, the waiter granted
    stat = row(top(engine, 10.0), "n")
    assert (stat.losses, stat.cancelled, stat.grants, stat.timeouts) == (1, 1, 1, 0)


def test_bad_arguments_are_refused_clearly() -> None:
    engine = make_engine()
    with pytest.raises(InvalidArgumentError, match="window must be one of 60, 300"):
        top(engine, 0.0, window=30.0)
    with pytest.raises(InvalidArgumentError, match="sort must be one of wait, queue"):
        top(engine, 0.0, sort="names")
    with pytest.raises(InvalidArgumentError, match="limit"):
        top(engine, 0.0, limit=0)
    with pytest.raises(NotFoundError):
        engine.apply(TopNames("nowhere"), 0.0)
    assert engine.apply(TopNames(""), 0.0).names == ()  # every node


def test_a_full_sketch_pushes_out_the_least_counted_and_stays_bounded() -> None:
    ledger = QuotaLedger()
    stats = NameStats(ledger, capacity=100)
    for i in range(100_000):  # a flood of names queued on once each, over 1,000 s...
        stats.queued_on("n", f"cold-{i}", "", i / 100)
        if i % 20 == 0:  # ...and a hot one, 5 % of the events (kept: above 1/capacity)
            stats.queued_on("n", "hot", "", i / 100)
    assert stats.kept <= 100
    assert stats.entry("n", "hot") is not None
    assert stats.evicted >= 100_000 - 100
    assert (
        ledger.kept_bytes
        == stats.bytes
        == sum(entry.cost() for names in stats.nodes.values() for entry in names.values())
    )
    assert stats.bytes <= 100 * (ENTRY_BYTES + len("cold-99999") + SLOTS * SLOT_BYTES)


def test_a_token_cannot_push_out_more_than_its_share() -> None:
    stats = NameStats(QuotaLedger(), capacity=100, share=0.25)
    for i in range(80):
        stats.queued_on("n", f"mine-{i}", "alice", 0.0)
        stats.queued_on("n", f"mine-{i}", "alice", 0.0)  # counted twice: above the flood
    for i in range(10_000):
        stats.queued_on("n", f"flood-{i}", "mallory", 0.0)
    kept = [e for names in stats.nodes.values() for e in names.values()]
    # Mallory's names fill its share (25) at most: Alice's lose what the sketch lacked
    # room for, no more.
    assert sum(e.owner == "mallory" for e in kept) <= 25
    assert sum(e.owner == "alice" for e in kept) >= 100 - 25
    # Alone, an owner may fill it all.
    alone = NameStats(QuotaLedger(), capacity=100, share=0.25)
    for i in range(1_000):
        alone.queued_on("n", f"x-{i}", "bob", 0.0)
    assert alone.kept > 25


def test_the_memory_budget_refuses_a_new_name_rather_than_pass_it() -> None:
    engine = make_engine()
    holder, waiter = open_session(engine), open_session(engine)
    lock(engine, holder, "n", 0.0)
    # Room for the queued request itself, not for keeping its name too.
    engine.ledger.budget = engine.ledger.estimate() + OBJECT_BYTES[Q_WAITERS] + ENTRY_BYTES // 2
    lock(engine, waiter, "n", 0.0)
    release(engine, holder, "n", 1.0)
    assert engine.name_stats.kept == 0
    assert engine.name_stats.refused == 1
    assert engine.name_stats.grants == 2  # (the totals still count)


def test_a_dropped_node_forgets_its_names_and_their_bytes() -> None:
    engine = make_engine()
    contend(engine, "n", 0.0, waiters=1, hold=1.0)
    assert engine.name_stats.kept == 1
    assert engine.ledger.kept_bytes > 0
    from tenure._core.commands import DropNode

    engine.apply(DropNode(NODE, force=True), 5.0)
    assert engine.name_stats.kept == 0
    assert engine.ledger.kept_bytes == 0


def test_a_resumed_engine_counts_afresh_on_its_new_clock() -> None:
    from tenure._core.snapshot import resume

    engine = make_engine()
    contend(engine, "n", 0.0, waiters=1, hold=1.0)
    assert engine.name_stats.kept == 1
    resume(engine, 5_000.0)  # (a restart's, a cluster's takeover's: another clock)
    assert engine.name_stats.kept == 0
    assert engine.name_stats.grants == 0
    assert engine.ledger.kept_bytes == 0
    assert top(engine, 5_000.0).names == ()


def test_a_smaller_capacity_given_later_pushes_out_what_is_past_it() -> None:
    ledger = QuotaLedger()
    stats = NameStats(ledger, capacity=100)
    for i in range(100):  # (a replay's, kept at the default capacity)
        stats.queued_on("n", f"m{i}", "", 0.0)
    stats.resize(10, 0.5)
    assert stats.kept <= 10
    assert (stats.capacity, stats.share) == (10, 0.5)
    assert ledger.kept_bytes == stats.bytes
    stats.resize(0, 0.5)
    assert stats.kept == 0
    assert stats.nodes == {}
    assert ledger.kept_bytes == 0
    assert stats.queued == 100  # (the totals stay)


_TOTALS = ("grants", "wait_total", "releases", "hold_total", "losses", "timeouts", "cancelled")

_steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("lock"),
            st.integers(0, 2),
            st.sampled_from("abc"),
            st.sampled_from([None, 0.0, 1.5]),
        ),
        st.tuples(st.just("release"), st.integers(0, 2), st.sampled_from("abc")),
        st.tuples(st.just("detach"), st.integers(0, 2)),
        st.tuples(st.just("wait"), st.sampled_from([0.25, 1.0, 6.0])),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(_steps)
@example(
    [
        ("lock", 0, "a", None),
        ("lock", 1, "a", 1.5),
        ("lock", 2, "a", None),
        ("wait", 1.0),
        ("release", 0, "a"),
        ("wait", 6.0),
        ("detach", 2),
        ("wait", 6.0),
    ]
)  # fmt: skip  (a name kept: a grant, a timeout, a loss after)
def test_the_totals_of_kept_and_unkept_names_are_counted_alike(
    steps: list[tuple[Any, ...]],
) -> None:
    # The grant and release paths count the totals inline for a name not kept (no
    # call: the usual case), and NameStats.granted/hold_ended for a kept one: the
    # same commands with no name kept and with every contended name kept add up
    # the same.
    engines = [make_engine(), make_engine()]
    engines[0].name_stats.resize(0, 1.0)
    for engine in engines:
        engine.apply(CreateSession(NODE, KEY, timeout=5.0), 0.0)  # (ids 1 to 3: alike)
        engine.apply(CreateSession(NODE, KEY, timeout=5.0), 0.0)
        engine.apply(CreateSession(NODE, KEY, timeout=5.0), 0.0)
    sids = [1, 2, 3]
    now = 0.0
    for number, step in enumerate(steps, 1):
        outcomes: list[type[TenureError] | None] = []
        for engine in engines:
            try:
                if step[0] == "lock":
                    _, who, name, timeout = step
                    engine.apply(
                        Acquire(
                            sids[who], name, MAX_COUNT, number, timeout=timeout, ephemeral=True
                        ),
                        now,
                    )
                elif step[0] == "release":
                    engine.apply(Release(sids[step[1]], step[2]), now)
                elif step[0] == "detach":
                    engine.apply(DetachSession(sids[step[1]]), now)
                else:
                    engine.tick(now + step[1])
                outcomes.append(None)
            except TenureError as error:
                outcomes.append(type(error))
        assert outcomes[0] == outcomes[1]
        if step[0] == "wait":
            now += step[1]
    for total in _TOTALS:
        assert getattr(engines[0].name_stats, total) == getattr(engines[1].name_stats, total), total
    assert engines[0].name_stats.kept == 0
