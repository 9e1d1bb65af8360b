"""Rate limiters: a semaphore's data read as a token bucket, and the rule that spends it.

A rate limiter is a persistent semaphore whose data is ``limiter RATE BURST TAT``
(three decimal numbers: units per second, the most units at once, and the
*theoretical arrival time*, UNIX seconds). Its rule is GCRA, the "generic cell rate
algorithm" of ATM networks (the same as a token bucket, kept as one number):

* a reservation of ``count`` units at time ``now`` starts at ``max(TAT, now)`` and
  moves TAT on by ``count / RATE``;
* it may go at ``TAT - BURST / RATE`` (the new TAT), or at once if that is past;
* so over any interval of ``T`` seconds, the units that may go sum to at most
  ``BURST + RATE * T``, and reservations go in the order they were made (FIFO).

A reservation that would have to wait longer than its ``max_wait`` is not made (the
TAT is left as it was): it can only be refused at once, never after a wait, and a
refused one takes nothing from the others.

Whose clock: ``now`` is UNIX seconds of the store's clock (the tenure server's wall
clock, passed in by its host; Redis's ``TIME``; PostgreSQL's ``clock_timestamp()``),
since the TAT must mean the same after a restart (the engine's own clock is
monotonic and starts afresh). A clock stepped back makes reservations wait longer;
stepped forward by ``d``, it lets up to ``RATE * d`` more units through at once.

This module is the rule alone: the engine's handler (and the etcd store, which has
no clock of its own) use it, the Redis and PostgreSQL stores restate it in their own
language, and the conformance kit checks that all agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from tenure._core.commands import RateReservation
from tenure.errors import InvalidArgumentError, LimitExceededError, PreconditionFailedError

#: The first word of a rate limiter's data.
LIMITER_WORD: Final = b"limiter"


@dataclass(frozen=True, slots=True)
class Bucket:
    """A rate limiter's state: units per second, the most at once, and its TAT."""

    rate: float
    burst: float
    tat: float


def check_rate(rate: float, burst: float) -> tuple[float, float]:
    """``(rate, burst)`` as floats, or InvalidArgumentError: both finite and above 0."""
    for what, value in (("rate", rate), ("burst", burst)):
        if (
            type(value) not in (int, float)
            or not math.isfinite(value)
            or value <= 0
            or value > 1e15
        ):
            raise InvalidArgumentError(
                f"{what} must be a number above 0 and at most 1e15, got {value!r}"
            )
    return float(rate), float(burst)


def bucket_data(bucket: Bucket) -> bytes:
    """The semaphore data that holds ``bucket`` (floats written to round-trip exactly)."""
    return b"%s %s %s %s" % (
        LIMITER_WORD,
        repr(bucket.rate).encode(),
        repr(bucket.burst).encode(),
        repr(bucket.tat).encode(),
    )


def parse_bucket(name: str, data: bytes) -> Bucket:
    """The bucket in semaphore ``name``'s data, or PreconditionFailedError if it holds none."""
    words = data.split(b" ")
    try:
        if len(words) != 4 or words[0] != LIMITER_WORD:
            raise ValueError("not four words starting with 'limiter'")
        rate, burst, tat = float(words[1]), float(words[2]), float(words[3])
        check_rate(rate, burst)
        if not math.isfinite(tat):
            raise ValueError("TAT is not finite")
    except (ValueError, InvalidArgumentError):
        raise PreconditionFailedError(
            f"semaphore {name!r} is not a rate limiter (its data is not "
            f"'limiter RATE BURST TAT': {data[:60]!r})"
        ) from None
    return Bucket(rate, burst, tat)


def check_units(count: float) -> float:
    """``count`` as a float, or InvalidArgumentError: finite and above 0."""
    if type(count) not in (int, float) or not math.isfinite(count) or count <= 0:
        raise InvalidArgumentError(f"units must be a number above 0, got {count!r}")
    return float(count)


def reserve(
    name: str, bucket: Bucket, count: float, max_wait: float | None, now: float
) -> tuple[RateReservation, Bucket | None]:
    """Reserve ``count`` units of ``bucket`` at ``now``: the reply, and the new bucket
    (None if it was not reserved: waiting longer than ``max_wait``, None for no limit).

    Raises:
        LimitExceededError: ``count`` is more than the burst (it could never go).
    """
    if count > bucket.burst:
        raise LimitExceededError(
            f"{count:g} units exceed the burst {bucket.burst:g} of rate limiter {name!r}"
        )
    start = max(bucket.tat, now)
    tat = start + count / bucket.rate
    at = max(tat - bucket.burst / bucket.rate, now)
    wait = at - now
    if max_wait is not None and wait > max_wait:
        return RateReservation(False, wait, at), None
    return RateReservation(True, wait, at), Bucket(bucket.rate, bucket.burst, tat)
