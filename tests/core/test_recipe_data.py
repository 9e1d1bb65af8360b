"""Each recipe's data format has one home: what the recipe writes, the tools read alike.

The counter's (and the latch's) value and the barrier's ``ROUND LAST`` and ``parties N``
are encoded and parsed by one module each (:mod:`tenure._core.counter_data`,
:mod:`tenure._core.barrier_data`); the recipes and :func:`tenure._core.kinds.classify`
both use them, so a semaphore's data is a barrier's for the recipe exactly when
``tenure describe`` says it is one.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenure._core.barrier_data import (
    START,
    barrier_progress,
    parties_data,
    progress_data,
    read_parties,
    read_progress,
)
from tenure._core.counter_data import (
    MAX_VALUE,
    MIN_VALUE,
    counter_value,
    read_value,
    value_data,
)
from tenure._core.kinds import BarrierKind, CounterKind, classify
from tenure._core.values import MAX_COUNT
from tenure.errors import PreconditionFailedError

NOT_A_NUMBER = [b"+3", b"03", b" 3", b"3 ", b"3_0", b"-0", b"-", b"\xd9\xa3", b"1e3"]


@given(st.integers(MIN_VALUE, MAX_VALUE))
def test_a_counter_value_reads_back_as_written(value: int) -> None:
    assert counter_value("c", value_data(value)) == value
    assert read_value(value_data(value)) == value


def test_a_counter_never_written_reads_zero() -> None:
    assert counter_value("c", b"") == 0
    assert read_value(b"") is None  # (empty data is no counter's kind: a plain semaphore)


@pytest.mark.parametrize(
    "data", [*NOT_A_NUMBER, value_data(MAX_VALUE + 1), value_data(MIN_VALUE - 1)], ids=repr
)
def test_data_a_counter_never_writes_is_refused(data: bytes) -> None:
    assert read_value(data) is None
    with pytest.raises(PreconditionFailedError, match="not a counter's value"):
        counter_value("c", data)


@given(st.integers(0, 2**64), st.integers(0, 2**64))
def test_a_barrier_progress_reads_back_as_written(rounds: int, last: int) -> None:
    assert barrier_progress("b", progress_data(rounds, last)) == (rounds, last)
    assert barrier_progress("b", START) == (0, 0)


@pytest.mark.parametrize(
    "data",
    [b"", b"1", b"1 2 3", b"1  2", b" 1 2", b"+1 2", b"1 +2", b"01 2", b"-1 2", b"1 2\n"],
    ids=repr,
)
def test_data_a_barrier_never_writes_is_refused(data: bytes) -> None:
    assert read_progress(data) is None
    with pytest.raises(PreconditionFailedError, match="not a barrier's"):
        barrier_progress("b", data)


def test_an_arrival_says_its_parties() -> None:
    assert read_parties(parties_data(4)) == 4
    for data in (b"parties 0", b"parties", b"parties +4", b"waiting", b"party 4", b""):
        assert read_parties(data) is None


@given(st.one_of(st.binary(max_size=24), st.from_regex(rb"\A[-+ 0-9]{1,8}\Z")))
def test_the_recipes_and_describe_agree_on_what_is_their_data(data: bytes) -> None:
    """What the recipe reads as its own data is what ``classify`` names it, and only that."""
    barrier = classify("b", limit=MAX_COUNT, ephemeral=False, data=data, owners=(), waiters=())
    try:
        progress = barrier_progress("b", data)
    except PreconditionFailedError:
        assert not isinstance(barrier, BarrierKind)
    else:
        assert isinstance(barrier, BarrierKind)
        assert (barrier.rounds, barrier.last) == progress
    counter = classify("c", limit=1, ephemeral=False, data=data, owners=(), waiters=())
    if data and not data.startswith((b"claim ", b"limiter ")):
        try:
            value = counter_value("c", data)
        except PreconditionFailedError:
            assert not isinstance(counter, CounterKind)
        else:
            assert counter == CounterKind(value)
