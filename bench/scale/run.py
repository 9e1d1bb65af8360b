"""``python -m bench.scale`` (``scripts/bench --scale``): every dimension at every size.

Runs the dimensions of :mod:`bench.scale.dimensions` (and the watchers', the
cluster's and the shards' from their own modules) one size at a time, each on a
fresh server, writes the rows to ``build/scale.json`` and docs/scale.md with its
plots (:mod:`bench.scale.report`). ``--quick`` keeps every size (the issue's sizes
are the point) with a shorter probe window and the durable server only where it
differs (the restart); ``--only`` picks dimensions. A dimension that fails is
reported as failed (its reason in the report) and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.scale import dimensions, report
from bench.tools import systems

REPO = Path(__file__).resolve().parents[2]
#: The sizes of each dimension (0: the probe alone, the baseline of connections).
SIZES: dict[str, tuple[int, ...]] = {
    "connections": (0, 1_000, 10_000, -1),  # -1: as many as the file limit allows
    "sessions": (1_000, 10_000, 100_000),
    "watchers": (1_000, 10_000, 100_000),
    "holds": (10_000, 100_000, 1_000_000),
    "holds-always": (100_000, 1_000_000),  # the same on a durable server (--fsync always)
    "waiters": (1_000, 10_000, 100_000),
    "nodes": (1_000, 100_000),
    "failover": (10_000, 100_000, 1_000_000),
    "snapshot": (100_000, 1_000_000),
    "shards": (1, 2),
    "cells": (1, 2),
    "cell-failover": (2,),  # two cells: one fails over, the other is probed
}
DIMENSIONS = tuple(SIZES)
#: The probe's window at each size, in seconds (quick, full).
PROBE_SECONDS = {True: 4.0, False: 10.0}

_started = time.monotonic()


def log(message: str) -> None:
    """Progress on stderr, with the seconds since the start."""
    print(f"[{time.monotonic() - _started:6.1f}s] {message}", file=sys.stderr, flush=True)


def _size(dimension: str, size: int) -> int:
    if dimension == "connections" and size < 0:
        return dimensions.most_connections()
    return size


def measurers(quick: bool) -> dict[str, Callable[[int, Path], dict[str, Any]]]:
    """Each dimension's measure of one size, in a work directory."""
    seconds = PROBE_SECONDS[quick]

    def watchers(size: int, workdir: Path) -> dict[str, Any]:
        from bench.micro import watch_fanout

        # A fleet: 1,000 connections (fewer at small sizes), one session each.
        runs = watch_fanout.measure(size, min(1_000, size), repeats=1 if quick else 3)
        return {
            "size": size,
            "answer_ms": 1e3 * statistics.median(r["answer_s"] for r in runs),
            "last_told_ms": 1e3 * statistics.median(r["last_told_s"] for r in runs),
            "told_once": min(r["told_once"] for r in runs),
            "told_twice_or_more": max(r["told_twice_or_more"] for r in runs),
            "not_told": max(r["not_told"] for r in runs),
            "max_ms": max(r["probe_max_ms"] for r in runs),
            "p50_ms": statistics.median(r["probe_p50_ms"] for r in runs),
            "server_cpu_s": statistics.median(r["server_cpu_s"] for r in runs),
        }

    def failover(size: int, workdir: Path) -> dict[str, Any]:
        from bench.micro import failover as failover_bench

        return {"size": size, **failover_bench.measure(size, faults_=1 if quick else 3)}

    def snapshot(size: int, workdir: Path) -> dict[str, Any]:
        from bench.micro import cluster_snapshot

        return {"size": size, **cluster_snapshot.measure(holds=size)}

    def shards(size: int, workdir: Path) -> dict[str, Any]:
        from bench.scale import shards as shards_bench

        return {"size": size, **shards_bench.measure(size, workdir, seconds=2 * seconds)}

    def cells(size: int, workdir: Path) -> dict[str, Any]:
        from bench.scale import cells as cells_bench

        return {"size": size, **cells_bench.measure(size, workdir, seconds=2 * seconds)}

    def cell_failover(size: int, workdir: Path) -> dict[str, Any]:
        from bench.scale import cell_failover as failover_bench

        # Three failovers (one in --quick): the two windows' p99s are a few thousand
        # pairs each, on two shared cores; the median ratio is the one judged.
        runs = [
            failover_bench.measure(workdir / f"run{n}", seconds=seconds)
            for n in range(1 if quick else 3)
        ]
        ratios = [r["p99_ratio"] for r in runs]
        middle = sorted(runs, key=lambda r: r["p99_ratio"])[len(runs) // 2]
        return {"size": size, **middle, "p99_ratios": ratios}

    return {
        "connections": lambda n, w: dimensions.connections(n, w, seconds),
        "sessions": lambda n, w: dimensions.sessions(n, w, seconds),
        "watchers": watchers,
        "holds": lambda n, w: dimensions.holds(n, w, seconds),
        "holds-always": lambda n, w: dimensions.holds(n, w, seconds, fsync="always"),
        "waiters": lambda n, w: dimensions.waiters(n, w, seconds),
        "nodes": lambda n, w: dimensions.nodes(n, w, seconds),
        "failover": failover,
        "snapshot": snapshot,
        "shards": shards,
        "cells": cells,
        "cell-failover": cell_failover,
    }


def run(
    wanted: list[str], quick: bool, workdir: Path, max_size: int = 0
) -> dict[str, list[dict[str, Any]]]:
    """Every size of every wanted dimension: its rows (a failed size: its reason)."""
    measure = measurers(quick)
    rows: dict[str, list[dict[str, Any]]] = {}
    for dimension in wanted:
        rows[dimension] = []
        for given in SIZES[dimension]:
            size = _size(dimension, given)
            if max_size and size > max_size:
                continue
            log(f"{dimension} {size:,}")
            where = workdir / f"{dimension}-{size}"
            where.mkdir(parents=True, exist_ok=True)
            started = time.monotonic()
            try:
                row = measure[dimension](size, where)
            except Exception as error:
                traceback.print_exc()
                row = {"size": size, "error": f"{type(error).__name__}: {error}"[-400:]}
            row["took_s"] = time.monotonic() - started
            log(f"{dimension} {size:,}: {json.dumps(row)}")
            rows[dimension].append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    """The command line of ``python -m bench.scale``."""
    parser = argparse.ArgumentParser(prog="scripts/bench --scale", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="shorter windows (under 15 min)")
    parser.add_argument("--only", help=f"comma-separated dimensions of {','.join(DIMENSIONS)}")
    parser.add_argument(
        "--max-size", type=int, default=0, help="skip sizes above this (0: every size)"
    )
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "scale.md")
    parser.add_argument("--json", type=Path, default=REPO / "build" / "scale.json")
    parser.add_argument(
        "--report-only", action="store_true", help="write --out from --json, measure nothing"
    )
    args = parser.parse_args(argv)
    wanted = args.only.split(",") if args.only else list(DIMENSIONS)
    unknown = sorted(set(wanted) - set(DIMENSIONS))
    if unknown:
        parser.error(f"unknown dimensions {unknown}; known: {', '.join(DIMENSIONS)}")
    if args.report_only:
        saved = json.loads(args.json.read_text())
        report.write(saved["rows"], saved["meta"], args.out)
        return 0
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # (the servers inherit it)
    meta = {
        "command": "scripts/bench --scale " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "quick": args.quick,
        "probe_seconds": PROBE_SECONDS[args.quick],
        "file_limit": hard,
        "versions": systems.versions(),
    }
    with tempfile.TemporaryDirectory(prefix="tenure-scale-") as scratch:
        rows = run(wanted, args.quick, Path(scratch), args.max_size)
    meta["minutes"] = round((time.monotonic() - _started) / 60, 1)
    if args.json.exists() and args.only:  # a partial run keeps the other dimensions' rows
        before = json.loads(args.json.read_text())
        rows = {**before["rows"], **rows}
        rows = {d: rows[d] for d in DIMENSIONS if d in rows}  # (in the page's order)
        earlier = before["meta"]
        again = [*earlier.get("then", []), f"`{meta['command']}` ({meta['date']})"]
        meta = {**earlier, "then": again}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    report.write(rows, meta, args.out)
    log(f"wrote {args.out} and {args.json}")
    return 0
