"""One load process of the soak (:mod:`tools.faults.soak`): a kind of client, forever.

``python -m tools.faults.soak_load CONFIG.json KIND STATS.json``. The kinds are
what users run against one ``tenure serve`` at once:

* ``locks``: tenure clients taking mutexes among 20 names (ephemeral semaphores:
  each vanishes with its last holder), holding each a few milliseconds;
* ``semaphores``: tenure clients sharing a 3-token pool, 1 or 2 tokens at a time
  (a grant is an operation), and rewriting the pool's data (1 KiB) now and then
  (not one: a pool whose tokens are never given back must show as no progress);
* ``watches``: tenure clients watching a semaphore's data, and one writer changing
  it ten times a second;
* ``elections``: tenure candidates campaigning for one office, leading a moment and
  resigning, and an observer following the leader;
* ``dflockd``: dflockd's own client (``dflockd-client``), locks and a semaphore on
  the dflockd face;
* ``ydb``: YDB's Python SDK (``ydb.aio``), sessions of its coordination service
  sharing a 2-token semaphore on the YDB face.

Every client churns: it closes its session after a few dozen operations and its
connection after a few sessions, so the server keeps making and forgetting them.
A failure (the server killed or stopped by a fault, a session lost) is counted by
its type and the client starts over after a short pause: the soak measures what the
server keeps, and that the load goes on, not each answer (the fault suite's
scenarios check those). Every wait is bounded; SIGTERM stops the process.

Counts are written to ``STATS.json`` (replaced whole) every ``STATS_EVERY`` s and
at the end: ``{"ops": N, "timeouts": N, "errors": {type: N}, "last": {client: T}}``,
where ``last`` is, per client (its index), the ``time.monotonic()`` of its latest
operation (the machine's clock, the soak's too): each client's own progress, dated,
so the soak can tell a client that worked since a fault from one that did not,
however late the counts were written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import tenure

#: Seconds between two writes of the counts.
STATS_EVERY: Final = 5.0
#: Bound of any one step of a client (an acquire's own timeout is shorter).
STEP: Final = 20.0
#: How long a client has, after SIGTERM, to end on its own before it is cancelled.
STOP_GRACE: Final = 2.0
#: Operations per session, sessions per connection (the churn).
OPS_PER_SESSION: Final = 40
SESSIONS_PER_CONNECTION: Final = 4
#: The sessions' recovery window (the server forgets a dead client's after it).
WINDOW: Final = 5.0
KINDS: Final = ("locks", "semaphores", "watches", "elections", "dflockd", "ydb")


@dataclass(frozen=True)
class SoakConfig:
    """Where the server's faces are (written as JSON by the soak)."""

    url: str
    node: str
    dflockd: tuple[str, int]
    ydb_endpoint: str
    ydb_database: str
    seed: int

    @classmethod
    def read(cls, path: Path) -> SoakConfig:
        """The config written as JSON at ``path``."""
        raw = json.loads(path.read_text())
        return cls(**{**raw, "dflockd": tuple(raw["dflockd"])})


class Tally:
    """The process's counts, written to its stats file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ops = 0
        self.timeouts = 0
        self.errors: Counter[str] = Counter()
        #: Client index -> ``time.monotonic()`` of its latest operation.
        self.last: dict[int, float] = {}

    def done(self, client: int) -> None:
        """Count one operation of client ``client``, dated now."""
        self.ops += 1
        self.last[client] = time.monotonic()

    def write(self) -> None:
        """Replace the stats file with the counts (atomically: the soak reads it live)."""
        temp = self.path.with_suffix(".tmp")
        stats = {"ops": self.ops, "timeouts": self.timeouts, "errors": self.errors}
        temp.write_text(json.dumps({**stats, "last": self.last}))
        os.replace(temp, self.path)


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def forever(
    stop: asyncio.Event, tally: Tally, rng: random.Random, life: Callable[[], Awaitable[None]]
) -> None:
    """Run ``life`` again and again until ``stop``; count what ends it by its type."""
    while not stop.is_set():
        try:
            await life()
        except Exception as error:  # a fault ended this life: counted, then a new one
            tally.errors[type(error).__name__] += 1
            await _pause(stop, rng.uniform(0.2, 1.0))


async def _tenure_lives(
    config: SoakConfig,
    stop: asyncio.Event,
    description: str,
    session_body: Callable[[tenure.Session], Awaitable[None]],
) -> None:
    """One connection's life: a few sessions, each running ``session_body``."""
    async with asyncio.timeout(STEP):
        client = await tenure.connect(config.url, connect_timeout=2.0)
    async with client:
        for _ in range(SESSIONS_PER_CONNECTION):
            if stop.is_set():
                return
            async with asyncio.timeout(STEP):
                session = await client.session(
                    config.node, recovery_window=WINDOW, description=description
                )
            async with session:
                await session_body(session)


async def locks(config: SoakConfig, stop: asyncio.Event, tally: Tally, index: int) -> None:
    """One mutex client (see the module docstring)."""
    rng = random.Random(f"{config.seed}-locks-{index}")

    async def body(session: tenure.Session) -> None:
        for _ in range(OPS_PER_SESSION):
            if stop.is_set():
                return
            try:
                async with session.mutex(f"m{rng.randrange(20)}").lock(timeout=5.0):
                    await asyncio.sleep(rng.uniform(0.002, 0.03))
                tally.done(index)
            except TimeoutError:
                tally.timeouts += 1
            await asyncio.sleep(rng.uniform(0.01, 0.1))

    await forever(stop, tally, rng, lambda: _tenure_lives(config, stop, f"locks-{index}", body))


async def semaphores(config: SoakConfig, stop: asyncio.Event, tally: Tally, index: int) -> None:
    """One pool client (see the module docstring)."""
    rng = random.Random(f"{config.seed}-semaphores-{index}")

    async def body(session: tenure.Session) -> None:
        pool = session.semaphore("pool")
        async with asyncio.timeout(STEP):
            await pool.create(3, exist_ok=True)
        for n in range(OPS_PER_SESSION):
            if stop.is_set():
                return
            try:
                async with pool.acquire(rng.choice((1, 1, 2)), timeout=5.0, data=b"w%d" % index):
                    await asyncio.sleep(rng.uniform(0.005, 0.05))
                tally.done(index)
            except TimeoutError:
                tally.timeouts += 1
            if n % 10 == index % 10:
                async with asyncio.timeout(STEP):
                    await pool.update(rng.randbytes(1024))
            await asyncio.sleep(rng.uniform(0.01, 0.1))

    await forever(
        stop, tally, rng, lambda: _tenure_lives(config, stop, f"semaphores-{index}", body)
    )


async def watches(config: SoakConfig, stop: asyncio.Event, tally: Tally, index: int) -> None:
    """Index 0 writes the watched data; the others watch it."""
    rng = random.Random(f"{config.seed}-watches-{index}")

    async def write(session: tenure.Session) -> None:
        config_semaphore = session.semaphore("config")
        async with asyncio.timeout(STEP):
            await config_semaphore.create(1, exist_ok=True)
        for _ in range(OPS_PER_SESSION * 5):
            if stop.is_set():
                return
            async with asyncio.timeout(STEP):
                await config_semaphore.update(b"version %d" % rng.randrange(1 << 30))
            tally.done(index)
            await asyncio.sleep(0.1)

    async def watch(session: tenure.Session) -> None:
        seen = 0
        states = session.semaphore("config").watch(data=True)
        async with contextlib.aclosing(states):
            while seen < OPS_PER_SESSION * 5 and not stop.is_set():
                async with asyncio.timeout(STEP):  # the writer changes it 10 times a second
                    await anext(states)
                seen += 1
                tally.done(index)

    body = write if index == 0 else watch
    await forever(stop, tally, rng, lambda: _tenure_lives(config, stop, f"watches-{index}", body))


async def elections(config: SoakConfig, stop: asyncio.Event, tally: Tally, index: int) -> None:
    """Index 0 observes the office; the others campaign for it."""
    rng = random.Random(f"{config.seed}-elections-{index}")

    async def campaign(session: tenure.Session) -> None:
        office = session.election("primary")
        for _ in range(OPS_PER_SESSION // 4):
            if stop.is_set():
                return
            try:
                async with office.campaign(b"candidate %d" % index, timeout=10.0):
                    await asyncio.sleep(rng.uniform(0.1, 0.5))
                tally.done(index)
            except TimeoutError:
                tally.timeouts += 1

    async def observe(session: tenure.Session) -> None:
        seen = 0
        changes = session.election("primary").observe()
        async with contextlib.aclosing(changes):
            while seen < OPS_PER_SESSION * 2 and not stop.is_set():
                async with asyncio.timeout(STEP):
                    await anext(changes)
                seen += 1
                tally.done(index)

    body = observe if index == 0 else campaign
    await forever(stop, tally, rng, lambda: _tenure_lives(config, stop, f"elections-{index}", body))


async def dflockd(config: SoakConfig, stop: asyncio.Event, tally: Tally, index: int) -> None:
    """A dflockd client: locks among 10 keys (even index) or a 2-slot semaphore (odd)."""
    from dflockd_client import AsyncDistributedLock, AsyncDistributedSemaphore, DflockdTimeoutError

    rng = random.Random(f"{config.seed}-dflockd-{index}")
    options: dict[str, Any] = {
        "servers": [config.dflockd],
        "acquire_timeout_s": 5,
        "lease_ttl_s": 10,
        "connect_timeout_s": 2.0,
    }

    async def life() -> None:
        for _ in range(OPS_PER_SESSION):
            if stop.is_set():
                return
            held: AsyncDistributedLock | AsyncDistributedSemaphore
            if index % 2 == 0:
                held = AsyncDistributedLock(f"soak-{rng.randrange(10)}", **options)
            else:
                held = AsyncDistributedSemaphore("soak-slots", limit=2, **options)
            try:
                async with asyncio.timeout(STEP), held:
                    await asyncio.sleep(rng.uniform(0.005, 0.05))
                tally.done(index)
            except DflockdTimeoutError:
                tally.timeouts += 1
            await asyncio.sleep(rng.uniform(0.01, 0.1))

    await forever(stop, tally, rng, life)


async def ydb_sessions(config: SoakConfig, stop: asyncio.Event, tally: Tally, index: int) -> None:
    """A YDB SDK client: a driver, sessions taking a 2-token semaphore in turn."""
    import ydb
    from ydb.aio.coordination import CoordinationClient
    from ydb.aio.driver import Driver

    rng = random.Random(f"{config.seed}-ydb-{index}")
    path = f"{config.ydb_database}/soak"

    async def life() -> None:
        driver = Driver(endpoint=config.ydb_endpoint, database=config.ydb_database)
        try:
            await driver.wait(timeout=5.0, fail_fast=True)
            client = CoordinationClient(driver)
            async with asyncio.timeout(STEP):
                with contextlib.suppress(ydb.issues.AlreadyExists):
                    await client.create_node(path)
            for _ in range(SESSIONS_PER_CONNECTION):
                # Each step is bounded on its own; the session's opening and closing
                # (the SDK retries them) by this, a generous bound of the whole.
                async with asyncio.timeout(OPS_PER_SESSION * STEP), client.session(path) as session:
                    slots = session.semaphore("slots", 2)
                    for _ in range(OPS_PER_SESSION):
                        if stop.is_set():
                            return
                        async with asyncio.timeout(STEP):
                            await slots.acquire(1)
                            await asyncio.sleep(rng.uniform(0.005, 0.05))
                            await slots.release()
                        tally.done(index)
                        await asyncio.sleep(rng.uniform(0.01, 0.1))
        finally:
            with contextlib.suppress(Exception):  # the driver of a dead server
                async with asyncio.timeout(STEP):
                    await driver.stop()

    await forever(stop, tally, rng, life)


#: Each kind's client, and how many a process runs.
CLIENTS: Final[dict[str, tuple[Callable[[SoakConfig, asyncio.Event, Tally, int], Any], int]]] = {
    "locks": (locks, 4),
    "semaphores": (semaphores, 4),
    "watches": (watches, 3),
    "elections": (elections, 4),
    "dflockd": (dflockd, 4),
    "ydb": (ydb_sessions, 3),
}
#: Every client of the load, by name (``kind-index``): each must keep making progress.
CLIENT_NAMES: Final = tuple(
    f"{kind}-{index}" for kind, (_, count) in CLIENTS.items() for index in range(count)
)


async def run(config: SoakConfig, kind: str, tally: Tally) -> None:
    """Run ``kind``'s clients until SIGTERM, writing the counts every STATS_EVERY s."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    client, count = CLIENTS[kind]
    tasks = [asyncio.create_task(client(config, stop, tally, n)) for n in range(count)]
    while not stop.is_set():
        tally.write()
        await _pause(stop, STATS_EVERY)
    # A client between two steps sees ``stop`` and ends; one waiting on others (a
    # watcher for the writer's next change, an observer for the next leader) would
    # wait out its STEP, since the others have stopped: after a grace it is cancelled,
    # which closes its session and connection as an exception would.
    _, pending = await asyncio.wait(tasks, timeout=STOP_GRACE)
    for task in pending:
        task.cancel()
    await asyncio.wait(tasks, timeout=STEP)  # cancelled: each close is bounded
    tally.write()


def main(argv: Sequence[str]) -> int:
    """Entry point (see the module docstring)."""
    if len(argv) != 3 or argv[1] not in KINDS:
        print(
            f"usage: python -m tools.faults.soak_load CONFIG.json {{{','.join(KINDS)}}} STATS.json",
            file=sys.stderr,
        )
        return 2
    config = SoakConfig.read(Path(argv[0]))
    asyncio.run(run(config, argv[1], Tally(Path(argv[2]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
