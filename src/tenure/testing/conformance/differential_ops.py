"""The differential test's operations: abstract, resolved against the state when they run.

What :mod:`test_differential` draws (Hypothesis strategies of operation sequences), and
the names, limits, windows, waits, bounds and claims' times they range over (chosen so
that no two deadlines fall on one instant: see ``WINDOWS``). Which operations a
backend is given follows what it declares (:class:`Draws`): ``lock_all`` with
ALL_OR_NONE, a bound on acquires with MAX_HOLD, hand-offs with HANDOFF, claims with
CLAIMS; the passing of time only where the kit fakes it.
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

#: A hold's bound (``max_hold``), by name. Where time is faked, in seconds whose
#: fractions no other deadline has (none of the multiples of 0.25 that waits, windows
#: and advances reach; nor each other's sums, short of many of them). Where the store
#: keeps its own time, "short" ends within the step that granted it (the test waits
#: for the store to end it: ``REAL_SHORT``) and "long" never in a test.
FAKE_BOUNDS: dict[str, float | None] = {"none": None, "short": 0.83, "long": 2.37}
REAL_SHORT = 0.3
REAL_BOUNDS: dict[str, float | None] = {"none": None, "short": REAL_SHORT, "long": 3600.0}
#: What claims claim: s0, which the other operations use too (a held one is refused, a
#: claimed one acquired, deleted), and c0, which only claims do.
CLAIM_NAMES = ("s0", "c0")
#: The claims' ids (a retry carries its claim's id; a release names either).
CLAIM_IDS = ("a1" * 16, "b2" * 16)
#: A claim's ``at_least`` and ``at_most``, by name: fractions of their own where time is
#: faked; where it is not, a claim never reaches its end in a test (a release with no
#: ``at_least`` ends it at once, which needs no clock).
FAKE_CLAIM_TIMES: dict[str, float] = {"none": 0.0, "least": 0.6, "short": 1.3, "long": 3.15}
REAL_CLAIM_TIMES: dict[str, float] = {"none": 0.0, "least": 1800.0, "short": 3600.0, "long": 3600.0}


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
    bound: str = "none"  # its max_hold: a key of FAKE_BOUNDS / REAL_BOUNDS


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


@dataclass(frozen=True)
class HandoffOp:
    """A hold of ``who`` on ``sem`` offered, and adopted by the ``to``-th session; with
    ``again``, the same hand-off adopted a second time by another (which must fail)."""

    who: int
    sem: int
    to: int
    again: bool


@dataclass(frozen=True)
class ClaimOp:
    """``who`` claims ``sem`` (of CLAIM_NAMES) with the claim id ``claim`` for ``least``
    and ``most`` (keys of the claims' times): a claim, a retry of it, or another's
    refused."""

    who: int
    sem: int
    claim: int
    least: str
    most: str


@dataclass(frozen=True)
class ReleaseClaimOp:
    """A claim of ``sem`` (of CLAIM_NAMES) released by its id alone: with ``claim`` 0,
    the id of the claim made there last (if any), else ``CLAIM_IDS[claim]``."""

    sem: int
    claim: int


@dataclass(frozen=True)
class Draws:
    """What a backend is given beyond the core's operations (module docstring)."""

    fake_time: bool = False
    all_or_none: bool = False
    max_hold: bool = False
    handoff: bool = False
    claims: bool = False


def operations(draws: Draws) -> st.SearchStrategy[Any]:
    """One operation, acquires and releases the most likely; with ``fake_time``, also
    waits with timeouts, disconnects and the passing of time; with ``all_or_none``,
    locks of both semaphores at once; with ``max_hold``, acquires bounded short or
    long; with ``handoff``, holds handed off; with ``claims``, claims and releases.
    """
    fake_time = draws.fake_time
    who, sem = st.integers(0, 3), st.integers(0, len(SEMAPHORES) - 1)
    waits = sorted(WAITS) if fake_time else ["try", "forever"]
    counts = st.sampled_from((1, 1, 1, 2, 3))
    bounds = ["none", "short", "short", "long"] if draws.max_hold else ["none"]
    acquire = st.builds(
        AcquireOp,
        who,
        sem,
        counts,
        st.sampled_from(waits),
        st.booleans(),
        st.sampled_from(bounds),
    )
    weighted: list[tuple[int, st.SearchStrategy[Any]]] = [
        (6, acquire),
        (3, st.builds(ReleaseOp, who, sem)),
        (1, st.builds(Cancel, who, sem)),
        (1, st.builds(Open, st.sampled_from(WINDOWS))),
        (1, st.builds(Create, sem, LIMITS)),
        (1, st.builds(Close, who)),
        (1, st.builds(Delete, sem, st.booleans())),
    ]
    if draws.all_or_none:
        weighted.append((2, st.builds(LockAllOp, who, st.booleans(), st.sampled_from(waits))))
    if draws.handoff:
        weighted.append((2, st.builds(HandoffOp, who, sem, who, st.booleans())))
    if draws.claims:
        claim = st.integers(0, len(CLAIM_IDS) - 1)
        claimed = st.integers(0, len(CLAIM_NAMES) - 1)
        times = st.sampled_from([("none", "short"), ("none", "long"), ("least", "short")])
        weighted += [
            (
                2,
                times.flatmap(
                    lambda t: st.builds(ClaimOp, who, claimed, claim, st.just(t[0]), st.just(t[1]))
                ),
            ),
            (2, st.builds(ReleaseClaimOp, claimed, claim)),
        ]
    if fake_time:
        weighted += [
            (3, st.builds(Advance, st.sampled_from(ADVANCES))),
            (1, st.builds(Disconnect, who)),
            (1, st.builds(Reconnect, who)),
        ]
    # sampled_from, not one_of: it picks uniformly from the list, so weights hold.
    kinds = [strategy for weight, strategy in weighted for _ in range(weight)]
    return st.sampled_from(kinds).flatmap(lambda strategy: strategy)


def scenarios(draws: Draws) -> st.SearchStrategy[list[Any]]:
    """Two or three sessions and a created ``s0`` to start with, then the operations."""
    start = st.tuples(
        st.lists(st.builds(Open, st.sampled_from(WINDOWS)), min_size=2, max_size=3),
        st.builds(Create, st.just(0), LIMITS),
    )
    return st.builds(
        lambda first, then: [*first[0], first[1], *then],
        start,
        st.lists(operations(draws), min_size=10, max_size=50),
    )
