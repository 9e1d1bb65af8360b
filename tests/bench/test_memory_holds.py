"""``bench.micro.memory_holds``' in-process measures: the memory budget's estimate per
held mutex (what ``bytes_per_hold`` gives ``bench/scale`` beside the RSS), and where
a hold's heap is, with a session's table of holds past MANY names (no process is
started: a server's RSS is for the bench alone to measure)."""

from __future__ import annotations

from bench.micro.memory_holds import engine_estimate, parts

from tenure._core.many_holds import MANY
from tenure._core.quotas import OBJECT_BYTES, Q_HOLDS, Q_SEMAPHORES


def test_the_estimate_per_hold_is_a_semaphore_a_hold_and_the_name() -> None:
    holds, sessions = 600, 2
    names = [f"lock-{s}-{i}" for s in range(sessions) for i in range(holds // sessions)]
    expected = OBJECT_BYTES[Q_SEMAPHORES] + OBJECT_BYTES[Q_HOLDS] + sum(map(len, names)) / holds
    assert engine_estimate(holds, sessions) == expected


def test_a_session_of_many_holds_keeps_them_in_about_a_pointer_each() -> None:
    found = parts(4 * MANY, 1)
    assert found["sessions' holds tables"] < 12  # (a dict of as many: about 31 to 40)
    assert found["semaphores' rests"] == 0  # (held mutexes: their defaults, no rest)
