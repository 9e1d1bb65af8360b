"""How long a leader takeover takes with the leader runner (``client.lead``), per backend.

``python -m bench.micro.takeover`` starts each system of ``--systems`` (the peer
benchmark's servers: ``tenure-memory``, ``tenure-off``, ``tenure-redis``,
``tenure-etcd``, ``tenure-postgres``) on free ports and times, from the moment the
leader is taken away to the moment the next ``work`` runs (its first line):

* ``session killed``: two runners in this process, one leading, one waiting; an
  operator's ``kill_session`` of the leader's session. The next work is the waiting
  runner's; the killed runner campaigns again in a new session and waits in turn,
  and the next round kills the new leader (``--n`` rounds, after 3 untimed ones);
* ``process killed``: the leader's runner in a child interpreter, ``kill -9``-ed
  while this process's runner waits; the next work runs once the store has ended
  the dead leader's session, its recovery window (``--window``, on the node; etcd
  rounds it up to 2 s) after its last renewal (``--kills`` rounds). Not on
  ``memory://``, which lives in one process.

It prints, per system, the median and 99th percentile in ms (with a few dozen
samples the p99 is about the largest). Compare within one run: the machine is noisy.

Internals: none: the public API only (``tenure.connect``, ``Client.lead``,
``Client.kill_session``, ``Semaphore.describe``).
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

ELECTION = "takeover"

#: A runner in a child process: prints "leading" when its work starts, then waits.
CHILD = """
import asyncio, sys
import tenure

async def main():
    async with tenure.connect(sys.argv[1]) as client:
        async def work(leadership):
            print("leading", flush=True)
            await asyncio.Event().wait()
        await client.lead(sys.argv[2], sys.argv[3], work)

asyncio.run(main())
"""


class Terms:
    """The terms of this process's runners: when each work started, with its leadership."""

    def __init__(self) -> None:
        self.started: asyncio.Queue[tuple[float, tenure.Leadership]] = asyncio.Queue()

    async def work(self, leadership: tenure.Leadership) -> None:
        await self.started.put((time.perf_counter(), leadership))
        await asyncio.Event().wait()


async def _waiting(observer: tenure.Session, count: int) -> None:
    """Until ``count`` candidates wait behind the leader."""
    while True:
        description = await observer.semaphore(ELECTION).describe(waiters=True)
        if len(description.waiters) >= count:
            return
        await asyncio.sleep(0.001)


async def _session_killed(url: str, node: str, n: int) -> list[float]:
    """ms from each kill_session of the leader to the next work's start."""
    async with (
        tenure.connect(url) as one,
        tenure.connect(url) as two,
        tenure.connect(url) as admin,
    ):
        terms = Terms()
        runners = [asyncio.create_task(c.lead(node, ELECTION, terms.work)) for c in (one, two)]
        observer = await admin.session(node)
        _, leader = await terms.started.get()
        samples = []
        for _ in range(n + 3):
            await _waiting(observer, 1)
            killed = time.perf_counter()
            await admin.kill_session(node, leader.session.id)
            started, leader = await asyncio.wait_for(terms.started.get(), 60)
            samples.append((started - killed) * 1000)
        for runner in runners:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)
        return samples[3:]


async def _process_killed(url: str, node: str, kills: int) -> list[float]:
    """ms from each kill -9 of the leader's process to the next work's start."""
    samples = []
    async with tenure.connect(url) as client:
        observer = await client.session(node)
        for _ in range(kills):
            child = await asyncio.create_subprocess_exec(
                sys.executable, "-c", CHILD, url, node, ELECTION, stdout=asyncio.subprocess.PIPE
            )
            assert child.stdout is not None
            line = await asyncio.wait_for(child.stdout.readline(), 60)
            assert line.startswith(b"leading"), line
            terms = Terms()
            runner = asyncio.create_task(client.lead(node, ELECTION, terms.work))
            await _waiting(observer, 1)
            killed = time.perf_counter()
            child.kill()
            await child.wait()
            started, _ = await asyncio.wait_for(terms.started.get(), 60)
            samples.append((started - killed) * 1000)
            runner.cancel()  # resigns: the next child leads at once
            await asyncio.gather(runner, return_exceptions=True)
    return samples


async def _measure(system: str, url: str, n: int, kills: int, window: float) -> None:
    url = with_prefix(url)
    async with tenure.connect(url) as client:
        node = f"bench-{uuid.uuid4().hex[:8]}"
        await client.create_node(node, recovery_window=window)
        killed = await _session_killed(url, node, n)
        # memory:// lives in this process: no other process can lead in it.
        processes = [] if url.startswith("memory://") else await _process_killed(url, node, kills)
        async with client.session(node) as session:
            granted = session.recovery_window
        print(
            f"{system:<16}  {p50_p99(killed, '8.1f'):>19}  {p50_p99(processes, '8.1f'):>19}  "
            f"{granted:>6.1f} s  ({len(killed)} kills, {len(processes)} kill -9)"
        )
        await client.drop_node(node, force=True)


def main() -> None:
    command_line = parser(__doc__)
    command_line.add_argument("--n", type=int, default=50, help="timed session kills per system")
    command_line.add_argument("--kills", type=int, default=5, help="kill -9 rounds per system")
    command_line.add_argument(
        "--window", type=float, default=1.0, help="the node's recovery window"
    )
    args = command_line.parse_args()
    header = ("system", "session killed ms", "process killed ms", "window")
    print(f"{header[0]:<16}  {header[1]:>19}  {header[2]:>19}  {header[3]:>8}")
    print(f"{'':<16}  {'(p50 / p99)':>19}  {'(p50 / p99)':>19}")
    for system, server in each_running(args.systems, "takeover"):
        asyncio.run(_measure(system, server.url, args.n, args.kills, args.window))


if __name__ == "__main__":
    main()
