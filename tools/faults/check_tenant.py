"""Checker rules of the hostile-tenant scenario (issue 37: no client can hurt another).

They apply to a run whose ``params`` note says ``tokens`` (the ``tenant`` scenario:
:mod:`tools.faults.tenant`); the honest clients are the workers' (``w<i>c<n>``).
That scenario injects no fault but the tenant itself, so anything that goes wrong
for an honest client is the tenant's doing:

* ``honest-session-lost``: an honest client lost a session (it expired, or was ended).
* ``honest-lock-lost``: an honest critical section ended other than ``released``
  (its lease lost, or its release failed), or the bystander (one more honest client,
  holding one lock from before the first hostile phase to the end with a 3 s
  recovery window: :mod:`tools.faults.tenant`) lost its lock or never got it.
* ``honest-refused``: an honest operation (opening a session, an acquire, creating
  or updating its register, a probe) failed or ended unknown, other than by the
  worker's own stop.
* ``honest-latency``: the 99th percentile of the honest clients' probes (a read of
  their register's description: one round trip, no disk) during the hostile phases
  is more than :data:`RATIO` times that of the quiet phases of the same run, the
  quiet one taken as at least :data:`FLOOR`; or either kind of phase has fewer than
  :data:`MIN_SAMPLES` probes (too few to judge is a failure, not a pass).
  Judged on runs of at least :data:`JUDGED_FROM` seconds of faults (long mode,
  ``scripts/faults``): a short run's percentiles (two hostile phases, CI's test run
  beside three other workers on two cores) measure the machine, not the server (below);
  there the numbers are kept (``stats``) and ``honest-stall`` judges.
* ``honest-stall``: an honest probe during a hostile phase took more than
  :data:`STALL` (issue 47: a bystander answers under 0.5 s throughout), while no
  probe of a quiet phase of the run did. The quiet phases are the control: a machine
  that stalls the honest clients' processes (or the server's) for half a second does
  so whoever else is connected, and over a run of alternating phases it shows in the
  quiet ones too; then a slow hostile probe is not blamed on the tenant (the numbers
  still show it). What it catches does not hide among percentiles: one request of
  the tenant's that holds the server's loop for a second (issue 47: a scan per
  firing of thousands of detached prefix watches, a listing of every limiter of a
  node, a dashboard view of 60,000 members) stalls every honest probe then.

Why this comparison holds on a shared, noisy two-core machine: both percentiles
come from one run, whose quiet and hostile phases alternate every few seconds, so a
machine that gets busier or quieter weighs on both alike; each has hundreds of
samples or more (a p99 of fewer is one unlucky sample); and the quiet percentile is
taken as at least :data:`FLOOR`, a few of the kernel's scheduling periods: below it a
ratio measures the machine's scheduler, not the server. On two cores shared with other
jobs (a load of 4 and more), every extra runnable process (the tenant's, the server
busy with it) delays the honest clients' processes by whole time slices: runs there
measured quiet p99s of 2-16 ms and hostile ones of 15-50 ms with the same code, while
what the rule exists to catch, the server's loop stalled by one request (issue 37: a
scoped ListNodes scanning 10,000 nodes per page), takes seconds and expires the
honest sessions (2 s windows). The tenant's own process runs niced
(:mod:`tools.faults.hostile`). Why only long runs are judged by percentiles: the short
run of CI's test command shares two cores with three other test workers, whose load
comes and goes over seconds, not over the phases; there a quiet p99 of 37 ms and a
hostile one of 169 ms (no probe over 0.5 s, the bystander's lock kept) came from the
code whose 3-minute run, alone, had 40 ms hostile; and a control beside the probes (an
echo server's round trips) did not follow the server's own starvation (a process that
computes loses time slices that a mostly idle one gets back at once). The project
measures speed outside its tests (bench/); a stall the tenant causes is seconds long
(above), and ``honest-stall`` judges it in every run.

Also counted (not judged): each abuse's answers, the refusals by quota (from the
tenant's ``LimitExceededError``\\ s, and from the server's
``tenure_quota_refusals_total`` where it has it), the server's resident memory
before the first hostile phase and its peak.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Final

from tools.faults.check_locks import Violation
from tools.faults.history import History, Op

#: The most the hostile phases' p99 may be, in quiet p99s (the issue's "within 2x").
RATIO: Final = 2.0
#: The least the quiet p99 is taken to be, in seconds (module docstring).
FLOOR: Final = 0.05
#: The longest an honest probe may take in a hostile phase (the ``honest-stall`` rule),
#: in seconds.
STALL: Final = 0.5
#: Probes each kind of phase needs at least for a p99 to be judged.
MIN_SAMPLES: Final = 200
#: The least seconds of faults (the run's ``params``) for ``honest-latency`` to judge
#: (module docstring): long mode's runs are minutes, short mode's 18 s.
JUDGED_FROM: Final = 60.0
#: Kinds of honest operations that must not fail.
HONEST_KINDS: Final = frozenset({"session-open", "acquire", "create", "update", "probe"})
#: Errors an operation ends with when its worker stops (not the tenant's doing).
STOPPED: Final = frozenset({"stopped", "cancelled"})
_HONEST: Final = re.compile(r"^w\d+c\d+$")


def tenant_run(history: History) -> bool:
    """Whether ``history`` is a hostile-tenant run (its ``params`` say ``tokens``)."""
    return any(note.fields.get("tokens") for note in history.notes_of("params"))


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (0 for no value)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def _phases(history: History) -> dict[str, list[tuple[float, float]]]:
    phases: dict[str, list[tuple[float, float]]] = {"quiet": [], "hostile": []}
    for note in history.notes_of("phase"):
        phases.setdefault(str(note.fields["phase"]), []).append(
            (float(note.fields["start"]), float(note.fields["end"]))
        )
    return phases


def _latencies(probes: list[Op], spans: list[tuple[float, float]]) -> list[float]:
    return [
        op.t1 - op.t0
        for op in probes
        if op.t1 is not None and any(start <= op.t0 < end for start, end in spans)
    ]


def check_latency(history: History) -> tuple[list[Violation], dict[str, Any]]:
    """The ``honest-latency`` rule, and the percentiles (in ms) it compared."""
    probes = [
        op for op in history.of_kind("probe") if _HONEST.match(op.process) and op.outcome == "ok"
    ]
    phases = _phases(history)
    quiet = _latencies(probes, phases["quiet"])
    hostile = _latencies(probes, phases["hostile"])
    stats: dict[str, Any] = {"samples": {"quiet": len(quiet), "hostile": len(hostile)}}
    for name, values in (("quiet", quiet), ("hostile", hostile)):
        stats[name] = {f"p{p}": round(percentile(values, p / 100) * 1000, 2) for p in (50, 99)} | {
            "max": round(max(values, default=0.0) * 1000, 2)
        }
    seconds = [note.fields.get("seconds") for note in history.notes_of("params")]
    short = [float(s) for s in seconds if isinstance(s, int | float) and s < JUDGED_FROM]
    if short:
        stats["judged"] = f"no: {short[0]:g} s of faults, under {JUDGED_FROM:g} (long mode judges)"
        return [], stats
    if min(len(quiet), len(hostile)) < MIN_SAMPLES:
        message = (
            f"too few probes to judge: {len(quiet)} quiet, {len(hostile)} hostile "
            f"(at least {MIN_SAMPLES} each)"
        )
        return [Violation("honest-latency", message, 0.0)], stats
    quiet_p99, hostile_p99 = percentile(quiet, 0.99), percentile(hostile, 0.99)
    bound = RATIO * max(quiet_p99, FLOOR)
    stats["bound_ms"] = round(bound * 1000, 2)
    if hostile_p99 <= bound:
        return [], stats
    message = (
        f"the honest clients' p99 was {hostile_p99 * 1000:.1f} ms with the hostile tenant, "
        f"{quiet_p99 * 1000:.1f} ms without (bound {bound * 1000:.1f} ms: {RATIO:g} x "
        f"max(quiet p99, {FLOOR * 1000:g} ms))"
    )
    start = min((s for s, _ in phases["hostile"]), default=0.0)
    return [Violation("honest-latency", message, start)], stats


def check_stall(history: History) -> tuple[list[Violation], dict[str, Any]]:
    """The ``honest-stall`` rule, and the probes over :data:`STALL` it counted."""
    probes = [
        op for op in history.of_kind("probe") if _HONEST.match(op.process) and op.outcome == "ok"
    ]
    phases = _phases(history)
    slow = {
        name: [
            op
            for op in probes
            if op.t1 is not None
            and op.t1 - op.t0 > STALL
            and any(start <= op.t0 < end for start, end in phases[name])
        ]
        for name in ("quiet", "hostile")
    }
    stats: dict[str, Any] = {"over_ms": STALL * 1000} | {
        name: len(found) for name, found in slow.items()
    }
    if not slow["hostile"] or slow["quiet"]:
        return [], stats
    worst = max(slow["hostile"], key=lambda op: (op.t1 or op.t0) - op.t0)
    took = ((worst.t1 or worst.t0) - worst.t0) * 1000
    message = (
        f"{len(slow['hostile'])} honest probes took more than {STALL * 1000:g} ms with the "
        f"hostile tenant, none without; the longest {took:.1f} ms ({worst.process})"
    )
    return [Violation("honest-stall", message, worst.t0)], stats


def _bystander(history: History) -> list[Violation]:
    """``honest-lock-lost`` of the bystander (its ``bystander`` note says ``kept``)."""
    return [
        Violation(
            "honest-lock-lost",
            f"the bystander did not keep its lock: {note.fields.get('error')}",
            note.t,
        )
        for note in history.notes_of("bystander")
        if not note.fields.get("kept")
    ]


def check_honest(history: History) -> list[Violation]:
    """The ``honest-session-lost``, ``honest-lock-lost`` and ``honest-refused`` rules."""
    violations = [
        Violation("honest-session-lost", f"{note.process} lost its session: {note.fields}", note.t)
        for note in history.notes_of("session-lost")
        if _HONEST.match(note.process)
    ]
    for op in history.ops:
        if not _HONEST.match(op.process):
            continue
        if op.kind == "section" and op.outcome not in (None, "released", "info"):
            violations.append(
                Violation(
                    "honest-lock-lost",
                    f"{op.process}: its hold of {op.key} (token {op.token}) ended "
                    f"{op.outcome}: {op.error}",
                    op.t1 or op.t0,
                )
            )
        failed = op.outcome == "fail" or (op.outcome == "info" and op.error not in STOPPED)
        if op.kind in HONEST_KINDS and failed:
            violations.append(
                Violation(
                    "honest-refused",
                    f"{op.process}: {op.kind} {op.key or ''} ended {op.outcome}: {op.error}",
                    op.t0,
                )
            )
    return violations


def tenant_stats(history: History) -> dict[str, Any]:
    """What the tenant got, by abuse; refusals by quota; the server's memory."""
    abuses: dict[str, dict[str, Any]] = {}
    refusals: Counter[str] = Counter()
    for note in history.notes_of("abuse"):
        entry = abuses.setdefault(
            str(note.fields["abuse"]), {"done": 0, "refused": Counter(), "failed": Counter()}
        )
        entry["done"] += int(note.fields["done"])
        entry["refused"].update(note.fields["refused"])
        entry["failed"].update(note.fields["failed"])
        refusals.update(note.fields["refused"])
    hostile = [n for n in history.notes_of("phase") if n.fields["phase"] == "hostile"]
    stats: dict[str, Any] = {
        "hostile_phases": len(hostile),
        "abuses": {
            name: {k: dict(sorted(v.items())) if isinstance(v, Counter) else v
                   for k, v in entry.items()}
            for name, entry in abuses.items()
        },
        "refusals": dict(sorted(refusals.items())),
    }  # fmt: skip
    for note in history.notes_of("server-memory")[-1:]:
        stats["rss_peak_mib"] = round(int(note.fields["peak_kib"]) / 1024, 1)
        stats["rss_before_mib"] = round(int(note.fields["before_kib"]) / 1024, 1)
    for note in history.notes_of("quota-metrics")[-1:]:
        stats["quota_metrics"] = note.fields.get("refusals") if note.fields.get("served") else None
    return stats


def check_tenant(history: History) -> tuple[list[Violation], dict[str, Any] | None]:
    """Every rule of the module over a tenant run, and its numbers (None: not one)."""
    if not tenant_run(history):
        return [], None
    latency, measured = check_latency(history)
    stall, stalled = check_stall(history)
    stats = tenant_stats(history)
    stats["latency_ms"] = measured
    stats["stalls"] = stalled
    kept = [bool(note.fields.get("kept")) for note in history.notes_of("bystander")]
    stats["bystander_kept"] = kept[-1] if kept else None
    return check_honest(history) + _bystander(history) + latency + stall, stats
