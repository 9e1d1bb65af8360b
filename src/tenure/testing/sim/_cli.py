"""``python -m tenure.testing.sim`` (``scripts/sim``): simulated runs from a shell.

* ``--seed S``: one run; it prints ``history sha256: HEX`` (the same for the same seed
  and options, on any machine), what it did and, if a rule broke, each violation, the
  witness of a model, the command that replays it and a shrunk witness
  (:mod:`tenure.testing.sim._shrink`) with its own command.
* ``--seeds N``: the runs of seeds S, S+1, ... S+N-1, spread over ``--jobs`` processes
  (the machine's cores); a line per run that broke a rule, the first of them shrunk,
  and a summary (runs, CPU seconds, how much faster than real time per core).
* ``--mutant NAME``: the runs with that bug put back
  (:mod:`tenure.testing.sim._mutants`); ``--mutants``: every mutant of the
  ``--target``, each over seeds
  S, S+1, ... until one finds it (at most ``--seeds``, 10,000 by default): exit 0
  when every mutant was found. Mutants run on tenure's pure build (a patch of a
  compiled module does not take): where the compiled one is installed, the command
  runs itself again in a child interpreter that imports the sources.

Exit status: 0 every run held (``--mutants``: every mutant was found); 1 a rule broke
(``--mutants``: a mutant was not found); 2 bad input.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import hashlib
import importlib
import importlib.util
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Final

from tenure._build import build
from tenure.testing.sim._mutants import MUTANT_TARGETS, MUTANTS
from tenure.testing.sim._nemesis import FAULTS_OF
from tenure.testing.sim._run import TARGETS, SimOptions, SimResult, run_seed
from tenure.testing.sim._shrink import shrink

__all__ = ["main"]

EXIT_HELD: Final = 0
EXIT_BROKEN: Final = 1
EXIT_BAD_INPUT: Final = 2
#: Seeds each mutant is given by ``--mutants`` unless ``--seeds`` says.
MUTANT_SEEDS: Final = 10_000
#: Set in the child interpreter that runs mutants on the pure build.
PURE_CHILD: Final = "TENURE_SIM_PURE_CHILD"
#: What the child interpreter runs first: tenure's modules from their sources.
_PURE_BOOT: Final = """
import importlib.machinery, importlib.util, sys
from pathlib import Path
spec = importlib.util.find_spec("tenure")
root = Path(next(iter(spec.submodule_search_locations))).resolve()
sources = importlib.machinery.FileFinder.path_hook(
    (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES),
    (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES),
)
def hook(path):
    if Path(path).resolve().is_relative_to(root):
        return sources(path)
    raise ImportError(path)
sys.path_hooks.insert(0, hook)
sys.path_importer_cache.clear()
from tenure.testing.sim._cli import main
sys.exit(main(sys.argv[1:]))
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tenure.testing.sim",
        description="Deterministic simulation: tenure's server and clients on simulated "
        "time and network, one seed deciding everything (docs/testing.md).",
    )
    parser.add_argument("--seed", type=int, default=1, help="the (first) seed (default 1)")
    parser.add_argument(
        "--seeds", type=int, default=None,
        help="run this many seeds from --seed on (--mutants: the most each mutant is given)",
    )  # fmt: skip
    parser.add_argument("--target", choices=TARGETS, default="server")
    parser.add_argument(
        "--minutes", type=float, default=1.0, help="simulated minutes per run (default 1)"
    )
    parser.add_argument("--clients", type=int, default=8, help="clients per run (default 8)")
    every = "; ".join(f"{target}: {','.join(FAULTS_OF[target])}" for target in TARGETS)
    parser.add_argument(
        "--faults", default=None,
        help=f"the faults drawn, comma-separated, or none (default: every fault of the "
        f"target: {every})",
    )  # fmt: skip
    parser.add_argument("--fsync", choices=("always", "batch", "off"), default="always")
    parser.add_argument(
        "--dflockd",
        action="store_true",
        help="the clients also take mutexes through dflockd's face, with dflockd-client "
        "(--target server)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--mutant", choices=sorted(MUTANTS), help="put this bug back")
    which.add_argument("--mutants", action="store_true", help="find every mutant")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-shrink", action="store_true", help="do not shrink a failure")
    return parser


def _options(args: argparse.Namespace, parser: argparse.ArgumentParser) -> SimOptions:
    known = FAULTS_OF[args.target]
    faults: tuple[str, ...] | None = None
    if args.faults is not None:
        faults = () if args.faults == "none" else tuple(f for f in args.faults.split(",") if f)
        unknown = [f for f in faults if f not in known]
        if unknown:
            where = f"of --target {args.target}"
            parser.error(f"no fault {unknown[0]!r} {where} (one of {', '.join(known)}, or none)")
    if args.mutant is not None and args.target not in MUTANT_TARGETS[args.mutant]:
        targets = " or ".join(MUTANT_TARGETS[args.mutant])
        parser.error(f"mutant {args.mutant!r} runs on --target {targets}")
    if args.target in ("cluster", "cells") and not _cluster_importable():
        parser.error(f"--target {args.target} needs the etcd extra: pip install 'tenure[etcd]'")
    if args.target in ("cluster", "cells") and args.fsync != "always":
        parser.error("--fsync is a single server's: a cluster's log is in etcd")
    if args.dflockd and args.target != "server":
        parser.error("--dflockd is a single server's: dflockd's client follows no leader")
    if args.dflockd and importlib.util.find_spec("dflockd_client") is None:
        parser.error("--dflockd needs dflockd's client: pip install dflockd-client")
    if args.minutes < 0.5:
        parser.error("--minutes must be at least 0.5 (a run ends with 15 s of quiet)")
    if args.clients < 1:
        parser.error("--clients must be at least 1")
    if args.seeds is not None and args.seeds < 1:
        parser.error("--seeds must be at least 1")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    return SimOptions(
        args.seed, args.target, args.minutes, args.clients, faults, args.fsync, args.mutant,
        args.dflockd,
    )  # fmt: skip


def _cluster_importable() -> bool:
    """Whether the cluster target can run here (the ``etcd`` extra is installed)."""
    try:
        importlib.import_module("tenure.testing.sim._cluster")
    except ImportError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return EXIT_BAD_INPUT if exit_.code else EXIT_HELD
    try:
        options = _options(args, parser)
    except SystemExit:
        return EXIT_BAD_INPUT
    wants_pure = args.mutant is not None or args.mutants
    if wants_pure and build() != "pure" and not os.environ.get(PURE_CHILD):
        child = [sys.executable, "-c", _PURE_BOOT, *(sys.argv[1:] if argv is None else argv)]
        return subprocess.run(child, env={**os.environ, PURE_CHILD: "1"}, check=False).returncode
    if args.mutants:
        return _find_mutants(options, args.seeds or MUTANT_SEEDS, args.jobs)
    if args.seeds is None:
        return _one(options, shrinking=not args.no_shrink)
    return _many(options, args.seeds, args.jobs, shrinking=not args.no_shrink)


def _one(options: SimOptions, *, shrinking: bool) -> int:
    result = run_seed(options)
    print(f"history sha256: {result.digest}")
    _print_run(result)
    if result.ok:
        return EXIT_HELD
    _print_failure(result, shrinking)
    return EXIT_BROKEN


def _print_run(result: SimResult) -> None:
    done = ", ".join(f"{n} {model}" for model, n in result.verdicts.operations.items())
    faults = ", ".join(f"{n} {name}" for name, n in result.faults.items() if n) or "none"
    print(f"operations: {done}")
    print(f"faults: {faults}")
    print(
        f"simulated {result.simulated:.1f}s in {result.cpu:.2f}s of CPU "
        f"({result.simulated / max(result.cpu, 1e-9):.0f}x real time)"
    )
    print("verdict: every rule held" if result.ok else "verdict: a rule broke")


def _print_failure(result: SimResult, shrinking: bool) -> None:
    for violation in result.verdicts.violations:
        print(f"  {violation}")
    for model, explanation in result.verdicts.explanations.items():
        print(f"witness ({model}):")
        print("\n".join("    " + line for line in explanation.splitlines()[:40]))
    print(f"replay: {result.options.command()}")
    if shrinking:
        smaller = shrink(result)
        if smaller is result:
            print("shrunk: no smaller run breaks the same rule")
        else:
            print(f"shrunk: {smaller.options.command()}")
            print(f"  {smaller.verdicts.violations[0]}")


def _run_one(options: SimOptions) -> SimResult:
    return run_seed(options)


def _results(options: SimOptions, seeds: Iterator[int], jobs: int) -> Iterator[SimResult]:
    """The runs of ``seeds`` in their order, on ``jobs`` processes (one: here); a few
    ahead at a time, so that a caller that stops early leaves little running."""
    each = (dataclasses.replace(options, seed=seed) for seed in seeds)
    if jobs == 1:
        yield from map(_run_one, each)
        return
    context = multiprocessing.get_context("fork")  # (the parent's imports, shared)
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        ahead: collections.deque[concurrent.futures.Future[SimResult]] = collections.deque()
        for run in each:
            ahead.append(pool.submit(_run_one, run))
            if len(ahead) >= 2 * jobs:
                yield ahead.popleft().result()
        while ahead:
            yield ahead.popleft().result()


def _many(options: SimOptions, count: int, jobs: int, *, shrinking: bool) -> int:
    started = time.monotonic()
    digest = hashlib.sha256()
    failed: list[SimResult] = []
    cpu = simulated = 0.0
    seeds = range(options.seed, options.seed + count)
    for result in _results(options, iter(seeds), jobs):
        digest.update(result.digest.encode())
        cpu += result.cpu
        simulated += result.simulated
        if not result.ok:
            failed.append(result)
            print(f"seed {result.options.seed}: {result.verdicts.violations[0]}")
            print(f"  replay: {result.options.command()}")
    wall = time.monotonic() - started
    print(f"histories sha256: {digest.hexdigest()} (seeds {seeds.start}..{seeds.stop - 1})")
    print(
        f"{count} runs, {len(failed)} broke a rule; {simulated:.0f}s simulated in "
        f"{cpu:.0f}s of CPU ({simulated / max(cpu, 1e-9):.0f}x real time per core), "
        f"{wall:.0f}s on {jobs} process(es)"
    )
    if not failed:
        return EXIT_HELD
    print(f"the first failure (seed {failed[0].options.seed}):")
    _print_failure(failed[0], shrinking)
    return EXIT_BROKEN


def _find_mutants(options: SimOptions, most: int, jobs: int) -> int:
    missed = []
    for name in MUTANTS:
        if options.target not in MUTANT_TARGETS[name]:
            continue
        started = time.monotonic()
        mutant = dataclasses.replace(options, mutant=name)
        tried = cpu = 0.0
        found: SimResult | None = None
        for result in _results(mutant, iter(range(options.seed, options.seed + most)), jobs):
            tried += 1
            cpu += result.cpu
            if not result.ok:
                found = result
                break
        wall = time.monotonic() - started
        if found is None:
            missed.append(name)
            print(f"{name}: NOT found in {tried:.0f} seeds ({cpu:.1f}s of CPU)")
            continue
        print(
            f"{name}: found by seed {found.options.seed}, after {tried:.0f} seed(s) "
            f"({cpu:.1f}s of CPU, {wall:.1f}s): {found.verdicts.violations[0][:200]}"
        )
        print(f"  replay: {found.options.command()}")
    return EXIT_BROKEN if missed else EXIT_HELD
