"""Watches that list owners or waiters, bounded per firing (issue 47, round two).

A watch armed by a describe that lists a semaphore's owners or waiters fires with
them listed, built in the step of whoever changed the semaphore: one read-only
watch on a queue of 10,000 made each enqueue there list 10,000 waiters (0.01 ms ->
34 ms, pure build). ``max_listed_per_firing`` bounds that listing: a firing that
would list more carries no description (nil: docs/protocol.md section 8), and its
watcher describes the semaphore itself, in a request of its own.

The work is counted, not timed: the entries each change's firings list (the
descriptions built; in the pure build, every call of ``Semaphore.describe``).
"""

from __future__ import annotations

from typing import Any

import pytest

from tenure._core import DescribeSemaphore, Engine, Release, UpdateSemaphore
from tenure._core.semaphore import Semaphore
from tenure._core.values import MAX_LISTED_PER_FIRING, SemaphoreDescription
from tests.compiled import compiled_build

from .support import acquire, create_semaphore, describe, fired, make_engine, open_session, settled

LIMIT = 10


class Listed:
    """Counts what ``Semaphore.describe`` lists (owners and waiters built)."""

    def __init__(self) -> None:
        self.entries = 0
        self.calls = 0


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch) -> Listed:
    """Every description the engine builds, counted (the pure build: a compiled
    class's methods cannot be replaced; the firings' own listing is checked there)."""
    if compiled_build():
        pytest.skip("counts Semaphore.describe calls: pure build only")
    counter = Listed()
    real = Semaphore.describe

    def counting(self: Semaphore, **kwargs: Any) -> SemaphoreDescription:
        description = real(self, **kwargs)
        counter.calls += 1
        counter.entries += len(description.owners) + len(description.waiters)
        return description

    monkeypatch.setattr(Semaphore, "describe", counting)
    return counter


def _busy(engine: Engine, waiters: int) -> tuple[int, list[int]]:
    """A bystander's mutex ``q``: held, with ``waiters`` sessions queued behind."""
    holder = open_session(engine)
    create_semaphore(engine, holder, "q", 1)
    acquire(engine, holder, "q")
    queued = [open_session(engine) for _ in range(waiters)]
    for session_id in queued:
        acquire(engine, session_id, "q")
    return holder, queued


def _listing_watch(engine: Engine, session_id: int, *, repeat: bool = True) -> int:
    asked = DescribeSemaphore(
        session_id, "q", owners=True, waiters=True, watch_waiters=True, watch_repeat=repeat
    )
    watch_id = engine.apply(asked, 0.0).watch_id
    assert watch_id is not None
    return watch_id


def test_the_default_is_the_engine_s_named_limit() -> None:
    assert Engine().max_listed_per_firing == MAX_LISTED_PER_FIRING == 1_000


def test_a_listing_watch_on_a_big_queue_adds_no_listing_to_another_s_change(
    listed: Listed,
) -> None:
    engine = make_engine()
    engine.max_listed_per_firing = LIMIT
    _, queued = _busy(engine, 3 * LIMIT)
    reader = open_session(engine)
    watch_id = _listing_watch(engine, reader)
    settled(engine)
    listed.entries = listed.calls = 0
    # Each bystander's enqueue fires the reader's watch: its firing says the queue
    # changed, without listing it.
    for _ in range(5):
        acquire(engine, open_session(engine), "q")
        firings = fired(settled(engine))
        assert [(f.session_id, f.watch_id, f.description) for f in firings] == [
            (reader, watch_id, None)
        ]
    assert (listed.calls, listed.entries) == (0, 0)
    # The watcher reads the latest state itself, in a request of its own.
    assert len(describe(engine, reader, "q").waiters) == 3 * LIMIT + 5
    # Once the holder and the queue are back within the bound (1 + LIMIT - 1 after
    # the next enqueue), firings carry the state again.
    for session_id in queued[: 2 * LIMIT + 7]:
        engine.apply(Release(session_id, "q"), 0.0)
    settled(engine)
    listed.entries = listed.calls = 0
    acquire(engine, open_session(engine), "q")
    (firing,) = fired(settled(engine))
    assert firing.description is not None
    assert len(firing.description.owners) + len(firing.description.waiters) == LIMIT
    assert (listed.calls, listed.entries) == (1, LIMIT)


def test_each_shape_is_bounded_by_what_it_lists(listed: Listed) -> None:
    """Owners-only and unlisted shapes of the same change still carry the state."""
    engine = make_engine()
    engine.max_listed_per_firing = LIMIT
    holder, _ = _busy(engine, 2 * LIMIT)
    reader = open_session(engine)
    asked = {
        "both": DescribeSemaphore(reader, "q", owners=True, waiters=True, watch_data=True),
        "waiters": DescribeSemaphore(reader, "q", waiters=True, watch_data=True),
        "owners": DescribeSemaphore(reader, "q", owners=True, watch_data=True),
        "none": DescribeSemaphore(reader, "q", watch_data=True),
    }
    ids = {engine.apply(command, 0.0).watch_id: shape for shape, command in asked.items()}
    settled(engine)
    listed.entries = listed.calls = 0
    engine.apply(UpdateSemaphore(holder, "q", b"v1"), 0.0)
    carried = {ids[f.watch_id]: f.description for f in fired(settled(engine))}
    assert carried["both"] is None
    assert carried["waiters"] is None
    owners_only, unlisted = carried["owners"], carried["none"]
    assert owners_only is not None
    assert unlisted is not None
    assert [o.session_id for o in owners_only.owners] == [holder]
    assert owners_only.data == unlisted.data == b"v1"
    assert not unlisted.owners
    assert not unlisted.waiters
    # (The one-shot watches are gone: each fired once.)
    assert (listed.calls, listed.entries) == (2, 1)


def test_a_one_shot_listing_watch_fires_bare_and_the_next_describe_reads_the_latest() -> None:
    engine = make_engine()
    engine.max_listed_per_firing = 0  # every non-empty listing is left to the watcher
    _busy(engine, 1)
    reader = open_session(engine)
    _listing_watch(engine, reader, repeat=False)
    settled(engine)
    acquire(engine, open_session(engine), "q")
    (firing,) = fired(settled(engine))
    assert firing.description is None
    acquire(engine, open_session(engine), "q")
    assert fired(settled(engine)) == []  # gone: it fired
    assert len(describe(engine, reader, "q").waiters) == 3


def test_a_vanished_semaphore_is_described_whatever_the_bound() -> None:
    """Its description lists nobody: a firing says so, as before."""
    engine = make_engine()
    engine.max_listed_per_firing = 0
    holder = open_session(engine)
    acquire(engine, holder, "eph", ephemeral=True)
    reader = open_session(engine)
    _listing_watch_on = DescribeSemaphore(
        reader, "eph", owners=True, waiters=True, watch_owners=True, watch_repeat=True
    )
    engine.apply(_listing_watch_on, 0.0)
    settled(engine)
    engine.apply(Release(holder, "eph"), 0.0)
    (firing,) = fired(settled(engine))
    assert firing.description is not None
    assert not firing.description.exists
