"""The cyclic collector is paused while a step's many effects are routed (issue 51).

One change that 100,000 sessions watch makes 100,000 firings at once; the collector
walking them while they were routed promoted them and then paid full collections
of the whole state. A step of :data:`~tenure._runtime.host.MANY_EFFECTS` effects or
more is routed with the collector paused; a lone request's step pays nothing for it.
"""

from __future__ import annotations

import gc

import pytest

from tenure._core import (
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeSemaphore,
    Effect,
    Engine,
    NodeConfig,
    UpdateSemaphore,
)
from tenure._runtime import collector
from tenure._runtime.host import MANY_EFFECTS, Host

from .test_host import ManualClock


def _host_watched(watches: int) -> tuple[Host, int, list[tuple[int, bool]]]:
    """A host whose semaphore ``s`` has ``watches`` repeating watches; what its route
    sees: (effects, whether the collector ran) per step."""
    host = Host(Engine(), ManualClock())
    seen: list[tuple[int, bool]] = []

    def route(effects: list[Effect]) -> None:
        seen.append((len(effects), gc.isenabled()))

    host.route = route
    host.execute(CreateNode("n", NodeConfig(max_watches_per_session=MANY_EFFECTS)))
    sid = host.execute(CreateSession("n", b"k")).session_id
    host.execute(CreateSemaphore(sid, "s", 1))
    for _ in range(watches):
        host.execute(DescribeSemaphore(sid, "s", watch_data=True, watch_repeat=True))
    return host, sid, seen


def test_a_step_with_many_effects_is_routed_with_the_collector_paused() -> None:
    host, sid, seen = _host_watched(MANY_EFFECTS)
    assert gc.isenabled()
    host.execute(UpdateSemaphore(sid, "s", b"v"))
    assert seen == [(MANY_EFFECTS, False)]
    assert gc.isenabled()  # (and it runs again after)
    assert collector.paused() == 0


def test_a_step_with_few_effects_leaves_the_collector_alone() -> None:
    host, sid, seen = _host_watched(MANY_EFFECTS - 1)
    host.execute(UpdateSemaphore(sid, "s", b"v"))
    assert seen == [(MANY_EFFECTS - 1, True)]


def test_the_collector_runs_again_when_the_routing_fails() -> None:
    host, sid, _ = _host_watched(MANY_EFFECTS)

    def failing(effects: list[Effect]) -> None:
        raise RuntimeError("routing failed")

    host.route = failing
    with pytest.raises(RuntimeError, match="routing failed"):
        host.execute(UpdateSemaphore(sid, "s", b"v"))
    assert gc.isenabled()
    assert collector.paused() == 0


def test_pauses_nest_and_a_collector_off_before_stays_off() -> None:
    collector.pause()
    collector.pause()
    collector.resume()
    assert not gc.isenabled()
    collector.resume()
    assert gc.isenabled()
    gc.disable()
    try:
        collector.pause()
        collector.resume()
        assert not gc.isenabled()
    finally:
        gc.enable()
