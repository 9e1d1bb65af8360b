"""Shrinking a failing run: fewer clients, fewer kinds of fault, fewer minutes, the same
seed, as long as the same rule still breaks.

A run is decided by its seed and options (:class:`SimOptions`), so a smaller witness
is a smaller set of options whose run still breaks the rule the first one broke. The
search is greedy and bounded (:data:`MAX_RUNS` runs): the fewest clients that still
fail (trying from one up), then each kind of fault left out in turn (kept out if it
still fails), then the minutes halved while it still fails. The witness's command
replays it exactly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final

from tenure.testing.sim._run import QUIET, SimOptions, SimResult, run_seed

__all__ = ["MAX_RUNS", "rule_of", "shrink"]

#: Runs a shrink may make at most.
MAX_RUNS: Final = 24
#: The fewest minutes a run may last (its quiet end, and a little before it).
MIN_MINUTES: Final = (QUIET + 15.0) / 60


def rule_of(violation: str) -> str:
    """The rule a violation's line names (``linearizable:mutex: ...``: the first part)."""
    return violation.split(": ", 1)[0]


def shrink(
    failed: SimResult,
    run: Callable[[SimOptions], SimResult] = run_seed,
    max_runs: int = MAX_RUNS,
) -> SimResult:
    """The smallest run found that breaks ``failed``'s first rule (``failed`` itself if
    none smaller does)."""
    rule = rule_of(failed.verdicts.violations[0])
    best = failed
    runs = 0

    def still_fails(options: SimOptions) -> bool:
        nonlocal best, runs
        if runs >= max_runs or options == best.options:
            return False
        runs += 1
        result = run(options)
        if any(rule_of(v) == rule for v in result.verdicts.violations):
            best = result
            return True
        return False

    clients = 1
    while clients < best.options.clients:
        if still_fails(dataclasses.replace(best.options, clients=clients)):
            break
        clients *= 2
    for fault in list(best.options.chosen_faults()):
        fewer = tuple(f for f in best.options.chosen_faults() if f != fault)
        still_fails(dataclasses.replace(best.options, faults=fewer))
    while best.options.minutes / 2 >= MIN_MINUTES:
        if not still_fails(dataclasses.replace(best.options, minutes=best.options.minutes / 2)):
            break
    return best
