"""Rate limiter commands: reserve units of a bucket kept in a semaphore's data.

The rule is :func:`tenure._core.rates.reserve`; the time it is given is the
command's ``at``, the host's wall clock (UNIX seconds), not the engine's monotonic
``now``: a limiter's TAT must mean the same after a restart, which moves the
engine's clock (:mod:`tenure._core.snapshot`).
"""

from __future__ import annotations

from tenure._core import commands as c
from tenure._core.quotas import Q_DATA_BYTES
from tenure._core.rates import bucket_data, check_units, parse_bucket, reserve
from tenure._core.shared_steps import fire_watches
from tenure._core.state import EngineState
from tenure._core.values import check_duration
from tenure._core.watches import DATA


def reserve_units(state: EngineState, cmd: c.ReserveUnits, now: float) -> c.RateReservation:
    """Reserve ``count`` units unless they would wait more than ``max_wait``."""
    _, node = state.lookup_session_node(cmd.session_id)
    sem = state.lookup_semaphore(node, cmd.name)
    count = check_units(cmd.count)
    max_wait = (
        None if cmd.max_wait is None else check_duration("max_wait", cmd.max_wait, allow_zero=True)
    )
    at = check_duration("at", cmd.at, allow_zero=True)
    reply, after = reserve(sem.name, parse_bucket(sem.name, sem.data), count, max_wait, at)
    if after is not None:
        # The TAT's digits may grow the data (a bucket written ``limiter 1 1 0`` is
        # rewritten with each number's repr): the limiter's owner pays, as for an update.
        stored = bucket_data(after)
        state.check_quota(sem.usage, Q_DATA_BYTES, len(stored) - len(sem.data))
        sem.set_data(stored)
        fire_watches(state, node, sem.name, DATA)
    return reply
