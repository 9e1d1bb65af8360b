"""DescribeSession: what a session holds, waits for, and the endings it may have missed.

A push can be lost (written to a connection that then died, or queued by a server
that then restarted); everything a lost push told must be readable back from the
engine, so a re-attaching client can agree with the server (docs/protocol.md,
sections 8 and 11).
"""

from __future__ import annotations

import random

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireAll,
    AcquireFailed,
    AcquireStatus,
    AlterNode,
    CancelAcquire,
    DeleteSemaphore,
    DescribeSession,
    Engine,
    HeldGrant,
    LeaseLost,
    NodeConfig,
    QueuedAcquire,
    Release,
    SessionState,
)
from tenure._core.snapshot import dump, load
from tenure.errors import ErrorCode, InvalidArgumentError, SessionExpiredError

from .support import acquire, create_semaphore, make_engine, open_session
from .test_snapshot import random_command, step


def state(engine: Engine, sid: int, *, now: float = 0.0) -> SessionState:
    return engine.apply(DescribeSession(sid), now)


def test_holds_and_waits_are_listed_by_name_with_tokens_and_request_ids() -> None:
    engine = make_engine(NodeConfig(default_lease=9.0))
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "pool", 3)
    taken = acquire(engine, a, "pool", 2)
    locked = acquire(engine, a, "lock", MAX_COUNT, ephemeral=True)
    acquire(engine, b, "lock", MAX_COUNT, request_id=41, ephemeral=True)
    acquire(engine, b, "pool", 2, request_id=42)

    assert taken.token is not None
    assert locked.token is not None
    assert state(engine, a) == SessionState(
        a,
        holds=(
            HeldGrant("lock", locked.token, MAX_COUNT, 9.0),
            HeldGrant("pool", taken.token, 2, 9.0),
        ),
    )
    assert state(engine, b) == SessionState(
        b, waits=(QueuedAcquire("lock", 41, MAX_COUNT), QueuedAcquire("pool", 42, 2))
    )


def test_a_timed_out_acquire_is_kept_until_the_session_acquires_again() -> None:
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    acquire(engine, a, "m", MAX_COUNT, ephemeral=True)
    acquire(engine, b, "m", MAX_COUNT, request_id=7, timeout=1.0, ephemeral=True)
    engine.tick(1.0)
    (pushed,) = engine.take_effects()

    assert state(engine, b, now=2.0).missed == (pushed,)
    assert pushed == AcquireFailed(b, 7, "m", ErrorCode.TIMEOUT, "timed out waiting for 'm'")
    busy = acquire(engine, b, "m", MAX_COUNT, request_id=8, timeout=0, now=3.0)
    assert busy.status is AcquireStatus.BUSY
    assert state(engine, b, now=3.0).missed == ()


def test_a_forced_delete_is_kept_for_holders_and_waiters_until_they_act_again() -> None:
    engine = make_engine()
    a, b, c = (open_session(engine) for _ in range(3))
    create_semaphore(engine, a, "s", 1)
    token = acquire(engine, a, "s").token
    assert token is not None
    acquire(engine, b, "s", request_id=5)
    engine.apply(DeleteSemaphore(c, "s", force=True), 1.0)

    message = "semaphore 's' was deleted"
    assert state(engine, a).missed == (LeaseLost(a, "s", token, ErrorCode.LEASE_LOST, message),)
    assert state(engine, b).missed == (AcquireFailed(b, 5, "s", ErrorCode.NOT_FOUND, message),)
    assert state(engine, c).missed == ()
    # A release that finds nothing keeps it: its answer may be lost with its
    # connection, and one sent again finds nothing either (the simulation's seed 52).
    assert engine.apply(Release(a, "s"), 2.0) is False
    assert state(engine, a).missed != ()
    acquire(engine, a, "s", ephemeral=True, now=3.0)  # acting on it again: it has seen it
    assert state(engine, a).missed == ()
    assert state(engine, b).missed != ()


def test_an_expired_lease_is_kept() -> None:
    engine = make_engine()
    a = open_session(engine)
    token = acquire(engine, a, "m", ephemeral=True, lease_ttl=2.0).token
    assert token is not None
    engine.tick(2.0)
    message = "lease on 'm' expired without renewal"
    assert state(engine, a, now=2.0) == SessionState(
        a, missed=(LeaseLost(a, "m", token, ErrorCode.LEASE_LOST, message),)
    )


def test_what_the_session_did_itself_is_not_kept() -> None:
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    acquire(engine, a, "m", MAX_COUNT, ephemeral=True)
    acquire(engine, b, "m", MAX_COUNT, request_id=1, ephemeral=True)
    acquire(engine, b, "m", MAX_COUNT, request_id=2, ephemeral=True)  # supersedes 1
    engine.apply(CancelAcquire(b, "m", 2), 0.0)
    acquire(engine, b, "m", MAX_COUNT, request_id=3, ephemeral=True)
    engine.apply(Release(b, "m"), 0.0)  # cancels 3
    assert len([e for e in engine.take_effects() if isinstance(e, AcquireFailed)]) == 3
    assert state(engine, b).missed == ()


def test_only_the_latest_endings_are_kept_one_per_semaphore() -> None:
    kept = NodeConfig().max_missed_per_session
    engine = make_engine(NodeConfig(max_semaphores=kept + 10))
    a, b = open_session(engine), open_session(engine)
    names = [f"s{i:04}" for i in range(kept + 5)]
    for i, name in enumerate(names):
        acquire(engine, a, name, MAX_COUNT, ephemeral=True, now=float(i))
        acquire(engine, b, name, MAX_COUNT, request_id=i, timeout=0.5, ephemeral=True, now=i)
    acquire(engine, b, names[0], MAX_COUNT, request_id=999, timeout=0.5, ephemeral=True, now=500)
    engine.tick(501.0)

    missed = engine.sessions[b].missed
    assert len(missed) == kept
    # The oldest went first; a semaphore that ended again counts as new.
    assert list(missed) == [(name, 0) for name in [*names[6:], names[0]]]
    assert missed[names[0], 0].request_id == 999  # type: ignore[union-attr]


def test_the_node_sets_how_many_are_kept_and_a_lower_limit_applies_at_the_next() -> None:
    engine = make_engine(NodeConfig(max_missed_per_session=3))
    a, b = open_session(engine), open_session(engine)

    def time_out(name: str, now: float) -> None:
        acquire(engine, a, name, MAX_COUNT, ephemeral=True, now=now)
        acquire(engine, b, name, MAX_COUNT, timeout=0.5, ephemeral=True, now=now)
        engine.tick(now + 0.5)

    for i, name in enumerate("abcd"):
        time_out(name, float(i))
    assert list(engine.sessions[b].missed) == [("b", 0), ("c", 0), ("d", 0)]
    engine.apply(AlterNode("n", {"max_missed_per_session": 1}), 10.0)
    assert list(engine.sessions[b].missed) == [("b", 0), ("c", 0), ("d", 0)]  # kept
    time_out("e", 10.0)
    assert list(engine.sessions[b].missed) == [("e", 0)]


def test_pages_cover_every_semaphore_once_in_name_order() -> None:
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    for name in "edcba":
        acquire(engine, a, name, MAX_COUNT, ephemeral=True)
        acquire(engine, b, name, MAX_COUNT, request_id=ord(name), ephemeral=True)
    acquire(engine, b, "f", MAX_COUNT, ephemeral=True)

    pages, after = [], ""
    while True:
        page = engine.apply(DescribeSession(b, after, limit=2), 0.0)
        pages.append(page)
        if page.next_after is None:
            break
        after = page.next_after
    assert [[w.name for w in p.waits] + [h.name for h in p.holds] for p in pages] == [
        ["a", "b"],
        ["c", "d"],
        ["e", "f"],
    ]
    assert [p.next_after for p in pages] == ["b", "d", None]


@pytest.mark.parametrize(
    ("after", "limit"), [(None, 5), (3, 5), ("", 0), ("", 10_001), ("", True), ("", 1.5)]
)
def test_bad_pages_are_refused(after: object, limit: object) -> None:
    engine = make_engine()
    a = open_session(engine)
    with pytest.raises(InvalidArgumentError):
        engine.apply(DescribeSession(a, after, limit), 0.0)  # type: ignore[arg-type]


def test_an_unknown_session_is_expired() -> None:
    with pytest.raises(SessionExpiredError):
        make_engine().apply(DescribeSession(99), 0.0)


@pytest.mark.parametrize("seed", range(30))
def test_the_state_agrees_with_the_semaphores_and_the_pushes(seed: int) -> None:
    """Random commands: holds and waits are the semaphores' view of each session, and
    ``missed`` is exactly the latest unasked-for ending pushed on each semaphore since
    the session last acquired it or released something there, before and after a
    snapshot."""
    rng = random.Random(seed)
    engine = make_engine(NodeConfig(recovery_window=1.0, default_lease=rng.choice([None, 1.0])))
    for _ in range(4):
        open_session(engine)
    expected: Expected = {s: {} for s in engine.sessions}
    now = 0.0
    for request_id in range(1, 150):
        now += rng.choice([0.0, 0.1, 0.4, 1.5])
        engine.tick(now)
        fold(expected, list(engine.take_effects()))
        command = random_command(rng, engine, request_id)
        reply, effects = step(engine, command, now)
        if (isinstance(command, Acquire) and not isinstance(reply, tuple)) or (
            isinstance(command, Release) and reply is True
        ):
            # It succeeded (a release that released something): its session has seen
            # how its last acquire there ended.
            expected.get(command.session_id, {}).pop((command.name, command.hold), None)
        if isinstance(command, AcquireAll) and not isinstance(reply, tuple):
            for name, hold in zip(command.names, command.holds, strict=True):
                expected.get(command.session_id, {}).pop((name, hold), None)
        fold(expected, effects)
        for sid, session in engine.sessions.items():
            assert dict(session.missed) == expected.setdefault(sid, {})
            agrees_with_semaphores(engine, sid, now)
    restored = load(dump(engine))
    for sid in engine.sessions:
        assert restored.apply(DescribeSession(sid), now) == engine.apply(DescribeSession(sid), now)


Expected = dict[int, dict[tuple[str, int], AcquireFailed | LeaseLost]]


def fold(expected: Expected, effects: list[object]) -> None:
    for effect in effects:
        kept = isinstance(effect, LeaseLost) or (
            isinstance(effect, AcquireFailed)
            and effect.code in (ErrorCode.TIMEOUT, ErrorCode.NOT_FOUND)
        )
        if kept:
            assert isinstance(effect, AcquireFailed | LeaseLost)
            mine = expected.setdefault(effect.session_id, {})
            mine.pop((effect.name, effect.hold), None)
            mine[effect.name, effect.hold] = effect


def agrees_with_semaphores(engine: Engine, sid: int, now: float) -> None:
    node = engine.nodes[engine.sessions[sid].node]
    holds, waits = [], []
    for name in sorted(node.semaphores):
        sem = node.semaphores[name]
        mine = sorted((o.hold, o) for o in sem.owners.values() if o.session_id == sid)
        for hold, o in mine:
            holds.append(HeldGrant(name, o.token, o.count, o.lease_ttl, hold))
        queued = sorted((w.hold, w) for w in sem.waiters.values() if w.session_id == sid)
        for hold, w in queued:
            waits.append(QueuedAcquire(name, w.request_id, w.count, hold))
    got = engine.apply(DescribeSession(sid), now)
    assert (got.holds, got.waits, got.next_after) == (tuple(holds), tuple(waits), None)
