"""When a link pings and what it makes of an unanswered Ping (tenure.backends._link_pings)."""

from __future__ import annotations

from tenure.backends._link_pings import GIVE_UP, LOOK, PING, SLACK, WAIT, next_step

INTERVAL, PATIENCE = 2.0, 4.0


def test_a_ping_leaves_one_interval_after_the_last_answer_not_on_a_fixed_tick() -> None:
    # Confirmed just before a wake: the keepalive wakes again when the Ping is due,
    # not a whole interval after this wake.
    assert next_step(10.0, 9.9, None, INTERVAL, PATIENCE) == (WAIT, 11.9)
    assert next_step(11.9, 9.9, None, INTERVAL, PATIENCE) == (PING, 13.9)


def test_a_ping_unanswered_for_an_interval_is_looked_into_then_given_up_at_its_patience() -> None:
    assert next_step(12.0, 9.9, 11.9, INTERVAL, PATIENCE) == (WAIT, 13.9)
    assert next_step(13.9, 9.9, 11.9, INTERVAL, PATIENCE) == (LOOK, 15.9)
    step, wake = next_step(15.9, 9.9, 11.9, INTERVAL, PATIENCE)
    assert step == LOOK
    assert wake > 11.9 + PATIENCE  # the next wake finds the patience passed
    assert next_step(wake, 9.9, 11.9, INTERVAL, PATIENCE)[0] == GIVE_UP


def test_a_late_pong_is_followed_by_the_next_ping_within_an_interval() -> None:
    """A slow network (a round trip longer than the interval) is no loss: the wake
    after a LOOK is an interval on, where the Ping answered meanwhile is followed by
    the next (not at the patience, which would let a short window run out)."""
    step, wake = next_step(0.5, 0.0, 0.25, 0.25, 2.0)
    assert step == LOOK
    assert wake == 0.75
    assert next_step(wake, 0.25, None, 0.25, 2.0)[0] == PING  # answered meanwhile


def test_a_stopped_server_is_looked_into_within_two_intervals_of_its_last_answer() -> None:
    answered = 100.0  # its last answer; nothing after it
    wake, pinged = answered, None
    while True:  # the keepalive's wakes
        step, next_wake = next_step(wake, answered, pinged, INTERVAL, PATIENCE)
        if step == PING:
            pinged = wake
        if step == LOOK:
            break
        wake = next_wake
    assert wake <= answered + 2 * INTERVAL + SLACK
