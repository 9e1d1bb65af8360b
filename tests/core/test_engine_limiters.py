"""ReserveUnits: GCRA over a bucket in a semaphore's data (tenure._core.rates)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure._core import NodeConfig, ReserveUnits
from tenure._core.invariants import check_invariants
from tenure._core.rates import Bucket, bucket_data, parse_bucket, reserve
from tenure.errors import (
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
)

from .support import create_semaphore, describe, make_engine, open_session

T0 = 1_750_000_000.0  # UNIX seconds of the store's clock


def test_a_burst_goes_at_once_then_units_go_at_the_rate() -> None:
    engine = make_engine(NodeConfig())
    s = open_session(engine)
    create_semaphore(engine, s, "api", 1, data=bucket_data(Bucket(10.0, 5.0, 0.0)))
    got = [engine.apply(ReserveUnits(s, "api", 1, None, T0), 0.0) for _ in range(7)]
    assert [g.wait for g in got[:5]] == [0.0] * 5  # the burst
    assert got[5].granted
    assert (got[5].wait, got[5].at) == pytest.approx((0.1, T0 + 0.1), abs=1e-5)
    assert got[6].wait == pytest.approx(0.2, abs=1e-5)  # FIFO: after the one before it
    assert parse_bucket("api", describe(engine, s, "api").data).tat == pytest.approx(
        T0 + 0.7, abs=1e-5
    )
    check_invariants(engine)


def test_a_reservation_that_would_wait_too_long_is_refused_and_takes_nothing() -> None:
    engine = make_engine(NodeConfig())
    s = open_session(engine)
    create_semaphore(engine, s, "api", 1, data=bucket_data(Bucket(2.0, 2.0, 0.0)))
    assert engine.apply(ReserveUnits(s, "api", 2, 0.0, T0), 0.0).granted
    before = describe(engine, s, "api").data
    refused = engine.apply(ReserveUnits(s, "api", 1, 0.4, T0), 0.0)
    assert not refused.granted
    assert (refused.wait, refused.at) == pytest.approx((0.5, T0 + 0.5), abs=1e-5)
    assert describe(engine, s, "api").data == before  # nothing reserved
    assert engine.apply(ReserveUnits(s, "api", 1, 0.5, T0), 0.0).granted
    # Time refills the bucket: a second later two units are back (the burst).
    assert engine.apply(ReserveUnits(s, "api", 1, 0.0, T0 + 1.5), 0.0).granted
    assert engine.apply(ReserveUnits(s, "api", 1, 0.0, T0 + 1.5), 0.0).granted
    assert not engine.apply(ReserveUnits(s, "api", 1, 0.0, T0 + 1.5), 0.0).granted


def test_bad_requests_and_non_limiters_are_refused() -> None:
    engine = make_engine(NodeConfig())
    s = open_session(engine)
    create_semaphore(engine, s, "api", 1, data=bucket_data(Bucket(1.0, 3.0, 0.0)))
    create_semaphore(engine, s, "plain", 1, data=b"42")
    with pytest.raises(LimitExceededError, match="exceed the burst 3"):
        engine.apply(ReserveUnits(s, "api", 4, None, T0), 0.0)
    for count in (0, -1, float("nan"), float("inf"), "1"):
        with pytest.raises(InvalidArgumentError, match="units"):
            engine.apply(ReserveUnits(s, "api", count, None, T0), 0.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="max_wait"):
        engine.apply(ReserveUnits(s, "api", 1, -1.0, T0), 0.0)
    with pytest.raises(PreconditionFailedError, match="not a rate limiter"):
        engine.apply(ReserveUnits(s, "plain", 1, None, T0), 0.0)
    with pytest.raises(NotFoundError):
        engine.apply(ReserveUnits(s, "missing", 1, None, T0), 0.0)
    for data in (b"limiter 0 1 0", b"limiter 1 -1 0", b"limiter 1 1 nan", b"limiter 1 1"):
        with pytest.raises(PreconditionFailedError, match="not a rate limiter"):
            parse_bucket("x", data)


@settings(max_examples=200, deadline=None)
@given(
    rate=st.floats(0.5, 50.0),
    burst=st.integers(1, 20),
    steps=st.lists(
        st.tuples(st.floats(0.0, 0.5), st.integers(1, 5), st.sampled_from([None, 0.0, 0.3])),
        min_size=1,
        max_size=60,
    ),
)
def test_granted_units_never_exceed_burst_plus_rate_times_any_interval(
    rate: float, burst: int, steps: list[tuple[float, int, float | None]]
) -> None:
    """The guarantee, over the grant times ``at``: for every interval [a, b] of them,
    the units that go in it sum to at most ``burst + rate * (b - a)``; and they go
    in the order they were reserved (FIFO)."""
    bucket, now, grants = Bucket(rate, float(burst), 0.0), T0, []
    for gap, count, max_wait in steps:
        now += gap
        if count > burst:
            continue
        reply, after = reserve("x", bucket, count, max_wait, now)
        assert reply.at >= now
        assert reply.wait == pytest.approx(reply.at - now, abs=1e-5)
        if max_wait is not None:
            assert reply.granted == (reply.wait <= max_wait)
        if after is not None:
            bucket = after
            grants.append((reply.at, count))
    times = [at for at, _ in grants]
    assert times == sorted(times)
    for i in range(len(grants)):
        for j in range(i, len(grants)):
            units = sum(count for _, count in grants[i : j + 1])
            # (within float error: times near 1.75e9 are exact to about 2.4e-7 s)
            assert units <= burst + rate * (times[j] - times[i]) + 1e-4
