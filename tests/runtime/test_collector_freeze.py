"""A long full collection freezes what it left alive (``--gc-freeze-after``, issue 51).

While the state grows, each full collection walks all of it: 0.56 s at a million
holds. :func:`~tenure._runtime.collector.freeze_after` times each full collection
and freezes what a long one left, so the next ones walk only what came after.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest

from tenure._runtime import collector


@pytest.fixture(autouse=True)
def _no_freezing_left() -> Iterator[None]:
    yield
    collector.freeze_after(0)
    gc.unfreeze()  # (this process's objects: walked again, as before the test)


def ticking(*times: float) -> Callable[[], float]:
    """A clock that reads ``times`` in turn."""
    readings = iter(times)
    return lambda: next(readings)


class Survivor:
    """An object the collector tracks, alive through the collections."""


def test_a_long_full_collection_freezes_what_it_left() -> None:
    collector.freeze_after(0.02, ticking(10.0, 10.03))
    alive = Survivor()
    before, frozen = collector.freezes(), collector.frozen()
    gc.collect()  # a full collection "of 30 ms"
    assert collector.freezes() == before + 1
    assert collector.frozen() > frozen
    # gc.get_objects() lists what the collections walk: no longer the survivor.
    assert not any(o is alive for o in gc.get_objects())


def test_a_short_full_collection_freezes_nothing() -> None:
    collector.freeze_after(0.02, ticking(10.0, 10.019))
    before, frozen = collector.freezes(), collector.frozen()
    gc.collect()
    assert collector.freezes() == before
    assert collector.frozen() == frozen


def test_young_collections_are_not_timed() -> None:
    collector.freeze_after(0.02, ticking())  # (a reading would raise StopIteration)
    before = collector.freezes()
    gc.collect(0)
    gc.collect(1)
    assert collector.freezes() == before


def test_zero_never_freezes_and_takes_the_callback_out() -> None:
    collector.freeze_after(0.02)
    collector.freeze_after(0.01)
    assert gc.callbacks.count(collector._on_collection) == 1  # (set again: not twice)
    collector.freeze_after(0)
    assert collector._on_collection not in gc.callbacks
    before = collector.freezes()
    gc.collect()
    assert collector.freezes() == before


def test_negative_seconds_are_refused() -> None:
    with pytest.raises(ValueError, match="seconds >= 0"):
        collector.freeze_after(-1)


def test_what_was_frozen_is_still_freed_when_it_dies() -> None:
    # Reference counting frees a frozen object that dies outside a cycle: the frozen
    # count goes down with it (only a cycle among frozen objects would stay).
    collector.freeze_after(0.02, ticking(0.0, 1.0))
    doomed = [Survivor() for _ in range(1000)]
    gc.collect()
    frozen = collector.frozen()
    del doomed
    assert collector.frozen() <= frozen - 1000
