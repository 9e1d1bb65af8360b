"""How long a partition takes to rebalance after a member leaves, on each backend.

``python -m bench.micro.rebalance`` starts each system of ``--systems`` (the peer
benchmark's servers: ``tenure-memory``, ``tenure-off``, ``tenure-redis``,
``tenure-etcd``, ``tenure-postgres``) on free ports, and makes ``--members``
partition members of one group (``session.group(name).partition(id)``), each in a
session of a client of its own, as processes would be. Then, ``--rounds`` times, one
member (each in turn) leaves, and the time is taken from just before its
``leave()`` until **every** remaining member's view has dropped it (each learns it
through its own watch: ``part.changes()``); the member then joins again, and the
next round starts once everyone sees it. Printed: the median and 99th percentile of
that time, and of the time until the **first** member saw it, in milliseconds.

Compare within one run: the machine is noisy.

Internals: none: the public API only (``tenure.connect``, ``Group.partition``,
``Partition.changes``, ``Partition.leave``).
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

import tenure
from bench.micro._backends import each_running, p50_p99, parser, with_prefix

GROUP = "shards"


async def _seen(part: tenure.Partition, present: str | None, absent: str | None) -> float:
    """When (perf_counter) ``part``'s view first has ``present`` and not ``absent``."""
    changes = part.changes()
    try:
        async for view in changes:
            if (present is None or present in view.weights) and absent not in view.weights:
                return time.perf_counter()
    finally:
        await changes.aclose()
    raise RuntimeError(f"{part!r}: its changes ended")


async def _measure(url: str, members: int, rounds: int) -> None:
    url = with_prefix(url)
    node = f"bench-{uuid.uuid4().hex[:8]}"
    clients = [await tenure.connect(url) for _ in range(members)]
    try:
        await clients[0].create_node(node)
        sessions = [await client.session(node) for client in clients]
        parts = [await s.group(GROUP).partition(f"m{i}") for i, s in enumerate(sessions)]
        await asyncio.gather(*(_seen(part, f"m{members - 1}", None) for part in parts))
        everyone, first = [], []
        for round_ in range(rounds):
            i = round_ % members
            leaver, others = parts[i], parts[:i] + parts[i + 1 :]
            watching = [asyncio.ensure_future(_seen(p, None, leaver.id)) for p in others]
            await asyncio.sleep(0)  # (each watcher has its view before the leave)
            start = time.perf_counter()
            await leaver.leave()
            seen = await asyncio.wait_for(asyncio.gather(*watching), 60)
            everyone.append((max(seen) - start) * 1000)
            first.append((min(seen) - start) * 1000)
            parts[i] = await sessions[i].group(GROUP).partition(leaver.id)
            await asyncio.gather(*(_seen(p, leaver.id, None) for p in parts))
        print(
            f"{members:>7}  {rounds:>6}  "
            f"{p50_p99(everyone, '8.2f'):>20}  {p50_p99(first, '8.2f'):>20}"
        )
        for part in parts:
            await part.leave()
        for session in sessions:
            await session.close()
        await clients[0].drop_node(node, force=True)
    finally:
        for client in clients:
            await client.aclose()


def main() -> None:
    command_line = parser(__doc__)
    command_line.add_argument("--members", type=int, default=8, help="partition members")
    command_line.add_argument("--rounds", type=int, default=50, help="leaves timed")
    args = command_line.parse_args()
    for system, server in each_running(args.systems, "rebalance"):
        print(f"\n{system} ({server.url})")
        header = ("members", "rounds", "all saw it, ms", "first saw it, ms")
        print(f"{header[0]:>7}  {header[1]:>6}  {header[2]:>20}  {header[3]:>20}")
        asyncio.run(_measure(server.url, args.members, args.rounds))


if __name__ == "__main__":
    main()
