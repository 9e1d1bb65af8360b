"""What the engine keeps that no quota or budget counted before (issue 47, round two).

A node's annex keys (its values were counted, its keys not), the endings a session
keeps for its client to read back after a re-attach (``Session.missed``: not in the
estimate at all), what one acquire makes at once (a new ephemeral semaphore and its
hold were asked of the memory budget apart: each fit where both did not), and the
deadline heap's dead entries (each renew left one until its time). Each counted or
bounded now, uncounted exactly when it goes, and the invariants' recount agrees
(after a snapshot's load too).
"""

from __future__ import annotations

import pytest

from tenure._core import (
    MAX_COUNT,
    AcquireAll,
    AcquireStatus,
    CancelAcquire,
    CloseSession,
    CreateNode,
    CreateSession,
    Engine,
    NodeConfig,
    Renew,
    SetNodeAnnex,
)
from tenure._core.deadlines import COMPACT_AT_LEAST
from tenure._core.invariants import check_invariants
from tenure._core.quotas import (
    OBJECT_BYTES,
    Q_DATA_BYTES,
    Q_HOLDS,
    Q_MISSED_BYTES,
    Q_SEMAPHORES,
    Quota,
)
from tenure._core.session import MISSED_BYTES, missed_bytes
from tenure._core.snapshot import dump, load
from tenure.errors import LimitExceededError

from .support import KEY, NODE, acquire, make_engine

BUDGET = r"the server's memory budget \(\d+ bytes\) is used up"


def _as(engine: Engine, actor: str, command: object, now: float = 0.0) -> object:
    """Apply ``command`` sent by ``actor`` (as a server's host does)."""
    engine.actor = actor
    try:
        return engine.apply(command, now)  # type: ignore[arg-type]
    finally:
        engine.actor = ""


# -- a node's annex keys ----------------------------------------------------------------


def test_an_annex_key_counts_as_its_value_does() -> None:
    """64-byte keys with 1-byte values: 16 of them counted 16 bytes before, 1,040 now."""
    engine = make_engine()
    usage = engine.ledger.of("")
    start, estimate = usage.counts[Q_DATA_BYTES], engine.ledger.estimate()
    for i in range(16):
        engine.apply(SetNodeAnnex(NODE, f"{i:02d}" + "k" * 62, b"v"), 0.0)
        check_invariants(engine)
    assert usage.counts[Q_DATA_BYTES] - start == 16 * (64 + 1)
    assert engine.ledger.estimate() - estimate == 16 * (64 + 1)
    assert load(dump(engine)).ledger.estimate() == engine.ledger.estimate()  # (recounted)
    # A new value under a kept key: only the value's change; removed: all it counted.
    engine.apply(SetNodeAnnex(NODE, "00" + "k" * 62, b"v" * 10), 0.0)
    assert usage.counts[Q_DATA_BYTES] - start == 16 * (64 + 1) + 9
    for i in range(16):
        engine.apply(SetNodeAnnex(NODE, f"{i:02d}" + "k" * 62, b""), 0.0)
        check_invariants(engine)
    assert usage.counts[Q_DATA_BYTES] == start
    assert engine.ledger.estimate() == estimate


def test_a_data_bytes_quota_refuses_an_annex_key_that_would_pass_it() -> None:
    engine = make_engine()
    engine.ledger.quotas = {"batch": Quota(data_bytes=4 + 60)}
    _as(engine, "batch", CreateNode("mine"))
    # The node's name (4) and a 59-byte key with a 1-byte value fit; one more such key not.
    _as(engine, "batch", SetNodeAnnex("mine", "a" * 59, b"v"))
    with pytest.raises(LimitExceededError, match="token 'batch' is over its quota data_bytes"):
        _as(engine, "batch", SetNodeAnnex("mine", "b" * 59, b"v"))
    assert engine.nodes["mine"].annex == {"a" * 59: b"v"}
    check_invariants(engine)


# -- the endings a session keeps ------------------------------------------------------------


def _timed_out(engine: Engine, name: str, holds: range) -> int:
    """A session whose ``holds`` each queued on ``name`` (held by another) and timed out:
    its id (its endings kept)."""
    holder = engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    acquire(engine, holder, name, MAX_COUNT, ephemeral=True)
    waiter = engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    for hold in holds:
        queued = acquire(engine, waiter, name, MAX_COUNT, ephemeral=True, timeout=1.0, hold=hold)
        assert queued.status is AcquireStatus.QUEUED
    engine.tick(engine.now + 2.0)
    engine.take_effects()
    return waiter


def test_kept_endings_count_in_the_estimate_and_go_with_their_session() -> None:
    engine = make_engine()
    start = engine.ledger.estimate()
    name = "m" * 1000
    waiter = _timed_out(engine, name, range(1, 11))
    session = engine.sessions[waiter]
    assert len(session.missed) == 10
    each = missed_bytes(next(iter(session.missed.values())))
    assert each == MISSED_BYTES + 1000 + len(f"timed out waiting for {name!r}")
    assert engine.ledger.total.counts[Q_MISSED_BYTES] == 10 * each
    check_invariants(engine)  # (the recount agrees)
    # Read back and acted on again: forgotten, uncounted.
    acquire(engine, waiter, name, MAX_COUNT, ephemeral=True, timeout=0, hold=1)
    assert engine.ledger.total.counts[Q_MISSED_BYTES] == 9 * each
    check_invariants(engine)
    loaded = load(dump(engine))
    assert loaded.ledger.total.counts == engine.ledger.total.counts
    check_invariants(loaded)
    engine.apply(CloseSession(waiter), engine.now)
    assert engine.ledger.total.counts[Q_MISSED_BYTES] == 0
    check_invariants(engine)
    assert engine.ledger.estimate() > start  # (the holder's, still there)


def test_endings_pushed_out_by_the_node_limit_are_uncounted() -> None:
    engine = make_engine(NodeConfig(max_missed_per_session=3))
    waiter = _timed_out(engine, "busy", range(1, 9))
    session = engine.sessions[waiter]
    assert len(session.missed) == 3
    assert engine.ledger.total.counts[Q_MISSED_BYTES] == sum(
        map(missed_bytes, session.missed.values())
    )
    check_invariants(engine)


def test_the_memory_budget_sees_kept_endings() -> None:
    """The hole: a queued acquire that times out leaves an ending of up to 2 KiB (a
    1 KiB name, and a message naming it) where a waiter of 600 was; uncounted, a token
    could keep queueing and timing out on long names, each admitted against an
    estimate that never grew. Counted, its next wait is refused at the budget."""
    engine = make_engine(NodeConfig(max_missed_per_session=1000))
    name = "m" * 1000
    holder = engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    acquire(engine, holder, name, MAX_COUNT, ephemeral=True)
    waiter = engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    room = 40_000
    engine.ledger.budget = engine.ledger.estimate() + room
    refusal = None
    for hold in range(1, 1001):
        try:
            acquire(engine, waiter, name, MAX_COUNT, ephemeral=True, timeout=1.0, hold=hold)
        except LimitExceededError as refused:
            refusal = str(refused)
            break
        engine.tick(engine.now + 2.0)
        engine.take_effects()
    assert refusal is not None, "1,000 waits timed out: no refusal"
    assert "memory budget" in refusal
    kept = len(engine.sessions[waiter].missed)
    assert kept == hold - 1
    assert engine.ledger.total.counts[Q_MISSED_BYTES] <= room
    check_invariants(engine)


# -- what one acquire makes, asked of the budget at once ------------------------------------


def test_an_ephemeral_acquire_asks_the_budget_for_its_semaphore_and_hold_at_once() -> None:
    engine = make_engine()
    sid = engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    name = "e" * 100
    cost = OBJECT_BYTES[Q_SEMAPHORES] + 100 + OBJECT_BYTES[Q_HOLDS] + 10
    engine.ledger.budget = engine.ledger.estimate() + cost - 1  # (each alone fits)
    with pytest.raises(LimitExceededError, match=BUDGET):
        acquire(engine, sid, name, MAX_COUNT, ephemeral=True, data=b"d" * 10)
    assert name not in engine.nodes[NODE].semaphores
    check_invariants(engine)
    engine.ledger.budget += 1
    acquire(engine, sid, name, MAX_COUNT, ephemeral=True, data=b"d" * 10)
    assert engine.ledger.estimate() == engine.ledger.budget
    check_invariants(engine)


def test_an_all_or_none_acquire_asks_the_budget_for_all_it_makes_at_once() -> None:
    engine = make_engine()
    sid = engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    names = ("a" * 50, "b" * 50)
    cost = 2 * (OBJECT_BYTES[Q_SEMAPHORES] + 50 + OBJECT_BYTES[Q_HOLDS])
    engine.ledger.budget = engine.ledger.estimate() + cost - 1
    every = AcquireAll(sid, names, (0, 0), (1, 2), MAX_COUNT)
    with pytest.raises(LimitExceededError, match=BUDGET):
        engine.apply(every, 0.0)
    assert not engine.nodes[NODE].semaphores
    engine.ledger.budget += 1
    assert engine.apply(every, 0.0).status is AcquireStatus.GRANTED
    check_invariants(engine)


# -- the deadline heap's dead entries ----------------------------------------------------------


def _live_deadlines(engine: Engine) -> int:
    """How many entries of the heap are live (what a compaction keeps)."""
    return sum(engine._is_live(when, key) for when, _, key in engine.deadlines._heap)


def test_renews_of_a_long_lease_leave_a_bounded_heap() -> None:
    """The hole: each renew scheduled the lease's new end and left the old entry until
    its time (a lease of 10**9 s: for ever); 20,000 renews kept 20,001 entries of about
    176 bytes each, seen by no quota or budget."""
    engine = make_engine()
    sid = engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    acquire(engine, sid, "x", MAX_COUNT, ephemeral=True, lease_ttl=1e9)
    for i in range(20_000):
        engine.apply(Renew(sid, "x"), i / 1000)
    assert _live_deadlines(engine) == 1
    assert len(engine.deadlines) <= COMPACT_AT_LEAST
    # The lease still ends at its last renew's end, not an earlier one's.
    last = 19_999 / 1000
    engine.tick(last + 1e9 - 1)
    assert "x" in engine.nodes[NODE].semaphores
    engine.tick(last + 1e9)
    assert "x" not in engine.nodes[NODE].semaphores
    check_invariants(engine)


def test_cancelled_long_waits_leave_a_bounded_heap() -> None:
    engine = make_engine()
    holder = engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    acquire(engine, holder, "x", MAX_COUNT, ephemeral=True)
    waiter = engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    for _ in range(10_000):
        queued = acquire(engine, waiter, "x", MAX_COUNT, timeout=1e9, request_id=7)
        assert queued.status is AcquireStatus.QUEUED
        engine.apply(CancelAcquire(waiter, "x", 7), 0.0)
    assert len(engine.deadlines) <= COMPACT_AT_LEAST
    check_invariants(engine)


def test_a_heap_of_live_deadlines_is_kept_whole() -> None:
    """Compaction drops only dead entries: 10,000 live leases are all there, and each
    still ends (the threshold doubles with what is live: no compaction per command)."""
    engine = make_engine(NodeConfig(max_semaphores=20_000))
    sid = engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    for i in range(10_000):
        acquire(engine, sid, f"s{i}", MAX_COUNT, ephemeral=True, lease_ttl=10.0 + i)
    assert len(engine.deadlines) == _live_deadlines(engine) == 10_000
    engine.tick(10.0 + 9_999)
    assert not engine.nodes[NODE].semaphores
    check_invariants(engine)
