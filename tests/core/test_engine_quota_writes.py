"""Every write pays for the bytes it stores, whoever pays (issue 47, tenure._core.quotas).

A claim's record is its owner data in hex plus the words around it, more than twice
the data; a claim of an ended claim's semaphore takes the semaphore over (the claimer
pays from then on, its maker no longer); a release writes its time into the record;
a queued upgrade keeps its hold's data beside its own; a limiter's bucket is
rewritten with each number's repr. Each is checked against the quota of whoever pays
and the memory budget before anything changes, and the running counts stay what a
recount of the whole state gives (:func:`tenure._core.invariants.check_invariants`).
"""

from __future__ import annotations

from typing import Any

import pytest

from tenure._core import (
    AcquireStatus,
    ClaimName,
    ClaimRecord,
    CreateSemaphore,
    CreateSession,
    Engine,
    ReleaseClaim,
    ReserveUnits,
)
from tenure._core.claims import claim_data, parse_claim
from tenure._core.invariants import check_invariants
from tenure._core.quotas import Q_DATA_BYTES, Q_SEMAPHORES, Quota
from tenure._core.rates import Bucket, bucket_data, parse_bucket
from tenure._core.snapshot import dump, load
from tenure.errors import LimitExceededError

from .support import KEY, NODE, acquire, describe, make_engine, open_session

T0 = 1_750_000_000.0  # UNIX seconds of the host's wall clock
A, B, C = "a" * 32, "b" * 32, "c" * 32
OVER_QUOTA = r"token 'batch' is over its quota data_bytes "
OVER_BUDGET = r"the server's memory budget \(\d+ bytes\) is used up"


def _allow(engine: Engine, owner: str, more: int) -> None:
    """Give ``owner`` a data_bytes quota of ``more`` bytes over what it holds now (a
    session's own bytes count as well: its key, its identity)."""
    held = engine.ledger.of(owner).counts[Q_DATA_BYTES]
    engine.ledger.quotas = {owner: Quota(data_bytes=held + more)}


def _cost(name: str, data: bytes) -> int:
    """What a semaphore ``name`` of ``data`` costs its owner's data_bytes, measured
    on an engine of its own (a CreateSemaphore of it)."""
    engine = make_engine()
    sid = open_session(engine)
    before = engine.ledger.of("").counts[Q_DATA_BYTES]
    engine.apply(CreateSemaphore(sid, name, 1, data), 0.0)
    return engine.ledger.of("").counts[Q_DATA_BYTES] - before


def _session(engine: Engine, actor: str) -> int:
    """A session of ``actor``'s token: what it makes counts against that token."""
    engine.actor = actor
    try:
        return engine.apply(CreateSession(NODE, KEY), 0.0).session_id
    finally:
        engine.actor = ""


def _claim(
    engine: Engine, sid: int, name: str, claim_id: str, data: bytes = b"", *, now: float = 0.0
) -> ClaimRecord:
    """Claim ``name`` for at least 5 and at most 10 seconds."""
    return engine.apply(ClaimName(sid, name, claim_id, 5.0, 10.0, data, T0 + now), now)


def _ended(engine: Engine, sid: int, name: str) -> bytes:
    """Make ``name`` a semaphore whose data is an ended claim's record (anyone may
    write one); returns that data."""
    data = claim_data(ClaimRecord(C, 1, T0 - 100.0, 1.0, 2.0, None, sid, b""))
    engine.apply(CreateSemaphore(sid, name, 1, data), 0.0)
    return data


def _holds(engine: Engine, owner: str) -> tuple[int, int]:
    """(semaphores, data bytes) counted against ``owner``."""
    counts = engine.ledger.of(owner).counts
    return counts[Q_SEMAPHORES], counts[Q_DATA_BYTES]


def _refused(engine: Engine, match: str, command: Any, now: float = 0.0) -> None:
    """``command`` is refused (``match``) and changes nothing anybody counts."""
    before = {owner: list(usage.counts) for owner, usage in engine.ledger.usage.items()}
    with pytest.raises(LimitExceededError, match=match):
        engine.apply(command, now)
    assert {owner: list(usage.counts) for owner, usage in engine.ledger.usage.items()} == before
    check_invariants(engine)


def test_a_new_claim_is_charged_the_record_it_stores() -> None:
    """2,000 bytes of owner data fit a 3,000-byte quota; their record (4,000 in hex, and
    the words) does not. A claim costs what writing its record in a semaphore does."""
    engine = make_engine()
    sid = _session(engine, "batch")
    _allow(engine, "batch", 3000)
    _refused(engine, OVER_QUOTA, ClaimName(sid, "big", A, 5.0, 10.0, b"o" * 2000, T0))
    assert "big" not in engine.nodes[NODE].semaphores
    before = _holds(engine, "batch")
    record = _claim(engine, sid, "job", A, b"o" * 600)
    stored = describe(engine, sid, "job").data
    assert stored == claim_data(record)
    assert len(stored) > 1200
    assert _holds(engine, "batch") == (before[0] + 1, before[1] + _cost("job", stored))
    check_invariants(engine)


def test_a_claim_of_an_ended_claims_semaphore_is_the_claimers_to_pay() -> None:
    """The path that checked nothing: a semaphore whose data is an ended claim's record,
    made by another token. The claimer's quota is asked for the whole record; granted,
    the semaphore counts against the claimer, and no longer against its maker."""
    engine = make_engine()
    maker, batch = _session(engine, "maker"), _session(engine, "batch")
    made, before = _holds(engine, "maker"), _holds(engine, "batch")
    _allow(engine, "batch", 1500)
    old = _ended(engine, maker, "x")
    assert _holds(engine, "maker") == (made[0] + 1, made[1] + _cost("x", old))
    _refused(engine, OVER_QUOTA, ClaimName(batch, "x", A, 5.0, 10.0, b"o" * 1000, T0))
    assert describe(engine, batch, "x").data == old  # (not claimed)
    record = _claim(engine, batch, "x", A, b"o" * 600)
    assert parse_claim("x", describe(engine, batch, "x").data) == record
    assert _holds(engine, "maker") == made
    first = _cost("x", claim_data(record))
    assert _holds(engine, "batch") == (before[0] + 1, before[1] + first)
    # Its own ended claim's semaphore: the record replaces the data it paid for.
    own = _ended(engine, batch, "y")
    assert _holds(engine, "batch") == (before[0] + 2, before[1] + first + _cost("y", own))
    _refused(engine, OVER_QUOTA, ClaimName(batch, "y", B, 5.0, 10.0, b"o" * 400, T0))
    second = _cost("y", claim_data(_claim(engine, batch, "y", B, b"o" * 30)))
    assert _holds(engine, "batch") == (before[0] + 2, before[1] + first + second)
    check_invariants(engine)
    restored = load(dump(engine))  # (a snapshot keeps the semaphore's new owner)
    assert (_holds(restored, "batch"), _holds(restored, "maker")) == (
        _holds(engine, "batch"),
        made,
    )
    check_invariants(restored)


def test_the_memory_budget_refuses_claims_by_what_they_store() -> None:
    """On every path: a claim of an ended claim's semaphore (another's, or its own) was
    not checked at all, and a new one was checked for its owner data only."""
    engine = make_engine()
    maker, sid = _session(engine, "maker"), _session(engine, "")
    _ended(engine, maker, "theirs")
    _ended(engine, sid, "own")
    engine.ledger.budget = engine.ledger.estimate() + 1000
    for name in ("theirs", "own"):
        _refused(engine, OVER_BUDGET, ClaimName(sid, name, A, 5.0, 10.0, b"o" * 1000, T0))
    # 600 bytes would fit; their record (about 1,270) does not.
    _refused(engine, OVER_BUDGET, ClaimName(sid, "new", B, 5.0, 10.0, b"o" * 600, T0))
    assert engine.ledger.refusals == {("memory_budget", ""): 3}
    _claim(engine, sid, "theirs", A, b"o" * 100)
    _claim(engine, sid, "own", B)
    _claim(engine, sid, "new", C)
    assert engine.ledger.estimate() <= engine.ledger.budget
    check_invariants(engine)


def test_a_release_is_checked_against_the_claims_owner() -> None:
    """A release before ``at_least`` writes its time into the record: the claim's
    owner pays (the releaser has no session); refused, the claim is as it was."""
    engine = make_engine()
    sid = _session(engine, "batch")
    record = _claim(engine, sid, "job", A)
    _, held = _holds(engine, "batch")
    _allow(engine, "batch", 5)
    _refused(engine, OVER_QUOTA, ReleaseClaim(NODE, "job", A, T0 + 1.0), 1.0)
    assert parse_claim("job", describe(engine, sid, "job", now=1.0).data) == record
    assert engine.nodes[NODE].claims["job"].ends_at == 10.0
    _allow(engine, "batch", 20)
    assert engine.apply(ReleaseClaim(NODE, "job", A, T0 + 1.0), 1.0)
    released = describe(engine, sid, "job", now=1.0).data
    assert parse_claim("job", released).released_at == T0 + 1.0
    grown = len(released) - len(claim_data(record))
    assert grown > 5
    assert _holds(engine, "batch") == (1, held + grown)
    check_invariants(engine)


def test_usage_returns_to_what_it_was_once_the_claims_end() -> None:
    """New, taken over, its own, released or not: each claim's semaphore goes at its
    end, and every count is back where it was before any of them."""
    engine = make_engine()
    maker, batch = _session(engine, "maker"), _session(engine, "batch")
    _allow(engine, "batch", 10_000)  # (a quota: every check is made)
    before = {owner: list(usage.counts) for owner, usage in engine.ledger.usage.items()}
    total = list(engine.ledger.total.counts)
    _ended(engine, maker, "theirs")
    _ended(engine, batch, "own")
    for name, claim_id in (("new", A), ("theirs", B), ("own", C)):
        _claim(engine, batch, name, claim_id, b"d" * 100, now=1.0)
        check_invariants(engine)
    assert engine.apply(ReleaseClaim(NODE, "new", A, T0 + 2.0), 2.0)  # (ends at 6)
    check_invariants(engine)
    assert _holds(engine, "batch")[0] == 3
    engine.tick(11.0)
    assert not engine.nodes[NODE].semaphores
    assert {owner: list(usage.counts) for owner, usage in engine.ledger.usage.items()} == before
    assert engine.ledger.total.counts == total
    check_invariants(engine)


def test_a_queued_upgrade_pays_for_its_data_beside_its_holds() -> None:
    """An acquire for more than its hold has queues, and its hold (with its data) stays:
    it was checked for the growth over the hold's data only (none, for the same data)."""
    engine = make_engine()
    sid, other = _session(engine, "batch"), _session(engine, "other")
    _, held = _holds(engine, "batch")
    _allow(engine, "batch", 150)
    engine.apply(CreateSemaphore(other, "pool", 2, b""), 0.0)
    acquire(engine, other, "pool")
    assert acquire(engine, sid, "pool", data=b"d" * 100).status is AcquireStatus.GRANTED
    with pytest.raises(LimitExceededError, match=OVER_QUOTA):
        acquire(engine, sid, "pool", 2, data=b"d" * 100, timeout=5.0)
    assert _holds(engine, "batch") == (0, held + 100)
    queued = acquire(engine, sid, "pool", 2, data=b"d" * 50, timeout=5.0)
    assert queued.status is AcquireStatus.QUEUED
    # Restating the queued request replaces its data: only the growth over it counts.
    again = acquire(engine, sid, "pool", 2, data=b"d" * 50, timeout=5.0, keep_place=True)
    assert again.status is AcquireStatus.QUEUED
    assert _holds(engine, "batch") == (0, held + 150)
    check_invariants(engine)


def test_a_limiters_rewritten_bucket_is_checked_against_its_owner() -> None:
    """``limiter 1 1 0`` is rewritten ``limiter 1.0 1.0 1750000001.0``: more bytes, paid
    by the limiter's owner, whoever reserves."""
    small = b"limiter 1 1 0"
    engine = make_engine()
    sid, other = _session(engine, "batch"), _session(engine, "other")
    engine.apply(CreateSemaphore(sid, "api", 1, small), 0.0)
    theirs, (_, held) = _holds(engine, "other"), _holds(engine, "batch")
    _allow(engine, "batch", 0)
    _refused(engine, OVER_QUOTA, ReserveUnits(other, "api", 1, None, T0 + 1.0))
    assert describe(engine, sid, "api").data == small
    _allow(engine, "batch", 100)
    assert engine.apply(ReserveUnits(other, "api", 1, None, T0 + 1.0), 0.0).granted
    written = describe(engine, sid, "api").data
    assert written == bucket_data(Bucket(1.0, 1.0, T0 + 2.0))
    assert parse_bucket("api", written).tat == T0 + 2.0
    assert _holds(engine, "batch") == (1, held + len(written) - len(small))
    assert _holds(engine, "other") == theirs
    check_invariants(engine)
