"""The clock nemesis's rule: a client whose wall clock alone jumps loses nothing by it.

* ``wall-clock``: a worker whose wall clock jumped (its monotonic clock left
  alone) lost no session and no lease: expiry follows the server's clock, and
  the client measures its own deadlines on the monotonic clock only.

The workers on true clocks are the control. A loss of the wall-clock worker's
that one of them shares, within a recovery window of it, is the machine's, not
the clock's: a target or a machine that stalled for a window is silence every
client hears, whatever its clock says (a run on a loaded machine lost the
sessions of five workers of six within 0.9 s, the wall-clock worker's among
them). A control must not have been stopped by the pause nemesis then (from the
stop to a window after it was resumed): its loss is the pause's. A history
without the recovery window (the harness's ``params`` note) has no control.
"""

from __future__ import annotations

from tools.faults.check_locks import Violation
from tools.faults.history import History, Note

__all__ = ["check_wall_clock"]

#: The pause nemesis's faults (a worker stopped, holding or not).
_PAUSES = frozenset({"sigstop-holder", "sigstop"})


def _worker(process: str) -> int | None:
    """The worker index of a client's process name (``w3c1`` -> 3)."""
    if not process.startswith("w") or "c" not in process:
        return None
    index = process[1:].split("c", 1)[0]
    return int(index) if index.isdigit() else None


def _paused(history: History, window: float) -> dict[int, list[tuple[float, float]]]:
    """Each worker's spans under the pause nemesis, each until a window after it was
    resumed (a stop never healed: until the end)."""
    spans: dict[int, list[tuple[float, float]]] = {}
    stopped: dict[int, float] = {}
    for note in sorted(history.notes, key=lambda n: n.t):
        worker = note.fields.get("worker")
        if not isinstance(worker, int):
            continue
        if note.kind == "fault" and note.fields.get("fault") in _PAUSES:
            stopped[worker] = note.t
        elif note.kind == "healed" and note.fields.get("fault") == "sigstop":
            since = stopped.pop(worker, None)
            if since is not None:
                spans.setdefault(worker, []).append((since, note.t + window))
    for worker, since in stopped.items():
        spans.setdefault(worker, []).append((since, float("inf")))
    return spans


def _controls(history: History, faked: set[int], window: float) -> list[float]:
    """When the control workers (true clocks, not paused then) lost a session."""
    paused = _paused(history, window)
    found = []
    for note in history.notes_of("session-lost"):
        worker = _worker(note.process)
        if worker is None or worker in faked:
            continue
        if any(start <= note.t <= end for start, end in paused.get(worker, [])):
            continue
        found.append(note.t)
    return found


def check_wall_clock(history: History) -> list[Violation]:
    """The ``wall-clock`` rule (module docstring)."""
    roles: dict[int, str] = {
        int(note.fields["worker"]): str(note.fields.get("clock"))
        for note in history.notes_of("role")
    }
    wall = {index for index, clock in roles.items() if clock == "wall"}
    if not wall:
        return []
    params: list[Note] = history.notes_of("params")
    window = float(params[-1].fields.get("window", 0.0)) if params else 0.0
    controls = _controls(history, set(roles), window) if window > 0 else []

    def shared(t: float) -> bool:
        return any(abs(t - control) <= window for control in controls)

    violations = [
        Violation("wall-clock", f"{note.process} lost its session: {note.fields}", note.t)
        for note in history.notes_of("session-lost")
        if _worker(note.process) in wall and not shared(note.t)
    ]
    violations += [
        Violation("wall-clock", f"{op.process} lost its lease on {op.key}: {op.error}", op.t0)
        for op in history.of_kind("section")
        if _worker(op.process) in wall
        and op.outcome == "lost"
        and not shared(op.t0 if op.t1 is None else op.t1)
    ]
    return violations
