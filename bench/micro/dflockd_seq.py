"""Sequential lock + release over the dflockd protocol against `tenure serve`.

One connection, distinct keys, `l` then `r`, one pair at a time (the seq workload of
the benchmark issue, as a dflockd client sees the server). Not part of the tests.
Run: ``python -m bench.micro.dflockd_seq [--pairs N]``.

Internals: ``tenure.compat.dflockd.codec.frame``, to write dflockd's wire lines
(the server's face, not a tenure client).
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.server.wire import ServerProcess

from tenure.compat.dflockd.codec import frame


def run(port: int, pairs: int) -> tuple[float, float, float]:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = sock.makefile("rb")
        latencies = []
        started = time.perf_counter()
        for i in range(pairs):
            t0 = time.perf_counter()
            sock.sendall(frame("l", f"k{i}", "5"))
            token = reader.readline().split()[1].decode()
            sock.sendall(frame("r", f"k{i}", token))
            assert reader.readline() == b"ok\n"
            latencies.append(time.perf_counter() - t0)
        rate = pairs / (time.perf_counter() - started)
        reader.close()
    q = statistics.quantiles(latencies, n=100)
    return rate, q[49] * 1e3, q[98] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.micro.dflockd_seq", description=__doc__)
    parser.add_argument("--pairs", type=int, default=2_000)
    args = parser.parse_args()
    for fsync in ("off", "always"):
        with (
            tempfile.TemporaryDirectory() as tmp,
            ServerProcess(
                Path(tmp) / "data", "--fsync", fsync, "--dflockd-max-locks", "100000"
            ) as server,
        ):
            rate, p50, p99 = run(server.port, args.pairs)
            print(
                f"dflockd l+r, tenure serve --fsync {fsync:6}: {rate:>7,.0f} pairs/s"
                f"  (p50 {p50:.2f} ms, p99 {p99:.2f} ms per pair)"
            )


if __name__ == "__main__":
    main()
