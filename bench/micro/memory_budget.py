"""What ``--memory-budget`` counts, and the RSS of a server filled to it (issue 37).

``python -m bench.micro.memory_budget`` prints three tables (``--kinds-only``: the
first alone):

* **per kind, on a real server**: a fresh ``tenure serve --fsync off`` for each kind
  of object whose size a client chooses (:data:`KINDS`: sessions with a real
  client's key, description and identity, and with the largest ones; semaphores,
  nodes and watches with 1 KiB names, and semaphores whose 1 KiB name has an emoji),
  given ``--objects`` of it; then the growth of its RSS beside the growth of the
  estimate (the same commands applied to an engine here: the estimate is a function
  of the state), per object, and their ratio (the memory budget is honest where it
  is near 1: above, it undercounts what a token can make; well below, it refuses
  early). Issue 47: before names, identities and keys were counted, 1.4 for real
  sessions, 2.5 for the largest, 3.2 for semaphores with 1 KiB names, 11 with an
  emoji in them; now 0.8 to 1.2 (the pure build);
* **per object**: the Python heap each counted object of the engine costs (a
  session, a semaphore, a node, a queued acquire, a watch, a hold; tracemalloc's growth over
  ``--objects`` of each, divided), beside the cost the budget charges for it
  (:data:`tenure._core.quotas.OBJECT_BYTES`, rounded up from these); and the
  endings a session keeps for a re-attach (``Session.missed``: timed-out acquires,
  with a short name and a 1 KiB one), beside what the estimate counts of them
  (:func:`tenure._core.session.missed_bytes`; issue 47, round two);
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
import secrets
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
from tenure._core.commands import Command
from tenure._core.quotas import OBJECT_BYTES, Q_MISSED_BYTES, TRACKED
from tenure._core.values import ClientIdentity
from tenure._protocol import Failure, Reply

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


def _wide(engine: Engine) -> int:
    sid = _session(engine)
    engine.apply(CreateSemaphore(sid, "wide", MAX_COUNT, b""), 0.0)
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
        "holds": _heap_per(
            objects,
            _wide,
            lambda e, sid, i: e.apply(Acquire(sid, "wide", 1, i + 1, hold=i + 1), 0.0),
        ),
        "nodes": _heap_per(
            objects, lambda e: None, lambda e, _, i: e.apply(CreateNode(f"n{i}"), 0.0)
        ),
    }


def per_missed(objects: int, name: str) -> tuple[float, float]:
    """Per ending a session keeps (a queued acquire on ``name``, held by another
    session, that timed out): (heap bytes, the estimate's bytes). Each ending is of a
    hold of its own (the session keeps one per hold); the semaphore, and so its
    name, stays (held): the heap is the ending's alone."""
    engine = Engine()
    engine.apply(
        CreateNode(
            "n",
            NodeConfig(max_waiters=objects + 10, max_missed_per_session=objects + 10),
        ),
        0.0,
    )
    holder = _session(engine)
    engine.apply(Acquire(holder, name, MAX_COUNT, 1, ephemeral=True), 0.0)
    waiter = _session(engine)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    estimate = engine.ledger.total.counts[Q_MISSED_BYTES]
    for i in range(objects):
        engine.apply(
            Acquire(waiter, name, MAX_COUNT, 1, ephemeral=True, timeout=1.0, hold=i + 1), 0.0
        )
    engine.tick(2.0)
    engine.take_effects()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    estimated = engine.ledger.total.counts[Q_MISSED_BYTES] - estimate
    return (after - before) / objects, estimated / objects


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


#: A node roomy enough for every kind below.
ROOMY = NodeConfig(
    max_sessions=1_000_000, max_semaphores=1_000_000, max_watches_per_session=100_000
)
#: The most nodes a server keeps by default (``--max-nodes``): the nodes' kind makes fewer.
MAX_NODES = 10_000
#: 1 KiB: the longest name (``MAX_NAME_BYTES``), description and client name.
KIB = 1024


def _realistic_session(i: int, _: int) -> Command[Any]:
    """What a real client opens: a 16-byte key (as tenure's clients draw), a
    description and an identity of the lengths a deployment shows."""
    host = f"orders-worker-7d9f8c6b5-{i:06d}.prod.eu-west-1.internal"
    identity = ClientIdentity(host, 1000 + i, "orders-service/lock-client")
    description = f"orders worker {i} (deploy 2026-11-26.3, shard {i % 64})"
    return CreateSession("n", secrets.token_bytes(16), description=description, identity=identity)


def _largest_session(i: int, _: int) -> Command[Any]:
    """The largest session a client may open: 1 KiB description, host and client name,
    a 256-byte key."""
    tag = f"{i:08d}"
    identity = ClientIdentity(tag + "h" * (KIB - 8), 1000 + i, tag + "c" * (KIB - 8))
    description = tag + "d" * (KIB - 8)
    return CreateSession("n", secrets.token_bytes(256), description=description, identity=identity)


def _long_semaphore(i: int, sid: int) -> Command[Any]:
    return CreateSemaphore(sid, f"{i:08d}" + "s" * (KIB - 8), 1, b"")


def _wide_semaphore(i: int, sid: int) -> Command[Any]:
    # (One emoji: the interpreter keeps the whole name in 4 bytes a character.)
    return CreateSemaphore(sid, f"{i:08d}" + "s" * (KIB - 12) + "\N{GRINNING FACE}", 1, b"")


def _long_node(i: int, _: int) -> Command[Any]:
    return CreateNode(f"{i:08d}" + "n" * (KIB - 8))


def _long_watch(i: int, sid: int) -> Command[Any]:
    # (A semaphore watch: a node's prefix watches are bounded, a few hundred at most.)
    return DescribeSemaphore(sid, f"{i:08d}" + "w" * (KIB - 8), watch_data=True)


#: Each kind measured on a real server: its maker (the object's number, the session
#: id), and the most objects made of it (None: ``--objects``).
KINDS: dict[str, tuple[Callable[[int, int], Command[Any]], int | None]] = {
    "sessions (a real client's)": (_realistic_session, None),
    "sessions (the largest)": (_largest_session, None),
    "semaphores (1 KiB names)": (_long_semaphore, None),
    "semaphores (1 KiB, 1 emoji)": (_wide_semaphore, None),
    "nodes (1 KiB names)": (_long_node, MAX_NODES - 10),
    "watches (1 KiB names)": (_long_watch, None),
}


async def _made_on_server(
    make: Callable[[int, int], Command[Any]], objects: int
) -> tuple[int, int]:
    """A fresh server given ``objects`` of ``make``'s: (its RSS before, after)."""
    clients = Clients()
    with tempfile.TemporaryDirectory() as scratch:
        data_dir = Path(scratch) / "data"
        with ServerProcess(data_dir, "--fsync", "off") as server:
            try:
                client = await clients.connect(server.port)
                await client.call(CreateNode("n", ROOMY))
                sid = (await client.call(CreateSession("n", KEY))).session_id
                before = _rss(server.proc.pid)
                batch = 500  # (pipelined: each batch's answers read before the next)
                for start in range(0, objects, batch):
                    sent = [
                        client.send(make(i, sid)) for i in range(start, min(objects, start + batch))
                    ]
                    for request_id in sent:
                        answer = await client.answer(request_id)
                        if not isinstance(answer, Reply):
                            raise RuntimeError(f"refused: {answer}")
                    client.events.clear()  # (the bench's own memory, not the server's)
                return before, _rss(server.proc.pid)
            finally:
                await clients.close_all()


def _estimated(make: Callable[[int, int], Command[Any]], objects: int) -> tuple[int, int]:
    """The estimate of an engine given what the server was: (before, after)."""
    engine = Engine()
    engine.apply(CreateNode("n", ROOMY), 0.0)
    sid = int(engine.apply(CreateSession("n", KEY), 0.0).session_id)
    before = engine.ledger.estimate()
    for i in range(objects):
        engine.apply(make(i, sid), 0.0)
    return before, engine.ledger.estimate()


def per_kind(objects: int) -> dict[str, tuple[int, float, float]]:
    """Per kind (:data:`KINDS`): (objects made, RSS growth per object, estimate's
    growth per object), on a fresh server each."""
    measured: dict[str, tuple[int, float, float]] = {}
    for kind, (make, most) in KINDS.items():
        count = objects if most is None else min(objects, most)
        rss_before, rss_after = asyncio.run(_made_on_server(make, count))
        estimate_before, estimate_after = _estimated(make, count)
        measured[kind] = (
            count,
            (rss_after - rss_before) / count,
            (estimate_after - estimate_before) / count,
        )
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--budget", type=int, action="append", help="bytes (repeatable)")
    parser.add_argument("--kinds-only", action="store_true", help="only the per-kind table")
    args = parser.parse_args()
    print("per kind, on a real server: RSS growth vs the estimate's, per object:")
    for kind, (count, rss, estimate) in per_kind(args.objects).items():
        print(
            f"  {kind:<27} {count:>7,} made: RSS {rss:>7,.0f}  estimate {estimate:>7,.0f}"
            f"  RSS/estimate {rss / estimate:.2f}"
        )
    if args.kinds_only:
        return
    print(f"per object ({args.objects:,} of each), heap bytes vs what the budget charges:")
    measured = per_object(args.objects)
    measured["waiters"] -= measured["sessions"]
    for name, heap in measured.items():
        charged = OBJECT_BYTES[TRACKED.index(name)]
        print(f"  {name:<11} {heap:>8,.0f}   charged {charged:>6,}")
    print("  data_bytes          1   charged      1 (each byte of data, besides its object)")
    for label, name in (("short name", "busy"), ("1 KiB name", "b" * KIB)):
        heap, estimated = per_missed(args.objects, name)
        print(
            f"  ending, {label:<10} {heap:>6,.0f}   charged {estimated:>6,.0f}"
            " (kept for a re-attach)"
        )
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
