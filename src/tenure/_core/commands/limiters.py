"""The rate limiter's command: ReserveUnits, and its reply."""

from __future__ import annotations

from dataclasses import dataclass

from tenure._core.commands.base import Command


@dataclass(frozen=True, slots=True)
class RateReservation:
    """Reply to ReserveUnits: whether the units were reserved, and when they may go.

    ``at`` is when they may go (UNIX seconds of the store's clock, never before the
    time the reservation was made) and ``wait`` how long that is from then; both
    are set whether or not it was ``granted`` (a refused one says how long it would
    have had to wait).
    """

    granted: bool
    wait: float
    at: float


@dataclass(frozen=True, slots=True)
class ReserveUnits(Command[RateReservation]):
    """Reserve ``count`` units of the rate limiter ``name`` (a persistent semaphore whose
    data is a bucket: :mod:`tenure._core.rates`), unless they would have to wait more
    than ``max_wait`` seconds (None: no limit).

    ``at`` is the store's clock, UNIX seconds: the host that applies the command sets
    it (whatever a client sent), so that a replay of the journal decides the same.
    """

    session_id: int
    name: str
    count: float
    max_wait: float | None
    at: float = 0.0
