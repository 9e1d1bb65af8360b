"""Quotas per owner and the memory budget, in the engine (tenure._core.quotas).

The owner is ``engine.actor`` while a command is applied (a server sets it from the
connection's token). Each quota is refused at its limit naming the quota and the
owner, nothing else is affected, the counts follow every way a thing ends, and a
snapshot keeps who owns what.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tenure._core import (
    MAX_COUNT,
    AcquireStatus,
    CancelAcquire,
    CancelWatch,
    CloseSession,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DeleteSemaphore,
    DescribeSemaphore,
    DetachSession,
    DropNode,
    Engine,
    KillSession,
    Release,
    Renew,
    SetNodeAnnex,
    UpdateSemaphore,
    WatchPrefix,
)
from tenure._core.invariants import check_invariants
from tenure._core.ownership import counted_usage
from tenure._core.quotas import OBJECT_BYTES, Q_DATA_BYTES, Q_HOLDS, Q_SESSIONS, TRACKED, Quota
from tenure._core.session import KEY_DIGEST_BYTES
from tenure._core.snapshot import SNAPSHOT_VERSION, dump, load
from tenure.errors import LimitExceededError

from .support import KEY, NODE, acquire, make_engine


def _as(engine: Engine, actor: str, command: Any, now: float = 0.0) -> Any:
    """Apply ``command`` sent by ``actor`` (as a server's host does)."""
    engine.actor = actor
    try:
        return engine.apply(command, now)
    finally:
        engine.actor = ""


def _usage(engine: Engine, owner: str) -> dict[str, int]:
    return dict(zip(TRACKED, engine.ledger.of(owner).counts, strict=True))


def _engine(**quota: Any) -> Engine:
    engine = make_engine()
    engine.ledger.quotas = {"batch": Quota(**quota)}
    return engine


def _refused(engine: Engine, actor: str, command: Any, quota: str, owner: str = "") -> None:
    named = owner or actor
    with pytest.raises(LimitExceededError, match=rf"token '{named}' is over its quota {quota} "):
        _as(engine, actor, command)
    check_invariants(engine)


def test_sessions_quota() -> None:
    engine = _engine(sessions=2)
    first = _as(engine, "batch", CreateSession(NODE, KEY)).session_id
    _as(engine, "batch", CreateSession(NODE, KEY))
    _refused(engine, "batch", CreateSession(NODE, KEY), "sessions")
    # Another token, and nobody's (no auth file), are not affected.
    _as(engine, "other", CreateSession(NODE, KEY))
    engine.apply(CreateSession(NODE, KEY), 0.0)
    assert engine.ledger.refusals == {("sessions", "batch"): 1}
    # A session that ends gives its place back: closed, expired or killed.
    engine.apply(CloseSession(first), 0.0)
    third = _as(engine, "batch", CreateSession(NODE, KEY, timeout=5.0)).session_id
    engine.apply(DetachSession(third), 1.0)
    engine.tick(10.0)
    fourth = _as(engine, "batch", CreateSession(NODE, KEY), 10.0).session_id
    engine.apply(KillSession(NODE, fourth), 10.0)
    _as(engine, "batch", CreateSession(NODE, KEY), 10.0)
    assert _usage(engine, "batch")["sessions"] == 2
    check_invariants(engine)


def test_recovery_window_quota() -> None:
    engine = _engine(recovery_window=300.0)
    _refused(engine, "batch", CreateSession(NODE, KEY, timeout=86400.0), "recovery_window")
    sid = _as(engine, "batch", CreateSession(NODE, KEY, timeout=300.0)).session_id
    # The node's own default window is asked when none is given: over it, refused too.
    _as(engine, "root", CreateNode("long", engine.nodes[NODE].config.replace(recovery_window=900)))
    _refused(engine, "batch", CreateSession("long", KEY), "recovery_window")
    # Restating a longer one on attach is refused the same way.
    from tenure._core import AttachSession

    _refused(engine, "batch", AttachSession(sid, KEY, 2, timeout=3600.0), "recovery_window")
    _as(engine, "other", CreateSession(NODE, KEY, timeout=86400.0))


def test_watches_quota_counts_semaphore_and_prefix_watches() -> None:
    engine = _engine(watches=2)
    sid = _as(engine, "batch", CreateSession(NODE, KEY)).session_id
    armed = engine.apply(DescribeSemaphore(sid, "a", watch_data=True), 0.0)
    engine.apply(WatchPrefix(sid, "jobs/"), 0.0)
    _refused(engine, "batch", DescribeSemaphore(sid, "b", watch_data=True), "watches")
    _refused(engine, "batch", WatchPrefix(sid, "x/"), "watches")
    # A plain describe (no watch) is a read: never refused.
    other = _as(engine, "batch", CreateSession(NODE, KEY)).session_id
    engine.apply(CreateSemaphore(other, "a", 1, b""), 0.0)  # fires (and so disarms) the first
    engine.apply(DescribeSemaphore(sid, "a"), 0.0)
    assert armed.watch_id not in engine.sessions[sid].watches
    engine.apply(DescribeSemaphore(sid, "b", watch_data=True), 0.0)
    assert _usage(engine, "batch")["watches"] == 2
    check_invariants(engine)


def test_prefix_watches_quota_counts_prefix_watches_only() -> None:
    """Issue 47: a prefix watch fires on every change under its prefix, so a token's
    prefix watches are a quota of their own (within ``watches``, which counts them too)."""
    engine = _engine(prefix_watches=2)
    sid = _as(engine, "batch", CreateSession(NODE, KEY)).session_id
    first = engine.apply(WatchPrefix(sid, ""), 0.0).watch_id
    engine.apply(WatchPrefix(sid, "jobs/"), 0.0)
    _refused(engine, "batch", WatchPrefix(sid, "x/"), "prefix_watches")
    # Semaphore watches are not prefix watches; another token has its own count.
    engine.apply(DescribeSemaphore(sid, "a", watch_data=True), 0.0)
    other = _as(engine, "other", CreateSession(NODE, KEY)).session_id
    engine.apply(WatchPrefix(other, ""), 0.0)
    assert engine.ledger.refusals == {("prefix_watches", "batch"): 1}
    assert (_usage(engine, "batch")["prefix_watches"], _usage(engine, "batch")["watches"]) == (2, 3)
    # A cancel gives its place back; so does the session's end (and a re-attach's).
    engine.apply(CancelWatch(sid, first), 0.0)
    assert _usage(engine, "batch")["prefix_watches"] == 1
    engine.apply(WatchPrefix(sid, "x/"), 0.0)
    check_invariants(engine)
    engine.apply(CloseSession(sid), 0.0)
    assert _usage(engine, "batch")["prefix_watches"] == 0
    check_invariants(engine)


def test_waiters_quota() -> None:
    engine = _engine(waiters=1)
    holder = _as(engine, "other", CreateSession(NODE, KEY)).session_id
    waiter = _as(engine, "batch", CreateSession(NODE, KEY)).session_id
    for name in ("a", "b"):  # (mutexes: the whole count)
        acquire(engine, holder, name, MAX_COUNT, ephemeral=True)
    queued = acquire(engine, waiter, "a", MAX_COUNT, ephemeral=True, request_id=1)
    assert queued.status is AcquireStatus.QUEUED
    with pytest.raises(LimitExceededError, match="token 'batch' is over its quota waiters"):
        acquire(engine, waiter, "b", MAX_COUNT, ephemeral=True)
    # A try (timeout 0) does not queue: it is answered, not refused.
    assert acquire(engine, waiter, "b", MAX_COUNT, timeout=0).status is AcquireStatus.BUSY
    engine.apply(CancelAcquire(waiter, "a", 1), 0.0)
    queued = acquire(engine, waiter, "b", MAX_COUNT, ephemeral=True)
    assert queued.status is AcquireStatus.QUEUED
    engine.apply(Release(holder, "b"), 0.0)  # granted: no longer waits
    assert _usage(engine, "batch")["waiters"] == 0
    check_invariants(engine)


def test_semaphores_quota_counts_created_and_ephemeral_ones() -> None:
    engine = _engine(semaphores=2)
    sid = _as(engine, "batch", CreateSession(NODE, KEY)).session_id
    engine.apply(CreateSemaphore(sid, "a", 1, b""), 0.0)
    acquire(engine, sid, "e", ephemeral=True)
    _refused(engine, "batch", CreateSemaphore(sid, "b", 1, b""), "semaphores")
    with pytest.raises(LimitExceededError, match="over its quota semaphores"):
        acquire(engine, sid, "f", ephemeral=True)
    # An existing semaphore (anybody's) may still be acquired.
    assert acquire(engine, sid, "a").status is AcquireStatus.GRANTED
    engine.apply(Release(sid, "e"), 0.0)  # the ephemeral one goes with its last holder
    engine.apply(CreateSemaphore(sid, "b", 1, b""), 0.0)
    engine.apply(DeleteSemaphore(sid, "b"), 0.0)
    engine.apply(CreateSemaphore(sid, "c", 1, b""), 0.0)
    assert _usage(engine, "batch")["semaphores"] == 2
    check_invariants(engine)


def test_nodes_quota() -> None:
    engine = _engine(nodes=1)
    _as(engine, "batch", CreateNode("jobs-1"))
    _refused(engine, "batch", CreateNode("jobs-2"), "nodes")
    _as(engine, "other", CreateNode("jobs-2"))
    engine.apply(DropNode("jobs-1"), 0.0)
    _as(engine, "batch", CreateNode("jobs-3"))
    check_invariants(engine)


def test_data_bytes_quota_counts_data_descriptions_and_annexes() -> None:
    engine = _engine(data_bytes=99 + KEY_DIGEST_BYTES)  # (100 beside a 1-byte key)
    sid = _as(engine, "batch", CreateSession(NODE, b"k", description="d" * 10)).session_id
    engine.apply(CreateSemaphore(sid, "a", 1, b"x" * 60), 0.0)
    # Its session's key (its digest, 32 bytes) and description (10), the semaphore's
    # name (1) and data (60).
    assert _usage(engine, "batch")["data_bytes"] == 71 + KEY_DIGEST_BYTES
    _refused(engine, "batch", CreateSemaphore(sid, "b", 1, b"y" * 28), "data_bytes")
    _refused(engine, "batch", UpdateSemaphore(sid, "a", b"x" * 89), "data_bytes")
    engine.apply(UpdateSemaphore(sid, "a", b"x" * 88), 0.0)  # exactly the quota
    engine.apply(UpdateSemaphore(sid, "a", b"x"), 0.0)  # smaller: always
    _as(engine, "batch", CreateNode("own"))  # (its name: 3)
    engine.apply(SetNodeAnnex("own", "k", b"z" * 80), 0.0)  # the node's owner pays
    _refused(engine, "batch", SetNodeAnnex("own", "k2", b"z" * 10), "data_bytes")
    engine.apply(SetNodeAnnex("own", "k", b""), 0.0)
    _refused(engine, "batch", CreateSession(NODE, b"k", description="d" * 100), "data_bytes")
    assert _usage(engine, "batch")["data_bytes"] == 15 + KEY_DIGEST_BYTES
    check_invariants(engine)


def test_an_owners_things_stay_its_own_whoever_acts_on_them() -> None:
    """What a session makes counts against the session's owner: another token that
    re-attaches it cannot move its count, nor spend its own quota through it."""
    engine = _engine(semaphores=1)
    sid = _as(engine, "batch", CreateSession(NODE, KEY)).session_id
    engine.apply(CreateSemaphore(sid, "a", 1, b""), 0.0)
    _refused(engine, "other", CreateSemaphore(sid, "b", 1, b""), "semaphores", owner="batch")
    assert _usage(engine, "other")["semaphores"] == 0


def test_dropping_a_node_gives_back_all_it_held() -> None:
    engine = _engine(sessions=5)
    _as(engine, "batch", CreateNode("tmp"))
    sid = _as(engine, "batch", CreateSession("tmp", KEY, description="x")).session_id
    other = _as(engine, "batch", CreateSession("tmp", KEY)).session_id
    engine.apply(CreateSemaphore(sid, "a", 1, b"data"), 0.0)
    acquire(engine, sid, "a")
    acquire(engine, other, "a")  # queued
    engine.apply(DescribeSemaphore(other, "a", watch_data=True), 0.0)
    engine.apply(SetNodeAnnex("tmp", "k", b"v"), 0.0)
    engine.apply(DropNode("tmp", force=True), 0.0)
    assert _usage(engine, "batch") == dict.fromkeys(TRACKED, 0)
    check_invariants(engine)


def test_a_snapshot_keeps_owners_and_counts() -> None:
    engine = _engine(sessions=2)
    sid = _as(engine, "batch", CreateSession(NODE, KEY, description="abc")).session_id
    _as(engine, "batch", CreateSession(NODE, KEY))
    engine.apply(CreateSemaphore(sid, "a", 1, b"12345"), 0.0)
    _as(engine, "batch", CreateNode("mine"))
    plain = msgspec.msgpack.decode(msgspec.msgpack.encode(dump(engine)))
    assert plain["version"] == SNAPSHOT_VERSION
    loaded = load(plain)
    check_invariants(loaded)
    assert _usage(loaded, "batch") == _usage(engine, "batch")
    # A description and data (8), two sessions' keys' digests, a semaphore's and a node's
    # names.
    expected = 8 + 2 * KEY_DIGEST_BYTES + len("a") + len("mine")
    assert _usage(loaded, "batch")["data_bytes"] == expected
    loaded.ledger.quotas = {"batch": Quota(sessions=2)}
    _refused(loaded, "batch", CreateSession(NODE, KEY), "sessions")
    # A version 9 snapshot (before owners) loads with everything nobody's.
    plain["version"] = 9
    del plain["owners"]
    old = load(plain)
    check_invariants(old)
    assert old.ledger.of("batch").counts == [0] * len(TRACKED)
    assert old.ledger.of("").counts[Q_SESSIONS] == 2


def test_memory_budget_refuses_what_adds_state_and_lets_the_rest_work() -> None:
    engine = make_engine()
    sid = engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    engine.apply(CreateSemaphore(sid, "m", 1, b""), 0.0)
    acquire(engine, sid, "m", lease_ttl=10.0)
    waiting = engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    engine.ledger.budget = engine.ledger.estimate() + OBJECT_BYTES[Q_DATA_BYTES] * 10
    message = r"the server's memory budget \(\d+ bytes\) is used up"
    for command in (
        CreateSession(NODE, KEY),
        CreateSemaphore(sid, "n", 1, b""),
        CreateNode("more"),
        UpdateSemaphore(sid, "m", b"x" * 11),
        DescribeSemaphore(sid, "m", watch_data=True),
    ):
        with pytest.raises(LimitExceededError, match=message):
            engine.apply(command, 0.0)
    with pytest.raises(LimitExceededError, match=message):
        acquire(engine, waiting, "m")  # it would queue
    assert engine.ledger.refusals[("memory_budget", "")] == 6
    # Reads, renewals, releases, detaches, closes and deletes keep working.
    engine.apply(DescribeSemaphore(sid, "m"), 0.0)
    engine.apply(UpdateSemaphore(sid, "m", b"x" * 10), 0.0)  # (within the budget)
    engine.apply(Renew(sid, "m", 10.0), 1.0)
    assert acquire(engine, waiting, "m", timeout=0).status is AcquireStatus.BUSY
    assert engine.apply(Release(sid, "m"), 1.0)
    engine.apply(DeleteSemaphore(sid, "m"), 1.0)
    engine.apply(DetachSession(waiting), 1.0)
    engine.apply(CloseSession(waiting), 1.0)
    # What was freed may be used again.
    engine.apply(CreateSemaphore(sid, "n", 1, b""), 1.0)
    check_invariants(engine)


def test_the_running_counts_match_a_full_count_through_a_busy_life() -> None:
    """Many owners, every way of making and ending things: the incremental counts equal
    a count of the whole state at each step (the invariant checks compare them)."""
    engine = make_engine()
    sessions = [
        _as(engine, f"t{i % 3}", CreateSession(NODE, KEY, description="s" * i)).session_id
        for i in range(6)
    ]
    for i, sid in enumerate(sessions):
        name = f"e{i % 2}"
        acquire(engine, sid, name, MAX_COUNT, ephemeral=True, data=b"d" * i, timeout=5.0, now=i)
        engine.apply(WatchPrefix(sid, "e"), float(i))
        check_invariants(engine)
    engine.apply(DetachSession(sessions[0]), 6.0)
    engine.tick(100.0)  # the detached one expires; the queued acquires time out
    check_invariants(engine)
    for sid in sessions[1:]:
        engine.apply(CloseSession(sid), 100.0)
        check_invariants(engine)
    counted = counted_usage(engine)
    assert all(counts == [0] * len(TRACKED) for owner, counts in counted.items() if owner)


def test_data_bytes_counts_each_holds_and_waits_data() -> None:
    """A hold's data (an acquire's ``data``) is its session's owner's, on anybody's
    semaphore: 14,000 ephemeral locks of 64 KiB are refused at data_bytes too."""
    own = KEY_DIGEST_BYTES + len("a")  # (its session's key digest, its semaphore's name)
    engine = _engine(data_bytes=100 + own)
    sid = _as(engine, "batch", CreateSession(NODE, KEY)).session_id
    holder = _as(engine, "other", CreateSession(NODE, KEY)).session_id
    acquire(engine, sid, "a", MAX_COUNT, ephemeral=True, data=b"x" * 60)
    with pytest.raises(LimitExceededError, match="token 'batch' is over its quota data_bytes"):
        acquire(engine, sid, "b", MAX_COUNT, ephemeral=True, data=b"x" * 41)
    acquire(engine, holder, "c", MAX_COUNT, ephemeral=True, data=b"y" * 500)  # not batch's
    queued = acquire(engine, sid, "c", MAX_COUNT, ephemeral=True, data=b"x" * 40, timeout=5.0)
    assert queued.status is AcquireStatus.QUEUED
    assert _usage(engine, "batch")["data_bytes"] == 100 + own
    # Restating its own hold with the same data is no growth.
    assert acquire(engine, sid, "a", MAX_COUNT, data=b"x" * 60).status is AcquireStatus.GRANTED
    engine.apply(Release(holder, "c"), 1.0)  # the wait is granted: its data, now a hold's
    assert _usage(engine, "batch")["data_bytes"] == 100 + own
    engine.apply(Release(sid, "a"), 1.0)
    engine.apply(Release(sid, "c"), 1.0)
    assert _usage(engine, "batch")["data_bytes"] == KEY_DIGEST_BYTES  # (its open session's)
    check_invariants(engine)


def test_the_memory_budget_counts_holds() -> None:
    """A session may hold one semaphore many times (hold numbers): each hold counts for
    the budget, so holds cannot grow the state past it either."""
    engine = make_engine()
    sid = engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    engine.apply(CreateSemaphore(sid, "wide", 1_000, b""), 0.0)
    engine.ledger.budget = engine.ledger.estimate() + 3 * OBJECT_BYTES[Q_HOLDS]
    for hold in (1, 2, 3):
        assert acquire(engine, sid, "wide", hold=hold).status is AcquireStatus.GRANTED
    with pytest.raises(LimitExceededError, match="memory budget"):
        acquire(engine, sid, "wide", hold=4)
    assert acquire(engine, sid, "wide", 2, hold=3).status is AcquireStatus.GRANTED  # restated
    assert engine.ledger.total.counts[Q_HOLDS] == 3
    engine.apply(Release(sid, "wide", hold=1), 0.0)
    assert acquire(engine, sid, "wide", hold=4).status is AcquireStatus.GRANTED
    check_invariants(engine)
