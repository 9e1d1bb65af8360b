"""Shards on one host: par's throughput from one server and from ``--shards N``.

:func:`measure` starts ``tenure serve --shards N --fsync off`` (N = 1: one server),
then :data:`CLIENTS` client processes at once, each with :data:`SESSIONS` sessions
on nodes of their own (``NODES`` of them, so that the sharded URL spreads them over
the shards) locking and releasing distinct mutexes, one pair at a time per session,
for ``seconds``. It returns the pairs per second of all clients together, the
pairs' p50 and p99, and the servers' CPU (all shards) per pair.

``python -m bench.scale.shards worker --url URL --seconds S --index I`` is one
client process (spawned here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

import tenure
from bench.tools import systems

#: Client processes, sessions per client, nodes per client.
CLIENTS = 2
SESSIONS = 16
NODES = 8
REPO = Path(__file__).resolve().parents[2]


def _url(port: int, shards: int) -> str:
    doors = ",".join(f"127.0.0.1:{port + k}" for k in range(shards))
    return f"tenure://{doors}?sharded=true" if shards > 1 else f"tenure://{doors}"


def _consecutive_ports(count: int) -> int:
    """A port P with P..P+count-1 all free now."""
    import socket

    for _ in range(200):
        port = systems.free_port()
        if port + count > 65535:
            continue
        free = True
        for k in range(1, count):
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port + k))
                except OSError:
                    free = False
                    break
        if free:
            return port
    raise RuntimeError(f"no {count} free ports in a row")


def _cpu(pid: int) -> float:
    main = psutil.Process(pid)
    procs = [main, *main.children(recursive=True)]
    return sum(float(t.user + t.system) for t in (p.cpu_times() for p in procs))


def measure(shards: int, workdir: Path, seconds: float) -> dict[str, Any]:
    """par over ``shards`` servers for ``seconds``: pairs/s, p50/p99 (ms), CPU per pair."""
    port = _consecutive_ports(shards)
    argv = [sys.executable, "-m", "tenure", "serve", "--shards", str(shards), "--port", str(port)]
    argv += ["--data-dir", str(workdir / "data"), "--fsync", "off", "--log-format", "json"]
    log_path = workdir / "shards.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    clients: list[subprocess.Popen[str]] = []
    try:
        deadline = time.monotonic() + systems.START_TIMEOUT
        while log_path.read_text().count('"event": "listening"') < shards:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the shards did not start: {log_path.read_text()[-800:]}")
            time.sleep(0.05)
        url = _url(port, shards)
        for index in range(CLIENTS):
            cmd = [sys.executable, "-m", "bench.scale.shards", "worker", "--url", url]
            cmd += ["--seconds", str(seconds), "--index", str(index)]
            clients.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=REPO))
        time.sleep(1.0)  # (the clients open their sessions; the window is theirs)
        cpu0 = _cpu(server.pid)
        outputs = [c.communicate(timeout=seconds + 60)[0] for c in clients]
        cpu1 = _cpu(server.pid)
        results = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    finally:
        for client in clients:
            if client.poll() is None:
                client.kill()
        server.terminate()
        server.wait(timeout=30)
    pairs = sum(r["pairs"] for r in results)
    rate = sum(r["pairs"] / r["seconds"] for r in results)
    return {
        "pairs_per_s": rate,
        "par_p50_ms": statistics.median(r["p50_ms"] for r in results),
        "par_p99_ms": max(r["p99_ms"] for r in results),
        # The CPU window brackets the clients' whole run (opening included): an upper bound.
        "server_cpu_us_per_pair": 1e6 * (cpu1 - cpu0) / pairs,
    }


async def work(url: str, seconds: float, index: int) -> dict[str, Any]:
    """SESSIONS sessions over NODES nodes, each locking distinct mutexes for ``seconds``."""
    async with tenure.connect(url) as client:
        nodes = [f"par-{index}-{k}" for k in range(NODES)]
        for node in nodes:
            await client.create_node(node, exist_ok=True)
        sessions = [await client.session(nodes[i % NODES]) for i in range(SESSIONS)]
        took: list[float] = []
        per_node = dict.fromkeys(nodes, 0)  # (which server did them: bench.scale.cells)
        end = time.monotonic() + seconds

        async def one(s: int, session: tenure.Session) -> None:
            node, i = nodes[s % NODES], 0
            while time.monotonic() < end:
                started = time.perf_counter()
                lock = await session.mutex(f"m{s}-{i}").lock()
                await lock.release()
                took.append(time.perf_counter() - started)
                per_node[node] += 1
                i += 1

        started = time.monotonic()
        await asyncio.gather(*(one(s, session) for s, session in enumerate(sessions)))
        elapsed = time.monotonic() - started
        for session in sessions:
            await session.close()
    cuts = statistics.quantiles(took, n=100)
    return {
        "pairs": len(took),
        "seconds": elapsed,
        "p50_ms": cuts[49] * 1e3,
        "p99_ms": cuts[98] * 1e3,
        "per_node": per_node,
    }


def main(argv: list[str] | None = None) -> int:
    """``worker``: one client process; or, by hand, ``run N`` (prints the numbers)."""
    parser = argparse.ArgumentParser(prog="python -m bench.scale.shards", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker")
    w.add_argument("--url", required=True)
    w.add_argument("--seconds", type=float, required=True)
    w.add_argument("--index", type=int, required=True)
    r = sub.add_parser("run")
    r.add_argument("shards", type=int)
    r.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    if args.command == "run":
        import tempfile

        with tempfile.TemporaryDirectory() as scratch:
            print(json.dumps(measure(args.shards, Path(scratch), args.seconds)))
        return 0
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        print(json.dumps(runner.run(work(args.url, args.seconds, args.index))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
