"""What a prefix cache costs on each backend: its first listing, and its lag behind a change.

``python -m bench.micro.cache`` starts each system of ``--systems`` (the peer
benchmark's servers: ``tenure-memory``, ``tenure-off``, ``tenure-redis``,
``tenure-etcd``, ``tenure-postgres``) on free ports, creates ``--size`` semaphores
under ``config/`` (and as many outside it), and times:

* ``first listing``: entering ``client.cache(node, prefix="config/")``: its session
  opened, its prefix watch armed, the prefix listed and each name described (ms,
  median of ``--listings``);
* ``lag``: another client updates one of the names (a random one each time, new
  data), and the cache's ``changes()`` yields it: from the start of the update's
  call to the change in hand (ms, p50 and p99 of ``--n`` changes, one at a time).
  The update's own round trip is part of it (shown beside it: ``write``); what the
  push adds is the difference.

It prints one line per system. Compare within one run: the machine is noisy.

Internals: none: the public API only (``tenure.connect``, ``Client.cache``).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

import tenure
from bench.micro._backends import each_running, p50_p99, parser, with_prefix

#: Creates in flight at once while the semaphores are made.
CREATING = 32


async def _fill(session: tenure.Session, size: int) -> list[str]:
    """``size`` semaphores under ``config/`` and as many outside it; the names under it."""
    gate = asyncio.Semaphore(CREATING)
    names = [f"config/{i:05d}" for i in range(size)]

    async def create(name: str) -> None:
        async with gate:
            await session.semaphore(name).create(1, b"v0")

    await asyncio.gather(*(create(n) for n in names + [f"other/{i:05d}" for i in range(size)]))
    return names


async def _measure(url: str, size: int, n: int, listings: int) -> None:
    url = with_prefix(url)
    rng = random.Random(35)
    async with tenure.connect(url) as app, tenure.connect(url) as writer_client:
        node = f"bench-{uuid.uuid4().hex[:8]}"
        await writer_client.create_node(node, max_semaphores=4 * size + 100)
        writer = await writer_client.session(node)
        names = await _fill(writer, size)
        entries = []
        for _ in range(listings):
            start = time.perf_counter()
            async with app.cache(node, prefix="config/", max_size=size) as cache:
                entries.append((time.perf_counter() - start) * 1000)
                assert len(cache.items()) == size
        async with app.cache(node, prefix="config/", max_size=size) as cache:
            changes = cache.changes()
            lags, writes = [], []
            for i in range(n):
                name, data = rng.choice(names), b"v%d" % (i + 1)
                start = time.perf_counter()
                await writer.semaphore(name).update(data)
                writes.append((time.perf_counter() - start) * 1000)
                while True:
                    change = await asyncio.wait_for(anext(changes), 30)
                    if change.name == name and change.view is not None and change.view.data == data:
                        break
                lags.append((time.perf_counter() - start) * 1000)
        print(
            f"{size:>6}  {statistics.median(entries):>10.1f}  "
            f"{p50_p99(lags)}  "
            f"{statistics.median(writes):>7.2f}"
        )
        await writer.close()
        await writer_client.drop_node(node, force=True)


def main() -> None:
    command_line = parser(__doc__)
    command_line.add_argument("--size", type=int, default=1000, help="semaphores under the prefix")
    command_line.add_argument("--n", type=int, default=300, help="timed changes")
    command_line.add_argument("--listings", type=int, default=5, help="timed first listings")
    args = command_line.parse_args()
    for system, server in each_running(args.systems, "cache"):
        print(f"\n{system} ({server.url})")
        print(f"{'names':>6}  {'listing ms':>10}  {'lag ms (p50 / p99)':>17}  {'write':>7}")
        asyncio.run(_measure(server.url, args.size, args.n, args.listings))


if __name__ == "__main__":
    main()
