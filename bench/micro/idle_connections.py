"""Many idle connections beside a busy client: the server's latency and memory (issue 28).

Run: ``python -m bench.micro.idle_connections [--idle 10000] [--workers 32] [--pairs 200]
[--ping 5]``

Idle, as a real client's connection is idle: each sends a Ping every ``--ping``
seconds (5 by default, a client's keepalive when it hears nothing else; staggered
over the interval) and reads its Pong; ``--ping 0`` leaves them silent (issue 28's
measure). Issue 51's target: a connection costs at most 16 KiB of the server's RSS,
and 10,000 of them leave the busy client's p99 within 2x of its p99 alone.

It starts ``tenure serve --fsync off`` with room for the idle connections
(``--max-connections``, ``--idle-timeout 0``, ``--max-handshaking`` for a batch),
then measures **par** (``--workers`` sessions of one client, each locking and
releasing distinct mutexes, one pair at a time) twice: quiet, and with ``--idle``
connections open that said Hello and then only ping (or nothing). It prints both
runs' pairs/s, p50 and p99, their ratios, and the server's resident memory per idle connection
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
from tenure._protocol import ClientConnection, Hello, NeedData, Ping, Pong

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


class IdleConnection:
    """One connection that said Hello and read its Welcome; then silent, or pinging."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, protocol: ClientConnection
    ) -> None:
        self.reader, self.writer, self.protocol = reader, writer, protocol
        #: Pongs read (each the answer to one of its Pings).
        self.pongs = 0

    async def next_event(self) -> object:
        """The next message the server sent it (read as needed)."""
        while True:
            event = self.protocol.next_event()
            if event is not NeedData.NEED_DATA:
                return event
            data = await self.reader.read(65536)
            if not data:
                raise ConnectionError("the server closed an idle connection")
            self.protocol.receive_data(data)

    async def ping_every(self, interval: float, offset: float) -> None:
        """A Ping every ``interval`` seconds (the first after ``offset``), each Pong read:
        what an idle client's keepalive does (a real client's: every 5 s unless it
        heard the server more lately)."""
        await asyncio.sleep(offset)
        nonce = 0
        while True:
            nonce += 1
            self.writer.write(self.protocol.send(Ping(nonce)))
            while not isinstance(await self.next_event(), Pong):
                pass
            self.pongs += 1
            await asyncio.sleep(interval)


async def idle_connection(port: int) -> IdleConnection:
    """A connection that said Hello, read its Welcome, and then says nothing (yet)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    protocol = ClientConnection()
    writer.write(protocol.send(Hello(client_name="idle")))
    connection = IdleConnection(reader, writer, protocol)
    await connection.next_event()  # (its Welcome)
    return connection


async def run(idle: int, workers: int, pairs: int, ping: float = 0.0) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < idle + 512:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, idle + 1024), hard))
    port = free_port()
    with server(port, idle + 256) as process:
        url = f"tenure://127.0.0.1:{port}"
        await asyncio.wait_for(par(url, workers, 20), STEP_LIMIT)  # warm up
        quiet = await asyncio.wait_for(par(url, workers, pairs), STEP_LIMIT)
        before = rss_kib(process.pid)
        connections: list[IdleConnection] = []
        for start in range(0, idle, BATCH):
            batch = [idle_connection(port) for _ in range(min(BATCH, idle - start))]
            connections += await asyncio.wait_for(asyncio.gather(*batch), STEP_LIMIT)
        pingers = [
            asyncio.create_task(c.ping_every(ping, ping * i / idle))
            for i, c in enumerate(connections)
            if ping
        ]
        # Let the server settle what they cost (pinging: each has pinged once or more).
        await asyncio.sleep(1.0 + ping)
        after = rss_kib(process.pid)
        loaded = await asyncio.wait_for(par(url, workers, pairs), STEP_LIMIT)
        alive = sum(not c.writer.is_closing() for c in connections)
        failed = sum(p.done() for p in pingers)  # (a pinger ends only on an error)
        for pinger in pingers:
            pinger.cancel()
        await asyncio.gather(*pingers, return_exceptions=True)
        pongs = sum(c.pongs for c in connections)
        for connection in connections:
            connection.writer.close()
    kind = f"pinging every {ping:g} s" if ping else "idle"
    rows = [("quiet", quiet), (f"{idle} connections {kind}", loaded)]
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
        f"{(after - before) * 1024 / idle:.0f} bytes per connection {kind} "
        f"({alive} of {idle} still open after the loaded run; server pid was {process.pid})"
    )
    if ping:
        print(f"{pongs} Pongs read in all; {failed} pinging connections failed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument(
        "--ping", type=float, default=5.0, help="seconds between each one's Pings (0: silent)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    asyncio.run(run(args.idle, args.workers, args.pairs, args.ping))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
