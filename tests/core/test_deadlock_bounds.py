"""What one deadlock check may cost the server (issue 47): the cycle's text is bounded
(a few waits, names cut), the texts a node keeps count in the memory estimate, and
the look at the holders before the search is spent from the search's limit."""

from __future__ import annotations

import pytest

from tenure._core import MAX_COUNT, AcquireStatus, DescribeNode, DropNode, Engine, NodeConfig
from tenure._core.deadlocks import CUT, LOOKED, REFUSED
from tenure._core.invariants import check_invariants
from tenure._core.limits import (
    DEADLOCK_SEARCH_LIMIT,
    MAX_DEADLOCK_LINKS,
    MAX_DEADLOCK_NAME_BYTES,
    MAX_DEADLOCKS_SHOWN,
    MAX_NAME_BYTES,
)
from tenure._core.quotas import OBJECT_BYTES, Q_HOLDS, Q_WAITERS
from tenure._core.state import BROKEN_DEADLOCK_BYTES
from tenure.errors import DeadlockError

from .support import NODE, acquire, create_semaphore, make_engine, open_session

QUEUED = AcquireStatus.QUEUED

#: The most bytes one cycle's text may take (limits.py: "about 1.5 KB"), the
#: message's "refused: ..." included.
TEXT_BOUND = 1536


def lock(engine: Engine, sid: int, name: str, task: int = 1) -> AcquireStatus:
    """A mutex acquire by ``task`` of ``sid``."""
    return acquire(engine, sid, name, MAX_COUNT, ephemeral=True, task=task).status


def long_name(i: int) -> str:
    """A name of about MAX_NAME_BYTES, of characters whose repr is longest per byte
    (a private-use character: 4 bytes, shown as 10) after a few plain ones."""
    head = f"m{i:04d}-"
    return head + "\U000f0000" * ((MAX_NAME_BYTES - len(head)) // 4)


def ring(links: int) -> tuple[Engine, list[int]]:
    """``links`` sessions, each holding one long-named mutex and waiting for the next
    one's, but the last, which holds its own and waits for nothing yet."""
    engine = make_engine(NodeConfig(max_sessions=links + 10))
    sids = [open_session(engine) for _ in range(links)]
    for i, sid in enumerate(sids):
        assert lock(engine, sid, long_name(i)) is AcquireStatus.GRANTED
    for i, sid in enumerate(sids[:-1]):
        assert lock(engine, sid, long_name(i + 1)) is QUEUED
    return engine, sids


def close_ring(engine: Engine, sids: list[int], now: float = 0.0) -> str:
    """The last session's asking for the first one's mutex: refused; its message."""
    with pytest.raises(DeadlockError) as caught:
        acquire(engine, sids[-1], long_name(0), MAX_COUNT, ephemeral=True, task=1, now=now)
    return str(caught.value)


def test_a_long_cycle_of_long_names_is_told_in_a_bounded_text() -> None:
    engine, sids = ring(300)
    message = close_ring(engine, sids)
    assert len(message.encode()) <= TEXT_BOUND  # (each name alone is a KiB)
    first, last = sids[0], sids[-1]
    cut = repr(long_name(0).encode()[:MAX_DEADLOCK_NAME_BYTES].decode(errors="ignore"))
    assert message.startswith(
        f"refused: waiting would deadlock: session {last} (task 1) waits for {cut}... "
        f"held by session {first} (task 1), which waits for "
    )
    assert message.count("waits for") == MAX_DEADLOCK_LINKS
    more = 300 - MAX_DEADLOCK_LINKS
    assert message.endswith(
        f", and {more} more waits back to session {last} (task 1): a cycle of 300"
    )
    check_invariants(engine)


def test_a_short_cycle_is_told_whole() -> None:
    engine, sids = ring(MAX_DEADLOCK_LINKS)
    message = close_ring(engine, sids)
    assert message.count("waits for") == MAX_DEADLOCK_LINKS
    assert "more waits" not in message
    assert message.endswith(f"held by session {sids[-1]} (task 1)")


def test_the_nodes_description_stays_small_after_many_such_refusals() -> None:
    engine, sids = ring(300)
    for attempt in range(MAX_DEADLOCKS_SHOWN + 2):
        close_ring(engine, sids, now=float(attempt))
    kept = engine.apply(DescribeNode(NODE), 20.0).deadlocks
    assert len(kept) == MAX_DEADLOCKS_SHOWN
    assert sum(len(d.cycle.encode()) for d in kept) <= MAX_DEADLOCKS_SHOWN * TEXT_BOUND


def test_the_memory_estimate_counts_the_kept_texts_until_the_node_goes() -> None:
    engine, sids = ring(20)
    ledger = engine.ledger
    before = ledger.estimate()

    def kept_cost() -> int:
        kept = engine.broken_deadlocks[NODE]
        return sum(BROKEN_DEADLOCK_BYTES + len(d.cycle.encode()) for d in kept)

    close_ring(engine, sids)
    assert ledger.estimate() == before + kept_cost() > before
    for attempt in range(MAX_DEADLOCKS_SHOWN + 2):  # (the oldest go, uncounted)
        close_ring(engine, sids, now=float(attempt))
    assert len(engine.broken_deadlocks[NODE]) == MAX_DEADLOCKS_SHOWN
    assert ledger.estimate() == before + kept_cost()
    engine.apply(DropNode(NODE, force=True), 20.0)
    assert NODE not in engine.broken_deadlocks
    counts = ledger.total.counts
    assert ledger.estimate() == sum(n * size for n, size in zip(counts, OBJECT_BYTES, strict=True))


def test_a_refusal_past_the_memory_budget_is_not_kept() -> None:
    engine, sids = ring(20)
    ledger = engine.ledger
    # Room for the acquire's own hold or waiter (checked first), not for its text.
    room = max(OBJECT_BYTES[Q_WAITERS], OBJECT_BYTES[Q_HOLDS])
    ledger.budget = ledger.estimate() + room
    message = close_ring(engine, sids)  # refused all the same
    assert BROKEN_DEADLOCK_BYTES + len(message.encode()) > room
    assert engine.apply(DescribeNode(NODE), 0.0).deadlocks == ()
    assert ledger.kept_bytes == engine.name_stats.bytes  # (the names its waits keep)
    assert NODE not in engine.broken_deadlocks
    ledger.budget = 0
    close_ring(engine, sids)
    assert len(engine.apply(DescribeNode(NODE), 0.0).deadlocks) == 1


def pool_behind_free_holders(free: int, limit: int) -> AcquireStatus | str:
    """A semaphore of ``free`` + 1 tokens: ``free`` held by tasks that wait for nothing,
    granted first, then one by a task waiting for the asker's mutex 'x'. The asker
    asks for every token (so needs the stuck one's): a deadlock, which the look at
    the holders finds only at the last one. Its answer under ``limit``."""
    engine = make_engine(NodeConfig(max_sessions=free + 10))
    engine.deadlock_search_limit = limit
    asker, stuck = open_session(engine), open_session(engine)
    create_semaphore(engine, asker, "pool", free + 1)
    for _ in range(free):
        assert acquire(engine, open_session(engine), "pool", 1, task=1).status is not QUEUED
    assert acquire(engine, stuck, "pool", 1, task=1).status is not QUEUED
    lock(engine, asker, "x")
    assert lock(engine, stuck, "x") is QUEUED
    try:
        return acquire(engine, asker, "pool", free + 1, task=1).status
    except DeadlockError as error:
        return str(error)


def test_the_look_at_the_holders_is_spent_from_the_search_limit() -> None:
    free = 50
    assert isinstance(pool_behind_free_holders(free, DEADLOCK_SEARCH_LIMIT), str)
    needed = next(n for n in range(1, 1000) if isinstance(pool_behind_free_holders(free, n), str))
    assert pool_behind_free_holders(free, needed - 1) is QUEUED  # past it: waits
    # Its holders are looked at twice (before the search, and by it): both count.
    assert needed > 2 * (free + 1)


def looked(engine: Engine) -> int:
    """The holds, requests and set members deadlock checks looked at, everyone's."""
    return sum(n for (what, _), n in engine.deadlock_counts.items() if what == LOOKED)


def test_one_check_looks_at_no_more_than_the_limit_however_many_holders() -> None:
    limit = 200
    engine = make_engine(NodeConfig(max_sessions=2000))
    engine.deadlock_search_limit = limit
    sids = [open_session(engine) for _ in range(1000)]
    create_semaphore(engine, sids[0], "pool", 1000)
    # Free holders, then holders whose tasks each wait for the next one's mutex.
    for sid in sids[:150]:
        acquire(engine, sid, "pool", 1, task=1)
    for i, sid in enumerate(sids[150:]):
        lock(engine, sid, f"m{i}")
        acquire(engine, sid, "pool", 1, task=1)
    for i, sid in enumerate(sids[150:-1]):
        assert lock(engine, sid, f"m{i + 1}") is QUEUED
    asker = open_session(engine)
    # 150 holders: the look finds the 151st waiting, the search goes on from there.
    before = looked(engine)
    small = open_session(engine)
    create_semaphore(engine, small, "few", 160)
    for sid in sids[:150]:
        acquire(engine, sid, "few", 1, task=2)
    acquire(engine, sids[150], "few", 1, task=1)
    assert acquire(engine, asker, "few", 160, task=1).status is QUEUED
    assert 150 < looked(engine) - before <= limit
    assert engine.deadlock_counts[CUT, ""] == 1
    # 1,000 holders: more than the search could look at; not even looked at.
    before = looked(engine)
    assert acquire(engine, asker, "pool", 1, task=2).status is QUEUED
    assert looked(engine) == before
    assert engine.deadlock_counts[CUT, ""] == 2
    # A holder that waits for nothing: the look at it, and no search.
    lock(engine, sids[0], "alone", task=3)
    assert lock(engine, asker, "alone", task=3) is QUEUED
    assert looked(engine) == before + 1
    assert engine.deadlock_counts[CUT, ""] == 2
    check_invariants(engine)


def test_the_checks_are_counted_for_the_token_whose_acquire_asked() -> None:
    engine = make_engine()

    def session_of(token: str) -> int:
        engine.actor = token  # (as a server's host sets it: the session's quota owner)
        try:
            return open_session(engine)
        finally:
            engine.actor = ""

    one, two, bystander = session_of("evil"), session_of("evil"), session_of("calm")
    lock(engine, one, "a")
    lock(engine, two, "b")
    assert lock(engine, one, "b") is QUEUED
    for _ in range(3):  # asked again and again: each time a search, counted
        with pytest.raises(DeadlockError):
            lock(engine, two, "a")
    assert lock(engine, bystander, "a") is QUEUED  # (waits for 'a': no cycle)
    counts = engine.deadlock_counts
    assert counts[REFUSED, "evil"] == 3
    assert counts[LOOKED, "evil"] >= 3 * 4  # (two holds and two requests, at least)
    assert (REFUSED, "calm") not in counts
    assert counts[LOOKED, "calm"] >= 1
