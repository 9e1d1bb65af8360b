"""What an all-or-none acquire costs on each backend, against taking the mutexes one by one.

``python -m bench.micro.lock_all`` starts each system of ``--systems`` (the peer
benchmark's servers: ``tenure-memory``, ``tenure-off``, ``tenure-redis``,
``tenure-etcd``, ``tenure-postgres``) on free ports and, for each set size of
``--sizes``, times:

* ``lock_all``: one session, ``session.lock_all(names)`` then ``release()`` on free
  names, one set at a time (median and 99th percentile of the pair, ms);
* ``one by one``: the same names taken as ``session.mutex(name).lock()`` one after
  the other, in name order, then released: what users write by hand (Redisson's
  MultiLock does this, a round trip a key), which holds some names while it waits
  for the others;
* ``contended``: two sessions of two clients, each taking the same set again and
  again for ``--seconds`` (one in the names' order, one in reverse): sets handed
  over per second. One by one in opposite orders would deadlock; lock_all may not.

It prints one table per system. Compare ratios within one run: the machine is noisy.

Internals: none: the public API only (``tenure.connect``, ``Session.lock_all``,
``Session.mutex``).
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

import tenure
from bench.micro._backends import each_running, p50_p99, parser, timed, with_prefix


async def _uncontended(session: tenure.Session, names: list[str], n: int) -> tuple[str, str]:
    async def together() -> None:
        held = await session.lock_all(names, timeout=10)
        await held.release()

    async def one_by_one() -> None:
        locks = [await session.mutex(name).lock(timeout=10) for name in sorted(names)]
        for lock in locks:
            await lock.release()

    return p50_p99(await timed(together, n)), p50_p99(await timed(one_by_one, n))


async def _contended(url: str, node: str, names: list[str], seconds: float) -> float:
    """Sets handed over per second between two sessions asking in opposite orders."""
    async with tenure.connect(url) as one, tenure.connect(url) as two:
        first, second = await one.session(node), await two.session(node)
        deadline = time.monotonic() + seconds
        done = 0

        async def worker(session: tenure.Session, order: list[str]) -> None:
            nonlocal done
            while time.monotonic() < deadline:
                held = await session.lock_all(order, timeout=30)
                await held.release()
                done += 1

        await asyncio.wait_for(
            asyncio.gather(worker(first, names), worker(second, names[::-1])), seconds + 60
        )
        return done / seconds


async def _measure(url: str, sizes: list[int], n: int, seconds: float) -> None:
    url = with_prefix(url)
    header = ("names", "lock_all ms (p50 / p99)", "one by one ms", "contended sets/s")
    print(f"{header[0]:>5}  {header[1]:>24}  {header[2]:>18}  {header[3]:>17}")
    async with tenure.connect(url) as client:
        node = f"bench-{uuid.uuid4().hex[:8]}"
        await client.create_node(node)
        session = await client.session(node)
        for size in sizes:
            names = [f"acct/{i:03d}" for i in range(size)]
            together, by_one = await _uncontended(session, names, n)
            rate = await _contended(url, node, names, seconds)
            print(f"{size:>5}  {together:>24}  {by_one:>18}  {rate:>17.0f}")
        await session.close()
        await client.drop_node(node, force=True)


def main() -> None:
    command_line = parser(__doc__)
    command_line.add_argument("--sizes", default="1,2,8,32")
    command_line.add_argument("--n", type=int, default=200, help="timed pairs per size")
    command_line.add_argument("--seconds", type=float, default=2.0, help="of each contended run")
    args = command_line.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    for system, server in each_running(args.systems, "lock-all"):
        print(f"\n{system} ({server.url})")
        asyncio.run(_measure(server.url, sizes, args.n, args.seconds))


if __name__ == "__main__":
    main()
