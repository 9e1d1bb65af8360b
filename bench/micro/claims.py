"""What a claim costs on each backend: granted, refused, released.

``python -m bench.micro.claims`` starts each system of ``--systems`` (the peer
benchmark's servers: ``tenure-memory``, ``tenure-off``, ``tenure-redis``,
``tenure-etcd``, ``tenure-postgres``) on free ports and times, one call at a time
(median and 99th percentile, ms):

* ``claim``: ``session.claim(name, at_least=0, at_most=600)`` of a free name (a new
  slot's name each time, as a job's per-day slots are: the store makes its
  semaphore);
* ``refused``: a claim of a name another claim holds (what every replica but the
  winner pays, per slot);
* ``release``: ``claim.release()`` (by id, no session: at_least 0, so the claim ends
  and its semaphore goes);
* ``claim + release``: the pair, on one name again and again (a lock's use).

It prints one line per system. Compare within one run: the machine is noisy.

Internals: none: the public API only (``tenure.connect``, ``Session.claim``,
``Claim.release``).
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

import tenure
from bench.micro._backends import each_running, p50_p99, parser, timed, with_prefix


async def _measure(url: str, n: int) -> None:
    async with tenure.connect(with_prefix(url)) as client:
        node = f"bench-{uuid.uuid4().hex[:8]}"
        await client.create_node(node)
        session = await client.session(node)
        slots = itertools.count()
        claims: list[tenure.Claim] = []

        async def claim_new() -> None:
            claim = await session.claim(f"slot-{next(slots)}", at_least=0, at_most=600)
            assert claim is not None
            claims.append(claim)

        held = await session.claim("held", at_least=0, at_most=600)
        assert held is not None

        async def refused() -> None:
            assert await session.claim("held", at_least=0, at_most=600) is None

        async def release() -> None:
            assert await claims.pop().release()

        async def pair() -> None:
            claim = await session.claim("job", at_least=0, at_most=600)
            assert claim is not None
            await claim.release()

        granted = p50_p99(await timed(claim_new, n))
        lost = p50_p99(await timed(refused, n))
        released = p50_p99(await timed(release, n))
        both = p50_p99(await timed(pair, n))
        print(f"  claim {granted}   refused {lost}   release {released}   claim+release {both}")
        await held.release()
        await session.close()
        await client.drop_node(node, force=True)


def main() -> None:
    command_line = parser(__doc__)
    command_line.add_argument("--n", type=int, default=200, help="timed calls of each kind")
    args = command_line.parse_args()
    print("ms, p50 / p99")
    for system, server in each_running(args.systems, "claims"):
        print(f"{system} ({server.url})")
        asyncio.run(_measure(server.url, args.n))


if __name__ == "__main__":
    main()
