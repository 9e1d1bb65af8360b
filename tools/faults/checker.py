"""The checker: every rule over one run's whole history, and what it counted.

The rules live in :mod:`~tools.faults.check_locks` (mutual exclusion, fencing
tokens, fenced writes), :mod:`~tools.faults.check_queue` (FIFO),
:mod:`~tools.faults.check_data` (durability, disk faults),
:mod:`~tools.faults.check_live` (liveness), :mod:`~tools.faults.check_failover`
(a replicated service's failovers, which it also measures: ``stats["failover"]``,
present only then), :mod:`~tools.faults.check_tenant` (the hostile-tenant
scenario's honest clients, measured in ``stats["tenant"]``, present only then),
:mod:`~tools.faults.check_clock` (``wall-clock``: a client whose wall clock alone
jumps loses nothing by it) and :mod:`~tools.faults.check_lin` (``linearizable:mutex``,
``linearizable:register``: the whole history of each model checked by
:mod:`tenure.testing.lincheck`, its numbers in ``stats["linearizability"]``); each
module's docstring states its rules precisely.
And one rule is about the run itself: ``client-error``, a client's loop died of an
exception the workload does not expect (tenure raised something it must not, or
the harness is broken); the rest of that client's history is then missing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.faults.check_clock import check_wall_clock
from tools.faults.check_data import check_registers, check_server_exits
from tools.faults.check_failover import check_failovers
from tools.faults.check_lin import check_linearizability
from tools.faults.check_live import check_liveness
from tools.faults.check_locks import (
    Violation,
    check_fenced_writes,
    check_loss_cancels,
    check_overlap,
    check_tokens,
    sections,
)
from tools.faults.check_queue import check_fifo
from tools.faults.check_tenant import check_tenant
from tools.faults.history import History


@dataclass
class Verdict:
    """The violations found (empty: the run is clean) and the numbers behind them."""

    violations: list[Violation]
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether no rule was broken."""
        return not self.violations

    def rules(self) -> set[str]:
        """The names of the broken rules."""
        return {violation.rule for violation in self.violations}

    def summary(self, limit: int = 12) -> str:
        """The violations, one a line (the first ``limit``), for assertion messages."""
        lines = [f"{len(self.violations)} violation(s): {sorted(self.rules())}"]
        lines += [f"  [{v.rule}] t={v.t:.3f} {v.message}" for v in self.violations[:limit]]
        return "\n".join(lines)


def check_client_errors(history: History) -> list[Violation]:
    """``client-error``: a client's loop died of an exception the workload did not expect."""
    return [
        Violation("client-error", f"{note.process}: {note.fields.get('error')}", note.t)
        for note in history.notes_of("client-error")
    ]


def check(history: History, lincheck_dir: Path | None = None) -> Verdict:
    """Run every rule over ``history``; ``lincheck_dir``: where each model's lincheck
    history (and a witness) is written (:func:`~tools.faults.check_lin.check_linearizability`)."""
    stop = max([note.t for note in history.notes_of("stop")] or [0.0])
    found = sections(history, stop)
    violations = check_overlap(found) + check_loss_cancels(found) + check_tokens(history)
    refused, stale = check_fenced_writes(history)
    fifo, queue = check_fifo(history)
    lost, reads = check_registers(history)
    live, stalls = check_liveness(history)
    violations += refused + fifo + lost + check_server_exits(history) + live
    violations += check_wall_clock(history) + check_client_errors(history)
    failover, failovers = check_failovers(history)
    violations += failover
    hostile, tenant = check_tenant(history)
    violations += hostile
    linear, models = check_linearizability(history, lincheck_dir)
    violations += linear
    outcomes: Counter[str] = Counter(
        f"{op.kind}:{op.outcome or 'pending'}" for op in history.ops if op.kind != "snapshot"
    )
    faults: Counter[str] = Counter(str(note.fields["fault"]) for note in history.notes_of("fault"))
    stats: dict[str, Any] = {
        "operations": dict(sorted(outcomes.items())),
        "faults": dict(sorted(faults.items())),
        "sections": len(found),
        "stale_writes_refused": stale,
        "sessions_lost": len(history.notes_of("session-lost")),
        "fifo_snapshots": queue.snapshots,
        "fifo_pairs": queue.pairs,
        "fifo_skipped": queue.skipped,
        "register_reads": reads,
        "restarts": stalls.restarts,
        "longest_stall_after_restart": round(stalls.longest_stall_after_restart, 3),
        "longest_gap": round(stalls.longest_gap, 3),
        "linearizability": models,
    }
    if failovers:
        stats["failover"] = failovers
    if tenant is not None:
        stats["tenant"] = tenant
    return Verdict(sorted(violations, key=lambda v: v.t), stats)
