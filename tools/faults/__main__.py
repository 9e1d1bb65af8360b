"""Long mode: ``python -m tools.faults [--minutes N] [--only SCENARIO] [--target T]``.

(See scripts/faults; the arguments are :mod:`tools.faults.cli`'s.) Runs each
scenario for ``--minutes`` of faults (10 by default) against a fresh server of each
target it applies to, with more workers than short mode, then writes
docs/reliability.md (and its JSON), replacing the results of the (target, scenario)
pairs it ran and keeping the others. Targets: ``tenure`` (a ``tenure serve``),
``tenure-cluster`` (three ``tenure serve --cluster`` over a three-member etcd
cluster), ``etcd`` (a three-member etcd cluster), ``redis`` (a ``redis-server``) and
``postgres`` (a PostgreSQL 15); all by default. Exits 1 if any rule was broken, 2 if
a target cannot run here. Each run's directory is removed afterwards unless
``--keep``, or unless lincheck found a model's history not linearizable (or could not
tell): then its lincheck histories and witness stay there (``lincheck/``), named in
the result.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tests.etcd.cluster import etcd_unavailable
from tests.postgres.server import postgres_unavailable
from tests.redis.server import redis_unavailable

from tools.faults import cli
from tools.faults.cluster_target import TenureClusterTarget
from tools.faults.db_targets import PostgresTarget, RedisTarget
from tools.faults.etcd_target import EtcdTarget
from tools.faults.harness import run_scenario
from tools.faults.lin_harness import run_linearizable
from tools.faults.netns import unavailable as netns_unavailable
from tools.faults.report import Result, commit_of_checkout, write
from tools.faults.report_texts import TARGETS
from tools.faults.scenarios import LINEARIZABLE, SCENARIOS, applies, liveness_bound
from tools.faults.target import NETNS, Target, TenureTarget

#: Each target's capabilities, known before one is made (scenarios are chosen by them).
CAPABILITIES = {
    "tenure": TenureTarget.capabilities,
    "tenure-cluster": TenureClusterTarget.capabilities,
    "etcd": EtcdTarget.capabilities,
    "redis": RedisTarget.capabilities,
    "postgres": PostgresTarget.capabilities,
}
#: Why a target's server cannot run here (None: it can).
UNAVAILABLE = {
    "tenure-cluster": etcd_unavailable,
    "etcd": etcd_unavailable,
    "redis": redis_unavailable,
    "postgres": postgres_unavailable,
}


def _make(target: str, work_dir: Path, idle_timeout: float, netns: bool) -> Target:
    if target == "tenure-cluster":
        return TenureClusterTarget(work_dir / "cluster", idle_timeout=idle_timeout, netns=netns)
    if target == "etcd":
        return EtcdTarget(work_dir / "etcd", netns=netns)
    if target == "redis":
        return RedisTarget(work_dir / "redis")
    if target == "postgres":
        return PostgresTarget(work_dir / "postgres")
    return TenureTarget(work_dir / "data", idle_timeout=idle_timeout)


async def _one(target_name: str, name: str, minutes: float, workers: int, keep: bool) -> Result:
    scenario = SCENARIOS[name].long(workers)
    work_dir = Path(tempfile.mkdtemp(prefix=f"tenure-faults-{target_name}-{name}-"))
    netns = scenario.netns and NETNS in CAPABILITIES[target_name]
    target = _make(target_name, work_dir, scenario.idle_timeout, netns)
    bound = liveness_bound(scenario, target)
    started = time.monotonic()
    outcome = None
    try:
        run = run_linearizable if scenario.workload == LINEARIZABLE else run_scenario
        outcome = await run(scenario, target, work_dir, seconds=minutes * 60, seed=97, bound=bound)
    finally:
        target.close()
        # A witness is kept with its history: `python -m tenure.testing.lincheck` replays it.
        witness = outcome is not None and any(
            v.rule.startswith("linearizable:") for v in outcome.verdict.violations
        )
        keep = keep or witness
        if not keep:
            shutil.rmtree(work_dir, ignore_errors=True)
    verdict = outcome.verdict
    label = f"{target_name} {name}"
    print(
        f"{label}: {len(verdict.violations)} violation(s) in "
        f"{(time.monotonic() - started) / 60:.1f} min; {verdict.stats}",
        flush=True,
    )
    if verdict.violations:
        print(verdict.summary(), flush=True)
    if keep:
        print(f"{label}: history kept in {work_dir}", flush=True)
    return Result(
        scenario=name,
        minutes=minutes,
        workers=scenario.workers,
        clients=scenario.clients,
        stats=verdict.stats,
        violations=[f"[{v.rule}] {v.message}" for v in verdict.violations[:10]],
        violation_count=len(verdict.violations),
        target=target_name,
        liveness_bound=bound,
    )


def _soak(args: argparse.Namespace) -> int:
    from tools.faults import soak_report
    from tools.faults.soak import Soak

    work_dir = Path(tempfile.mkdtemp(prefix="tenure-soak-"))
    commit = commit_of_checkout()
    try:
        run = Soak(
            work_dir,
            seconds=args.soak * 3600,
            fault_every=args.fault_every,
            crash_every=args.crash_every,
            sample_every=args.sample_every,
        ).execute()
        generated = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        checks = soak_report.write(run, args.out.parent, generated, commit)
    finally:
        if not args.keep:
            shutil.rmtree(work_dir, ignore_errors=True)
    write([], args.out, generated, commit)  # the page again, with the soak's section
    broken = [c for c in checks if not c.ok]
    stalled = soak_report.stalled(run)
    for c in broken:
        print(f"not bounded: {c.quantity} over {c.stretch}: {c.last_max:g} > {c.limit:g}")
    if stalled:
        print(f"no operation in the last third and since the last fault: {', '.join(stalled)}")
    print(f"wrote {soak_report.SOAK_PAGE}, {args.out}")
    return 1 if broken or stalled else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    args = cli.parser().parse_args(argv)
    if args.soak is not None:
        return _soak(args)
    targets: list[str] = args.target or list(TARGETS)
    for name, unavailable in UNAVAILABLE.items():
        if name in targets and (reason := unavailable()) is not None:
            print(f"scripts/faults: target {name}: {reason}", file=sys.stderr)
            return 2
    runs = [
        (target, name)
        for target in targets
        for name in (args.only or list(SCENARIOS))
        if applies(SCENARIOS[name], CAPABILITIES[target])
    ]
    if not runs:
        print("scripts/faults: no chosen scenario applies to the chosen targets", file=sys.stderr)
        return 2
    in_netns = [f"{t} {n}" for t, n in runs if SCENARIOS[n].netns and NETNS in CAPABILITIES[t]]
    if in_netns and (reason := netns_unavailable()) is not None:
        print(f"scripts/faults: {', '.join(in_netns)} run in network namespaces: {reason}",
              file=sys.stderr)  # fmt: skip
        return 2
    print("runs: " + ", ".join(f"{t} {n}" for t, n in runs), flush=True)
    commit = commit_of_checkout()  # the code that runs (HEAD may move while it does)
    results = [
        asyncio.run(_one(target, name, args.minutes, args.workers, args.keep))
        for target, name in runs
    ]
    write(results, args.out, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit)
    print(f"wrote {args.out}")
    return 1 if any(result.violation_count for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
