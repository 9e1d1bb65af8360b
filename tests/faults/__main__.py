"""Long mode: ``python -m tests.faults [--minutes N] [--only SCENARIO]`` (see scripts/faults).

Runs each scenario for ``--minutes`` of faults (10 by default) against a fresh
``tenure serve``, with more workers than short mode, then writes
docs/reliability.md (and its JSON). Exits 1 if any rule was broken. Each run's
directory is removed afterwards unless ``--keep``.
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

from tests.faults.harness import run_scenario
from tests.faults.report import Result, commit_of_checkout, write
from tests.faults.scenarios import SCENARIOS
from tests.faults.target import REPO, TenureTarget


async def _one(name: str, minutes: float, workers: int, keep: bool) -> Result:
    scenario = SCENARIOS[name].long(workers)
    work_dir = Path(tempfile.mkdtemp(prefix=f"tenure-faults-{name}-"))
    target = TenureTarget(work_dir / "data", idle_timeout=scenario.idle_timeout)
    started = time.monotonic()
    try:
        outcome = await run_scenario(scenario, target, work_dir, seconds=minutes * 60, seed=97)
    finally:
        target.kill()
        if not keep:
            shutil.rmtree(work_dir, ignore_errors=True)
    verdict = outcome.verdict
    print(
        f"{name}: {len(verdict.violations)} violation(s) in "
        f"{(time.monotonic() - started) / 60:.1f} min; {verdict.stats}",
        flush=True,
    )
    if verdict.violations:
        print(verdict.summary(), flush=True)
    if keep:
        print(f"{name}: history kept in {work_dir}", flush=True)
    return Result(
        scenario=name,
        minutes=minutes,
        workers=scenario.workers,
        clients=scenario.clients,
        stats=verdict.stats,
        violations=[f"[{v.rule}] {v.message}" for v in verdict.violations[:10]],
        violation_count=len(verdict.violations),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="scripts/faults", description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0, help="faults per scenario")
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append", help="repeatable")
    parser.add_argument("--workers", type=int, default=8, help="worker processes (2 clients each)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "reliability.md")
    parser.add_argument("--keep", action="store_true", help="keep each run's history")
    args = parser.parse_args(argv)
    names = args.only or list(SCENARIOS)
    commit = commit_of_checkout()  # the code that runs (HEAD may move while it does)
    results = [asyncio.run(_one(name, args.minutes, args.workers, args.keep)) for name in names]
    write(results, args.out, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit)
    print(f"wrote {args.out}")
    return 1 if any(result.violation_count for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
