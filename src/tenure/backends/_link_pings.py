"""When a link pings its server, and what it makes of a Ping left unanswered.

A link (:mod:`tenure.backends._link`) confirms its connection with a Ping once it
has heard nothing for a ping interval. :func:`next_step` is what its keepalive
does each time it wakes, and when it wakes next: not on a fixed tick, but when the
next step is due, so that

* a Ping leaves one ping interval after the last answer (not up to two: a tick
  that found the connection just confirmed would otherwise wait a whole interval
  more), and
* a Ping unanswered for one interval is noticed then (``LOOK``: the link asks the
  other doors of a cluster who leads), looked at again each interval (a late Pong
  and the next Ping), and given up at its patience (``GIVE_UP``: the connection is
  lost).

So a client whose leader stopped (SIGSTOP) starts asking at most two ping
intervals after the leader's last answer. Plain arithmetic on loop times.
"""

from __future__ import annotations

from typing import Final

__all__ = ["GIVE_UP", "LOOK", "PING", "WAIT", "next_step"]

#: Nothing to do yet.
WAIT: Final = "wait"
#: Send a Ping.
PING: Final = "ping"
#: A Ping is unanswered for an interval: look for a leader elsewhere.
LOOK: Final = "look"
#: A Ping is unanswered past its patience: the connection is dead.
GIVE_UP: Final = "give up"
#: How much later than due a step may be taken, at least (timers' slack), in seconds.
SLACK: Final = 0.02


def next_step(
    now: float, confirmed_at: float, pinged_at: float | None, interval: float, patience: float
) -> tuple[str, float]:
    """What the keepalive does at loop time ``now``, and the loop time to wake next.

    ``confirmed_at``: when the latest request or Ping answered was sent;
    ``pinged_at``: when the oldest unanswered Ping was sent (None: none is);
    ``interval``: the ping interval; ``patience``: how long a Ping may go unanswered.
    """
    if pinged_at is None:
        due = confirmed_at + interval
        if now >= due - SLACK:
            return PING, now + interval
        return WAIT, due
    if now - pinged_at > patience:
        return GIVE_UP, now + interval
    if now >= pinged_at + interval - SLACK:  # (again an interval on: its Pong may come)
        return LOOK, min(now + interval, pinged_at + patience + SLACK)
    return WAIT, pinged_at + interval
