"""Instructions per seq pair, client and server, counted by callgrind (not part of the tests).

Timings on this shared 2-core machine swing by 2x from one minute to the next;
instruction counts do not. So this is the yardstick for a change to the request
path: one client process does ``lock()`` + ``release()`` of distinct mutexes over
one connection to a ``tenure serve --fsync off``, and the client (then, in a second
run, the server) runs under ``valgrind --tool=callgrind``. Each side is run at two
sizes, and the difference divided by the difference in pairs is the cost of one
pair, start-up excluded. User space only: the system calls' own work is not in it.

Run: ``python -m bench.micro.instructions [--src DIR ...] [--pairs N] [--repeats R]``;
each ``--src`` (default: this checkout's ``src``) is put first on PYTHONPATH, so
two checkouts compare from one run: ``python -m bench.micro.instructions --src /old/src
--src src``. Best on an idle machine (see :func:`per_pair` on the server's count
under load). Needs ``valgrind`` (Debian package); takes several minutes (callgrind
runs code about 50 times slower).

Internals: none; the client is tenure's public API and the server ``tenure
serve``. It is a micro-benchmark because it counts one path's instructions rather
than comparing with a peer.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.server.wire import free_port

#: The client: a session, then ``pairs`` lock + release of distinct mutexes, on uvloop
#: (as every client of ``scripts/bench`` runs).
CLIENT = """
import asyncio, sys, tenure
async def main(url, pairs):
    client = await tenure.connect(url)
    await client.create_node("bench", exist_ok=True)
    session = await client.session("bench")
    for i in range(pairs):
        lock = await session.mutex(f"k{i}").lock()
        await lock.release()
    await session.close()
    await client.aclose()
import uvloop
uvloop.run(main(sys.argv[1], int(sys.argv[2])))
"""
#: The smaller run's pairs: the larger one has ``--pairs`` more.
BASE_PAIRS = 100
#: How long a server under callgrind may take to start listening, in seconds.
START_TIMEOUT = 120.0


def _callgrind(out: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", "-q", f"--callgrind-out-file={out}"]


def _total(out: Path) -> int:
    """The Ir total of a callgrind output file."""
    for line in out.read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise RuntimeError(f"{out}: no totals line (did callgrind finish?)")


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    import socket

    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the server did not listen within {START_TIMEOUT:g} s")


def count(src: Path, side: str, pairs: int, work: Path) -> int:
    """Instructions of ``side`` ("client" or "server") for a run of ``pairs`` pairs."""
    env = dict(os.environ, PYTHONPATH=str(src))
    # One file per process (%p): the server forks a child to write each snapshot, and
    # a child writing the same file would leave its own count, taken at the fork.
    out = work / f"callgrind-{side}-{pairs}.%p.out"
    port = free_port()
    server_cmd = [sys.executable, "-m", "tenure", "serve", "--port", str(port)]
    # A data directory of its own: one left by an earlier run (another --src, another
    # repeat) would be recovered at start-up, its log longer after a larger run, and
    # that cost would count as the pairs' (the second --src measured twice its own).
    data_dir = tempfile.mkdtemp(prefix=f"data-{side}-{pairs}-", dir=work)
    server_cmd += ["--fsync", "off", "--data-dir", data_dir]
    client_cmd = [sys.executable, "-c", CLIENT, f"tenure://127.0.0.1:{port}", str(pairs)]
    if side == "server":
        server_cmd = _callgrind(out) + server_cmd
    else:
        client_cmd = _callgrind(out) + client_cmd
    quiet = subprocess.DEVNULL
    server = subprocess.Popen(server_cmd, env=env, stdout=quiet, stderr=quiet)
    try:
        _wait_listening(port, server)
        client = subprocess.Popen(client_cmd, env=env, stdout=quiet, stderr=subprocess.PIPE)
        _, error = client.communicate(timeout=1800)
        if client.returncode != 0:
            raise RuntimeError(f"the client failed: {error.decode(errors='replace')[-2000:]}")
    finally:
        server.send_signal(signal.SIGTERM)  # callgrind writes its file as the server exits
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    measured = server if side == "server" else client
    return _total(work / out.name.replace("%p", str(measured.pid)))


def per_pair(src: Path, side: str, pairs: int, work: Path, repeats: int = 1) -> float:
    """Instructions of one pair on ``side``: two run sizes, start-up cancelled out.

    Each size keeps the least of ``repeats`` runs. The client's count is the same
    from run to run; the server's is not quite: how its event loop's turns fall
    depends on timing, and a busy machine has been seen to add a third. Noise only
    adds instructions, so the least is the closest to the cost.
    """
    small = min(count(src, side, BASE_PAIRS, work) for _ in range(repeats))
    large = min(count(src, side, BASE_PAIRS + pairs, work) for _ in range(repeats))
    return (large - small) / pairs


def main(argv: list[str] | None = None) -> int:
    """Print the instructions per pair of each ``--src``, client and server."""
    parser = argparse.ArgumentParser(prog="python -m bench.micro.instructions", description=__doc__)
    parser.add_argument("--src", action="append", type=Path, help="a checkout's src directory")
    parser.add_argument("--pairs", type=int, default=500, help="pairs measured (default 500)")
    parser.add_argument(
        "--repeats", type=int, default=2, help="runs per size, the least kept (default 2)"
    )
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (apt-get install valgrind)")
    if args.pairs < 1 or args.repeats < 1:
        parser.error("--pairs and --repeats must be at least 1")
    sources = args.src or [Path(__file__).resolve().parents[2] / "src"]
    with tempfile.TemporaryDirectory(prefix="tenure-instructions-") as tmp:
        for src in sources:
            client = per_pair(src.resolve(), "client", args.pairs, Path(tmp), args.repeats)
            server = per_pair(src.resolve(), "server", args.pairs, Path(tmp), args.repeats)
            print(
                f"{src}: client {client / 1e3:,.1f}k, server {server / 1e3:,.1f}k instructions/pair"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
