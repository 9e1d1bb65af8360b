"""limits' storage, the parts without I/O: each strategy's record and rules, the key
names, the URL, and the arguments refused before anything is sent.

The rules are checked on limits' own examples (its docs' moving window, its
sliding window counter's weighting), and the fixed and moving windows against
limits' own in-memory storage (its reference), over random calls at random times.
"""

from __future__ import annotations

import time

import limits.storage.memory as limits_memory
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from limits.storage import MemoryStorage, storage_from_string

from tenure.contrib.limits import AsyncTenureStorage, TenureStorage
from tenure.contrib.limits import _records as rec
from tenure.contrib.limits._names import name_of, tenure_url
from tenure.errors import InvalidArgumentError, PreconditionFailedError

T0 = 1_800_000_000.0  # a UNIX time: the tests' clock starts there


# -- fixed window ---------------------------------------------------------------------


def test_a_fixed_window_starts_at_its_first_hit_and_counts_until_its_end() -> None:
    record: rec.Record = None
    assert rec.fixed_count(record, T0) == 0
    assert rec.fixed_end(record, T0) == T0  # no window: it "ends" now, as limits says
    for count, at in ((1, T0), (3, T0 + 10), (4, T0 + 59.9)):
        step = rec.fixed_hit(record, at, 60, count - rec.fixed_count(record, at))
        record = step.record
        assert step.answer == count
        assert step.until == T0 + 60
    assert rec.fixed_count(record, T0 + 59.9) == 4
    assert rec.fixed_end(record, T0 + 30) == T0 + 60
    # Over at its end: it reads 0, and the next hit starts the next window there.
    assert rec.fixed_count(record, T0 + 60) == 0
    step = rec.fixed_hit(record, T0 + 75, 60, 1)
    assert (step.answer, step.record) == (1, rec.Fixed(1, T0 + 135))


# -- moving window --------------------------------------------------------------------


def test_the_moving_window_of_limits_docs() -> None:
    # limits' docs (strategies, "Moving Window"), 10 a minute: 1, 2, 4 and 3 hits at
    # :10, :20, :30 and :50; at 1:11 the 10th newest (:10) is 61 s old: one more goes;
    # at 1:12 the 10th newest is :20, 52 s old: refused.
    record: rec.Record = None
    for at, hits in ((10, 1), (20, 2), (30, 4), (50, 3)):
        step = rec.moving_hit(record, T0 + at, 10, 60, hits)
        assert step.answer
        record = step.record
    assert rec.moving_window(record, T0 + 55, 10, 60) == (T0 + 10, 10)
    assert not rec.moving_hit(record, T0 + 69, 10, 60, 1).answer
    step = rec.moving_hit(record, T0 + 71, 10, 60, 1)
    assert step.answer
    assert not rec.moving_hit(step.record, T0 + 72, 10, 60, 1).answer
    # The log keeps the newest 10 hits of the last minute, and no older one.
    assert rec.moving_window(step.record, T0 + 72, 10, 60) == (T0 + 20, 10)
    assert rec.encode(step.record) == b"limits moving %d %d*3 %d*4 %d*2" % tuple(
        int((T0 + at) * 1000) for at in (71, 50, 30, 20)
    )
    assert step.until == T0 + 71 + 60


def test_a_moving_window_refuses_more_than_its_limit_and_varying_costs_count() -> None:
    # limits' test_moving_window_multiple_cost / _varying_cost / _huge_cost.
    step = rec.moving_hit(None, T0, 10, 60, 11)
    assert (step.answer, step.record) == (False, None)
    step = rec.moving_hit(None, T0, 10, 60, 5)
    assert step.answer
    assert rec.moving_window(step.record, T0, 10, 60) == (T0, 5)
    assert not rec.moving_hit(step.record, T0 + 1, 10, 60, 6).answer
    step = rec.moving_hit(step.record, T0 + 1, 10, 60, 5)
    assert step.answer
    assert rec.moving_window(step.record, T0 + 1, 10, 60) == (T0, 10)
    assert rec.moving_window(step.record, T0 + 60.5, 10, 60) == (T0 + 1, 5)
    assert rec.moving_window(step.record, T0 + 62, 10, 60) == (T0 + 62, 0)


# -- sliding window counter -----------------------------------------------------------


def test_the_sliding_window_counter_weighs_the_previous_bucket_by_its_time_left() -> None:
    # limits' docs (strategies, "Sliding Window Counter"), 100 a minute: 40 hits in
    # the previous bucket, 80 in the current one; 30 s into it the weighted count is
    # 80 + 40 * 0.5 = 100: refused; 40 s into it, 80 + floor(40 / 3) = 93: allowed.
    record = rec.Sliding(start=T0, previous=40, current=80)
    assert rec.sliding_window(record, T0 + 30, 60) == (40, 30.0, 80, 90.0)
    assert not rec.sliding_hit(record, T0 + 30, 100, 60, 1).answer
    step = rec.sliding_hit(record, T0 + 40, 100, 60, 1)
    assert (step.answer, step.record) == (True, rec.Sliding(T0, 40, 81))
    assert step.until == T0 + 120


def test_the_sliding_buckets_move_on_and_end() -> None:
    step = rec.sliding_hit(None, T0, 5, 1, 3)  # limits' previous-window test: 3 of 5/s
    assert step.record == rec.Sliding(T0, 0, 3)
    assert rec.sliding_window(step.record, T0 + 0.5, 1) == (0, 0.0, 3, 1.5)
    # A period later the bucket is the previous one, counted by its time left.
    assert rec.sliding_window(step.record, T0 + 1.25, 1) == (3, 0.75, 0, 1.75)
    moved = rec.sliding_hit(step.record, T0 + 1.25, 5, 1, 4)  # floor(3 * .75) + 4 > 5
    assert not moved.answer
    moved = rec.sliding_hit(step.record, T0 + 1.25, 5, 1, 2)
    assert moved.record == rec.Sliding(T0 + 1, 3, 2)
    # Two periods after its start nothing is left: the next hit starts afresh.
    assert rec.sliding_window(moved.record, T0 + 3, 1) == (0, 0.0, 0, 0.0)
    assert rec.sliding_hit(moved.record, T0 + 3, 5, 1, 5).record == rec.Sliding(T0 + 3, 0, 5)
    assert not rec.sliding_hit(None, T0, 5, 1, 6).answer


# -- records as data ------------------------------------------------------------------

records = st.one_of(
    st.none(),
    st.builds(rec.Fixed, st.integers(0, 10**9), st.integers(0, 4 * 10**9).map(lambda s: s / 8)),
    st.builds(
        rec.Moving,
        st.lists(st.tuples(st.integers(0, 10**13), st.integers(1, 10**4)), max_size=8).map(tuple),
    ),
    st.builds(
        rec.Sliding,
        st.integers(0, 4 * 10**9).map(lambda s: s / 8),
        st.integers(0, 10**9),
        st.integers(0, 10**9),
    ),
)


@given(records)
def test_a_record_reads_back_as_written(record: rec.Record) -> None:
    assert rec.parse("k", rec.encode(record)) == record


@pytest.mark.parametrize(
    "data",
    [b"42", b"limiter 1 2 3", b"limits fixed 1", b"limits fixed -1 5.0", b"limits nope 1",
     b"limits sliding 1 2 x", b"limits fixed 1 nan", b"limits moving 12*0", b"\xff"],
)  # fmt: skip
def test_data_that_is_no_record_is_refused_naming_the_semaphore(data: bytes) -> None:
    with pytest.raises(PreconditionFailedError, match="'limits/k' holds data that is not"):
        rec.parse("limits/k", data)


# -- against limits' own in-memory storage --------------------------------------------


class MemoryClock:
    """The clock limits' MemoryStorage reads (its module's ``time.time``), the test's."""

    now = T0

    @classmethod
    def time(cls) -> float:
        return cls.now


#: The windows' length: never a whole number of the calls' quarter seconds apart, as
#: limits' storages differ on a hit exactly one expiry old (its Redis storage's moving
#: window counts it, as this storage does; its in-memory one does not).
EXPIRY = 5.125

calls = st.lists(
    st.tuples(
        st.integers(0, 40).map(lambda quarters: quarters / 4),  # seconds after the last call
        st.sampled_from(["a", "b"]),
        st.integers(0, 4),  # hits (limits' cost)
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(calls=calls)
def test_fixed_and_moving_windows_answer_as_limits_memory_storage(
    calls: list[tuple[float, str, int]],
) -> None:
    MemoryClock.now = T0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(limits_memory, "time", MemoryClock)
        reference = MemoryStorage()
        try:
            fixed: dict[str, rec.Record] = {}
            moving: dict[str, rec.Record] = {}
            for wait, key, hits in calls:
                MemoryClock.now += wait
                now = MemoryClock.now
                step = rec.fixed_hit(fixed.get(key), now, EXPIRY, hits)
                fixed[key] = step.record
                assert step.answer == reference.incr("f" + key, EXPIRY, hits)
                assert rec.fixed_count(fixed[key], now) == reference.get("f" + key)
                assert rec.fixed_end(fixed[key], now) == reference.get_expiry("f" + key)
                moved = rec.moving_hit(moving.get(key), now, 3, EXPIRY, hits)
                moving[key] = moved.record
                expected = reference.acquire_entry("m" + key, 3, EXPIRY, hits)  # type: ignore[arg-type]
                assert moved.answer == expected
                window = reference.get_moving_window("m" + key, 3, EXPIRY)  # type: ignore[arg-type]
                ours = rec.moving_window(moving[key], now, 3, EXPIRY)
                # An empty window starts now (as Redis's says); the in-memory storage
                # answers its last expired hit's time until its thread drops it.
                assert ours == (window if window[1] else (now, 0))
        finally:
            reference.timer.cancel()  # (its expiry thread)


# -- names, URLs, arguments -----------------------------------------------------------


def test_a_key_is_its_semaphores_name_unless_tenure_would_refuse_it() -> None:
    assert (
        name_of("limits/", "LIMITER/127.0.0.1/5/1/minute") == "limits/LIMITER/127.0.0.1/5/1/minute"
    )
    assert name_of("p/", "clé ünicode") == "p/clé ünicode"
    hashed = [name_of("p/", key) for key in ("tab\there", "x" * 1100, "#deadbeef", "")]
    assert all(name.startswith("p/#") and len(name) == 2 + 1 + 64 for name in hashed)
    assert len(set(hashed)) == 4
    # No key kept as it is starts with "#": it cannot be taken for a hashed one.
    assert name_of("p/", "#" + hashed[0][3:]) != hashed[0]


def test_the_url_names_the_node_and_keeps_tenures_own_options() -> None:
    assert tenure_url("tenure://a:1,b:2?node=n&token=t") == ("tenure://a:1,b:2?token=t", "n")
    assert tenure_url("async+tenures://a:1") == ("tenures://a:1", None)
    for bad in ("redis://a:1", "memory://", "tenure://a:1?node=x&node=y"):
        with pytest.raises(InvalidArgumentError):
            tenure_url(bad)


@pytest.mark.parametrize(
    ("uri", "options", "named"),
    [
        ("tenure://127.0.0.1:1", {"nonsense": 1}, "nonsense"),
        ("tenure://127.0.0.1:1", {"node": "bad\nnode"}, "node"),
        ("tenure://127.0.0.1:1?node=", {}, "node"),
        ("tenure://127.0.0.1:1", {"key_prefix": "x\x00"}, "key_prefix"),
        ("tenure://127.0.0.1:1", {"recovery_window": -1}, "recovery_window"),
        ("tenure://127.0.0.1:1", {"clock": 3}, "clock"),
        ("tenure://127.0.0.1:1", {"timeout": 0}, "timeout"),
        ("tenure://127.0.0.1:1", {"timeout": float("inf")}, "timeout"),
        ("tenure+x://127.0.0.1:1", {}, "tenure://host:port"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_sent(
    uri: str, options: dict[str, object], named: str
) -> None:
    for storage in (TenureStorage, AsyncTenureStorage):
        with pytest.raises(InvalidArgumentError, match=named):
            storage(uri, **options)  # type: ignore[arg-type]


def test_a_calls_bad_arguments_are_refused_before_it_connects() -> None:
    # Port 1: nothing listens there; a call that tried would be UnavailableError.
    storage = TenureStorage("tenure://127.0.0.1:1")
    try:
        for call, named in (
            (lambda: storage.incr("k", 0), "expiry"),
            (lambda: storage.incr("k", 60, amount=-1), "amount"),
            (lambda: storage.acquire_entry("k", 1.5, 60), "limit"),  # type: ignore[arg-type]
            (lambda: storage.get(b"k"), "key"),  # type: ignore[arg-type]
            (lambda: storage.get_sliding_window("k", float("nan")), "expiry"),  # type: ignore[arg-type]
        ):
            with pytest.raises(InvalidArgumentError, match=named):
                call()
    finally:
        storage.close()


def test_limits_finds_both_storages_by_scheme_and_they_connect_on_first_use() -> None:
    # Port 1: nothing listens there, and nothing is tried until a call.
    assert type(storage_from_string("tenure://127.0.0.1:1")) is TenureStorage
    assert type(storage_from_string("tenures://127.0.0.1:1?node=x")) is TenureStorage
    found = storage_from_string("async+tenure://127.0.0.1:1", key_prefix="")
    assert type(found) is AsyncTenureStorage
    assert found.node == "limits"
    assert time.time() > T0 - 10**9  # (the clock the storages use by default)


@pytest.mark.parametrize(
    "uri",
    [
        "tenure+x://127.0.0.1:1?token=s3cr3t-token",  # not a tenure storage URL
        "redis://:s3cr3t-token@127.0.0.1:1",  # its password, before @
        "tenure://127.0.0.1:1?node=a&token=s3cr3t-token&node=b",  # node twice
        "tenure://[bad?token=s3cr3t-token",  # urlsplit cannot split it
        "tenure://127.0.0.1:1?node=a&node=b&password=s3cr3t-token",
    ],
)
def test_a_bad_storage_url_is_shown_without_its_secrets(uri: str) -> None:
    """Issue 47: the storage's URL errors quoted ``?token=`` in clear (``tenure.connect``
    masks it): they show the URL as tenure's backends do (tenure.backends.shown_url)."""
    for storage in (TenureStorage, AsyncTenureStorage):
        with pytest.raises(InvalidArgumentError) as raised:
            storage(uri)
        assert "s3cr3t-token" not in str(raised.value)
        assert "***" in str(raised.value)
