"""Healthy clients' latency while one connection floods the server (not part of the tests).

Issue 10, finding 1: one connection that pipelines requests and never reads its
answers must not take more than its share of the event loop. This runs one
``tenure serve`` per scenario and measures, for a few healthy raw-protocol clients
doing lock + unlock cycles on their own sessions, the latency of each request
(p50, p99, max):

* ``quiet``: the healthy clients alone;
* ``native``: plus one native connection that writes ``--flood`` pipelined
  requests (Acquire + Release pairs on a session of its own) and reads nothing;
* ``dflockd``: plus one dflockd connection that writes ``--flood`` pipelined
  ``l`` lines (a try-lock on a key it already holds: a session, an acquire and a
  close each) and reads nothing.

The healthy clients start once the flood is under way, and stop after
``--cycles`` cycles each or ``--budget`` seconds, whichever comes first (a request
still unanswered then counts with the time it has waited so far).

Run: ``python -m bench.micro.flood`` (the server of this tree), or
``python -m bench.micro.flood --server-src /tmp/old/src`` to measure another version of
the server in the same conditions (``git archive <commit> src | tar -x -C
/tmp/old`` makes one). Compare ratios from one run: the machine is noisy.

Internals: ``tenure._core``'s commands, ``tenure._protocol``'s client connection and
the dflockd codec (``tenure.compat.dflockd.codec``): a flood is pipelined raw frames
that no client library would send.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.server.wire import Clients, ServerProcess, WireClient

from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, Release
from tenure._protocol import NEED_DATA, ClientConnection, Hello, Reply, Request, Welcome
from tenure.compat.dflockd import codec as dwire

NODE = "flood"
#: Requests of one pre-built block of the native flood (request ids cycle through it).
BLOCK = 2_000
CHUNK = 65_536


class Flood(threading.Thread):
    """One connection writing ``requests`` pipelined requests, never reading an answer."""

    def __init__(self, port: int, kind: str, requests: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.kind = kind
        self.requests = requests
        self.sent = 0  # bytes the kernel accepted
        self.total = 0
        self.stop = threading.Event()
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.data = self._prepare()

    def _prepare(self) -> bytes:
        """Handshake (native) or the first grant (dflockd), then the bytes to flood with."""
        if self.kind == "dflockd":
            self.sock.sendall(dwire.frame("l", "flood", "0"))
            assert self.sock.recv(4096).startswith(b"ok "), "the flood key is not free"
            return dwire.frame("l", "flood", "0") * self.requests
        codec = ClientConnection()
        self.sock.sendall(codec.send(Hello(client_name="flood")))
        welcome = self._answer(codec)
        assert isinstance(welcome, Welcome), welcome
        self.sock.sendall(codec.send(Request(1, CreateSession(NODE, b"flood"))))
        reply = self._answer(codec)
        assert isinstance(reply, Reply), reply
        session = reply.value.session_id  # type: ignore[union-attr]
        pairs = []
        for i in range(BLOCK // 2):
            acquire = Acquire(session, f"f{i}", MAX_COUNT, i + 1, ephemeral=True)
            pairs.append(codec.send(Request(10 + 2 * i, acquire)))
            pairs.append(codec.send(Request(11 + 2 * i, Release(session, f"f{i}"))))
        block = b"".join(pairs)
        return block * (self.requests // BLOCK)

    def _answer(self, codec: ClientConnection) -> object:
        while (event := codec.next_event()) is NEED_DATA:
            codec.receive_data(self.sock.recv(65536))
        return event

    def run(self) -> None:
        self.total = len(self.data)
        view = memoryview(self.data)
        self.sock.settimeout(0.2)
        while self.sent < self.total and not self.stop.is_set():
            try:
                self.sent += self.sock.send(view[self.sent : self.sent + CHUNK])
            except TimeoutError:
                continue  # the server stopped reading us: try again until told to stop
            except OSError:
                break  # dropped
        self.stop.wait()
        self.sock.close()


async def healthy(
    port: int, clients: int, cycles: int, budget: float, flood: Flood | None
) -> list[float]:
    """Latencies (seconds) of every request of ``clients`` lock + unlock loops.

    The clients connect and open their sessions first; then the flood starts.
    """
    opened = Clients()
    latencies: list[float] = []
    try:
        conns = [await opened.connect(port) for _ in range(clients)]
        sessions = [
            (await conn.call(CreateSession(NODE, b"k", timeout=60.0))).session_id for conn in conns
        ]
        if flood is not None:
            flood.start()
            await asyncio.sleep(0.3)  # the flood is under way
        deadline = time.perf_counter() + budget

        async def loop(conn: WireClient, session: int, n: int) -> None:
            for i in range(cycles):
                for command in (
                    Acquire(session, f"h{n}-{i}", MAX_COUNT, i + 1, ephemeral=True),
                    Release(session, f"h{n}-{i}"),
                ):
                    t0 = time.perf_counter()
                    try:
                        await asyncio.wait_for(conn.call(command), deadline - t0)
                    except TimeoutError:
                        latencies.append(time.perf_counter() - t0)  # censored at the budget
                        return
                    latencies.append(time.perf_counter() - t0)

        pairs = enumerate(zip(conns, sessions, strict=True))
        await asyncio.gather(*(loop(conn, session, n) for n, (conn, session) in pairs))
    finally:
        for conn in opened.opened:
            conn.writer.transport.abort()
    return latencies


async def setup(port: int) -> None:
    opened = Clients()
    try:
        conn = await opened.connect(port)
        await conn.call(CreateNode(NODE))
    finally:
        await opened.close_all()


def scenario(args: argparse.Namespace, kind: str) -> str:
    env = {"PYTHONPATH": args.server_src} if args.server_src else None
    with (
        tempfile.TemporaryDirectory() as tmp,
        ServerProcess(Path(tmp) / "data", "--fsync", args.fsync, env=env) as server,
    ):
        asyncio.run(setup(server.port))
        flood = None if kind == "quiet" else Flood(server.port, kind, args.flood)
        started = time.perf_counter()
        lat = asyncio.run(healthy(server.port, args.clients, args.cycles, args.budget, flood))
        elapsed = time.perf_counter() - started
        flooded = ""
        if flood is not None:
            flooded = f"  flood: {flood.sent / flood.total:4.0%} of {flood.total / 1e6:.1f} MB sent"
            flood.stop.set()
            flood.join(5)
    q = statistics.quantiles(lat, n=100)
    return (
        f"{kind:8} {len(lat):6} requests in {elapsed:5.1f} s   p50 {q[49] * 1e3:8.2f} ms"
        f"   p99 {q[98] * 1e3:8.2f} ms   max {max(lat) * 1e3:8.1f} ms{flooded}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.micro.flood", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--clients", type=int, default=4, help="healthy connections")
    parser.add_argument("--cycles", type=int, default=250, help="lock + unlock cycles each")
    parser.add_argument("--budget", type=float, default=30.0, help="seconds, at most")
    parser.add_argument("--flood", type=int, default=500_000, help="pipelined requests")
    parser.add_argument("--fsync", default="always", choices=("always", "batch", "off"))
    parser.add_argument("--only", default="quiet,native,dflockd")
    parser.add_argument("--server-src", default=None, help="run the server from this src dir")
    args = parser.parse_args()
    for kind in args.only.split(","):
        print(scenario(args, kind), flush=True)


if __name__ == "__main__":
    main()
