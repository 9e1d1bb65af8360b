"""Checker rules for liveness after the faults stop (see docs/reliability.md).

A run ends with a heal phase (Jepsen's final generator): no fault, server up,
network whole, every process running, clocks true. The harness notes its start
(``heal``), the liveness bound ``B`` it used (``params``) and when it told the
workers to stop (``stop``). ``B`` is generous on purpose (the machine is shared
and noisy): the recovery window, the server's idle timeout, a restart, a queue
of holders and a wide margin; see :func:`tools.faults.scenarios.liveness_bound`.

* ``hang``: an acquire (or a session open, create or update) still pending when
  the workers were stopped, invoked more than ``B`` earlier: a client waited
  that long for one answer.
* ``no-progress``: a client that took no lock between the start of the heal
  phase and ``B`` after it (or the stop, if that came first).

Also measured (not judged): the longest stall after a restart of the server
(from the restart to a client's next grant, the worst client and restart), and
the longest time any client went without a grant.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from tools.faults.check_locks import Violation
from tools.faults.history import History

#: The operations that must not wait forever.
WAITING_KINDS = frozenset({"acquire", "session-open", "create", "update"})
_CLIENT = re.compile(r"^w\d+c\d+$")


@dataclass
class LiveStats:
    """Stalls measured by the liveness checker, in seconds."""

    longest_stall_after_restart: float = 0.0
    longest_gap: float = 0.0
    restarts: int = 0


def _param(history: History, kind: str, name: str) -> float | None:
    notes = history.notes_of(kind)
    if not notes:
        return None
    return float(notes[-1].fields[name]) if name else notes[-1].t


def check_liveness(history: History) -> tuple[list[Violation], LiveStats]:
    """The ``hang`` and ``no-progress`` rules, and the stall statistics."""
    bound = _param(history, "params", "liveness_bound")
    heal = _param(history, "heal", "")
    stop = _param(history, "stop", "")
    stats = LiveStats()
    if bound is None or stop is None:
        return [Violation("hang", "the run never reached its stop (harness failure)", 0.0)], stats
    violations = []
    for op in history.ops:
        if op.kind not in WAITING_KINDS or not _CLIENT.match(op.process):
            continue
        # Cancelled by the stop, or never answered at all (a hung or killed process).
        waiting = op.outcome is None or (op.outcome == "info" and op.error == "stopped")
        if waiting and op.t0 < stop - bound:
            violations.append(
                Violation(
                    "hang",
                    f"{op.process}: {op.kind} {op.key or ''} (session {op.session}) was still "
                    f"waiting {stop - op.t0:.1f}s after it was invoked (bound {bound:g}s)",
                    op.t0,
                )
            )
    grants: dict[str, list[float]] = {}
    clients = {op.process for op in history.ops if _CLIENT.match(op.process)}
    for op in history.of_kind("acquire"):
        if op.outcome == "ok" and op.t1 is not None:
            grants.setdefault(op.process, []).append(op.t1)
    for times in grants.values():
        times.sort()
    if heal is not None:
        end = min(stop, heal + bound)
        for client in sorted(clients):
            if not any(heal <= t <= end for t in grants.get(client, [])):
                violations.append(
                    Violation(
                        "no-progress",
                        f"{client} took no lock within {end - heal:.1f}s of the heal phase "
                        f"(bound {bound:g}s)",
                        heal,
                    )
                )
    _measure(history, grants, clients, stop, stats)
    return violations, stats


def _measure(
    history: History,
    grants: dict[str, list[float]],
    clients: set[str],
    stop: float,
    stats: LiveStats,
) -> None:
    restarts = [note.t for note in history.notes_of("restart")]
    stats.restarts = len(restarts)
    for client in clients:
        times = grants.get(client, [])
        for restart in restarts:
            after = next((t for t in times if t >= restart), stop)
            stats.longest_stall_after_restart = max(
                stats.longest_stall_after_restart, after - restart
            )
        for before, after in itertools.pairwise(times):
            stats.longest_gap = max(stats.longest_gap, after - before)
