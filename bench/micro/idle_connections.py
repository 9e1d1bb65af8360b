"""Many idle connections beside a busy client: the server's latency and memory (issue 28).

Run: ``python -m bench.micro.idle_connections [--idle 10000] [--workers 32] [--pairs 200]``

It starts ``tenure serve --fsync off`` with room for the idle connections
(``--max-connections``, ``--idle-timeout 0``, ``--max-handshaking`` for a batch),
then measures **par** (``--workers`` sessions of one client, each locking and
releasing distinct mutexes, one pair at a time) twice: quiet, and with ``--idle``
connections open that said Hello and then nothing. It prints both runs' pairs/s,
p50 and p99, their ratios, and the server's resident memory per idle connection
(``VmRSS`` before and after opening them). Compare the ratios of one run: the machine is noisy.

Internals: ``tenure._protocol``'s ``ClientConnection`` and ``Hello`` make the idle
connections' handshake on raw sockets (a tenure client per idle connection would
measure the client's own keepalives, not an idle peer).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import tenure
from tenure._protocol import ClientConnection, Hello, NeedData

#: How long any one step may take before the run gives up, in seconds.
STEP_LIMIT = 300.0
#: How many idle connections are opened at once.
BATCH = 500


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_kib(pid: int) -> int:
    """The process's resident memory, in KiB (``VmRSS`` of /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


@contextlib.contextmanager
def server(port: int, room: int) -> Iterator[subprocess.Popen[bytes]]:
    """``tenure serve`` on ``port`` with room for ``room`` connections; stopped after."""
    with tempfile.TemporaryDirectory() as data:
        args = [sys.executable, "-m", "tenure", "serve", "--fsync", "off", "--port", str(port)]
        args += ["--data-dir", data, "--max-connections", str(room), "--idle-timeout", "0"]
        # Room for a batch of BATCH connections in their handshake at once.
        args += ["--max-handshaking", str(2 * BATCH)]
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                    break
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the server did not start")
                time.sleep(0.1)
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def par(url: str, workers: int, pairs: int) -> tuple[float, float, float]:
    """``workers`` sessions of one client, ``pairs`` lock + release each: pairs/s, p50, p99 (ms)."""
    async with tenure.connect(url) as client:
        with contextlib.suppress(tenure.errors.AlreadyExistsError):
            await client.create_node("idle-bench")
        sessions = [await client.session("idle-bench") for _ in range(workers)]
        latencies: list[float] = []

        async def worker(index: int, session: tenure.Session) -> None:
            for i in range(pairs):
                started = time.perf_counter()
                lock = await session.mutex(f"w{index}-{i}").lock()
                await lock.release()
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(worker(i, s) for i, s in enumerate(sessions)))
        elapsed = time.perf_counter() - started
        for session in sessions:
            await session.close()
    cuts = statistics.quantiles(latencies, n=100)
    return workers * pairs / elapsed, cuts[49] * 1e3, cuts[98] * 1e3


async def idle_connection(port: int) -> asyncio.StreamWriter:
    """A connection that said Hello, read its Welcome, and then says nothing."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    protocol = ClientConnection()
    writer.write(protocol.send(Hello(client_name="idle")))
    while True:
        event = protocol.next_event()
        if event is NeedData.NEED_DATA:
            data = await reader.read(65536)
            if not data:
                raise ConnectionError("the server closed an idle connection at once")
            protocol.receive_data(data)
            continue
        return writer


async def run(idle: int, workers: int, pairs: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < idle + 512:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, idle + 1024), hard))
    port = free_port()
    with server(port, idle + 256) as process:
        url = f"tenure://127.0.0.1:{port}"
        await asyncio.wait_for(par(url, workers, 20), STEP_LIMIT)  # warm up
        quiet = await asyncio.wait_for(par(url, workers, pairs), STEP_LIMIT)
        before = rss_kib(process.pid)
        writers: list[asyncio.StreamWriter] = []
        for start in range(0, idle, BATCH):
            batch = [idle_connection(port) for _ in range(min(BATCH, idle - start))]
            writers += await asyncio.wait_for(asyncio.gather(*batch), STEP_LIMIT)
        await asyncio.sleep(1.0)  # let the server settle what they cost
        after = rss_kib(process.pid)
        loaded = await asyncio.wait_for(par(url, workers, pairs), STEP_LIMIT)
        alive = sum(not w.is_closing() for w in writers)
        for writer in writers:
            writer.close()
    rows = [("quiet", quiet), (f"{idle} idle connections", loaded)]
    print(f"par: {workers} sessions of one client, {pairs} lock + release each (--fsync off)")
    print(f"{'':>24} {'pairs/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
    for label, (rate, p50, p99) in rows:
        print(f"{label:>24} {rate:9.0f} {p50:8.2f} {p99:8.2f}")
    print(
        f"loaded / quiet: pairs/s {loaded[0] / quiet[0]:.2f}x, p50 {loaded[1] / quiet[1]:.2f}x, "
        f"p99 {loaded[2] / quiet[2]:.2f}x"
    )
    print(
        f"server RSS {before / 1024:.1f} MiB -> {after / 1024:.1f} MiB: "
        f"{(after - before) * 1024 / idle:.0f} bytes per idle connection "
        f"({alive} of {idle} still open after the loaded run; server pid was {process.pid})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=200)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    asyncio.run(run(args.idle, args.workers, args.pairs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
