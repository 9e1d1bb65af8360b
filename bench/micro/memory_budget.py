"""What ``--memory-budget`` counts, and the RSS of a server filled to it (issue 37).

``python -m bench.micro.memory_budget`` prints two tables:

* **per object**: the Python heap each counted object of the engine costs (a
  session, a semaphore, a node, a queued acquire, a watch; tracemalloc's growth over
  ``--objects`` of each, divided), beside the cost the budget charges for it
  (:data:`tenure._core.quotas.OBJECT_BYTES`, rounded up from these);
* **a server filled to its budget**: a real ``tenure serve --fsync off
  --memory-budget B`` for each ``--budget`` (default 64 MiB and 256 MiB), filled
  with semaphores of 64 KiB of data until one is refused, then with empty ones
  until one is refused; then its state's estimate (``tenure_state_estimate_bytes``
  would say the same), and the process's RSS before and after (from /proc).

The RSS is what an operator must plan for: the budget bounds the state's estimate,
and the interpreter, the buffers and the allocator's slack come on top
(docs/operations.md, "Quotas and limits").

Internals: ``tenure._core``'s Engine and its commands (to measure objects alone), and
the test suite's wire client for the server (no public client needed).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from tests.server.wire import Clients, ServerProcess, WireClient

from tenure._core import (
    MAX_COUNT,
    Acquire,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeSemaphore,
    Engine,
    NodeConfig,
)
from tenure._core.quotas import COUNTED, OBJECT_BYTES
from tenure._protocol import Failure

KEY = b"bench-key"
KIB64 = b"x" * 65536


def _heap_per(
    objects: int, setup: Callable[[Engine], Any], make: Callable[[Engine, Any, int], object]
) -> float:
    engine = Engine(max_nodes=objects + 10)
    roomy = NodeConfig(
        max_sessions=objects + 10,
        max_semaphores=objects + 10,
        max_waiters=objects + 10,
        max_watches_per_session=objects + 10,
    )
    engine.apply(CreateNode("n", roomy), 0.0)
    context = setup(engine)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(objects):
        make(engine, context, i)
    engine.take_effects()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / objects


def _session(engine: Engine) -> int:
    return int(engine.apply(CreateSession("n", KEY), 0.0).session_id)


def _held(engine: Engine) -> int:
    sid = _session(engine)
    engine.apply(Acquire(sid, "busy", MAX_COUNT, 1, ephemeral=True), 0.0)
    return sid


def per_object(objects: int) -> dict[str, float]:
    """Heap bytes per counted object (module docstring)."""
    return {
        "sessions": _heap_per(
            objects, lambda e: None, lambda e, _, i: e.apply(CreateSession("n", KEY), 0.0)
        ),
        "watches": _heap_per(
            objects,
            _session,
            lambda e, sid, i: e.apply(DescribeSemaphore(sid, f"w{i}", watch_data=True), 0.0),
        ),
        "waiters": _heap_per(
            objects,
            _held,  # (each waiter of its own session: less a session's cost, below)
            lambda e, _, i: e.apply(
                Acquire(_session(e), "busy", MAX_COUNT, 1, ephemeral=True), 0.0
            ),
        ),
        "semaphores": _heap_per(
            objects,
            _session,
            lambda e, sid, i: e.apply(CreateSemaphore(sid, f"s{i}", 1, b""), 0.0),
        ),
        "nodes": _heap_per(
            objects, lambda e: None, lambda e, _, i: e.apply(CreateNode(f"n{i}"), 0.0)
        ),
    }


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def _fill(client: WireClient, sid: int, prefix: str, data: bytes) -> tuple[int, str]:
    """Create semaphores until one is refused: (how many were made, the refusal)."""
    made = 0
    while True:
        answer = await client.answer(client.send(CreateSemaphore(sid, f"{prefix}{made}", 1, data)))
        if isinstance(answer, Failure):
            return made, answer.message
        made += 1


async def filled(budget: int, big_first: bool) -> tuple[int, int, int, int, str]:
    """A server filled to ``budget`` (with 64 KiB semaphores first, or empty ones only):
    (64 KiB ones made, empty ones made, RSS before, RSS after, the refusal)."""
    clients = Clients()
    with tempfile.TemporaryDirectory() as scratch:
        flags = ("--fsync", "off", "--memory-budget", str(budget))
        with ServerProcess(Path(scratch) / "data", *flags) as server:
            try:
                client = await clients.connect(server.port)
                await client.call(CreateNode("n", NodeConfig(max_semaphores=1_000_000)))
                sid = (await client.call(CreateSession("n", KEY))).session_id
                rss_before = _rss(server.proc.pid)
                big = (await _fill(client, sid, "big", KIB64))[0] if big_first else 0
                small, refusal = await _fill(client, sid, "small", b"")
                return big, small, rss_before, _rss(server.proc.pid), refusal
            finally:
                await clients.close_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--budget", type=int, action="append", help="bytes (repeatable)")
    args = parser.parse_args()
    print(f"per object ({args.objects:,} of each), heap bytes vs what the budget charges:")
    measured = per_object(args.objects)
    measured["waiters"] -= measured["sessions"]
    for name, heap in measured.items():
        charged = OBJECT_BYTES[COUNTED.index(name)]
        print(f"  {name:<11} {heap:>8,.0f}   charged {charged:>6,}")
    print("  data_bytes          1   charged      1 (each byte of data, besides its object)")
    print("a server filled to its budget:")
    for budget in args.budget or [64 * 1024 * 1024, 256 * 1024 * 1024]:
        for big_first in (True, False):
            big, small, before, after, refusal = asyncio.run(filled(budget, big_first))
            print(
                f"  budget {budget / 2**20:>4.0f} MiB: {big:,} x 64 KiB + {small:,} empty "
                f"semaphores; RSS {before / 2**20:.0f} MiB empty -> {after / 2**20:.0f} MiB "
                f"full ({after / budget:.2f} x the budget)"
            )
    print(f"  (refused: {refusal})")


if __name__ == "__main__":
    main()
