"""The peer comparison's orchestrator: ``python -m bench`` (what scripts/bench runs).

Every server is started here (fresh per system, reused across its repeats) and
stopped before the next; every repeat runs in a client process of its own
(:mod:`bench.peers.lockload`, :mod:`bench.peers.ceiling`); hold, sessions and
recovery are :mod:`bench.peers.resources`', watch :mod:`bench.peers.watch`'s. The
medians go to docs/benchmarks.md (:mod:`bench.tools.report`), judged against
:mod:`bench.peers.targets`. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from bench.peers import resources, watch
from bench.tools import report, systems
from bench.tools.results import Measure, client_each, loads, median_measure, to_json

REPO = Path(__file__).resolve().parents[2]
LOCK_WORKLOADS = ("seq", "seq-awaited", "par", "cont")
#: The workloads of one session (so of one client shape).
ONE_SESSION = ("seq", "seq-awaited")
RESOURCE_WORKLOADS = ("hold", "sessions", "recovery")
WORKLOADS = (*LOCK_WORKLOADS, *RESOURCE_WORKLOADS, "watch", "ceiling")
#: Full sizes: pairs (seq, seq-awaited, par) and grants (cont); round trips (ceiling).
SIZES = {"seq": 2_000, "seq-awaited": 2_000, "par": 10_000, "cont": 3_000, "ceiling": 20_000}
#: Quick mode halves par and cont (and the echo ceiling): at full sizes the
#: whole run (with the resource workloads) takes over 5 minutes on 2 cores.
QUICK_SIZES = {**SIZES, "par": 5_000, "cont": 1_500, "ceiling": 10_000}
#: Quick mode's cap on each lock workload's timed part, in seconds (a repeat stops
#: at its size or at this, whichever comes first): the slowest systems here
#: (tenure on postgres://, etcd's cont) would take most of the 5 minutes otherwise.
QUICK_SECONDS = 1.0
CLIENTS = 32
RUN_TIMEOUT = 120.0  # one repeat, in seconds; longer is reported as a failure
#: The systems whose par and cont also run in the shape "each of the 32 workers has
#: its own client and connection" (the par and cont targets hold for both), beside
#: the shape of one client (connection, pool, channel) shared by the 32. PostgreSQL
#: advisory locks and dflockd take a connection per session anyway (they are that
#: shape already); memory:// has no connection; the backends' own targets
#: (tenure-etcd, tenure-redis, tenure-postgres) are set for the shared client.
#: tenure-cluster is judged against etcd as durable tenure is: in both shapes.
EACH_SHAPE: tuple[str, ...] = ("tenure-always", "tenure-off", "tenure-cluster", "redis", "etcd")
#: The systems seq-awaited runs on: those its targets judge, tenure on tenure:// and on
#: redis:// (where leaving ``async with`` does not wait for the release's answer), and
#: their peer, redis-py's Lock (whose release waits always: its seq-awaited is its seq,
#: measured again beside them). Not run elsewhere: no target judges it there (on etcd,
#: PostgreSQL, dflockd and tenure's etcd:// and postgres:// every release waits already,
#: and memory:// has no round trip: seq-awaited would be seq again).
AWAITED_FORM: tuple[str, ...] = ("tenure-off", "tenure-redis", "redis")

_started = time.monotonic()


def log(message: str) -> None:
    """Progress on stderr, with the seconds since the start."""
    print(f"[{time.monotonic() - _started:6.1f}s] {message}", file=sys.stderr, flush=True)


def failure(workload: str, system: str, reason: str) -> Measure:
    """A run that produced no numbers (the report shows the reason)."""
    log(f"{workload} {system}: FAILED: {reason}")
    return Measure(workload, system, "error", float("nan"), "", [], reason[-300:])


def client_run(argv: list[str], workload: str, system: str) -> list[Measure]:
    """One repeat in a fresh client process; its Measures, or one failure."""
    try:
        done = subprocess.run(
            [sys.executable, *argv],
            cwd=REPO,  # -m bench... needs the repo on sys.path
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT + 30,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return [failure(workload, system, f"client hung past {RUN_TIMEOUT + 30:g}s")]
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return [failure(workload, system, lines[-1])]
    return loads(done.stdout)


def aggregate(runs: list[list[Measure]]) -> list[Measure]:
    """Medians over repeats of each metric; failures are kept as they are."""
    samples: dict[tuple[str, str, str, str], list[float]] = {}
    notes: dict[tuple[str, str, str, str], str] = {}
    failures: list[Measure] = []
    for run in runs:
        for m in run:
            if m.metric == "error":
                failures.append(m)
                continue
            key = (m.workload, m.system, m.metric, m.unit)
            samples.setdefault(key, []).extend(m.samples)
            note = m.note.split(", pid")[0]  # the pid differs per repeat
            if key not in notes or "quick mode" in note:  # a capped repeat is said
                notes[key] = note
    out = [median_measure(*key, values, notes[key]) for key, values in samples.items()]
    return out + failures


def lock_workloads(
    system: str, workloads: Sequence[str], repeats: int, workdir: Path, quick: bool
) -> list[Measure]:
    """The lock workloads on ``system``: one server, ``repeats`` client processes each.

    par and cont run in both shapes on the systems of :data:`EACH_SHAPE`, reported
    under :func:`~bench.tools.results.client_each`'s name; seq and seq-awaited have one
    session, so one shape. seq-awaited runs on the systems of :data:`AWAITED_FORM` only.
    Full mode runs every (workload, shape, repeat) in a client process of its own;
    quick mode a process per (shape, repeat) doing its workloads in turn, each capped
    at :data:`QUICK_SECONDS` (process starts were most of a quick run's time).
    """
    measures: list[Measure] = []
    workloads = [w for w in workloads if w != "seq-awaited" or system in AWAITED_FORM]
    if not workloads:
        return measures
    try:
        server = systems.start(system, workdir)
    except Exception as exc:
        return [failure(w, system, f"server did not start: {exc}") for w in workloads]
    try:
        shapes = [(system, "one", list(workloads))]
        if system in EACH_SHAPE and (each := [w for w in workloads if w not in ONE_SESSION]):
            shapes.append((client_each(system), "each", each))
        # A process's work: (name, shape, its workloads), in the order they run.
        if quick:
            plan = shapes
        else:
            plan = [(n, shape, [w]) for w in workloads for n, shape, ws in shapes if w in ws]
        runs: dict[tuple[str, str], list[list[Measure]]] = {}
        for name, shape, wanted in plan:
            for r in range(repeats):
                run = _lock_run(system, server, name, shape, wanted, quick)
                for w in wanted:
                    got = [m for m in run if m.workload == w]
                    runs.setdefault((w, name), []).append(got)
                    log(f"{w} {name} {r + 1}/{repeats}: {_headline(got)}")
        for w in workloads:  # the report's order: by workload, then shape
            for name, _shape, wanted in shapes:
                if w in wanted:
                    measures += aggregate(runs[(w, name)])
    finally:
        server.stop()
    return measures


def _lock_run(
    system: str, server: systems.Server, name: str, shape: str, wanted: list[str], quick: bool
) -> list[Measure]:
    """One client process running ``wanted`` in turn; its Measures named ``name``."""
    argv = ["-m", "bench.peers.lockload", "--system", system, "--url", server.url]
    argv += ["--workload", ",".join(wanted)]
    argv += ["--n", ",".join(f"{w}={SIZES[w]}" for w in wanted)]
    argv += ["--clients", str(CLIENTS), "--timeout", str(RUN_TIMEOUT), "--shape", shape]
    if quick:
        argv += ["--max-seconds", str(QUICK_SECONDS)]
    if any(w in ONE_SESSION for w in wanted) and (pids := server.pids()):
        argv += ["--server-pid", ",".join(map(str, pids))]
    run = client_run(argv, ",".join(wanted), name)
    out = []
    for m in run:
        m.system = name
        if m.metric == "error":  # a failed process: a failure of each of its workloads
            out += [Measure(w, name, "error", math.nan, "", [], m.note) for w in wanted]
        else:
            out.append(m)
    return out


def _headline(run: list[Measure]) -> str:
    return ", ".join(f"{m.metric} {m.value:,.3g}" for m in run[:3] if m.metric != "error") or (
        run[0].note if run else "no output"
    )


def ceiling(repeats: int) -> list[Measure]:
    """The echo ceiling, with the server on uvloop and on asyncio."""
    measures: list[Measure] = []
    for loop in ("uvloop", "asyncio"):
        name = f"echo-{loop}"
        argv = [sys.executable, "-m", "bench.peers.ceiling", "serve", "--loop", loop]
        server = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            line = server.stdout.readline()  # "listening PORT", or "" if it died
            if not line.startswith("listening"):
                measures.append(failure("ceiling", name, "echo server did not start"))
                continue
            port = line.split()[1]
            runs = []
            for r in range(repeats):
                args = ["-m", "bench.peers.ceiling", "client", "--port", port, "--system", name]
                args += ["--n", str(SIZES["ceiling"]), "--clients", str(CLIENTS)]
                args += ["--server-pid", str(server.pid)]  # its CPU per round trip
                runs.append(client_run(args, "ceiling", name))
                log(f"ceiling {name} {r + 1}/{repeats}: {_headline(runs[-1])}")
            measures += aggregate(runs)
        finally:
            server.kill()
            server.wait(timeout=10)
            if server.stdout is not None:
                server.stdout.close()
    return measures


def guarded(workload: str, call: Callable[[], list[Measure]]) -> list[Measure]:
    """The Measures of ``call``, or one failure of ``workload`` if it raised."""
    try:
        return call()
    except Exception as exc:
        return [failure(workload, "all", f"{exc.__class__.__name__}: {exc}")]


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the selected workloads, write the report."""
    parser = argparse.ArgumentParser(prog="scripts/bench", description=__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--quick",
        action="store_true",
        help=f"3 repeats, half par/cont, each capped at {QUICK_SECONDS:g} s, 10k for 100k",
    )
    mode.add_argument("--full", action="store_true", help="5 repeats, full sizes (default)")
    parser.add_argument("--only", help=f"comma-separated workloads of {','.join(WORKLOADS)}")
    parser.add_argument("--systems", help=f"comma-separated systems of {','.join(systems.SYSTEMS)}")
    parser.add_argument("--repeats", type=int, help="override the mode's repeats")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks.md")
    parser.add_argument(
        "--size-factor",
        type=float,
        default=1.0,
        help="multiply seq/par/cont/ceiling sizes (smoke tests)",
    )
    args = parser.parse_args(argv)
    for name, size in (QUICK_SIZES if args.quick else SIZES).items():
        SIZES[name] = max(CLIENTS, round(size * args.size_factor))
    quick = bool(args.quick)
    repeats = args.repeats or (3 if quick else 5)
    workloads = _pick(args.only, WORKLOADS, "workload")
    chosen = _pick(args.systems, systems.SYSTEMS, "system")
    log(f"{'quick' if quick else 'full'} mode, {repeats} repeats: {workloads} on {chosen}")
    # Before the run: the code measured is what is checked out when the servers start.
    versions = systems.versions()

    measures: list[Measure] = []
    with tempfile.TemporaryDirectory(prefix="tenure-bench-") as tmp:
        workdir = Path(tmp)
        lock = [w for w in LOCK_WORKLOADS if w in workloads]
        if lock:
            for system in chosen:
                measures += lock_workloads(system, lock, repeats, workdir / system, quick)
        for w in RESOURCE_WORKLOADS:
            if w in workloads:
                log(f"{w}: bench.peers.resources")
                measures += guarded(w, _resources(w, chosen, quick, workdir))
        if "watch" in workloads:
            log("watch: bench.peers.watch")
            measures += guarded("watch", lambda: watch.run(chosen, quick, workdir / "watch"))
        if "ceiling" in workloads:
            measures += ceiling(repeats)

    elapsed = time.monotonic() - _started
    meta = {
        "mode": "quick" if quick else "full",
        "repeats": repeats,
        "command": "scripts/bench " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "duration_s": round(elapsed, 1),
        "sizes": {**SIZES, "clients": CLIENTS},
        "quick_seconds": QUICK_SECONDS if quick else None,
        "versions": versions,
    }
    out_dir = args.out.parent / args.out.stem
    to_json(measures, out_dir / "results.json")
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    report.write(measures, meta, args.out)
    log(f"wrote {args.out} and {out_dir}/ in {elapsed:.0f}s")
    return 0


def _resources(
    workload: str, chosen: list[str], quick: bool, workdir: Path
) -> Callable[[], list[Measure]]:
    """The call of :func:`bench.peers.resources.run` for one of its workloads."""
    return lambda: resources.run(workload, chosen, quick, workdir / workload)


def _pick(given: str | None, known: Sequence[str], what: str) -> list[str]:
    if not given:
        return list(known)
    picked = [x.strip() for x in given.split(",") if x.strip()]
    unknown = [x for x in picked if x not in known]
    if unknown:
        raise SystemExit(f"unknown {what}(s) {unknown}; known: {', '.join(known)}")
    return [x for x in known if x in picked]  # the report's order


if __name__ == "__main__":
    sys.exit(main())
