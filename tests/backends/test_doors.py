"""The doors of one service (tenure.backends._doors): which endpoint an attempt tries,
and in which order, when one of them stopped answering."""

from __future__ import annotations

from tenure.backends._doors import Door, DoorRound, Doors

A, B, C = Door("127.0.0.1", 1), Door("127.0.0.1", 2), Door("127.0.0.1", 3)


def tried(round_: DoorRound) -> list[Door]:
    """Every endpoint the round offers, each marked failed as it goes."""
    order = []
    while (endpoint := round_.next()) is not None:
        order.append(endpoint)
        round_.failed(endpoint, "refused")
    return order


def test_a_silent_door_is_left_out_until_its_time_then_tried_again() -> None:
    doors = Doors([A, B, C])
    doors.connected(B)
    doors.went_silent(B, until=10.0)
    assert tried(doors.attempt(now=5.0)) == [C, A]
    assert tried(doors.attempt(now=10.0)) == [B, C, A]  # a server only slow: back in turn
    assert doors.silent is None


def test_a_standby_naming_the_silent_door_does_not_send_the_round_there() -> None:
    doors = Doors([A, B, C])
    doors.connected(A)
    doors.went_silent(A, until=10.0)
    round_ = doors.attempt(now=1.0)
    assert round_.next() == B
    doors.heard(str(A))  # B is a standby that still names A (no election yet)
    round_.failed(B, "a standby", standby=True)
    assert round_.heard_standby
    assert round_.next() == C
    assert round_.next() is None


def test_a_hint_to_the_new_leader_goes_first() -> None:
    doors = Doors([A, B, C])
    doors.connected(A)
    doors.went_silent(A, until=10.0)
    doors.hint = C
    assert tried(doors.attempt(now=1.0)) == [C, B]


def test_a_link_of_one_door_never_leaves_it_out() -> None:
    doors = Doors([A])
    doors.went_silent(A, until=10.0)
    assert tried(doors.attempt(now=1.0)) == [A]


def test_a_connection_to_the_silent_door_ends_its_silence() -> None:
    doors = Doors([A, B])
    doors.went_silent(A, until=10.0)
    doors.connected(A)
    assert doors.silent is None
