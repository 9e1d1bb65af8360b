"""The differential test on chosen sequences: the abilities' interactions every run sees.

:mod:`test_differential` draws its sequences at random (50 examples, derandomized,
which Hypothesis grows from each other: they are fewer apart than they are many).
These sequences are written out, so that each backend meets, on every run, the
interactions of the abilities that a store's copy most easily gets wrong, held to
the engine step by step by the same :class:`~test_differential.Differential`: a
queued acquire's bound, which starts at its grant; a hold handed off to its own
session and handed off again; a claim retried by its id, refused to another id,
released by a wrong id and then by its own; a claimed semaphore acquired, then its
claim released under its holder. Each needs the capability it names (else it
skips, saying which); time passes only where the kit fakes it (``memory://``), and
is awaited where the store keeps its own (a short bound ends within its step).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenure.backends import Capability

from .differential_ops import (
    AcquireOp,
    Advance,
    ClaimOp,
    Create,
    HandoffOp,
    Open,
    ReleaseClaimOp,
    ReleaseOp,
)
from .harness import Harness
from .test_differential import Differential

pytestmark = pytest.mark.requires(Capability.FIFO)


def _passing(fake_time: bool, seconds: float) -> list[Any]:
    """Time passing where the kit fakes it (elsewhere a short bound is awaited)."""
    return [Advance(seconds)] if fake_time else []


def queued_bound(fake_time: bool) -> list[Any]:
    """A bounded acquire queued behind a holder: granted when the holder releases, and
    ended its bound after that grant (not after its request)."""
    return [
        Open(5.0),
        Open(5.0),
        Create(0, 1),
        AcquireOp(0, 0, 1, "try", False),
        AcquireOp(1, 0, 1, "forever", False, "short"),
        *_passing(fake_time, 0.5),
        ReleaseOp(0, 0),
        *_passing(fake_time, 0.5),
        *_passing(fake_time, 0.5),
        AcquireOp(0, 0, 1, "forever", False),
    ]


def handoff_to_itself(fake_time: bool) -> list[Any]:
    """A hold of two tokens handed off to its own session (as another hold), that one
    handed off again, then adopted once more from the spent string (refused)."""
    return [
        Open(5.0),
        Open(5.0),
        Create(0, 3),
        AcquireOp(0, 0, 2, "try", False),
        HandoffOp(0, 0, 0, False),
        HandoffOp(0, 0, 0, True),
        AcquireOp(1, 0, 1, "try", False),
        AcquireOp(1, 0, 1, "try", False),
    ]


def claim_ids(fake_time: bool) -> list[Any]:
    """A claim retried by its id, asked with another id (the live one answers), released
    by that other id (no), then by its own (it ends: nothing held it since)."""
    return [
        Open(5.0),
        Open(5.0),
        Create(0, 1),
        ClaimOp(0, 1, 0, "none", "long"),
        ClaimOp(1, 1, 0, "none", "long"),
        ClaimOp(1, 1, 1, "none", "long"),
        ReleaseClaimOp(1, 1),
        ReleaseClaimOp(1, 0),
        ClaimOp(1, 1, 1, "none", "short"),
    ]


def claimed_and_held(fake_time: bool) -> list[Any]:
    """An idle semaphore claimed, then acquired (a claim holds it by its data, not as an
    owner), and its claim released: the semaphore goes, and its holder loses it."""
    return [
        Open(5.0),
        Open(5.0),
        Create(0, 2),
        ClaimOp(0, 0, 0, "none", "long"),
        AcquireOp(1, 0, 1, "try", True),
        ReleaseClaimOp(0, 0),
        AcquireOp(1, 0, 1, "try", True),
    ]


#: Each sequence's maker (of ``fake_time``), and the capability it needs.
CHOSEN: dict[str, tuple[Callable[[bool], list[Any]], Capability]] = {
    "queued_bound": (queued_bound, Capability.MAX_HOLD),
    "handoff_to_itself": (handoff_to_itself, Capability.HANDOFF),
    "claim_ids": (claim_ids, Capability.CLAIMS),
    "claimed_and_held": (claimed_and_held, Capability.CLAIMS),
}


@pytest.mark.parametrize(
    "chosen",
    [pytest.param(name, marks=pytest.mark.requires(CHOSEN[name][1])) for name in sorted(CHOSEN)],
)
def test_the_backend_agrees_with_the_engine_on(backend: Harness, chosen: str) -> None:
    """A chosen sequence (module docstring): the backend and the engine agree at each step."""
    make = CHOSEN[chosen][0]
    fake_time = backend.can_fake_time and backend.can_disconnect
    ops = make(fake_time)

    # Given by Hypothesis (one example, this one): the differential records its events.
    @settings(
        max_examples=1,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.just(ops))
    def run(sequence: list[Any]) -> None:
        clock = backend.new_clock() if fake_time else None
        asyncio.run(Differential(backend, clock).run(sequence))

    run()
