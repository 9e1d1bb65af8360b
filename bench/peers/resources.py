"""The resource workloads: memory per held lock, many idle sessions, restart time.

:func:`run` is what the orchestrator (``python -m bench``) calls, once per workload:

* **hold**: server RSS idle, then with N mutexes held at once (few connections and
  sessions holding many locks each): bytes per held lock = (held - idle) / N.
  How each system holds its locks is :mod:`bench.peers.holders`'. tenure-memory
  has no server: the RSS growth of the client process, which then holds the
  engine too.
* **sessions**: N concurrent idle sessions over a few connections: server RSS, and
  the server's CPU (% of one core, psutil CPU-time deltas) over a quiet window.
  etcd's analogue is a lease per session with a keepalive stream.
* **recovery**: N held locks, then SIGTERM (and, separately, SIGKILL) and a
  restart on the same data directory: seconds from spawn to the ``listening`` log
  line and to the first successful request (which must see all N locks).

Clients never run in the orchestrator's process for hold and sessions: each is a
worker (:mod:`bench.peers.holders`) that waits for the orchestrator's word
between steps, so the server is measured while the worker holds still. Every wait
is bounded. ``python -m bench.peers.resources hold,sessions [--quick]`` runs them
by hand and prints their Measures.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import tenure
from bench.peers.holders import HOLDERS, LOCKS_PER_LEASE, NODE, SETTLE, DflockdHolder
from bench.tools import systems
from bench.tools.results import Measure, dumps, median_measure
from bench.tools.workers import Worker
from tenure.errors import UnavailableError

#: Sizes of full mode (the targets' sizes) and of quick mode.
FULL = {"hold": (10_000, 100_000), "sessions": (100_000,), "recovery": (100_000,)}
QUICK = {"hold": (10_000,), "sessions": (10_000,), "recovery": (10_000,)}
#: Worker processes (one client, one connection each) of the sessions workload.
SESSION_WORKERS = 4
#: The quiet window over which the sessions workload reads the server's CPU.
CPU_WINDOW = {True: 3.0, False: 20.0}
#: The module the workers run.
HOLDERS_MODULE = "bench.peers.holders"


@dataclass
class Fill:
    """What one worker reported when filled: how many, in how long, its own RSS."""

    count: int
    seconds: float
    rss: int


def step_timeout(n: int) -> float:
    """A generous bound for filling ``n`` (slow peers included), in seconds."""
    return 60.0 + n / 500


def spawn_workers(
    workload: str, server: systems.Server, n: int, parts: int, workdir: Path
) -> tuple[list[Worker], list[int]]:
    """``parts`` workers sharing ``n`` locks (or sessions), all ready; and their RSS then."""
    workers: list[Worker] = []
    try:
        for p in range(parts):
            first, count = p * n // parts, (p + 1) * n // parts - p * n // parts
            argv = ["--workload", workload, "--system", server.system, "--url", server.url]
            argv += ["--first", str(first), "--count", str(count), "--total", str(n)]
            argv += ["--timeout", str(step_timeout(n))]
            log = workdir / f"worker-{workload}-{server.port}-{p}.log"
            workers.append(Worker(HOLDERS_MODULE, argv, log))
        rss = [int(w.expect("ready", 90)["rss"]) for w in workers]
    except BaseException:
        for w in workers:
            w.kill()
        raise
    return workers, rss


def fill(workers: list[Worker], n: int) -> list[Fill]:
    """Tell every worker to go; wait until all are filled."""
    for w in workers:
        w.send("go")
    fills = []
    for w in workers:
        data = w.expect("filled", step_timeout(n) + 30)
        fills.append(Fill(int(data["count"]), float(data["seconds"]), int(data["rss"])))
    got = sum(f.count for f in fills)
    if got != n:
        raise RuntimeError(f"only {got} of {n} held")
    return fills


def label(n: int) -> str:
    """10000 -> "10k"."""
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def hold_once(system: str, n: int, workdir: Path) -> dict[str, float]:
    """One repeat of hold on a fresh server: idle and held RSS (MB), bytes per lock."""
    server = systems.start(system, workdir)
    workers: list[Worker] = []
    try:
        workers, ready_rss = spawn_workers("hold", server, n, 1, workdir)
        time.sleep(SETTLE)
        idle = server.rss_bytes()
        started = time.perf_counter()
        fills = fill(workers, n)
        seconds = time.perf_counter() - started
        held = server.rss_bytes()
        if server.pid is None:  # tenure-memory: the worker is the server
            idle, held = ready_rss[0], fills[0].rss
        return {
            "bytes_per_lock": (held - idle) / n,
            "rss_idle_mb": idle / 1e6,
            "rss_held_mb": held / 1e6,
            "fill_per_s": n / seconds,
        }
    finally:
        for w in workers:
            w.kill()  # what it holds goes with the server
        server.stop()


def sessions_once(system: str, n: int, workdir: Path, window: float) -> dict[str, float]:
    """One repeat of sessions: RSS with ``n`` idle sessions, and CPU over ``window`` s."""
    server = systems.start(system, workdir)
    workers: list[Worker] = []
    try:
        workers, _ = spawn_workers("sessions", server, n, SESSION_WORKERS, workdir)
        time.sleep(SETTLE)
        idle = server.rss_bytes()
        started = time.perf_counter()
        fill(workers, n)
        seconds = time.perf_counter() - started
        held = server.rss_bytes()
        cpu0, t0 = server.cpu_seconds(), time.monotonic()
        time.sleep(window)
        cpu1, t1 = server.cpu_seconds(), time.monotonic()
        alive = server.proc is None or server.proc.poll() is None
        if not alive:
            raise RuntimeError(f"the server died: {server.log()[-500:]}")
        return {
            "rss_mb": held / 1e6,
            "bytes_per_session": (held - idle) / n,
            "keepalive_cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
            "open_per_s": n / seconds,
        }
    finally:
        for w in workers:
            w.finish()
        server.stop()


async def _probe(url: str, deadline: float) -> int:
    """Retry until one request succeeds; the number of semaphores it saw."""
    while True:
        try:
            async with tenure.connect(url) as client:
                return (await client.describe_node(NODE)).semaphores
        except UnavailableError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.002)


def restart(system: str, workdir: Path, data_dir: Path) -> tuple[systems.Server, float, float, int]:
    """Start ``system`` on ``data_dir``: the server, seconds to listening and to an answer.

    Spawned here rather than with systems.start (same command line) to time it to the
    millisecond: the log is polled every 2 ms, then a request is retried until it works.
    """
    port = systems.free_port()
    argv, url = systems.command(system, port, data_dir)
    log_path = workdir / f"{system}-restart-{port}.log"
    with log_path.open("wb") as log:
        started = time.monotonic()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=data_dir
        )
    server = systems.Server(system, systems.HOST, port, data_dir, url, proc.pid, log_path, proc)
    try:
        deadline = started + systems.START_TIMEOUT
        while '"msg": "listening"' not in server.log():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{system} did not restart: {server.log()[-1000:]}")
            time.sleep(0.002)
        listening = time.monotonic() - started
        semaphores = asyncio.run(_probe(url, deadline))
        first = time.monotonic() - started
    except BaseException:
        server.kill()
        raise
    return server, listening, first, semaphores


def recovery_once(system: str, n: int, workdir: Path, how: str) -> dict[str, float]:
    """``n`` held locks; stop the server (``how``: "term" or "kill"); time the restart."""
    server = systems.start(system, workdir)
    workers: list[Worker] = []
    again: systems.Server | None = None
    try:
        workers, _ = spawn_workers("recovery", server, n, 1, workdir)
        fill(workers, n)
        for w in workers:
            w.kill()  # its connection drops: the sessions are detached, nothing released
        time.sleep(0.2)  # the server has logged the detaches
        started = time.monotonic()
        if how == "term":
            server.stop()
        else:
            server.kill()
        stopped = time.monotonic() - started
        again, listening, first, seen = restart(system, workdir, server.data_dir)
        if seen != n:
            raise RuntimeError(f"the restarted server has {seen} of the {n} locks")
        out = {f"restart_{how}_s": first, f"listening_{how}_s": listening}
        if how == "term":
            out["stop_s"] = stopped
        return out
    finally:
        for w in workers:
            w.kill()
        server.kill()
        if again is not None:
            again.stop()


RESOURCE_SYSTEMS = {
    "hold": ("tenure-always", "tenure-off", "tenure-memory", "redis", "etcd", "dflockd"),
    "sessions": ("tenure-always", "tenure-off", "etcd"),
    "recovery": ("tenure-always", "tenure-off"),
}


def _note(workload: str, system: str, n: int, quick: bool) -> str:
    size = f"N = {n:,}" + (" (quick mode; the full size is 100,000)" if quick else "")
    if workload == "hold":
        how = {
            "tenure-memory": "RSS of the client process, which holds the engine itself",
            "redis": "SET NX PX of redis-py's Lock (32-byte token)",
            "etcd": f"Put of k/<lease>, a lease per {LOCKS_PER_LEASE} locks (a held v3 lock's"
            " state; etcd slows down with many keys on one lease)",
            "dflockd": f"dflockd-client acquire over {DflockdHolder.CONNECTIONS} connections",
        }.get(system, f"session.mutex(k).lock() from {HOLDERS} sessions on one connection")
        return f"{size}; {how}"
    if workload == "sessions":
        how = (
            "a 60 s lease each, one keepalive per lease every 20 s on a stream per worker"
            if system == "etcd"
            else "tenure sessions (default 30 s recovery window); keepalive is per connection"
        )
        return f"{size} over {SESSION_WORKERS} client processes (one connection each); {how}"
    return f"{size} held locks ({HOLDERS} sessions); restart = spawn to first answered request"


def run(workload: str, systems_: Sequence[str], quick: bool, workdir: Path) -> list[Measure]:
    """The workload on each applicable system: medians of 1 (quick) or 3 (full) repeats."""
    if workload not in RESOURCE_SYSTEMS:
        raise ValueError(f"unknown resource workload {workload!r}")
    workdir.mkdir(parents=True, exist_ok=True)
    repeats = 1 if quick else 3
    sizes = (QUICK if quick else FULL)[workload]
    measures: list[Measure] = []
    for system in systems_:
        if system not in RESOURCE_SYSTEMS[workload]:
            continue
        for n in sizes:
            samples: dict[str, list[float]] = {}
            try:
                for _ in range(repeats):
                    for name, value in _once(workload, system, n, quick, workdir).items():
                        samples.setdefault(name, []).append(value)
            except Exception as exc:
                reason = f"{exc.__class__.__name__}: {exc}"
                measures.append(Measure(workload, system, "error", float("nan"), "", [], reason))
                continue
            # The largest size carries the target's metric names; smaller ones a suffix.
            suffix = "" if n == max(sizes) else f"_{label(n)}"
            for name, values in samples.items():
                unit = _unit(name)
                metric = name + suffix
                note = _note(workload, system, n, quick)
                measures.append(median_measure(workload, system, metric, unit, values, note))
            print(f"{workload} {system} N={n}: {_brief(samples)}", file=sys.stderr, flush=True)
    return measures


def _once(workload: str, system: str, n: int, quick: bool, workdir: Path) -> dict[str, float]:
    if workload == "hold":
        return hold_once(system, n, workdir)
    if workload == "sessions":
        return sessions_once(system, n, workdir, CPU_WINDOW[quick])
    out = {**recovery_once(system, n, workdir, "term"), **recovery_once(system, n, workdir, "kill")}
    # The target's number: the slower of the two (a crash may replay more of the log).
    return {"restart_s": max(out["restart_term_s"], out["restart_kill_s"]), **out}


def _unit(name: str) -> str:
    """The unit of a metric, from the end of its name."""
    for end, unit in (("_per_s", "/s"), ("_s", "s"), ("_mb", "MB"), ("_pct", "% of a core")):
        if name.endswith(end):
            return unit
    return "B"


def _brief(samples: dict[str, list[float]]) -> str:
    return ", ".join(f"{k} {sorted(v)[len(v) // 2]:,.3g}" for k, v in samples.items())


def main(argv: list[str] | None = None) -> int:
    """Run workloads by hand (the orchestrator calls :func:`run`); print their Measures."""
    parser = argparse.ArgumentParser(prog="python -m bench.peers.resources", description=__doc__)
    parser.add_argument("workloads", help="comma-separated: hold,sessions,recovery")
    parser.add_argument("--systems", default=",".join(systems.SYSTEMS))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tenure-resources-") as tmp:
        out: list[Measure] = []
        for workload in args.workloads.split(","):
            out += run(workload, args.systems.split(","), args.quick, Path(tmp) / workload)
    print(dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
