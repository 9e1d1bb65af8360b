"""The pause of ``tenure elect --requeue`` between runs of CMD (``RequeuePause``), by
the durations of the runs it is told: no process, no clock."""

from __future__ import annotations

import math

import pytest

from tenure.cli._requeue import (
    DEFAULT_REQUEUE_DELAY,
    DEFAULT_REQUEUE_MAX_DELAY,
    DEFAULT_REQUEUE_RESET_AFTER,
    RequeuePause,
)
from tenure.errors import InvalidArgumentError


def test_short_runs_in_a_row_double_the_pause_up_to_its_ceiling() -> None:
    pause = RequeuePause(1.0, 10.0, 60.0)
    assert [pause.after_run(0.1) for _ in range(7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]


def test_a_run_that_lasted_long_enough_starts_again_from_the_first_pause() -> None:
    pause = RequeuePause(1.0, 10.0, 60.0)
    assert [pause.after_run(1.0) for _ in range(3)] == [1.0, 2.0, 4.0]
    assert pause.after_run(60.0) == 1.0  # as long as reset_after: a good run
    assert [pause.after_run(59.9) for _ in range(3)] == [1.0, 2.0, 4.0]
    assert pause.after_run(3600.0) == 1.0
    assert pause.after_run(0.0) == 1.0


def test_a_first_pause_of_zero_never_pauses() -> None:
    pause = RequeuePause(0.0, 60.0, 60.0)
    assert [pause.after_run(0.0) for _ in range(5)] == [0.0] * 5


def test_a_reset_after_of_zero_never_grows_the_pause() -> None:
    pause = RequeuePause(2.0, 60.0, 0.0)
    assert [pause.after_run(0.0) for _ in range(3)] == [2.0] * 3


def test_the_defaults_are_a_second_to_a_minute_reset_by_a_minute_of_running() -> None:
    assert (DEFAULT_REQUEUE_DELAY, DEFAULT_REQUEUE_MAX_DELAY) == (1.0, 60.0)
    assert DEFAULT_REQUEUE_RESET_AFTER == 60.0
    pause = RequeuePause(DEFAULT_REQUEUE_DELAY, DEFAULT_REQUEUE_MAX_DELAY, 60.0)
    assert [pause.after_run(0.5) for _ in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]


@pytest.mark.parametrize(
    ("first", "most", "reset_after"),
    [
        (-1.0, 1.0, 1.0),
        (2.0, 1.0, 1.0),
        (1.0, math.inf, 1.0),
        (math.nan, 1.0, 1.0),
        (1.0, 1.0, -1.0),
        (1.0, 1.0, math.inf),
    ],
)
def test_bad_settings_are_refused(first: float, most: float, reset_after: float) -> None:
    with pytest.raises(InvalidArgumentError, match="a requeue pause needs"):
        RequeuePause(first, most, reset_after)
