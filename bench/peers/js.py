"""seq, par and cont from Node.js: ``python -m bench.peers.js`` (issue 52's "Measure").

The lock workloads of :mod:`bench.peers.lockload` (seq: one session, acquire +
release of distinct keys one pair at a time; par: 32 sessions on distinct keys; cont:
32 sessions on one key), from five clients, on two servers this process starts as
:mod:`bench.tools.systems` starts them for ``python -m bench``:

* ``tenure-off``: tenure's Python client (``bench.peers.lockload``, uvloop), against
  ``tenure serve --fsync off``; its seq also in the awaited form (``seq-awaited``:
  ``await lock.release()``, two round trips a pair, as the Node client's release);
* ``js-tenure``: the Node client ``tenure-client`` (``clients/js``) against the
  **same** server (``bench/js/driver.mjs``);
* ``js-effect-redis``: effect-distributed-lock's ``RedisBacking`` over ioredis (its
  defaults) against a ``redis-server`` started as the ``redis`` peer's (every
  acquire also opens a subscriber connection: its push-based wait, raced with a poll);
* ``js-effect-redis-poll``: the same with ``pushBasedAcquireEnabled: false`` (waiters
  poll every 100 ms, its default policy; no connection per acquire);
* ``redis``: redis-py's ``Lock`` against that same Redis (the Python peer, for scale).

Each repeat is a fresh client process, the Python and Node ones in turns on one
server; the medians, and each row's ratio to the Python tenure client's, are printed
as a Markdown table (``--json PATH`` also writes every Measure). One client is shared
by the 32 sessions (the ``one`` shape of ``python -m bench``). Before running, it
builds what the driver imports when it is missing: ``npm ci && npm run build`` in
``clients/js``, ``npm ci`` in ``bench/js`` (its lock file: ``tenure-client`` by
``file:``, effect, effect-distributed-lock and ioredis from the registry).

Bounded: each client process by ``--timeout`` (its own bound, then a kill 30 s
later), each workload's timed part by its count and ``--max-seconds`` (quick: 1 s),
each npm step by :data:`NPM_TIMEOUT`. See docs/benchmarks.md, "From Node.js".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.peers import run
from bench.tools import systems
from bench.tools.results import Measure, dumps, loads

REPO = Path(__file__).resolve().parents[2]
JS_CLIENT = REPO / "clients" / "js"
DRIVER_DIR = REPO / "bench" / "js"
DRIVER = DRIVER_DIR / "driver.mjs"
WORKLOADS = ("seq", "par", "cont")
#: The clients compared: (name, its server's system, the runner) in the table's order.
CLIENTS: tuple[tuple[str, str, str], ...] = (
    ("tenure-off", "tenure-off", "python"),
    ("js-tenure", "tenure-off", "node"),
    ("js-effect-redis", "redis", "node"),
    ("js-effect-redis-poll", "redis", "node"),
    ("redis", "redis", "python"),
)
#: The headline metric of each workload.
RATE = {"seq": "pairs_per_s", "seq-awaited": "pairs_per_s", "par": "pairs_per_s"}
RATE_DEFAULT = "grants_per_s"
NPM_TIMEOUT = 300.0


def _npm(args: list[str], cwd: Path) -> None:
    run.log(f"{cwd.relative_to(REPO)}: npm {' '.join(args)}")
    done = subprocess.run(
        ["npm", *args, "--no-audit", "--no-fund", "--loglevel=error"]
        if args[0] == "ci"
        else ["npm", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=NPM_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"npm {' '.join(args)} in {cwd} failed: {done.stderr.strip()[-2000:]}")


def prepare() -> None:
    """node and npm present; tenure-client built; bench/js's dependencies installed."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise SystemExit("node and npm are needed (Node.js 20 or newer)")
    newest_source = max(p.stat().st_mtime for p in (JS_CLIENT / "src").glob("*.ts"))
    built = JS_CLIENT / "dist" / "src" / "index.js"
    if not (JS_CLIENT / "node_modules").is_dir():
        _npm(["ci"], JS_CLIENT)
    if not built.exists() or built.stat().st_mtime < newest_source:
        _npm(["run", "build"], JS_CLIENT)
    if not (DRIVER_DIR / "node_modules").is_dir():
        _npm(["ci"], DRIVER_DIR)


def node_versions() -> str:
    """node's version, and the registry packages' of bench/js/package.json (exact pins)."""
    done = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=10)
    deps = json.loads((DRIVER_DIR / "package.json").read_text())["dependencies"]
    pinned = ", ".join(f"{k} {v}" for k, v in deps.items() if not v.startswith("file:"))
    return f"node {done.stdout.strip()} ({pinned})"


def _sizes(workloads: list[str]) -> str:
    return ",".join(f"{w}={run.SIZES[w]}" for w in workloads)


def client_argv(
    client: str, runner: str, url: str, workloads: list[str], args: argparse.Namespace
) -> list[str]:
    """The command of one repeat of ``client`` (without the interpreter for Python)."""
    common = ["--workload", ",".join(workloads), "--n", _sizes(workloads)]
    common += ["--clients", str(run.CLIENTS), "--timeout", str(args.timeout)]
    if math.isfinite(args.max_seconds):
        common += ["--max-seconds", str(args.max_seconds)]
    if runner == "node":
        return ["node", str(DRIVER), "--system", client, "--url", url, *common]
    return ["-m", "bench.peers.lockload", "--system", client, "--url", url, *common]


def node_run(argv: list[str], workload: str, client: str, timeout: float) -> list[Measure]:
    """One repeat of the Node driver; its Measures, or one failure."""
    try:
        done = subprocess.run(
            argv, cwd=REPO, capture_output=True, text=True, timeout=timeout + 30, check=False
        )
    except subprocess.TimeoutExpired:
        return [run.failure(workload, client, f"node hung past {timeout + 30:g}s")]
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return [run.failure(workload, client, lines[-1])]
    return loads(done.stdout)


def measure(args: argparse.Namespace, workdir: Path) -> list[Measure]:
    """Every chosen client's repeats, in turns on each server; the medians."""
    runs: dict[tuple[str, str], list[list[Measure]]] = {}
    for server_system in dict.fromkeys(s for _c, s, _r in CLIENTS):
        on_it = [(c, r) for c, s, r in CLIENTS if s == server_system and c in args.systems]
        if not on_it:
            continue
        server = systems.start(server_system, workdir / server_system)
        try:
            for repeat in range(args.repeats):
                for client, runner in on_it:  # in turns: the machine's drift hits all alike
                    workloads = list(args.only)
                    if client == "tenure-off" and "seq" in workloads:
                        workloads.insert(workloads.index("seq") + 1, "seq-awaited")
                    argv = client_argv(client, runner, server.url, workloads, args)
                    name = ",".join(workloads)
                    if runner == "node":
                        got = node_run(argv, name, client, args.timeout)
                    else:
                        got = run.client_run(argv, name, client)
                    for w in workloads:
                        mine = [m for m in got if m.workload in (w, name)]
                        runs.setdefault((w, client), []).append(mine)
                        rate = [m for m in mine if m.metric in (*RATE.values(), RATE_DEFAULT)]
                        head = (
                            f"{rate[0].value:,.0f}/s" if rate else (mine[0].note if mine else "?")
                        )
                        run.log(f"{w} {client} {repeat + 1}/{args.repeats}: {head}")
        finally:
            server.stop()
    return [m for ms in runs.values() for m in run.aggregate(ms)]


def table(measures: list[Measure], chosen: list[str], workloads: list[str]) -> list[str]:
    """Markdown: a row per (workload, client): its rate, p50/p99, the ratio to Python's.

    seq's ratio is to the Python client's block form (the release sent ahead of the
    next acquire, one round trip a pair) and, after the slash, to its awaited form
    (``seq-awaited``: two round trips, as the Node client's ``await lock.release()``).
    """
    lines = [
        "| workload | client | server | rate | p50 ms | p99 ms | ratio to Python tenure |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    servers = {c: s for c, s, _r in CLIENTS}
    by_key = {(m.workload, m.system, m.metric): m for m in measures}
    rows = [w for w in ("seq", "seq-awaited", "par", "cont") if w in workloads]
    if "seq" in workloads:
        rows.insert(1, "seq-awaited")
    for w in rows:
        metric = RATE.get(w, RATE_DEFAULT)
        bases = [by_key.get((w, "tenure-off", metric))]
        if w == "seq":
            bases.append(by_key.get(("seq-awaited", "tenure-off", metric)))
        for client in chosen:
            rate = by_key.get((w, client, metric))
            if rate is None:
                continue
            ratios = " / ".join(
                f"{rate.value / b.value:.2f}" if b is not None and b.value else "-" for b in bases
            )
            quick = " (capped)" if "quick mode" in rate.note else ""
            p50, p99 = _percentiles(by_key, w, client)
            lines.append(
                f"| {w} | {LABELS[client]} | {servers[client]} | {rate.value:,.0f} {rate.unit}"
                f"{quick} | {p50} | {p99} | {ratios} |"
            )
    notes = dict.fromkeys(f"FAILED {m.system}: {m.note}" for m in measures if m.metric == "error")
    return [*lines, "", *notes] if notes else lines


LABELS = {
    "tenure-off": "Python `tenure`",
    "js-tenure": "Node `tenure-client`",
    "js-effect-redis": "Node effect-distributed-lock + ioredis",
    "js-effect-redis-poll": "Node effect-distributed-lock + ioredis, no push",
    "redis": "Python redis-py `Lock`",
}


def _percentiles(by_key: dict[tuple[str, str, str], Measure], w: str, client: str) -> list[str]:
    """p50 and p99 of a pair (seq), a pair (par) or a wait (cont), as cells.

    lockload times seq's acquire and release apart: its cells say ``acquire + release``
    (each one's own percentile, so not the pair's exactly).
    """

    def cell(name: str) -> str | None:
        m = by_key.get((w, client, name))
        return None if m is None else f"{m.value:.3g}"

    out = []
    for cut in ("50", "99"):
        if w in ("seq", "seq-awaited"):
            pair, acq, rel = (
                cell(f"pair_p{cut}_ms"),
                cell(f"acquire_p{cut}_ms"),
                cell(f"release_p{cut}_ms"),
            )
            out.append(pair or (f"{acq} + {rel}" if acq and rel else ""))
        else:
            out.append(cell(f"{'wait_' if w == 'cont' else ''}p{cut}_ms") or "")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers.js", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="3 repeats, quick sizes, 1 s caps")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="of seq,par,cont")
    parser.add_argument(
        "--systems", default=",".join(c for c, _s, _r in CLIENTS), help="clients: default all"
    )
    parser.add_argument("--repeats", type=int, help="default 5 (quick: 3)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the sizes")
    parser.add_argument("--max-seconds", type=float, help="cap each timed part (quick: 1)")
    parser.add_argument("--timeout", type=float, default=run.RUN_TIMEOUT, help="one repeat, s")
    parser.add_argument("--json", type=Path, help="also write every Measure here")
    args = parser.parse_args(argv)
    args.only = run._pick(args.only, WORKLOADS, "workload")
    args.systems = run._pick(args.systems, [c for c, _s, _r in CLIENTS], "system")
    for name, size in (run.QUICK_SIZES if args.quick else run.SIZES).items():
        run.SIZES[name] = max(run.CLIENTS, round(size * args.scale))
    args.repeats = args.repeats or (3 if args.quick else 5)
    if args.max_seconds is None:
        args.max_seconds = run.QUICK_SECONDS if args.quick else math.inf
    prepare()
    versions = systems.versions()
    run.log(f"{args.only} on {args.systems}, {args.repeats} repeats; tenure {versions['tenure']}")
    with tempfile.TemporaryDirectory(prefix="tenure-bench-js-") as tmp:
        measures = measure(args, Path(tmp))
    sizes = ", ".join(f"{w} {run.SIZES[w]:,}" for w in args.only)
    print(
        f"tenure {versions['tenure']}; {node_versions()}; redis-server "
        f"{versions['redis-server']}; {args.repeats} repeats (medians); sizes {sizes};"
        f" {run.CLIENTS} clients; cap {args.max_seconds:g} s; {os.cpu_count()} CPUs\n"
    )
    print("\n".join(table(measures, args.systems, args.only)))
    if args.json is not None:
        args.json.write_text(dumps(measures) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
