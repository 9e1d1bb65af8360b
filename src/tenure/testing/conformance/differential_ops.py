"""The differential test's operations: abstract, resolved against the state when they run.

What :mod:`test_differential` draws (Hypothesis strategies of operation sequences), and
the names, limits, windows and waits they range over (chosen so that no two deadlines
fall on one instant: see ``WINDOWS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import strategies as st

from tenure.backends import Capability

pytestmark = pytest.mark.requires(Capability.FIFO)


SEMAPHORES = ("s0", "s1")
#: What a lock_all locks together: s1, which the other operations use too, and s2,
#: which only lock_all does (ephemeral: never created with a limit below its count).
LOCKED_TOGETHER = ("s1", "s2")
#: How many holds one session may have on one semaphore at once, in a sequence.
HOLDS_PER_SESSION = 2
#: Windows and waits are chosen so that no wait's deadline falls on a time an Advance
#: can reach (multiples of 0.5) or on another deadline (see ``acquire``): the order
#: of deadlines due at the same instant is not something a client can be held to.
WINDOWS = (2.0, 5.0)
ADVANCES = (0.5, 1.0, 2.5, 6.0)
WAITS: dict[str, float | None] = {"try": 0.0, "short": 1.25, "long": 3.75, "forever": None}
LIMITS = st.sampled_from((1, 2, 2, 3))


@dataclass(frozen=True)
class Open:
    window: float


@dataclass(frozen=True)
class Create:
    sem: int
    limit: int


@dataclass(frozen=True)
class AcquireOp:
    who: int
    sem: int
    count: int
    wait: str
    ephemeral: bool


@dataclass(frozen=True)
class LockAllOp:
    who: int
    reverse: bool  # (s1, s0) rather than (s0, s1)
    wait: str


@dataclass(frozen=True)
class ReleaseOp:
    who: int
    sem: int


@dataclass(frozen=True)
class Cancel:
    who: int
    sem: int


@dataclass(frozen=True)
class Close:
    who: int


@dataclass(frozen=True)
class Delete:
    sem: int
    force: bool


@dataclass(frozen=True)
class Disconnect:
    who: int


@dataclass(frozen=True)
class Reconnect:
    who: int


@dataclass(frozen=True)
class Advance:
    seconds: float


def operations(fake_time: bool, all_or_none: bool = False) -> st.SearchStrategy[Any]:
    """One operation, acquires and releases the most likely; with ``fake_time``, also
    waits with timeouts, disconnects and the passing of time; with ``all_or_none``,
    locks of both semaphores at once.
    """
    who, sem = st.integers(0, 3), st.integers(0, len(SEMAPHORES) - 1)
    waits = sorted(WAITS) if fake_time else ["try", "forever"]
    counts = st.sampled_from((1, 1, 1, 2, 3))
    acquire = st.builds(AcquireOp, who, sem, counts, st.sampled_from(waits), st.booleans())
    weighted: list[tuple[int, st.SearchStrategy[Any]]] = [
        (6, acquire),
        (3, st.builds(ReleaseOp, who, sem)),
        (1, st.builds(Cancel, who, sem)),
        (1, st.builds(Open, st.sampled_from(WINDOWS))),
        (1, st.builds(Create, sem, LIMITS)),
        (1, st.builds(Close, who)),
        (1, st.builds(Delete, sem, st.booleans())),
    ]
    if all_or_none:
        weighted.append((2, st.builds(LockAllOp, who, st.booleans(), st.sampled_from(waits))))
    if fake_time:
        weighted += [
            (3, st.builds(Advance, st.sampled_from(ADVANCES))),
            (1, st.builds(Disconnect, who)),
            (1, st.builds(Reconnect, who)),
        ]
    # sampled_from, not one_of: it picks uniformly from the list, so weights hold.
    kinds = [strategy for weight, strategy in weighted for _ in range(weight)]
    return st.sampled_from(kinds).flatmap(lambda strategy: strategy)


def scenarios(fake_time: bool, all_or_none: bool = False) -> st.SearchStrategy[list[Any]]:
    """Two or three sessions and a created ``s0`` to start with, then the operations."""
    start = st.tuples(
        st.lists(st.builds(Open, st.sampled_from(WINDOWS)), min_size=2, max_size=3),
        st.builds(Create, st.just(0), LIMITS),
    )
    return st.builds(
        lambda first, then: [*first[0], first[1], *then],
        start,
        st.lists(operations(fake_time, all_or_none), min_size=10, max_size=50),
    )
