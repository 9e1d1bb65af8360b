"""Checker rules for "acknowledged means kept" (see docs/reliability.md).

Each client writes 1, 2, 3... in turn into its own register (a persistent
semaphore's data, ``update``); the observer reads the registers all through the
run, across crashes and restarts, and once more after the heal phase. The
register is linearizable with writes that only grow, so a read that ran from
``r0`` to ``r1`` must return

* ``lost-write``: at least the highest number whose update was acknowledged
  before ``r0`` (and the register must exist if its create was acknowledged);
* ``phantom-write``: a number some update was invoked with before ``r1`` (or the
  initial 0): never something nobody wrote.

Updates that ended ``info`` (connection lost, session gone) may or may not have
happened, so they are never required, only allowed. And for the disk faults:

* ``disk-fault-acknowledged``: after a full disk or a failing fsync, the server
  must stop, with a non-zero exit code, instead of going on;
* ``restart-failed``: the server must start again on its data afterwards (or
  after any crash).
"""

from __future__ import annotations

import bisect

from tools.faults.check_locks import Violation
from tools.faults.history import History, Op


def _acknowledged(updates: list[Op]) -> tuple[list[float], list[int]]:
    """Completion times of the acknowledged updates, and the highest value by then."""
    done = sorted((op for op in updates if op.outcome == "ok"), key=lambda op: op.t1 or 0.0)
    times: list[float] = []
    highest: list[int] = []
    for op in done:
        times.append(op.t1 or 0.0)
        highest.append(max(int(op.value), highest[-1] if highest else 0))
    return times, highest


def check_registers(history: History) -> tuple[list[Violation], int]:
    """The ``lost-write`` and ``phantom-write`` rules; also how many reads were checked."""
    updates: dict[str, list[Op]] = {}
    for op in history.of_kind("update"):
        updates.setdefault(op.key or "", []).append(op)
    created: dict[str, float] = {}
    for op in history.of_kind("create"):
        if op.outcome == "ok" and op.t1 is not None:
            created[op.key or ""] = min(created.get(op.key or "", op.t1), op.t1)
    acked = {name: _acknowledged(ops) for name, ops in updates.items()}
    violations = []
    checked = 0
    for read in history.of_kind("read"):
        if read.outcome != "ok" or read.t1 is None:
            continue
        name = read.key or ""
        checked += 1
        times, highest = acked.get(name, ([], []))
        count = bisect.bisect_left(times, read.t0)
        floor = highest[count - 1] if count else 0
        if read.value is None:
            if name in created and created[name] < read.t0:
                violations.append(
                    Violation(
                        "lost-write",
                        f"{name} was gone, though its create was acknowledged",
                        read.t0,
                    )
                )
            continue
        value = int(read.value)
        if value < floor:
            violations.append(
                Violation(
                    "lost-write",
                    f"{name} read {value} after the update to {floor} was acknowledged",
                    read.t0,
                )
            )
        invoked = {int(op.value) for op in updates.get(name, []) if op.t0 <= read.t1}
        if value and value not in invoked:
            violations.append(
                Violation("phantom-write", f"{name} read {value}, which nobody wrote", read.t0)
            )
    return violations, checked


def check_server_exits(history: History) -> list[Violation]:
    """The ``disk-fault-acknowledged`` and ``restart-failed`` rules, from the nemesis notes."""
    violations = []
    for note in history.notes_of("server-exit"):
        fault = note.fields.get("fault")
        if not note.fields.get("stopped"):
            violations.append(
                Violation(
                    "disk-fault-acknowledged",
                    f"after {fault} the server was still running "
                    f"{note.fields.get('after', 0):.1f}s later",
                    note.t,
                )
            )
        elif note.fields.get("exit_code") == 0:
            violations.append(
                Violation("disk-fault-acknowledged", f"after {fault} the server exited 0", note.t)
            )
    for note in history.notes_of("restart-failed"):
        violations.append(
            Violation("restart-failed", f"the server did not start: {note.fields}", note.t)
        )
    return violations
