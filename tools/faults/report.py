"""docs/reliability.md: the long run's results, written by ``scripts/faults``.

The page is generated from the results of each (target, scenario) run
(:class:`Result`, also saved as JSON next to the page) and the hand-kept findings
(``tools/faults/findings.md``), so what it claims is what the runs found. A run
replaces the earlier result of the same target and scenario and keeps the others
(each result says when and at which commit it ran): ``scripts/faults --target
etcd`` leaves tenure's results on the page.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Final

from tools.faults.check_tenant import STALL
from tools.faults.report_texts import (
    CLUSTER_NOTES,
    DATABASE_NOTES,
    ETCD_NOTES,
    LINEARIZABLE_NOTES,
    MUTANTS,
    RULES,
    TARGETS,
    TENANT_NOTES,
)
from tools.faults.scenarios import LINEARIZABLE, SCENARIOS, liveness_bound

FINDINGS: Final = Path(__file__).with_name("findings.md")
#: The power scenario's own section (its layer, its runs per --fsync mode): kept by
#: hand beside the shim, since its batch and off runs are not long-mode results.
POWER: Final = Path(__file__).with_name("power.md")
#: The soak's section, written by ``scripts/faults --soak`` (tools/faults/soak_report.py).
SOAK: Final = Path(__file__).with_name("soak.md")


def _table(header: tuple[str, ...], rows: tuple[tuple[str, ...], ...]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows] + [""]


@dataclass
class Result:
    """One (target, scenario) long run."""

    scenario: str
    minutes: float
    workers: int
    clients: int
    stats: dict[str, Any]
    violations: list[str]
    violation_count: int
    target: str = "tenure"
    #: The liveness bound the run used (None: tenure's, from the scenario).
    liveness_bound: float | None = None
    #: When the run was made (UTC) and the commit of the code that ran.
    generated: str | None = None
    commit: str | None = None

    @property
    def bound(self) -> float:
        """The liveness bound of the run."""
        if self.liveness_bound is not None:
            return self.liveness_bound
        return liveness_bound(SCENARIOS[self.scenario])


def commit_of_checkout() -> str:
    """The short hash of the checkout's HEAD (``unknown`` outside git)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=30
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def _checked(stats: dict[str, Any]) -> int:
    ops: dict[str, int] = stats["operations"]
    own = sum(n for name, n in ops.items() if not name.startswith("read:"))
    models: dict[str, dict[str, Any]] = stats.get("linearizability") or {}
    if "answered" in stats:  # the linearizable scenario: its operations are lincheck's
        return sum(int(m.get("checked_operations", 0)) for m in models.values())
    return own + int(stats["register_reads"])


def _linearizability(stats: dict[str, Any]) -> str:
    """Per model, the operations and keys lincheck checked ("-": a result saved before)."""
    models: dict[str, dict[str, Any]] = stats.get("linearizability") or {}
    shown = [
        f"{model} {m.get('checked_operations', 0)} / {m.get('keys', 0)}"
        + ("" if m.get("verdict") == "linearizable" else f" ({m.get('verdict')})")
        for model, m in models.items()
        if "checked_operations" in m
    ]
    return ", ".join(shown) or "-"


def _linearizability_lines(stats: dict[str, Any]) -> list[str]:
    """A scenario section's line on lincheck's verdicts (none for a result saved before)."""
    models: dict[str, dict[str, Any]] = stats.get("linearizability") or {}
    if not models:
        return []
    told = "; ".join(
        f"{model}: {m.get('verdict')}, {m.get('checked_operations', 0)} operations on "
        f"{m.get('keys', 0)} keys in {m.get('seconds', 0)} s"
        for model, m in models.items()
        if "checked_operations" in m
    )
    return [f"* linearizability (lincheck, the whole history of each model): {told}"]


def _lock_lines(s: dict[str, Any]) -> list[str]:
    """A scenario section's lines on the suite's own workload (mutexes and registers)."""
    ops = ", ".join(f"{name} {n}" for name, n in s["operations"].items())
    return [
        f"* operations (kind:outcome): {ops}",
        f"* critical sections {s['sections']}; stale writes refused by the fenced "
        f"resource {s['stale_writes_refused']}; sessions lost and replaced "
        f"{s['sessions_lost']}",
        f"* FIFO: {s['fifo_snapshots']} queue snapshots, {s['fifo_pairs']} waiter pairs "
        f"compared, {s['fifo_skipped']} waiters not matched to one acquire",
        f"* register reads checked {s['register_reads']}; server restarts {s['restarts']}",
    ]


def _workload_lines(s: dict[str, Any]) -> list[str]:
    """A linearizable scenario's lines on its workload: the answers each model had (and
    those through YDB's face), and what the watchers saw."""
    answered: dict[str, int] = s.get("answered") or {}
    watch: dict[str, Any] = (s.get("linearizability") or {}).get("watch") or {}
    ydb: dict[str, int] = (s.get("linearizability") or {}).get("ydb") or {}
    through = {model: n for model, n in ydb.items() if model != "operations"}
    return [
        f"* operations answered (ok or fail), per model: {_counts(answered)}; server "
        f"restarts {s['restarts']}",
        *(
            [f"* of which through YDB's face, with YDB's SDK: {_counts(through)}"]
            if through
            else []
        ),
        f"* watches: {watch.get('watchers', 0)} watches saw {watch.get('states_seen', 0)} "
        f"states; lincheck's watch check: {watch.get('verdict', '-')}",
    ]


def _faults(stats: dict[str, Any]) -> str:
    faults: dict[str, int] = stats["faults"]
    return ", ".join(f"{name} {count}" for name, count in faults.items()) or "none"


def _stall(stats: dict[str, Any]) -> str:
    return str(stats["longest_stall_after_restart"]) if stats["restarts"] else "no restart"


def _seconds(measure: dict[str, float]) -> tuple[str, str, str]:
    """p50, p99 and max, as shown ("-" where not measured: results saved before p99)."""

    def shown(quantile: str) -> str:
        return f"{measure[quantile]:g}" if quantile in measure else "-"

    return shown("p50"), shown("p99"), shown("max")


def _failover_lines(stats: dict[str, Any]) -> list[str]:
    """A scenario section's lines on its failovers (none on a target without)."""
    measures: dict[str, dict[str, Any]] = stats.get("failover", {})
    lines = []
    for fault, m in measures.items():
        (f50, f99, fmax), (e50, e99, emax) = _seconds(m["failover"]), _seconds(m["election"])
        unmeasured = ""
        if m["unmeasured"]:
            unmeasured = f", {m['unmeasured']} with no grant before the next fault"
        f99, e99 = (f"p99 {q} s, " if q != "-" else "" for q in (f99, e99))
        lines.append(
            f"* failover after {fault} ({m['count']}{unmeasured}): p50 {f50} s, {f99}max "
            f"{fmax} s; election p50 {e50} s, {e99}max {emax} s"
        )
    return lines


def _failover_table(results: list[Result]) -> list[str]:
    """The failover times of every result that has them, one row per kind of fault."""
    rows = tuple(
        (r.target, r.scenario, fault, str(m["count"]), *_seconds(m["failover"]),
         *_seconds(m["election"]))
        for r in results
        for fault, m in r.stats.get("failover", {}).items()
    )  # fmt: skip
    if not rows:
        return []
    header = (
        "target", "scenario", "leader deposed by", "failovers", "failover p50 (s)",
        "failover p99 (s)", "failover max (s)", "election p50 (s)", "election p99 (s)",
        "election max (s)",
    )  # fmt: skip
    return ["", "### Failover times", "", *_table(header, rows)[:-1]]


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts.items()) or "none"


def _kept(kept: bool | None) -> str:
    return "not run" if kept is None else ("yes" if kept else "no")


def _tenant_lines(stats: dict[str, Any]) -> list[str]:
    """A scenario section's lines on the hostile tenant (none for other scenarios)."""
    tenant: dict[str, Any] | None = stats.get("tenant")
    if tenant is None:
        return []
    latency = tenant["latency_ms"]
    quiet, hostile, samples = latency["quiet"], latency["hostile"], latency["samples"]
    served = tenant.get("quota_metrics")
    stalls: dict[str, Any] = tenant.get("stalls") or {}
    metrics = "not served by this server" if served is None else _counts(served)
    abuses = "; ".join(
        f"{name}: {got['done']} answered, refused {_counts(got['refused'])}"
        + (f", failed {_counts(got['failed'])}" if got["failed"] else "")
        for name, got in tenant["abuses"].items()
    )
    return [
        f"* honest probes without the tenant: p50 {quiet['p50']} ms, p99 {quiet['p99']} ms, "
        f"max {quiet['max']} ms ({samples['quiet']} probes); with it: p50 {hostile['p50']} "
        f"ms, p99 {hostile['p99']} ms, max {hostile['max']} ms ({samples['hostile']} "
        f"probes); bound {latency.get('bound_ms', '-')} ms",
        f"* honest probes over {STALL * 1000:g} ms: {stalls.get('quiet', '-')} without the "
        f"tenant, {stalls.get('hostile', '-')} with it; the bystander kept its lock: "
        f"{_kept(tenant.get('bystander_kept'))}",
        f"* server RSS: {tenant.get('rss_before_mib', '-')} MiB before the first hostile "
        f"phase, peak {tenant.get('rss_peak_mib', '-')} MiB; "
        f"{tenant['hostile_phases']} hostile phases",
        f"* refusals by quota or limit (the tenant's LimitExceededError): "
        f"{_counts(tenant['refusals'])}; the server's tenure_quota_refusals_total: {metrics}",
        f"* abuses: {abuses}",
    ]


def _order(result: Result) -> tuple[int, str, int, str]:
    targets, names = list(TARGETS), list(SCENARIOS)
    target = targets.index(result.target) if result.target in targets else len(targets)
    name = names.index(result.scenario) if result.scenario in names else len(names)
    return (target, result.target, name, result.scenario)


def _intro(results: list[Result]) -> list[str]:
    stamps = sorted(
        {(r.target, r.generated or "?", r.commit or "?") for r in results},
        key=lambda stamp: (list(TARGETS).index(stamp[0]) if stamp[0] in TARGETS else 99, stamp),
    )
    runs = "; ".join(f"`{t}` on {when} at commit `{commit}`" for t, when, commit in stamps)
    return [
        "# Reliability: the fault suite's long run",
        "",
        f"Generated by `scripts/faults` ({runs}), on the project's machine (2 cores, "
        "shared). The suite's framework is `tools/faults/` (`tools/faults/__init__.py` "
        "describes it), the tests that run it `tests/faults/`; plain `pytest` runs the "
        "same scenarios for a few dozen seconds each (short mode), this page comes from "
        "the long mode. Each run: worker processes take 3 mutexes through the target's "
        "URL, write to a fenced resource with their token inside `async with lock:`, and "
        "update their own register (a semaphore's data); an observer records the "
        "backend's queues and reads the registers back; a nemesis injects faults; a heal "
        "phase with no fault ends it. Every rule below is checked on the whole history. "
        "The targets:",
        "",
        *[f"* `{name}`: {what}." for name, what in TARGETS.items()],
        "",
    ]


def render(results: list[Result], generated: str, commit: str | None = None) -> str:
    """The whole page; results without a stamp get ``generated`` and ``commit``.

    ``commit``: of the code that ran (default: the checkout's HEAD).
    """
    ran = commit or commit_of_checkout()
    for r in results:
        r.generated = r.generated or generated
        r.commit = r.commit or ran
    results = sorted(results, key=_order)
    lines = [
        *_intro(results),
        "## Results",
        "",
        "| target | scenario | minutes | clients | faults injected | operations checked | "
        "linearizability checked (operations / keys) | "
        "longest stall after a restart (s) | longest time without a grant (s) | violations |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        s = r.stats
        verdict = "0" if not r.violation_count else f"**{r.violation_count}**"
        lines.append(
            f"| {r.target} | {r.scenario} | {r.minutes:g} | {r.workers * r.clients} | "
            f"{_faults(s)} | {_checked(s)} | {_linearizability(s)} | {_stall(s)} | "
            f"{s['longest_gap']} | {verdict} |"
        )
    if any(r.target == "etcd" for r in results):
        lines += ["", ETCD_NOTES]
    if any(r.target in ("redis", "postgres") for r in results):
        lines += ["", DATABASE_NOTES]
    if any(r.target == "tenure-cluster" for r in results):
        lines += ["", CLUSTER_NOTES]
    if any(r.scenario == "tenant" for r in results):
        lines += ["", TENANT_NOTES]
    if any(SCENARIOS[r.scenario].workload == LINEARIZABLE for r in results):
        lines += ["", LINEARIZABLE_NOTES]
    lines += _failover_table(results)
    lines += ["", "## Scenarios", ""]
    for r in results:
        scenario = SCENARIOS[r.scenario]
        s = r.stats
        idle = (
            f"server idle timeout {scenario.idle_timeout:g} s, "
            if r.target in ("tenure", "tenure-cluster")
            else ""
        )
        lines += [
            f"### {r.scenario} ({r.target})",
            "",
            f"Faults: {scenario.summary}. Recovery window {scenario.window:g} s, {idle}"
            f"liveness bound {r.bound:g} s. Ran {r.minutes:g} min on {r.generated} at "
            f"commit `{r.commit}`.",
            "",
            f"* injected: {_faults(s)}",
            *(_workload_lines(s) if scenario.workload == LINEARIZABLE else _lock_lines(s)),
            *_linearizability_lines(s),
            *_failover_lines(s),
            *_tenant_lines(s),
            f"* violations: {r.violation_count}",
        ]
        lines += [f"  * `{line}`" for line in r.violations]
        lines.append("")
    if POWER.exists():
        lines += ["## Power loss", "", POWER.read_text().strip(), ""]
    if SOAK.exists():
        lines += ["## Soak", "", SOAK.read_text().strip(), ""]
    rules = tuple((f"`{name}`", what) for name, what in RULES)
    lines += ["## The rules", "", *_table(("rule", "what must hold"), rules)]
    lines += ["## The mutants", ""]
    lines += _table(("mutant (one planted bug)", "how it is planted", "caught by"), MUTANTS)
    if FINDINGS.exists():
        lines += ["## Findings", "", FINDINGS.read_text().strip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def load(path: Path) -> list[Result]:
    """The results saved next to the page at ``path`` (none if there is no JSON yet)."""
    raw = path.with_suffix(".json")
    if not raw.exists():
        return []
    known = {field.name for field in fields(Result)}
    return [
        Result(**{k: v for k, v in item.items() if k in known})
        for item in json.loads(raw.read_text())
    ]


def merge(old: list[Result], new: list[Result]) -> list[Result]:
    """``old`` with each (target, scenario) that ``new`` ran replaced by its new result."""
    ran = {(r.target, r.scenario) for r in new}
    return sorted([r for r in old if (r.target, r.scenario) not in ran] + new, key=_order)


def write(results: list[Result], path: Path, generated: str, commit: str | None = None) -> None:
    """Merge ``results`` into the page at ``path`` and its JSON (see the module docstring)."""
    ran = commit or commit_of_checkout()
    for r in results:
        r.generated = r.generated or generated
        r.commit = r.commit or ran
    merged = merge(load(path), results)
    path.write_text(render(merged, generated, ran))
    raw = [asdict(result) for result in merged]
    path.with_suffix(".json").write_text(json.dumps(raw, indent=1, sort_keys=True) + "\n")
