"""Ticks in slices (issue 37, nothing runs long on the loop): a budget of work per tick.

A mass expiry (many sessions ending at one instant, each end granting a waiter) is
done by ``Engine.tick(now, budget)`` a slice at a time: each slice does at most the
budget's items of work (one deadline past it: a deadline is never cut in two), the
engine says it is ``behind`` until the last, and the slices end in exactly the state
one whole tick ends in (what makes a journal's replay, which ticks whole, agree).
(A node-scoped token's view whose pattern starts with a wildcard is read a budget
of names at a time: ``test_engine_listing_index.py``, on its 100,000 nodes.) Work
is counted (``deadline_work``), never timed.
"""

from __future__ import annotations

from tenure._core import (
    MAX_COUNT,
    Acquire,
    CreateNode,
    CreateSession,
    DetachSession,
    Engine,
    ListSessions,
    NodeConfig,
)
from tenure._core.engine import DEFAULT_STEP_BUDGET
from tenure._core.invariants import check_invariants
from tenure._core.snapshot import dump

KEY = b"k"
BIG = NodeConfig(max_sessions=100_000, max_semaphores=100_000, max_waiters=100_000)
SESSIONS = 3_000
WINDOW = 30.0


def mass_expiry() -> tuple[Engine, int]:
    """``SESSIONS`` sessions detached at one instant, each holding a mutex that one
    other session waits for; the waiting session's id."""
    engine = Engine()
    engine.apply(CreateNode("n", BIG), 0.0)
    waiter = engine.apply(CreateSession("n", KEY), 0.0).session_id
    request = 0
    for i in range(SESSIONS):
        sid = engine.apply(CreateSession("n", KEY), 0.0).session_id
        request += 1
        engine.apply(Acquire(sid, f"m{i}", MAX_COUNT, request, ephemeral=True), 0.0)
        request += 1
        engine.apply(Acquire(waiter, f"m{i}", MAX_COUNT, request, ephemeral=True, timeout=1e6), 0.0)
        engine.apply(DetachSession(sid), 1.0)
    return engine, waiter


def test_a_mass_expiry_is_done_in_slices_of_the_budget_ending_as_one_tick_does() -> None:
    whole, _ = mass_expiry()
    assert whole.tick(1.0 + WINDOW) == SESSIONS
    assert not whole.behind()

    sliced, waiter = mass_expiry()
    budget = 100
    slices, handled = 0, 0
    while True:
        before = sliced.deadline_work
        handled += sliced.tick(1.0 + WINDOW, budget)
        slices += 1
        work = sliced.deadline_work - before
        # A slice stops at the first deadline that reaches the budget: at most one
        # session's end (2 items here: itself and its one hold) past it.
        assert work <= budget + 1
        check_invariants(sliced)
        if not sliced.behind():
            break
        assert handled < SESSIONS  # behind: some ends are still to come
    assert handled == SESSIONS
    assert slices >= SESSIONS * 2 // budget  # (the budget did cut it)
    assert dump(sliced) == dump(whole)
    assert sliced.take_effects() == whole.take_effects()
    page = sliced.apply(ListSessions("n", 0, 10), sliced.now).sessions
    assert [s.session_id for s in page] == [waiter]
    assert sliced.sessions[waiter].held == {f"m{i}" for i in range(SESSIONS)}


def test_a_command_never_sees_what_its_time_ended_while_the_engine_is_behind() -> None:
    engine, waiter = mass_expiry()
    engine.tick(1.0 + WINDOW, 10)
    assert engine.behind()
    # Rule 6: the command's own tick is whole, whatever a budgeted tick left.
    page = engine.apply(ListSessions("n", 0, 10), 1.0 + WINDOW).sessions
    assert [s.session_id for s in page] == [waiter]
    assert not engine.behind()


def test_the_default_budget_is_the_servers_and_an_unbudgeted_tick_does_everything() -> None:
    engine, _ = mass_expiry()
    assert engine.tick(1.0 + WINDOW, DEFAULT_STEP_BUDGET) < SESSIONS
    assert engine.behind()
    assert engine.tick(1.0 + WINDOW) > 0
    assert not engine.behind()
    assert len(engine.sessions) == 1
