"""Listing (nodes, semaphores, sessions), identities on owners and waiters, KillSession."""

from __future__ import annotations

import pytest

from tenure._core import (
    MAX_COUNT,
    CreateNode,
    CreateSession,
    DescribeSemaphore,
    DetachSession,
    KillSession,
    ListNodes,
    ListSemaphores,
    ListSessions,
    NodeConfig,
    WatchFired,
)
from tenure._core.stamps import stamp_effect, stamp_effects, stamp_reply
from tenure._core.values import MAX_PAGE, ClientIdentity
from tenure.errors import ErrorCode, InvalidArgumentError, NotFoundError, SessionExpiredError

from .support import (
    KEY,
    acquire,
    create_semaphore,
    describe,
    ended,
    failed,
    fired,
    granted,
    make_engine,
    open_session,
    settled,
)

ALICE = ClientIdentity("host-a", 101, "billing-worker")
BOB = ClientIdentity("host-b", 202, "")


def test_nodes_are_listed_in_pages_in_name_order() -> None:
    engine = make_engine(node="m")
    for name in ["c", "a", "b", "é", "aa"]:
        engine.apply(CreateNode(name), 0.0)
    assert engine.apply(ListNodes("", 3), 0.0).names == ("a", "aa", "b")
    assert engine.apply(ListNodes("b", 3), 0.0).names == ("c", "m", "é")
    assert engine.apply(ListNodes("é", 3), 0.0).names == ()


@pytest.mark.parametrize("limit", [0, -1, MAX_PAGE + 1, True, 2.0, None])
def test_a_page_size_outside_its_range_is_refused(limit: object) -> None:
    engine = make_engine()
    for command in (ListNodes("", limit), ListSemaphores("n", "", "", limit)):  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="limit"):
            engine.apply(command, 0.0)
    with pytest.raises(InvalidArgumentError, match="limit"):
        engine.apply(ListSessions("n", 0, limit), 0.0)  # type: ignore[arg-type]
    assert engine.apply(ListNodes("", MAX_PAGE), 0.0).names == ("n",)


def test_semaphores_are_listed_by_prefix_in_pages_with_their_counts() -> None:
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "jobs/2", 3)
    create_semaphore(engine, a, "jobs/1", 5)
    create_semaphore(engine, a, "other", 1)
    acquire(engine, a, "jobs/1", 2)
    acquire(engine, b, "jobs/1", 3)
    acquire(engine, a, "jobs/11", MAX_COUNT, ephemeral=True)
    acquire(engine, b, "jobs/11", MAX_COUNT, ephemeral=True, timeout=None)
    first = engine.apply(ListSemaphores("n", "jobs/", "", 2), 0.0).semaphores
    assert [(s.name, s.limit, s.count, s.owners, s.waiters, s.ephemeral) for s in first] == [
        ("jobs/1", 5, 5, 2, 0, False),
        ("jobs/11", MAX_COUNT, MAX_COUNT, 1, 1, True),
    ]
    rest = engine.apply(ListSemaphores("n", "jobs/", first[-1].name, 2), 0.0).semaphores
    assert [s.name for s in rest] == ["jobs/2"]
    everything = engine.apply(ListSemaphores("n", "", "", 100), 0.0).semaphores
    assert [s.name for s in everything] == ["jobs/1", "jobs/11", "jobs/2", "other"]


def test_listing_a_missing_node_is_not_found() -> None:
    engine = make_engine()
    with pytest.raises(NotFoundError, match="nope"):
        engine.apply(ListSemaphores("nope"), 0.0)
    with pytest.raises(NotFoundError, match="nope"):
        engine.apply(ListSessions("nope"), 0.0)
    with pytest.raises(NotFoundError, match="nope"):
        engine.apply(KillSession("nope", 1), 0.0)


def test_sessions_are_listed_with_identity_window_and_what_they_hold() -> None:
    engine = make_engine(NodeConfig(recovery_window=20.0))
    a = engine.apply(CreateSession("n", KEY, 5.0, "exporter", ALICE), 1.0).session_id
    b = engine.apply(CreateSession("n", KEY, None, "", BOB), 2.0).session_id
    acquire(engine, a, "x", MAX_COUNT, ephemeral=True, now=3.0)
    acquire(engine, a, "y", 1, ephemeral=True, now=3.0)
    acquire(engine, b, "x", MAX_COUNT, ephemeral=True, now=3.0)
    engine.apply(DetachSession(b), 4.0)
    first, second = engine.apply(ListSessions("n"), 10.0).sessions
    assert first.session_id == a
    assert (first.description, first.identity, first.timeout) == ("exporter", ALICE, 5.0)
    assert (first.created_at, first.expires_in, first.holds, first.waits) == (1.0, None, 2, 0)
    assert (second.session_id, second.identity, second.timeout) == (b, BOB, 20.0)
    assert (second.created_at, second.holds, second.waits) == (2.0, 0, 1)
    assert second.expires_in == pytest.approx(14.0)  # detached at 4.0 with a 20 s window
    assert engine.apply(ListSessions("n", a, 10), 10.0).sessions == (second,)
    assert engine.apply(ListSessions("n", 0, 1), 10.0).sessions == (first,)


@pytest.mark.parametrize(
    "identity",
    [
        ClientIdentity("h" * 1025),
        ClientIdentity(name="n" * 1025),
        ClientIdentity(pid=-1),
        ClientIdentity(pid=2**32),
        ClientIdentity(host="\ud800"),
        "not an identity",
    ],
)
def test_a_bad_identity_is_refused(identity: object) -> None:
    engine = make_engine()
    with pytest.raises(InvalidArgumentError):
        engine.apply(CreateSession("n", KEY, None, "", identity), 0.0)  # type: ignore[arg-type]
    assert not engine.sessions


def test_owners_and_waiters_carry_who_and_since() -> None:
    engine = make_engine()
    a = engine.apply(CreateSession("n", KEY, None, "exporter", ALICE), 0.0).session_id
    b = engine.apply(CreateSession("n", KEY, None, "backup", BOB), 0.0).session_id
    create_semaphore(engine, a, "s", 2)
    acquire(engine, a, "s", 2, now=1.5, data=b"a")
    acquire(engine, b, "s", 1, now=2.5, data=b"b")
    desc = describe(engine, a, "s", now=3.0)
    [owner], [waiter] = desc.owners, desc.waiters
    assert (owner.description, owner.identity, owner.since) == ("exporter", ALICE, 1.5)
    assert (waiter.description, waiter.identity, waiter.since) == ("backup", BOB, 2.5)
    # A restate in place keeps the grant (and its time); the waiter is granted at 4.0.
    acquire(engine, a, "s", 1, now=4.0, data=b"a2")
    owners = describe(engine, a, "s", now=5.0).owners
    assert [(o.session_id, o.since) for o in owners] == [(a, 1.5), (b, 4.0)]


def test_kill_session_ends_it_as_an_expiry_and_serves_the_next_waiter() -> None:
    engine = make_engine(NodeConfig(lock_delay=2.0))
    victim, waiter = open_session(engine), open_session(engine)
    acquire(engine, victim, "m", MAX_COUNT, ephemeral=True, now=0.0)
    acquire(engine, victim, "other", 1, ephemeral=True, now=0.0)
    acquire(engine, waiter, "other", MAX_COUNT, ephemeral=True, now=0.5)
    acquire(engine, victim, "w", 1, ephemeral=True, now=0.0)
    acquire(engine, waiter, "w", MAX_COUNT, ephemeral=True, now=0.0)
    queued = acquire(engine, waiter, "m", MAX_COUNT, ephemeral=True, now=1.0)
    assert queued.status.value == "queued"
    settled(engine)
    engine.apply(KillSession("n", victim), 3.0)
    effects = settled(engine)
    [end] = ended(effects)
    assert end.session_id == victim
    assert end.code == ErrorCode.SESSION_EXPIRED
    assert "operator" in end.message
    assert victim not in engine.sessions
    assert not granted(effects)  # lock-delay applies, as on an expiry
    engine.tick(5.0)
    later = settled(engine)
    assert sorted(g.name for g in granted(later)) == ["m", "other", "w"]
    assert all(g.session_id == waiter for g in granted(later))
    with pytest.raises(SessionExpiredError):
        acquire(engine, victim, "m", MAX_COUNT, ephemeral=True, now=6.0)


def test_kill_session_withdraws_the_victims_waits() -> None:
    engine = make_engine()
    holder, victim = open_session(engine), open_session(engine)
    acquire(engine, holder, "m", MAX_COUNT, ephemeral=True)
    acquire(engine, victim, "m", MAX_COUNT, ephemeral=True)
    settled(engine)
    engine.apply(KillSession("n", victim), 1.0)
    effects = settled(engine)
    [fail] = failed(effects)
    assert (fail.session_id, fail.code) == (victim, ErrorCode.SESSION_EXPIRED)
    assert describe(engine, holder, "m").waiters == ()


def test_kill_session_of_a_missing_or_foreign_session_is_not_found() -> None:
    engine = make_engine()
    engine.apply(CreateNode("other"), 0.0)
    foreign = open_session(engine, "other")
    with pytest.raises(NotFoundError, match="no live session"):
        engine.apply(KillSession("n", foreign), 0.0)
    with pytest.raises(NotFoundError):
        engine.apply(KillSession("n", 999), 0.0)
    with pytest.raises(NotFoundError):
        engine.apply(KillSession("n", "1"), 0.0)  # type: ignore[arg-type]
    assert foreign in engine.sessions


def test_times_leave_the_host_as_unix_seconds() -> None:
    engine = make_engine()
    a = engine.apply(CreateSession("n", KEY, None, "", ALICE), 10.0).session_id
    acquire(engine, a, "m", MAX_COUNT, ephemeral=True, now=11.0)
    result = engine.apply(DescribeSemaphore(a, "m", owners=True, watch_owners=True), 12.0)
    shift = 1_700_000_000.0
    [owner] = stamp_reply(result, shift).description.owners
    assert owner.since == 11.0 + shift
    command = ListSessions("n")
    [listed] = stamp_reply(engine.apply(command, 12.0), shift).sessions
    assert listed.created_at == 10.0 + shift
    acquire(engine, a, "m", 1, now=13.0)  # a restate: the owners change, the watch fires
    [watch] = fired(engine.take_effects())
    stamped = stamp_effect(watch, shift)
    assert isinstance(stamped, WatchFired)
    assert stamped.description is not None
    [fired_owner] = stamped.description.owners
    assert fired_owner.since == 11.0 + shift


def test_watchers_of_one_change_share_one_stamped_description() -> None:
    engine = make_engine()
    a, b, c = (open_session(engine) for _ in range(3))
    acquire(engine, a, "m", MAX_COUNT, ephemeral=True, now=1.0)
    for watcher in (b, c):
        engine.apply(DescribeSemaphore(watcher, "m", owners=True, watch_owners=True), 2.0)
    acquire(engine, a, "m", 1, now=3.0)  # a restate: both watches fire
    effects = stamp_effects(engine.take_effects(), 100.0)
    first, second = fired(effects)
    assert first.description is second.description
    assert first.description is not None
    assert [o.since for o in first.description.owners] == [101.0]
