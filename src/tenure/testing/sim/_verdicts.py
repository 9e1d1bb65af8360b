"""A simulated run's verdicts: its history checked, and its clients' progress.

The rules (each violation a line naming its rule):

* ``linearizable:<model>``: the model's merged history (the workload's files, the
  holds left open closed: :mod:`tenure.testing.workload._merge`) is linearizable by
  :func:`tenure.testing.lincheck.check`. The mutex model holds fencing tokens to
  strictly increasing order per name, across the server's crashes and restarts, and
  at most one holder; the registers and counters hold every acknowledged write (none
  lost, none applied twice); membership holds each member's join and leave. A search
  past its bound is a violation too (``unknown``: a run must be judged);
* ``claims:exclusive``, ``claims:token``, ``claims:refused``: the claims held to the
  store's promises with time in them (:func:`tenure.testing.workload.check_claims`);
* ``linearizable:watch``: what the watcher saw of a register (each state in order,
  none repeated, none before the write that made it) is explained by a linearization
  of the registers (:func:`tenure.testing.lincheck.check_watches`);
* ``no-progress``: a client with no operation answered (``ok`` or ``fail``) in the
  run's quiet end, once every fault was healed;
* ``hang``: an operation still unanswered at the stop, invoked more than the quiet
  end's length before it (but a killed client's);
* ``client-error``: a client's loop raised what no step expects (a bug of the client,
  or of what the server answered);
* ``unhandled``: a callback or task of the loop raised and nobody handled it (a
  server's or a client's bug);
* ``client-stuck``: a client did not stop within its bound when told to;
* ``stuck``: the simulated loop deadlocked (nothing could ever wake it) or
  livelocked (something re-armed itself for the same instant for ever);
* ``restart``: the server could not start from what a crash left of its data
  directory (the run ends there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tenure.testing import lincheck
from tenure.testing.sim._workload import SimNotes
from tenure.testing.workload import (
    CLAIM,
    MODELS,
    RECORDED,
    check_claims,
    close_holds,
    read_events,
    watch_records,
)

__all__ = ["Verdicts", "judge", "merged_histories", "watched"]

#: Seconds lincheck may search one model's history before its verdict is unknown.
SEARCH_BOUND: Final = 120.0


@dataclass
class Verdicts:
    """A run's violations (empty: it held), each model's operations and explanations."""

    violations: list[str] = field(default_factory=list)
    operations: dict[str, int] = field(default_factory=dict)
    #: A model's witness, where it is not linearizable.
    explanations: dict[str, str] = field(default_factory=dict)


def watched(lin_dir: Path) -> list[lincheck.WatchRecord]:
    """What the watchers saw, as lincheck's watch records."""
    return watch_records(sorted(lin_dir.glob("watch-*.jsonl")))


def merged_histories(lin_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Each model's events, merged and closed, in the order of the models; then the
    claims' (:data:`~tenure.testing.workload.RECORDED`)."""
    return {
        model: close_holds(model, read_events(sorted(lin_dir.glob(f"w*-{model}.jsonl"))))
        for model in RECORDED
    }


def judge(
    histories: dict[str, list[dict[str, Any]]],
    watched: list[lincheck.WatchRecord],
    notes: SimNotes,
    unhandled: list[str],
    quiet: float,
    operating: list[str],
    dead: set[str],
) -> Verdicts:
    """Every rule of the module docstring on one run (``operating``: the labels of the
    clients that operate, not watch, at the end; ``dead``: those of clients killed, whose
    operations in flight stay unanswered)."""
    verdicts = Verdicts()
    results = {
        model: _check_model(verdicts, model, events)
        for model, events in histories.items()
        if model in MODELS
    }
    claims = histories.get(CLAIM)
    if claims is not None:
        verdicts.operations[CLAIM], broken = check_claims(claims)
        verdicts.violations += broken
    registers = results.get("register")
    if watched and registers is not None and registers.ok:
        found = lincheck.check_watches(registers, watched)
        verdicts.operations["watch"] = sum(len(record.seen) for record in watched)
        for problem in (found.violations + found.unknown)[:3]:
            verdicts.violations.append(f"linearizable:watch: {problem}")
    heal = next((note.at for note in notes.of("heal")), None)
    stop = next((note.at for note in notes.of("stop")), None)
    if heal is not None and stop is not None:
        verdicts.violations += _progress(histories, heal, stop, quiet, operating, dead)
    for note in notes.of("client-error"):
        verdicts.violations.append(f"client-error: {note.process}: {note.fields.get('error')}")
    for note in notes.of("stuck"):
        verdicts.violations.append(f"stuck: {note.fields.get('error')}")
    for note in notes.of("restart-failed"):
        verdicts.violations.append(f"restart: {note.fields.get('error')}")
    for note in notes.of("misplaced"):
        verdicts.violations.append(str(note.fields.get("error")))
    for note in notes.of("client-stuck"):
        verdicts.violations.append(f"client-stuck: {note.fields.get('task')}")
    verdicts.violations += [f"unhandled: {error}" for error in unhandled]
    return verdicts


def _check_model(
    verdicts: Verdicts, model: str, events: list[dict[str, Any]]
) -> lincheck.CheckResult | None:
    header = MODELS[model]
    lines = ([header] if header else []) + events
    verdicts.operations[model] = sum(1 for e in events if e["type"] != "invoke")
    rule = f"linearizable:{model}"
    try:
        history = lincheck.from_events(enumerate(lines, start=1), model)
    except lincheck.HistoryError as error:
        verdicts.violations.append(f"{rule}: the history is malformed: {error}")
        return None
    result = lincheck.check(history, model, timeout=SEARCH_BOUND)
    if not result.ok:
        explanation = result.explain()
        verdicts.explanations[model] = explanation
        verdicts.violations.append(f"{rule}: {explanation.splitlines()[0]}")
    return result


def _label(process: str) -> str:
    return process.split("/")[0].split(".")[0]


def _progress(
    histories: dict[str, list[dict[str, Any]]], heal: float, stop: float, quiet: float,
    operating: list[str], dead: set[str],
) -> list[str]:  # fmt: skip
    answered: set[str] = set()
    pending: dict[str, dict[str, Any]] = {}
    for events in histories.values():
        for event in events:
            process = str(event["process"])
            if "/" in process or _label(process) in dead:
                continue  # a loss's own process, an end the merge added, a killed client's
            if event["type"] == "invoke":
                pending[process] = event
                continue
            pending.pop(process, None)
            if event["type"] in ("ok", "fail") and heal <= int(event["time"]) / 1e9 <= stop:
                answered.add(_label(process))
    found = [
        f"no-progress: {label}: no operation answered in the quiet {stop - heal:.1f}s "
        "after the heal"
        for label in operating
        if label not in answered
    ]
    for process, event in sorted(pending.items()):
        invoked = int(event["time"]) / 1e9
        if invoked < stop - quiet:
            found.append(
                f"hang: {process}: {event['f']} {event.get('key')} still unanswered "
                f"{stop - invoked:.1f}s after it was invoked"
            )
    return found
