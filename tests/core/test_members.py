"""A group's member records (:mod:`tenure._core.members`): what is written reads back
the same, nothing else reads as a record, ids and weights are checked, and the
members of a group are each id's joined record of the lowest token."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenure._core.members import (
    MAX_MEMBER_ID_BYTES,
    MAX_WEIGHT,
    Member,
    MemberRecord,
    check_member_id,
    check_weight,
    joining_count,
    member_record,
    members_of,
    parse_record,
)
from tenure.errors import InvalidArgumentError


@dataclass(frozen=True)
class Hold:
    """An owner as members_of reads it."""

    token: int
    data: bytes


#: Ids as a user may choose them: any text but control characters and surrogates.
IDS = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=80).filter(
    lambda text: len(text.encode()) <= MAX_MEMBER_ID_BYTES
)
WEIGHTS = st.one_of(
    st.none(),
    st.integers(1, int(MAX_WEIGHT)),
    st.floats(min_value=1e-300, max_value=MAX_WEIGHT, allow_nan=False),
)


@given(
    member_id=IDS,
    data=st.binary(max_size=64),
    weight=WEIGHTS,
    state=st.sampled_from(["joining", "joined"]),
)
def test_a_record_reads_back_as_written(
    member_id: str, data: bytes, weight: int | float | None, state: str
) -> None:
    record = member_record(member_id, data, weight=weight, state=state)  # type: ignore[arg-type]
    assert parse_record(record) == MemberRecord(state, member_id, weight, data)  # type: ignore[arg-type]


def reads_back_exactly_or_not_at_all(data: bytes) -> None:
    found = parse_record(data)
    if found is not None:
        again = member_record(found.id, found.data, weight=found.weight, state=found.state)
        assert again == data


@given(st.binary(max_size=60))
def test_anything_that_reads_as_a_record_is_written_so_exactly(data: bytes) -> None:
    reads_back_exactly_or_not_at_all(data)


@given(
    st.from_regex(
        rb"member (joined|joining|x) [0-9]{1,3}:[ -~]{0,12} (-|[-+.0-9e_]{1,8}) [ -~]{0,6}",
        fullmatch=True,
    )
)
def test_record_look_alikes_read_back_exactly_or_not_at_all(data: bytes) -> None:
    reads_back_exactly_or_not_at_all(data)


def test_the_written_form() -> None:
    assert member_record("w-1", b"10.0.0.5:80", weight=None, state="joined") == (
        b"member joined 3:w-1 - 10.0.0.5:80"
    )
    assert member_record("é", b"", weight=2.5, state="joining") == b"member joining 2:\xc3\xa9 2.5 "
    # The length prefix keeps ids and data with spaces and colons unambiguous.
    record = member_record("a b:c", b"x y 3:z", weight=3, state="joined")
    assert parse_record(record) == MemberRecord("joined", "a b:c", 3, b"x y 3:z")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"member",
        b"member joined 3:w-1",  # no weight, no separator
        b"member joined 3:w-1 -",  # no space before the data
        b"member joined 4:w-1 - x",  # a length that is not the id's
        b"member joined 03:w-1 - x",  # a leading zero
        b"member joined 0: - x",
        b"member Joined 3:w-1 - x",
        b"member left 3:w-1 - x",
        b"member joined 2:\n\n - x",  # a control character
        b"member joined 1:\xff - x",  # not UTF-8
        b"member joined 3:w-1 0 x",  # weight 0
        b"member joined 3:w-1 -1 x",
        b"member joined 3:w-1 nan x",
        b"member joined 3:w-1 inf x",
        b"member joined 3:w-1 1.50 x",  # not how repr writes 1.5
        b"member joined 3:w-1 1.0e3 x",
        b"member joined 3:w-1 01 x",
        b"member joined 3:w-1 1_0 x",
        b"member joined 3:w-1 2000000000 x",  # above MAX_WEIGHT
        b"parties 2",
    ],
)
def test_look_alikes_are_no_records(data: bytes) -> None:
    assert parse_record(data) is None


def test_ids_are_checked_naming_member_id() -> None:
    assert check_member_id("worker-1") == "worker-1"
    assert check_member_id("é" * 128) == "é" * 128  # 256 bytes
    assert check_member_id("a b") == "a b"
    for bad in ("", "a\tb", "\x7f", "\u0085", "\ud800", "é" * 129, "x" * 257, 3, None):
        with pytest.raises(InvalidArgumentError, match="member_id"):
            check_member_id(bad)


def test_weights_are_checked_naming_weight() -> None:
    assert check_weight(1) == 1
    assert check_weight(0.25) == 0.25
    assert check_weight(MAX_WEIGHT) == MAX_WEIGHT
    for bad in (0, -1, 0.0, -0.5, float("nan"), float("inf"), MAX_WEIGHT * 2, True, "1", None):
        with pytest.raises(InvalidArgumentError, match="weight"):
            check_weight(bad)


def test_the_members_are_each_ids_joined_record_of_the_lowest_token() -> None:
    def hold(token: int, member_id: str, state: str = "joined", data: bytes = b"") -> Hold:
        return Hold(token, member_record(member_id, data, weight=None, state=state))  # type: ignore[arg-type]

    owners = [
        hold(9, "b", data=b"late"),  # a second joined record of b: not the member
        hold(3, "a", data=b"A"),
        hold(5, "b", data=b"B"),
        hold(7, "c", state="joining"),  # not a member (yet)
        Hold(4, b"parties 2"),  # no record: nobody
        hold(11, "d", data=b"D"),
        hold(2, "d", state="joining"),  # a lower joining record does not hide d
    ]
    assert members_of(owners) == {
        "a": Member("a", 3, b"A", None),
        "b": Member("b", 5, b"B", None),
        "d": Member("d", 11, b"D", None),
    }
    assert list(members_of(owners)) == ["a", "b", "d"]  # by token
    assert joining_count(owners) == 2
    assert members_of([]) == {}
