"""Checking the ``linearizable`` scenario: each model's files merged, closed and checked.

The workers of the scenario record their operations in lincheck's format themselves
(:mod:`tenure.testing.workload`), a file per worker and model. For each model
(:data:`~tenure.testing.workload.MODELS`) the files are

1. **merged** into one history by time and 2. **closed** (the holds and members left
   open given an end never completed), as :mod:`tenure.testing.workload._merge` says (a
   model only a face records, ``semaphore``, is not checked where nothing recorded it);
3. **checked** by :func:`~tools.faults.check_lin.check_events`: the rule
   ``linearizable:<model>``, its numbers, and the merged history written to the
   run's ``lincheck/`` directory with its witness.

The registers' stale reads (on a cluster: reads its standbys answer, each with the
staleness it allows and the session it must not go back before, lincheck's stale
reads) are checked with them, by the same rule; their numbers are ``stale_reads``
(:func:`stale_reads`: how many were answered, and how many by a standby).

And the claims (``w*-claim.jsonl``), held to the store's promises with time in them by
:func:`tenure.testing.workload.check_claims`: ``claims:exclusive``, ``claims:token``,
``claims:refused`` (the suite's clocks do not jump: no jump is allowed for).

And the workload's liveness, from the same files (the suite's own rules have no
operation of these workers to judge):

* ``no-progress``: a client with no operation answered (``ok`` or ``fail``) between
  the heal and ``bound`` after it (or the stop);
* ``hang``: an operation still unanswered at the stop, invoked more than ``bound``
  before it (a watch waits for a change by design, and is left out).

And the watchers (``watch-*.jsonl``, :mod:`tenure.testing.workload._watcher`): each watch (a
process of a watcher, from its first call for a state) is a lincheck watch record,
armed at that call, each state it was given seen when it came;
:func:`tenure.testing.lincheck.check_watches` searches each register again with the
items its watchers saw among its operations (each a read after the watch was armed,
before the item came, after the item before it): ``linearizable:watch`` breaks when
no linearization explains them (in order, none repeated, none before the write that
made it, none older than at arming), or when that search passes its bound. No watch
is taken as watched to the end (``final``): the workers stop while the registers are
still written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tenure.testing import lincheck
from tenure.testing.workload import (
    CLAIM,
    MODELS,
    RECORDED,
    check_claims,
    close_holds,
    read_events,
    through_ydb,
    watch_records,
)
from tools.faults.check_lin import check_events
from tools.faults.check_locks import Violation


def check_workload(
    lin_dir: Path, out_dir: Path | None
) -> tuple[list[Violation], dict[str, dict[str, Any]]]:
    """Every ``linearizable:<model>`` rule of the workload (module docstring), and each
    model's numbers (with the watchers' counts under ``watch``, and under ``ydb`` the
    operations answered through YDB's face, per model, where there were any)."""
    violations: list[Violation] = []
    stats: dict[str, dict[str, Any]] = {}
    ydb: dict[str, int] = {}
    registers: lincheck.CheckResult | None = None
    for model, header in MODELS.items():
        found = close_holds(model, read_events(sorted(lin_dir.glob(f"w*-{model}.jsonl"))))
        broken, stats[model], result = check_events(model, found, out_dir, header)
        ydb[model] = sum(
            1 for e in found if e["type"] in ("ok", "fail") and through_ydb(e["process"])
        )
        violations += broken
        if model == "register":
            registers = result
            stale = stale_reads(found)
            if stale["reads"]:
                stats["stale_reads"] = stale
    if any(ydb.values()):
        stats["ydb"] = {"operations": sum(ydb.values()), **{m: n for m, n in ydb.items() if n}}
    claims = read_events(sorted(lin_dir.glob(f"w*-{CLAIM}.jsonl")))
    answered, problems = check_claims(claims)  # (each "claims:<rule>: what broke")
    stats[CLAIM] = {"operations": answered, "verdict": "violated" if problems else "ok"}
    for problem in problems:
        rule, message = problem.split(": ", 1)
        violations.append(Violation(rule, message, 0.0))
    records = watch_records(sorted(lin_dir.glob("watch-*.jsonl")))
    watched, stats["watch"] = check_watchers(records, registers)
    return violations + watched, stats


def stale_reads(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The stale reads among a model's ``events``: how many were answered (``reads``),
    how many of those by a standby (``standbys``; the rest by the leader, no standby
    able to), and the most staleness any allowed (``max_staleness``)."""
    answers = [e.get("answered_by") for e in events if e["type"] == "ok" and "answered_by" in e]
    allowed = [e["max_staleness"] for e in events if e.get("max_staleness") is not None]
    return {
        "reads": len(answers),
        "standbys": sum(1 for door in answers if door not in ("leader", "unknown")),
        "max_staleness": max(allowed, default=None),
    }


def check_watchers(
    records: list[lincheck.WatchRecord], registers: lincheck.CheckResult | None
) -> tuple[list[Violation], dict[str, Any]]:
    """The ``linearizable:watch`` rule (module docstring), and its numbers. Unjudged
    (said so) when the registers have no linearization to hold the watchers to."""
    seen = sum(len(record.seen) for record in records)
    numbers: dict[str, Any] = {"watchers": len(records), "states_seen": seen}
    if registers is None or not registers.ok:
        numbers["verdict"] = "not judged (the registers are not linearizable)"
        return [], numbers
    found = lincheck.check_watches(registers, records)
    certain = found.violations + found.unknown
    numbers["verdict"] = "violated" if found.violations else "unknown" if found.unknown else "ok"
    if not certain:
        return [], numbers
    numbers["violations"] = certain[:10]
    shown = "; ".join(certain[:3])
    more = f" (and {len(certain) - 3} more)" if len(certain) > 3 else ""
    return [Violation("linearizable:watch", f"{shown}{more}", 0.0)], numbers


def _label(process: str) -> str:
    """The client of a process id (``w0c1.3`` and ``w0c1/lost-m0-7``: ``w0c1``)."""
    return process.split("/")[0].split(".")[0]


def check_progress(
    lin_dir: Path, heal: float, stop: float, bound: float, clients: list[str]
) -> tuple[list[Violation], dict[str, int]]:
    """The ``no-progress`` and ``hang`` rules (module docstring) for ``clients`` (their
    labels); times in seconds of the suite's clock. Also how many operations each
    model's clients had answered."""
    answered: dict[str, list[float]] = {}
    pending: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for model in RECORDED:
        events = read_events(sorted(lin_dir.glob(f"w*-{model}.jsonl")))
        counts[model] = sum(1 for e in events if e["type"] in ("ok", "fail"))
        for event in events:
            process = str(event["process"])
            if "/" in process:
                continue  # a loss's own process: not a request of the client
            if event["type"] == "invoke":
                pending[process] = event
                continue
            pending.pop(process, None)
            if event["type"] in ("ok", "fail"):
                answered.setdefault(_label(process), []).append(int(event["time"]) / 1e9)
    violations = []
    end = min(stop, heal + bound)
    for client in sorted(clients):
        if not any(heal <= t <= end for t in answered.get(client, [])):
            violations.append(
                Violation(
                    "no-progress",
                    f"{client}: no operation answered within {end - heal:.1f}s of the heal "
                    f"phase (bound {bound:g}s)",
                    heal,
                )
            )
    for process, event in sorted(pending.items()):
        invoked = int(event["time"]) / 1e9
        if invoked < stop - bound:
            violations.append(
                Violation(
                    "hang",
                    f"{process}: {event['f']} {event.get('key')} was still waiting "
                    f"{stop - invoked:.1f}s after it was invoked (bound {bound:g}s)",
                    invoked,
                )
            )
    return violations, counts
