"""A paused quota ledger (no quota, no budget: ``QuotaLedger.pause_counting``).

A host with neither quotas nor a memory budget (``memory://``, a ``tenure serve``
without them) keeps no counts per change; what the counts answer stays the same:
the estimate is counted from the whole state when asked, and a quota or a budget
set later counts the state once and is enforced from there on.
"""

from __future__ import annotations

import pytest

from tenure._core import CreateSession, Engine, Release
from tenure._core.invariants import check_invariants
from tenure._core.ownership import counted_usage
from tenure._core.quotas import OBJECT_BYTES, Q_HOLDS, Q_SEMAPHORES, TRACKED, Quota
from tenure._core.snapshot import dump, load
from tenure.errors import LimitExceededError

from .support import KEY, NODE, acquire, make_engine


def _filled(engine: Engine) -> int:
    """Two owners' sessions, an ephemeral mutex held, a semaphore with data and a
    waiter; the first session's id."""
    sessions = []
    for actor in ("", "batch"):
        engine.actor = actor
        try:
            info = engine.apply(CreateSession(NODE, KEY, 10.0, description=f"d-{actor}"), 0.0)
        finally:
            engine.actor = ""
        sessions.append(info.session_id)
    first, second = sessions
    acquire(engine, first, "mutex-a", ephemeral=True, data=b"held")
    acquire(engine, second, "mutex-a", ephemeral=True, timeout=30.0, data=b"waits")
    acquire(engine, second, "mutex-b", ephemeral=True)
    return first


def test_a_paused_ledger_counts_nothing_per_change_and_estimates_the_same() -> None:
    counting, paused = make_engine(), make_engine()
    paused.ledger.pause_counting()
    assert not paused.ledger.counting
    before = paused.ledger.total.counts[:]  # (its node's, counted before the pause)
    for engine in (counting, paused):
        sid = _filled(engine)
    assert paused.ledger.total.counts == before
    batch = paused.ledger.of("batch")  # (made while paused)
    assert batch.counts == [0] * len(TRACKED)
    assert not batch.live
    assert counting.ledger.of("batch").counts != batch.counts
    assert paused.ledger.estimate() == counting.ledger.estimate() > 0
    check_invariants(paused)  # (a paused ledger's usages say they are paused)
    for engine in (counting, paused):
        engine.apply(Release(sid, "mutex-a"), 1.0)  # (the waiter is granted)
    assert paused.ledger.estimate() == counting.ledger.estimate()


def test_a_quota_set_on_a_paused_ledger_counts_the_state_and_is_enforced() -> None:
    engine = make_engine()
    engine.ledger.pause_counting()
    _filled(engine)
    engine.ledger.quotas = {"batch": Quota(semaphores=1)}
    assert engine.ledger.counting
    assert {o: u.counts for o, u in engine.ledger.usage.items()} == {
        owner: counted_usage(engine).get(owner, [0] * len(TRACKED)) for owner in engine.ledger.usage
    }
    check_invariants(engine)
    assert engine.ledger.of("batch").counts[Q_SEMAPHORES] == 1  # (mutex-b: its own)
    engine.actor = "batch"
    try:
        second = engine.apply(CreateSession(NODE, KEY, 10.0), 0.0).session_id
    finally:
        engine.actor = ""
    with pytest.raises(LimitExceededError, match="semaphores"):
        acquire(engine, second, "mutex-c", ephemeral=True)
    acquire(engine, second, "mutex-a", ephemeral=True, timeout=30.0)  # (exists: no new one)
    check_invariants(engine)


def test_a_budget_set_on_a_paused_ledger_is_enforced_from_the_counted_state() -> None:
    engine = make_engine()
    engine.ledger.pause_counting()
    sid = _filled(engine)
    estimate = engine.ledger.estimate()
    engine.ledger.budget = estimate + OBJECT_BYTES[Q_HOLDS] + OBJECT_BYTES[Q_SEMAPHORES] - 1
    assert engine.ledger.counting
    assert engine.ledger.estimate() == estimate
    with pytest.raises(LimitExceededError, match="memory budget"):
        acquire(engine, sid, "one-too-many", ephemeral=True)  # (a semaphore and its hold)
    check_invariants(engine)


def test_a_ledger_with_a_quota_or_a_budget_is_not_paused() -> None:
    engine = make_engine()
    engine.ledger.budget = 10**9
    engine.ledger.pause_counting()
    assert engine.ledger.counting
    _filled(engine)
    check_invariants(engine)  # (counted as it changed)


def test_a_paused_engine_s_snapshot_loads_counted() -> None:
    engine = make_engine()
    engine.ledger.pause_counting()
    _filled(engine)
    loaded = load(dump(engine))
    assert loaded.ledger.counting  # (an engine counts unless its host pauses it)
    assert loaded.ledger.estimate() == engine.ledger.estimate()
    check_invariants(loaded)


def test_a_snapshot_loaded_uncounted_counts_once_a_budget_or_quota_is_set() -> None:
    """``load(counted=False)``, a server's (its host pauses the ledger or sets a quota or
    the budget): the whole state is not counted at the load, and is once counting
    resumes."""
    engine = make_engine()
    _filled(engine)
    loaded = load(dump(engine), counted=False)
    assert not loaded.ledger.counting
    assert loaded.ledger.estimate() == engine.ledger.estimate()  # (counted when asked)
    check_invariants(loaded)
    loaded.ledger.budget = 10**9
    assert loaded.ledger.counting
    assert loaded.ledger.usage["batch"].counts == engine.ledger.usage["batch"].counts
    check_invariants(loaded)
    again = load(dump(engine), counted=False)
    again.ledger.quotas = {"batch": Quota(semaphores=5)}
    assert again.ledger.counting
    assert again.ledger.usage["batch"].counts == engine.ledger.usage["batch"].counts
    check_invariants(again)
