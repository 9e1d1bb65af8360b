"""Checker rules and measures of a replicated service's failovers (see docs/reliability.md).

They read the notes of the failover nemesis (:mod:`tools.faults.failover`) and apply
only to the runs that have them (a ``tenure serve --cluster`` target):

* ``no-leader``: after a fault, no server led within the nemesis's bound (30 s),
  though every server and etcd member was running again;
* ``stepped-down``: a leader cut off from etcd, or stopped, past its lease did not
  say that it stepped down (within 10 s of being healed): it must stop serving
  before its lease could end in etcd, and go back to being a standby;
* ``server-died``: a server exited by itself (no fault killed it): a cluster must
  ride out every fault injected with its servers running;
* ``session-kept``: a session whose client did not give it up was lost (the service
  told the client it was gone), or a lock was lost while its session lived. The new
  leader starts every session's window afresh when it takes over, so a client that
  re-attaches within its window keeps its session and its holds; a session is lost
  only by its own client's clock (its window passed without an answer: the error
  says so).

Measured (not judged), per kind of fault that deposes the leader: the **failover
time**, from the fault (the leader killed, cut off, stopped) to the first grant any
client saw after the successor began to lead (a grant sent by the old leader before
it died cannot come that late); and the **election time**, from the fault to the
successor's first moment as leader (its log). A failover whose successor granted
nothing before the next fault is counted, not measured.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Final

from tools.faults.check_locks import Violation
from tools.faults.history import History

#: What a session lost by its own client's clock says (backends/_session.py).
OWN_WINDOW: Final = "has not answered for its recovery window"


def check_failovers(history: History) -> tuple[list[Violation], dict[str, Any]]:
    """The rules above, and the failover measures (empty when no failover was noted)."""
    if not history.notes_of("elected") and not history.notes_of("deposed"):
        return [], {}
    violations = [
        Violation("no-leader", f"no server led after a fault: {note.fields}", note.t)
        for note in history.notes_of("no-leader")
    ]
    violations += [
        Violation(
            "stepped-down",
            f"{note.fields.get('member')} ({note.fields.get('fault')}) never said it stepped down",
            note.t,
        )
        for note in history.notes_of("deposed")
        if note.fields.get("stepped_down") is None
    ]
    violations += [
        Violation("server-died", f"{note.fields.get('member')} exited: {note.fields}", note.t)
        for note in history.notes_of("server-died")
    ]
    violations += _sessions_kept(history)
    return violations, measure(history)


def _sessions_kept(history: History) -> list[Violation]:
    """The ``session-kept`` rule (module docstring)."""
    lost_sessions = set()
    violations = []
    for note in history.notes_of("session-lost"):
        lost_sessions.add(note.fields.get("session"))
        error = str(note.fields.get("error", ""))
        if OWN_WINDOW not in error:
            violations.append(
                Violation(
                    "session-kept",
                    f"{note.process}: session {note.fields.get('session')} was lost before its "
                    f"client gave it up: {error}",
                    note.t,
                )
            )
    for op in history.of_kind("section"):
        if op.outcome == "lost" and op.session not in lost_sessions:
            violations.append(
                Violation(
                    "session-kept",
                    f"{op.process}: the lock {op.key} (token {op.token}) was lost while its "
                    f"session {op.session} lived: {op.error}",
                    op.t1 or op.t0,
                )
            )
    return violations


@dataclass
class _Samples:
    """The failovers of one kind of fault, in seconds."""

    failovers: list[float] = field(default_factory=list)
    elections: list[float] = field(default_factory=list)
    unmeasured: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "count": len(self.elections),
            "failover": percentiles(self.failovers),
            "election": percentiles(self.elections),
            "unmeasured": self.unmeasured,
        }


def percentiles(values: list[float]) -> dict[str, float]:
    """p50 (the median), p99 (nearest rank: with fewer than 100 values, the maximum
    unless one value in a hundred is left above it) and the maximum."""
    if not values:
        return {}
    ordered = sorted(values)
    p99 = ordered[math.ceil(0.99 * len(ordered)) - 1]
    return {
        "p50": round(statistics.median(ordered), 3),
        "p99": round(p99, 3),
        "max": round(ordered[-1], 3),
    }


def measure(history: History) -> dict[str, Any]:
    """Failover and election times per fault kind, and over all (module docstring)."""
    grants = sorted(
        op.t1 for op in history.of_kind("acquire") if op.outcome == "ok" and op.t1 is not None
    )
    faults = sorted(note.t for note in history.notes_of("fault"))
    every = _Samples()
    kinds: dict[str, _Samples] = {}
    for note in history.notes_of("elected"):
        since, led = float(note.fields["since"]), float(note.fields["led"])
        # The first fault after this one (a sigstop-holder's own kill is at ``since``).
        later = bisect.bisect_right(faults, since)
        next_fault = faults[later] if later < len(faults) else float("inf")
        first = bisect.bisect_left(grants, led)
        for samples in (kinds.setdefault(str(note.fields["fault"]), _Samples()), every):
            samples.elections.append(led - since)
            if first < len(grants) and grants[first] < next_fault:
                samples.failovers.append(grants[first] - since)
            else:
                samples.unmeasured += 1
    measures = {name: samples.summary() for name, samples in sorted(kinds.items())}
    if len(kinds) > 1:
        measures["all"] = every.summary()
    return measures
