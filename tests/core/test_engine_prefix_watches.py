"""Prefix watches (WatchPrefix): every semaphore under a prefix, those made later too."""

from __future__ import annotations

import pytest

from tenure._core import (
    CancelWatch,
    CloseSession,
    CreateNode,
    CreateSession,
    DeleteSemaphore,
    DescribeSemaphore,
    DetachSession,
    DropNode,
    Engine,
    NodeConfig,
    Release,
    ResumeSession,
    UpdateSemaphore,
    WatchArmed,
    WatchPrefix,
)
from tenure._core.invariants import check_invariants
from tenure._core.watches import Watch
from tenure.errors import InvalidArgumentError, LimitExceededError, SessionExpiredError

from .support import (
    KEY,
    NODE,
    acquire,
    create_semaphore,
    fired,
    make_engine,
    open_session,
    settled,
    snapshot,
)


def watch_prefix(
    engine: Engine,
    session_id: int,
    prefix: str,
    *,
    data: bool = True,
    owners: bool = True,
    waiters: bool = False,
) -> int:
    result = engine.apply(WatchPrefix(session_id, prefix, data, owners, waiters), 0.0)
    assert isinstance(result, WatchArmed)
    return result.watch_id


def firings(engine: Engine) -> list[tuple[int, str]]:
    """(watch id, name) of each WatchFired since the last look."""
    return [(e.watch_id, e.name) for e in fired(settled(engine))]


def _setup(config: NodeConfig | None = None) -> tuple[Engine, int, int]:
    """A node with a writer session and a watcher session."""
    engine = make_engine(config)
    writer, watcher = open_session(engine), open_session(engine)
    return engine, writer, watcher


def test_creation_data_owners_and_deletion_under_the_prefix_fire_with_the_name() -> None:
    engine, a, w = _setup()
    wid = watch_prefix(engine, w, "config/")
    create_semaphore(engine, a, "config/db", 1, data=b"v1")
    assert firings(engine) == [(wid, "config/db")]
    engine.apply(UpdateSemaphore(a, "config/db", b"v2"), 0.0)
    assert firings(engine) == [(wid, "config/db")]
    acquire(engine, a, "config/db", data=b"me")
    [firing] = fired(settled(engine))
    assert firing.description is not None
    assert [(o.session_id, o.data) for o in firing.description.owners] == [(a, b"me")]
    assert firing.description.waiters == ()  # waiters not asked for
    engine.apply(Release(a, "config/db"), 0.0)
    assert firings(engine) == [(wid, "config/db")]
    engine.apply(DeleteSemaphore(a, "config/db"), 0.0)
    [deleted] = fired(settled(engine))
    assert deleted.name == "config/db"
    assert deleted.description is not None
    assert not deleted.description.exists


def test_the_firing_carries_the_state_the_change_left() -> None:
    engine, a, w = _setup()
    watch_prefix(engine, w, "c/", waiters=True)
    create_semaphore(engine, a, "c/x", 1, data=b"d")
    acquire(engine, a, "c/x")
    settled(engine)
    acquire(engine, w, "c/x", timeout=None)  # queues: waiters change
    [firing] = fired(settled(engine))
    now = engine.apply(DescribeSemaphore(w, "c/x", owners=True, waiters=True), 0.0)
    assert firing.description == now.description


def test_names_outside_the_prefix_and_other_nodes_do_not_fire() -> None:
    engine, a, w = _setup()
    watch_prefix(engine, w, "config/")
    create_semaphore(engine, a, "config", 1)  # shorter than the prefix
    create_semaphore(engine, a, "configs/x", 1)
    create_semaphore(engine, a, "other/config/x", 1)
    engine.apply(CreateNode("elsewhere"), 0.0)
    b = engine.apply(CreateSession("elsewhere", KEY), 0.0).session_id
    create_semaphore(engine, b, "config/x", 1)
    assert firings(engine) == []


def test_an_empty_prefix_watches_the_whole_node() -> None:
    engine, a, w = _setup()
    wid = watch_prefix(engine, w, "")
    create_semaphore(engine, a, "x", 1)
    acquire(engine, a, "e", ephemeral=True)
    assert firings(engine) == [(wid, "x"), (wid, "e")]


def test_an_ephemeral_semaphore_fires_when_it_appears_and_when_it_vanishes() -> None:
    engine, a, w = _setup()
    wid = watch_prefix(engine, w, "jobs/", data=False, owners=False)
    acquire(engine, a, "jobs/1", ephemeral=True)
    assert firings(engine) == [(wid, "jobs/1")]
    engine.apply(Release(a, "jobs/1"), 0.0)
    [gone] = fired(settled(engine))
    assert gone.description is not None
    assert not gone.description.exists


def test_only_watched_aspects_fire_besides_existence() -> None:
    engine, a, w = _setup()
    create_semaphore(engine, a, "p/x", 1, data=b"0")
    settled(engine)
    wid = watch_prefix(engine, w, "p/", data=True, owners=False)
    acquire(engine, a, "p/x")  # owners: not watched
    assert firings(engine) == []
    engine.apply(UpdateSemaphore(a, "p/x", b"1"), 0.0)
    assert firings(engine) == [(wid, "p/x")]
    engine.apply(UpdateSemaphore(a, "p/x", b"1"), 0.0)  # the same data: no change
    assert firings(engine) == []


def test_watches_of_nested_and_equal_prefixes_each_fire_once() -> None:
    engine, a, w = _setup()
    b = open_session(engine)
    short = watch_prefix(engine, w, "a")
    long = watch_prefix(engine, w, "a/b/")
    same = watch_prefix(engine, b, "a/b/")
    name_watch = engine.apply(DescribeSemaphore(b, "a/b/c", watch_data=True), 0.0).watch_id
    create_semaphore(engine, a, "a/b/c", 1)
    got = firings(engine)
    assert sorted(got) == sorted(
        [(short, "a/b/c"), (long, "a/b/c"), (same, "a/b/c"), (name_watch, "a/b/c")]
    )
    assert got[0] == (name_watch, "a/b/c")  # the name's watches first
    create_semaphore(engine, a, "a/x", 1)
    assert firings(engine) == [(short, "a/x")]


def test_firings_of_one_change_share_one_description_per_shape() -> None:
    engine, a, w = _setup()
    b = open_session(engine)
    watch_prefix(engine, w, "s/")
    watch_prefix(engine, b, "s")
    create_semaphore(engine, a, "s/x", 1)
    first, second = fired(settled(engine))
    assert first.description is second.description  # (encoded once for both: fanout)


def test_a_prefix_watch_repeats_until_cancelled() -> None:
    engine, a, w = _setup()
    wid = watch_prefix(engine, w, "k/")
    create_semaphore(engine, a, "k/1", 1)
    for version in (b"1", b"2", b"3"):
        engine.apply(UpdateSemaphore(a, "k/1", version), 0.0)
    assert firings(engine) == [(wid, "k/1")] * 4
    assert engine.apply(CancelWatch(a, wid), 0.0) is False  # not a's
    assert engine.apply(CancelWatch(w, wid), 0.0) is True
    assert engine.apply(CancelWatch(w, wid), 0.0) is False
    engine.apply(UpdateSemaphore(a, "k/1", b"4"), 0.0)
    create_semaphore(engine, a, "k/2", 1)
    assert firings(engine) == []
    assert w not in {watch.session_id for watch in _armed(engine)}


def test_cancelling_one_of_two_watches_of_a_prefix_keeps_the_other() -> None:
    engine, a, w = _setup()
    first = watch_prefix(engine, w, "k/")
    second = watch_prefix(engine, w, "k/")
    engine.apply(CancelWatch(w, first), 0.0)
    create_semaphore(engine, a, "k/1", 1)
    assert firings(engine) == [(second, "k/1")]


@pytest.mark.parametrize("end", ["close", "expiry", "resume", "drop"])
def test_the_end_of_its_session_disarms_it(end: str) -> None:
    engine, a, w = _setup()
    watch_prefix(engine, w, "k/")
    watch_prefix(engine, w, "")
    if end == "close":
        engine.apply(CloseSession(w), 0.0)
    elif end == "expiry":
        engine.apply(DetachSession(w), 0.0)
        engine.tick(engine.sessions[w].timeout + 1.0)
    elif end == "resume":
        engine.apply(ResumeSession(w, KEY, NODE), 0.0)  # the new owner arms its own
    else:
        engine.apply(DropNode(NODE, force=True), 0.0)
        assert _armed(engine) == []
        return
    settled(engine)
    create_semaphore(engine, a, "k/1", 1)
    assert firings(engine) == []
    assert _armed(engine) == []


def test_prefix_watches_count_against_max_watches_per_session() -> None:
    engine, a, w = _setup(NodeConfig(max_watches_per_session=2))
    first = watch_prefix(engine, w, "a/")
    engine.apply(DescribeSemaphore(w, "x", watch_data=True), 0.0)
    before = snapshot(engine)
    with pytest.raises(LimitExceededError, match=r"max_watches_per_session \(2\)"):
        watch_prefix(engine, w, "b/")
    assert snapshot(engine) == before
    watch_prefix(engine, a, "b/")  # another session has its own budget
    engine.apply(CancelWatch(w, first), 0.0)
    watch_prefix(engine, w, "b/")  # a cancelled one frees its slot


def test_a_node_s_prefix_watches_are_bounded_whoever_armed_them() -> None:
    """Issue 47: each of a node's prefix watches may fire on every change of the node,
    so the engine bounds how many the node has (``max_prefix_watches_per_node``, the
    server's ``--max-prefix-watches-per-node``), over all its sessions together."""
    engine, a, w = _setup()
    engine.max_prefix_watches_per_node = 3
    first = watch_prefix(engine, w, "")
    watch_prefix(engine, w, "a/")
    engine.apply(DescribeSemaphore(w, "x", watch_data=True), 0.0)  # (not a prefix watch)
    watch_prefix(engine, a, "")
    before = snapshot(engine)
    for session in (a, w):
        with pytest.raises(
            LimitExceededError, match=r"max_prefix_watches_per_node \(3\) reached on node"
        ):
            watch_prefix(engine, session, "b/")
    assert snapshot(engine) == before
    assert engine.ledger.refusals == {("max_prefix_watches_per_node", ""): 2}
    assert engine.watches.prefix_count(NODE) == 3
    # Another node has its own; a cancel, and a session's end, give room back.
    engine.apply(CreateNode("other"), 0.0)
    elsewhere = engine.apply(CreateSession("other", KEY), 0.0).session_id
    for _ in range(3):
        watch_prefix(engine, elsewhere, "")
    engine.apply(CancelWatch(w, first), 0.0)
    watch_prefix(engine, a, "b/")
    check_invariants(engine)
    engine.apply(CloseSession(a), 0.0)
    assert engine.watches.prefix_count(NODE) == 1
    watch_prefix(engine, w, "c/")
    watch_prefix(engine, w, "d/")
    check_invariants(engine)


@pytest.mark.parametrize("prefix", [7, None, b"c/", "bad\nname", "x" * 1025])
def test_a_bad_prefix_is_refused_naming_it(prefix: object) -> None:
    engine, _, w = _setup()
    before = snapshot(engine)
    with pytest.raises(InvalidArgumentError, match="prefix"):
        engine.apply(WatchPrefix(w, prefix), 0.0)  # type: ignore[arg-type]
    assert snapshot(engine) == before


def test_a_missing_session_is_refused() -> None:
    engine, _, _ = _setup()
    with pytest.raises(SessionExpiredError):
        engine.apply(WatchPrefix(999, "a/"), 0.0)


def test_the_no_prefix_watch_case_keeps_no_index() -> None:
    """A node whose prefix watches are all gone leaves nothing behind to look through."""
    engine, a, w = _setup()
    wids = [watch_prefix(engine, w, p) for p in ("a", "ab", "a", "")]
    for wid in wids:
        engine.apply(CancelWatch(w, wid), 0.0)
    assert engine.watches._by_prefix == {}
    assert engine.watches._prefix_lengths == {}
    create_semaphore(engine, a, "abc", 1)
    assert firings(engine) == []
    check_invariants(engine)


def _armed(engine: Engine) -> list[Watch]:
    return list(engine.watches._by_id.values())
