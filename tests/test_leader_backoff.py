"""The leader runner's pauses between tries (``tenure.client._leader.Backoff``): doubling
from RETRY_FIRST up to RETRY_MAX, each drawn in the upper half of its ceiling, and
back to the first after a success."""

from __future__ import annotations

import pytest

from tenure.client._leader import RETRY_FACTOR, RETRY_FIRST, RETRY_MAX, Backoff
from tenure.errors import InvalidArgumentError


def ceilings(count: int) -> list[float]:
    return [min(RETRY_MAX, RETRY_FIRST * RETRY_FACTOR**n) for n in range(count)]


def test_the_pauses_double_up_to_the_cap_each_in_the_upper_half_of_its_ceiling() -> None:
    lowest, highest = Backoff(rng=lambda: 0.0), Backoff(rng=lambda: 1.0)
    expected = ceilings(12)
    assert expected[-1] == RETRY_MAX  # the cap is reached within 12 failures
    assert [lowest.next_pause() for _ in expected] == [c / 2 for c in expected]
    assert [highest.next_pause() for _ in expected] == expected


def test_jitter_spreads_runners_that_failed_together() -> None:
    draws = iter([0.1, 0.9, 0.5])
    backoff = Backoff(rng=lambda: next(draws))
    pauses = [Backoff(rng=lambda: 0.0).next_pause() for _ in range(3)]
    assert len(set(pauses)) == 1  # the same draw, the same pause
    spread = [backoff.next_pause(), backoff.next_pause(), backoff.next_pause()]
    assert spread == [RETRY_FIRST * 0.55, RETRY_FIRST * 2 * 0.95, RETRY_FIRST * 4 * 0.75]


def test_a_success_starts_again_from_the_first_pause() -> None:
    backoff = Backoff(rng=lambda: 1.0)
    for _ in range(20):
        backoff.next_pause()
    assert backoff.next_pause() == RETRY_MAX
    backoff.reset()
    assert backoff.next_pause() == RETRY_FIRST


@pytest.mark.parametrize(
    ("first", "most", "factor"), [(0.0, 1.0, 2.0), (2.0, 1.0, 2.0), (0.1, 1.0, 0.5)]
)
def test_settings_that_cannot_back_off_are_refused(
    first: float, most: float, factor: float
) -> None:
    with pytest.raises(InvalidArgumentError, match="backoff"):
        Backoff(first, most, factor)
