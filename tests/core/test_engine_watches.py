"""One-shot watches: what fires them, what does not, and when they are disarmed."""

from __future__ import annotations

import pytest

from tenure._core import (
    MAX_COUNT,
    CancelWatch,
    CloseSession,
    CreateNode,
    DeleteSemaphore,
    DescribeSemaphore,
    DetachSession,
    Engine,
    NodeConfig,
    Release,
    SemaphoreDescription,
    SwapSemaphoreData,
    UpdateSemaphore,
    WatchFired,
)
from tenure._core.invariants import check_invariants
from tenure.errors import LimitExceededError, NotFoundError

from .support import (
    acquire,
    create_semaphore,
    describe,
    fired,
    make_engine,
    open_session,
    settled,
    snapshot,
)


def watch(
    engine: Engine,
    session_id: int,
    name: str,
    *,
    data: bool = False,
    owners: bool = False,
    waiters: bool = False,
    now: float = 0.0,
) -> int:
    result = engine.apply(
        DescribeSemaphore(
            session_id, name, watch_data=data, watch_owners=owners, watch_waiters=waiters
        ),
        now,
    )
    assert result.watch_id is not None
    return result.watch_id


def fired_ids(engine: Engine) -> list[int]:
    return [e.watch_id for e in fired(settled(engine))]


def _setup(config: NodeConfig | None = None) -> tuple[Engine, int, int, int]:
    """A node with sessions a, b, w (the watcher) and semaphore "p" of limit 1."""
    engine = make_engine(config)
    a, b, w = (open_session(engine) for _ in range(3))
    create_semaphore(engine, a, "p", 1, data=b"d0")
    engine.take_effects()
    return engine, a, b, w


# -- what fires ---------------------------------------------------------------------


def test_owners_watch_fires_on_grant_and_on_release():
    engine, a, _, w = _setup()
    wid = watch(engine, w, "p", owners=True)
    acquire(engine, a, "p")
    effects = fired(settled(engine))
    now = engine.apply(DescribeSemaphore(w, "p"), 0.0).description
    assert effects == [WatchFired(w, wid, "p", now)]
    wid2 = watch(engine, w, "p", owners=True)
    engine.apply(Release(a, "p"), 1.0)
    assert fired_ids(engine) == [wid2]


def test_owners_watch_fires_on_in_place_change_but_not_on_a_restatement():
    engine, a, _, w = _setup()
    engine.apply(UpdateSemaphore(a, "p", b"x"), 0.0)
    create_semaphore(engine, a, "q", 3)
    acquire(engine, a, "q", 3, data=b"v")
    wid = watch(engine, w, "q", owners=True)
    acquire(engine, a, "q", 3, data=b"v")  # same count and data: nothing changed
    assert fired_ids(engine) == []
    acquire(engine, a, "q", 2, data=b"v")
    assert fired_ids(engine) == [wid]
    wid2 = watch(engine, w, "q", owners=True)
    acquire(engine, a, "q", 2, data=b"other")
    assert fired_ids(engine) == [wid2]


def test_owners_watch_ignores_data_and_queueing():
    engine, a, b, w = _setup()
    acquire(engine, a, "p")
    wid = watch(engine, w, "p", owners=True)
    engine.apply(UpdateSemaphore(a, "p", b"new"), 1.0)
    acquire(engine, b, "p", request_id=5)  # queues
    engine.apply(Release(b, "p"), 2.0)  # cancels the waiter
    assert fired_ids(engine) == []
    assert wid in engine.sessions[w].watches


def test_waiters_watch_fires_on_queue_and_cancel_not_on_plain_grant_or_data():
    engine, a, b, w = _setup()
    wid = watch(engine, w, "p", waiters=True)
    acquire(engine, a, "p")  # granted at once: the queue did not change
    engine.apply(UpdateSemaphore(a, "p", b"new"), 1.0)
    assert fired_ids(engine) == []
    acquire(engine, b, "p", request_id=5)
    assert fired_ids(engine) == [wid]
    wid2 = watch(engine, w, "p", waiters=True)
    engine.apply(Release(b, "p"), 2.0)
    assert fired_ids(engine) == [wid2]


def test_waiter_being_granted_fires_owners_and_waiters_watches():
    engine, a, b, w = _setup()
    acquire(engine, a, "p")
    acquire(engine, b, "p")
    w_owners = watch(engine, w, "p", owners=True)
    w_waiters = watch(engine, w, "p", waiters=True)
    w_data = watch(engine, w, "p", data=True)
    engine.apply(Release(a, "p"), 1.0)
    assert sorted(fired_ids(engine)) == sorted([w_owners, w_waiters])
    assert w_data in engine.sessions[w].watches


def test_data_watch_fires_only_when_data_actually_changes():
    engine, a, b, w = _setup()
    wid = watch(engine, w, "p", data=True)
    engine.apply(UpdateSemaphore(a, "p", b"d0"), 1.0)  # same data
    acquire(engine, a, "p")
    acquire(engine, b, "p")
    assert fired_ids(engine) == []
    engine.apply(UpdateSemaphore(a, "p", b"d1"), 2.0)
    assert fired_ids(engine) == [wid]


def test_watch_fires_exactly_once():
    engine, a, b, w = _setup()
    wid = watch(engine, w, "p", owners=True, waiters=True, data=True)
    acquire(engine, a, "p")
    acquire(engine, b, "p")
    engine.apply(UpdateSemaphore(a, "p", b"z"), 1.0)
    engine.apply(Release(a, "p"), 2.0)
    assert fired_ids(engine) == [wid]
    assert engine.sessions[w].watches == set()
    assert engine.apply(CancelWatch(w, wid), 3.0) is False


def test_a_describe_rearms_and_sees_the_latest_state():
    engine, a, _, w = _setup()
    wid = watch(engine, w, "p", data=True)
    engine.apply(UpdateSemaphore(a, "p", b"d1"), 1.0)
    engine.apply(UpdateSemaphore(a, "p", b"d2"), 2.0)  # coalesced into the one firing
    assert fired_ids(engine) == [wid]
    result = engine.apply(DescribeSemaphore(w, "p", watch_data=True), 3.0)
    assert result.description.data == b"d2"
    assert result.watch_id is not None
    assert result.watch_id != wid
    engine.apply(UpdateSemaphore(a, "p", b"d3"), 4.0)
    assert fired_ids(engine) == [result.watch_id]


def test_every_armed_watch_on_the_target_fires_in_arming_order():
    engine, a, b, w = _setup()
    w1 = watch(engine, w, "p", owners=True)
    w2 = watch(engine, b, "p", owners=True)
    w3 = watch(engine, w, "p", owners=True)
    acquire(engine, a, "p")
    effects = fired(settled(engine))
    assert [(e.session_id, e.watch_id) for e in effects] == [(w, w1), (b, w2), (w, w3)]


def test_delete_fires_every_watch_on_the_semaphore():
    engine, a, b, w = _setup()
    w_data = watch(engine, w, "p", data=True)
    w_owners = watch(engine, b, "p", owners=True)
    engine.apply(DeleteSemaphore(a, "p"), 1.0)
    assert sorted(fired_ids(engine)) == sorted([w_data, w_owners])


def test_ephemeral_vanishing_fires_data_watches_too():
    engine, a, _, w = _setup()
    acquire(engine, a, "e", ephemeral=True)
    wid = watch(engine, w, "e", data=True)
    engine.apply(Release(a, "e"), 1.0)
    assert fired_ids(engine) == [wid]


def test_watch_on_another_semaphore_or_node_does_not_fire():
    engine, a, _, w = _setup()
    engine.apply(CreateNode("m"), 0.0)
    m = open_session(engine, "m")
    create_semaphore(engine, m, "p", 1)
    create_semaphore(engine, a, "q", 1)
    w_q = watch(engine, w, "q", owners=True, waiters=True, data=True)
    w_m = watch(engine, m, "p", owners=True, waiters=True, data=True)
    acquire(engine, a, "p")
    engine.apply(UpdateSemaphore(a, "p", b"x"), 1.0)
    engine.apply(DeleteSemaphore(a, "p", force=True), 2.0)
    assert fired_ids(engine) == []
    assert w_q in engine.sessions[w].watches
    assert w_m in engine.sessions[m].watches


# -- missing semaphores -------------------------------------------------------------


def test_describe_of_missing_semaphore_without_watch_is_not_found():
    engine, _, _, w = _setup()
    with pytest.raises(NotFoundError):
        engine.apply(DescribeSemaphore(w, "nope", owners=True), 0.0)


def test_watch_on_missing_semaphore_reports_missing_and_fires_on_creation():
    engine, a, _, w = _setup()
    result = engine.apply(DescribeSemaphore(w, "later", watch_data=True), 0.0)
    assert result.description == SemaphoreDescription.missing("later")
    assert result.description.exists is False
    assert (result.description.limit, result.description.count) == (0, 0)
    assert result.watch_id is not None
    create_semaphore(engine, a, "later", 2)
    assert fired_ids(engine) == [result.watch_id]
    assert engine.apply(DescribeSemaphore(w, "later"), 1.0).description.exists is True


def test_watch_on_missing_semaphore_fires_on_ephemeral_creation():
    engine, a, _, w = _setup()
    wid = watch(engine, w, "e", waiters=True)
    acquire(engine, a, "e", MAX_COUNT, ephemeral=True)
    assert fired_ids(engine) == [wid]


# -- disarming ----------------------------------------------------------------------


def test_cancel_watch_disarms_it():
    engine, a, b, w = _setup()
    wid = watch(engine, w, "p", owners=True)
    assert engine.apply(CancelWatch(b, wid), 0.0) is False  # not b's watch
    assert engine.apply(CancelWatch(w, wid), 0.0) is True
    assert engine.apply(CancelWatch(w, wid), 0.0) is False
    acquire(engine, a, "p")
    assert fired_ids(engine) == []


def test_close_disarms_the_sessions_watches():
    engine, a, _, w = _setup()
    acquire(engine, w, "p")  # w holds p: closing w changes p's owners
    watch(engine, w, "p", owners=True)
    watch(engine, w, "q", data=True)
    other = watch(engine, a, "p", owners=True)
    engine.apply(CloseSession(w), 1.0)
    assert fired_ids(engine) == [other]  # only a's watch fired
    create_semaphore(engine, a, "q", 1)
    assert fired_ids(engine) == []


def test_expiry_disarms_the_sessions_watches():
    engine, a, _, w = _setup()
    acquire(engine, w, "p")
    watch(engine, w, "p", owners=True)
    engine.apply(DetachSession(w), 0.0)
    engine.tick(engine.sessions[w].timeout)
    assert fired_ids(engine) == []
    acquire(engine, a, "p")
    assert fired_ids(engine) == []


def test_max_watches_per_session_is_enforced_and_named():
    engine, a, b, w = _setup(NodeConfig(max_watches_per_session=2))
    w1 = watch(engine, w, "p", owners=True)
    watch(engine, w, "nope", data=True)
    before = snapshot(engine)
    with pytest.raises(LimitExceededError, match="max_watches_per_session"):
        watch(engine, w, "p", data=True)
    assert snapshot(engine) == before
    # A describe without a watch is always fine; other sessions have their own budget.
    assert engine.apply(DescribeSemaphore(w, "p"), 0.0).watch_id is None
    watch(engine, b, "p", data=True)
    # A fired watch frees its slot; so does a cancelled one.
    acquire(engine, a, "p")
    assert w1 in fired_ids(engine)
    w3 = watch(engine, w, "p", owners=True)
    assert engine.apply(CancelWatch(w, w3), 0.0) is True
    watch(engine, w, "p", owners=True)
    check_invariants(engine)


def test_firing_carries_the_state_the_change_left_in_the_shape_asked_for() -> None:
    engine, a, b, w = _setup()
    plain = watch(engine, w, "p", data=True)
    full = engine.apply(
        DescribeSemaphore(w, "p", owners=True, waiters=True, watch_waiters=True), 0.0
    ).watch_id
    acquire(engine, a, "p")
    assert fired(settled(engine)) == []  # no waiter came or went, no data changed
    acquire(engine, b, "p", timeout=None)  # queued behind a
    (event,) = fired(settled(engine))
    assert event.watch_id == full
    assert event.description == describe(engine, w, "p")  # owners and waiters listed
    assert event.description is not None
    assert len(event.description.waiters) == 1
    engine.apply(UpdateSemaphore(a, "p", b"d1"), 0.0)
    (event,) = fired(settled(engine))
    assert event.watch_id == plain
    assert event.description == engine.apply(DescribeSemaphore(w, "p"), 0.0).description
    assert event.description is not None
    assert event.description.data == b"d1"
    assert event.description.owners == ()  # not asked for


def test_firing_on_deletion_describes_a_missing_semaphore() -> None:
    engine, a, _, w = _setup()
    wid = watch(engine, w, "p", data=True)
    engine.apply(DeleteSemaphore(a, "p", force=False), 0.0)
    (event,) = fired(settled(engine))
    assert event.watch_id == wid
    assert event.description == SemaphoreDescription.missing("p")


# -- repeating watches ------------------------------------------------------------------


def repeating(engine: Engine, session_id: int, name: str) -> int:
    command = DescribeSemaphore(session_id, name, watch_data=True, watch_repeat=True)
    watch_id = engine.apply(command, 0.0).watch_id
    assert watch_id is not None
    return watch_id


def test_a_repeating_watch_fires_on_every_change_with_each_state() -> None:
    engine, a, _, w = _setup()
    wid = repeating(engine, w, "p")
    states = []
    for data in (b"d1", b"d2", b"d3"):
        engine.apply(UpdateSemaphore(a, "p", data), 0.0)
        (event,) = fired(settled(engine))
        assert event.watch_id == wid
        assert event.description is not None
        states.append(event.description.data)
    assert states == [b"d1", b"d2", b"d3"]
    assert wid in engine.sessions[w].watches  # still armed


def test_a_repeating_watch_sees_deletion_and_recreation() -> None:
    engine, a, _, w = _setup()
    wid = repeating(engine, w, "p")
    engine.apply(DeleteSemaphore(a, "p", force=False), 0.0)
    (gone,) = fired(settled(engine))
    create_semaphore(engine, a, "p", 1, data=b"again")
    (back,) = fired(settled(engine))
    assert (gone.watch_id, back.watch_id) == (wid, wid)
    assert gone.description == SemaphoreDescription.missing("p")
    assert back.description is not None
    assert back.description.data == b"again"


def test_a_repeating_watch_ends_with_cancel_or_its_session() -> None:
    engine, a, b, w = _setup()
    wid = repeating(engine, w, "p")
    other = repeating(engine, b, "p")
    assert engine.apply(CancelWatch(w, wid), 0.0) is True
    engine.apply(CloseSession(b), 0.0)
    engine.take_effects()
    engine.apply(UpdateSemaphore(a, "p", b"x"), 0.0)
    assert fired(settled(engine)) == []
    assert engine.apply(CancelWatch(w, wid), 0.0) is False
    assert other not in engine.sessions[w].watches


def test_repeating_watches_count_against_the_session_limit() -> None:
    engine, a, _, w = _setup(NodeConfig(max_watches_per_session=2))
    repeating(engine, w, "p")
    repeating(engine, w, "p")
    engine.apply(UpdateSemaphore(a, "p", b"x"), 0.0)  # they fire and stay
    with pytest.raises(LimitExceededError):
        repeating(engine, w, "p")


def test_a_swap_of_data_fires_data_watches_only_when_it_changes_the_data():
    engine, a, _, w = _setup()
    wid = watch(engine, w, "p", data=True)
    assert engine.apply(SwapSemaphoreData(a, "p", b"other", b"d1"), 1.0) is False
    assert engine.apply(SwapSemaphoreData(a, "p", b"d0", b"d0"), 1.0) is True  # no change
    assert fired_ids(engine) == []
    assert engine.apply(SwapSemaphoreData(a, "p", b"d0", b"d1"), 2.0) is True
    assert fired_ids(engine) == [wid]
