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

from tools.faults.check_tenant import FLOOR, MIN_SAMPLES, RATIO, STALL
from tools.faults.scenarios import SCENARIOS, liveness_bound

#: The targets, in the page's order, and what each is.
TARGETS: Final = {
    "tenure": "`tenure://`: one `tenure serve` process (fsync always), restarted on its data "
    "directory after a crash",
    "tenure-cluster": "`tenure://` with three doors: three `tenure serve --cluster` servers "
    "(lease TTL 2 s, idle timeout 5 s) over a three-member etcd cluster on loopback (as "
    "`etcd`'s), each server reaching etcd through fault proxies of its own; every client "
    "given all three servers, each worker starting on a different one",
    "etcd": "`etcd://`: a three-member etcd cluster on loopback (Debian's etcd-server, "
    "Raft heartbeat 50 ms, election timeout 500 ms), every client given all three "
    "members, each worker starting on a different one",
    "redis": "`redis://`: one `redis-server` (appendonly, appendfsync always), restarted on "
    "its append-only file after a crash",
    "postgres": "`postgres://`: one PostgreSQL 15 (fsync and synchronous_commit on), "
    "restarted on its data directory (crash recovery from the WAL) after a crash",
}

#: What differs on etcd, said once under the results.
ETCD_NOTES: Final = (
    'On `etcd` "the server" is the whole cluster. `crash` is not run there: '
    "`cluster-crash` kills the whole cluster too (at once, and for longer than the "
    "window), among its member faults. `disk` is not run either: etcd keeps three data "
    "directories, and a Go binary ignores the `LD_PRELOAD` fsync shim. A proxied "
    "worker has a proxy per member (a fault cuts it off from all three), and "
    "`partition-member` cuts one member off from the workers using it. etcd has no "
    "idle timeout: a paused holder is stopped for the window + 1-3 s, enough for its "
    "lease (TTL = the window rounded up, at least 2 s) to run out, and the liveness "
    "bound leaves the idle timeout out but adds what etcd may take beyond `tenure "
    "serve`: an election (2 s), one more lease TTL (a leader change or a restart "
    "renews every lease to its full TTL) and a call in flight when the leader died "
    "(the client's 5 s request timeout). The safety rules are the same for both "
    "targets."
)

#: What differs on Redis and PostgreSQL, said once under the results.
DATABASE_NOTES: Final = (
    "On `redis` and `postgres` the server is one process, killed with `kill -9` and "
    "restarted on its data. `disk` is not run there (their data directories are made by "
    "the test helpers, and what a full disk or a failing fsync does to them is their "
    "own business). A session there is kept by heartbeats, not by its connections: a "
    "paused holder is stopped for the window + 1-3 s, and its session runs out on the "
    "server's clock (PostgreSQL also closes a connection idle for 10 s, "
    "`idle_session_timeout` as the harness sizes it, which only frees the slot). The "
    "liveness bound adds 5 s for a restart's recovery. The safety rules are the same "
    "for every target."
)

#: What differs on a cluster of tenure servers, said once under the results.
CLUSTER_NOTES: Final = (
    'On `tenure-cluster` "the server" is the whole service, its etcd included. `crash` '
    "is not run there (`failover` kills everything at once, and for longer than the "
    "window, among its faults), nor `disk` (the log lives in etcd). A proxied worker has "
    "a proxy per server. The window of `failover` is 8 s: a failover (the dead leader's "
    "lease of 2 s running out, a standby taking over, the clients finding it) must fit in "
    "it with room for the clients' pings and backoff, since a session survives a "
    "failover only if its client re-attaches within its window. The liveness bound adds "
    "what a cluster may take beyond one `tenure serve`: the lease TTL, an etcd election "
    "(2 s), a server's etcd call in flight when etcd's leader died (5 s), a client's "
    "backoff (2 s) and one more window (a new leader starts every session's window "
    "afresh). The **failover time** is measured from the fault that deposed the leader "
    "(killed, cut off from etcd, stopped) to the first grant any client saw after the "
    "successor began to lead; the **election time** to that beginning (the successor's "
    "log). A kill of the leader while a worker is stopped in a body is measured as "
    "`sigstop-holder`'s, not `kill-9-leader`'s: when the stopped worker's clients hold "
    "every key the others wait for, the first grant comes once the successor ends their "
    "sessions, a window after it took over."
)

#: What the hostile-tenant scenario measures, said once under the results.
TENANT_NOTES: Final = (
    "The `tenant` scenario injects no fault but a hostile tenant (tools/faults/abuses.py, "
    "tools/faults/tokens.py): the honest clients use a token of their own limited to their "
    "node, with a 2 s recovery window, and each reads its register's description every "
    "50 ms (a probe: one round trip, no disk); the tenant's tokens are a read-write one "
    "limited to its own `jobs-*` nodes, another for its flood of requests (a rate of its "
    "own) and a read-only one of the honest node, with small quotas, and those of issue 47's "
    "abuses (tools/faults/abuses_surfaces.py: detached prefix watches, claims, deep YDB "
    "rate-limiter resources listed, 300-link deadlock cycles of 1 KB names, the dashboard's "
    "view of 60 groups of 1,000 members), each a bucket of its own. A bystander holds one "
    "honest lock all along with a 3 s recovery window. Quiet phases (3 s) "
    "and hostile ones (5 s of issue 37's abuses at once, or of issue 47's, in turn; then undone) "
    "alternate, and the honest p99 of each kind of phase is compared within the run: a "
    "machine that gets busier weighs on both alike. The tenant runs in a process of its "
    "own at nice 10 (its client-side work is not the server's doing), and the quiet p99 is "
    f"taken as at least {FLOOR * 1000:g} ms (below that a ratio measures the scheduler of a "
    "shared two-core machine; tools/faults/check_tenant.py says why); and no honest probe "
    f"of a hostile phase may take more than {STALL * 1000:g} ms unless one of a quiet phase "
    "did (the machine's stall, not the tenant's). The RSS peak is the kernel's "
    "VmHWM of the server at the end (the large state of 10,000 nodes and 20,000 "
    "semaphores included); the refusals are the tenant's LimitExceededErrors by the quota "
    "or limit they name, and the server's own `tenure_quota_refusals_total` where it is "
    "served."
)

FINDINGS: Final = Path(__file__).with_name("findings.md")
#: The power scenario's own section (its layer, its runs per --fsync mode): kept by
#: hand beside the shim, since its batch and off runs are not long-mode results.
POWER: Final = Path(__file__).with_name("power.md")
#: The soak's section, written by ``scripts/faults --soak`` (tools/faults/soak_report.py).
SOAK: Final = Path(__file__).with_name("soak.md")

#: Which rule caught which mutant (held by tests/faults/test_mutants.py).
MUTANTS: Final = (
    (
        "a grant that skips the limit check",
        "`Semaphore.fits` ignores the count",
        "`overlap`, `linearizable:mutex`",
    ),
    (
        "the fencing counter not persisted across a restart",
        "`resume` sets `last_token` to 0",
        "`token-order`, `fenced-write-refused`, `linearizable:mutex`",
    ),
    ("a dropped push", "one `Granted` push in ten is never written", "`hang`, `no-progress`"),
    (
        "a loss that does not cancel the body",
        "`CancelOnLoss.cancel_body` does nothing (client)",
        "`loss-not-cancelled`",
    ),
)

#: The rules and what each demands (each checker module's docstring is precise).
RULES: Final = (
    ("overlap", "two critical sections of one mutex overlap only if the earlier holder was "
     "told of its loss and its body was cancelled"),
    ("loss-not-cancelled", "a lease lost while its body runs cancels that body (promise 5)"),
    ("token-order", "a grant seen before another acquire of the key was invoked has the "
     "smaller token, across restarts"),
    ("token-reuse", "no token is granted twice"),
    ("fenced-write-refused", "the fenced resource refuses a write only from a holder that "
     "was told of its loss"),
    ("fifo", "waiters seen in the queue (describe) are granted in queue order, after the "
     "owners seen, except where a session ended"),
    ("lost-write", "every acknowledged register update (semaphore data) is read back, "
     "after any crash"),
    ("phantom-write", "nothing is read that nobody wrote"),
    ("disk-fault-acknowledged", "after a full disk or a failing fsync the server stops "
     "with a non-zero exit code"),
    ("restart-failed", "the server starts again on its data after every crash and disk fault"),
    ("no-leader", "after every fault (servers and etcd running again), a server leads "
     "within 30 s"),
    ("stepped-down", "a leader cut off from etcd or stopped past its lease says it stepped "
     "down (once it can) and stays a standby"),
    ("server-died", "no server of a cluster exits by itself during the faults"),
    ("session-kept", "on a cluster, a session is lost only by its own client's clock (its "
     "window passed), and a lock only with its session: a failover keeps both"),
    ("hang", "no client waits longer than the liveness bound for one answer"),
    ("no-progress", "after the faults stop, every client takes a lock within the bound"),
    ("wall-clock", "a client whose wall clock jumps loses nothing (expiry follows the "
     "server's clock), unless a client on true clocks, not paused, lost a session within "
     "a window of it (the machine stalled)"),
    ("client-error", "no client's loop dies of an exception the workload does not expect"),
    ("linearizable:mutex", "the grants, releases and told losses of each mutex are those of "
     "a lock with fencing tokens (lincheck's `mutex` model over the whole history: one holder "
     "at a time, tokens strictly increasing); past the search's bound the verdict is unknown, "
     "which breaks the rule too"),
    ("linearizable:register", "the creates, updates and reads of each register (a semaphore's "
     "data) are those of one register (lincheck's `register` model): no read goes back in "
     "time, none is lost or made up"),
    ("honest-session-lost", "with a hostile tenant (`tenant`), no honest client loses a "
     "session"),
    ("honest-lock-lost", "with a hostile tenant, every honest critical section ends released, "
     "and the bystander (one lock held all along, a 3 s recovery window) keeps its lock"),
    ("honest-refused", "with a hostile tenant, no honest operation fails"),
    ("honest-stall", f"with a hostile tenant, no honest probe takes more than "
     f"{STALL * 1000:g} ms (unless one in a quiet phase of the run did: the machine stalled)"),
    ("honest-latency", f"the honest clients' p99 with the hostile tenant is at most {RATIO:g} x "
     f"their p99 without it in the same run (quiet phases between hostile ones; the quiet p99 "
     f"taken as at least {FLOOR * 1000:g} ms; at least {MIN_SAMPLES} probes of each)"),
)  # fmt: skip


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
    return sum(n for name, n in ops.items() if not name.startswith("read:")) + int(
        stats["register_reads"]
    )


def _linearizability(stats: dict[str, Any]) -> str:
    """Per model, the operations and keys lincheck checked ("-": a result saved before)."""
    models: dict[str, dict[str, Any]] = stats.get("linearizability") or {}
    shown = [
        f"{model} {m.get('checked_operations', 0)} / {m.get('keys', 0)}"
        + ("" if m.get("verdict") == "linearizable" else f" ({m.get('verdict')})")
        for model, m in models.items()
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
    )
    return [f"* linearizability (lincheck, the whole history of each model): {told}"]


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
    lines += _failover_table(results)
    lines += ["", "## Scenarios", ""]
    for r in results:
        scenario = SCENARIOS[r.scenario]
        s = r.stats
        ops = ", ".join(f"{name} {n}" for name, n in s["operations"].items())
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
            f"* operations (kind:outcome): {ops}",
            f"* critical sections {s['sections']}; stale writes refused by the fenced "
            f"resource {s['stale_writes_refused']}; sessions lost and replaced "
            f"{s['sessions_lost']}",
            f"* FIFO: {s['fifo_snapshots']} queue snapshots, {s['fifo_pairs']} waiter pairs "
            f"compared, {s['fifo_skipped']} waiters not matched to one acquire",
            f"* register reads checked {s['register_reads']}; server restarts {s['restarts']}",
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
