"""What deadlock detection costs: the engine's check on contended mutexes and deep
queues, with it on and with it off (``deadlock_search_limit`` 0), and a client's
contended mutex on ``memory://`` both ways.

``python -m bench.micro.deadlocks`` prints, for each case, the time per operation
with the check and without (the best of three runs each), and their ratio:

* ``contended mutex``: a mutex held by a task that waits for nothing, with 64 tasks
  queued; a new task's acquire (which queues: the check runs) and its cancel;
* ``deep queue``: 10,000 tasks queue on one mutex, one by one (each check looks at
  the one holder, whatever the queue's length);
* ``chain of K``: K tasks each hold a mutex and wait for the next one's; a new task
  asks for the first (the walk goes down the whole chain, finds no way back);
* ``refused 2-cycle``: the acquire that closes a two-task cycle (refused each time);
* ``big semaphore (50,000 holds)``: a semaphore whose 50,000 tokens are held by free
  tasks; another task's acquire (which queues: the check runs) and its cancel (the
  look at the holders before the search is spent from the search's limit: issue 47);
* ``reduction, N ahead``: a 2-token semaphore, one token held by a free task, one by
  a task waiting for the asker: a cycle, but not a deadlock, confirmed by reducing
  a queue of N requests ahead (the worst case: the check reads the whole queue);
* ``memory:// ping-pong``: two tasks of one session lock and unlock one mutex in
  turn through the client (every lock queues behind the other's hold): locks a
  second, the median of 5 rounds of a second each, on and off in turn;
* ``task number``: the client's lookup of the asking task's number (ns).

Compare ratios within one run: the machine is noisy.

Internals: the engine (``tenure._core``: commands applied to an ``Engine``, its
``deadlock_search_limit``), the memory backend's host (to switch the check off for
the client case), and ``tenure.client._caller`` (its task numbers): the parts measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

import tenure
from tenure._core import (
    MAX_COUNT,
    Acquire,
    CancelAcquire,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    Engine,
    NodeConfig,
)
from tenure.client._caller import task_number
from tenure.errors import DeadlockError

_ids = itertools.count(1)


def _engine(check: bool) -> tuple[Engine, int]:
    engine = Engine()
    engine.deadlock_search_limit = 1_000 if check else 0
    engine.apply(CreateNode("n", NodeConfig(max_sessions=100_000, max_waiters=100_000)), 0.0)
    sid = engine.apply(CreateSession("n", b"k"), 0.0).session_id
    return engine, sid


def _lock(engine: Engine, sid: int, name: str, task: int, hold: int = 0) -> None:
    engine.apply(
        Acquire(sid, name, MAX_COUNT, next(_ids), ephemeral=True, hold=hold, task=task), 0.0
    )


def contended(check: bool, n: int = 20_000) -> float:
    """µs per queued acquire + cancel behind a free holder and 64 waiters."""
    engine, sid = _engine(check)
    _lock(engine, sid, "m", 1)
    for task in range(2, 66):
        _lock(engine, sid, "m", task, hold=task)
    start = time.perf_counter()
    for i in range(n):
        rid = next(_ids)
        engine.apply(Acquire(sid, "m", MAX_COUNT, rid, hold=100, task=1000 + i), 0.0)
        engine.apply(CancelAcquire(sid, "m", rid, hold=100), 0.0)
        engine.take_effects()
    return (time.perf_counter() - start) / n * 1e6


def deep_queue(check: bool, n: int = 10_000) -> float:
    """µs per acquire queued behind a growing queue of one mutex (n of them)."""
    engine, _ = _engine(check)
    sids = [engine.apply(CreateSession("n", b"k"), 0.0).session_id for _ in range(n + 1)]
    _lock(engine, sids[0], "m", 1)
    start = time.perf_counter()
    for sid in sids[1:]:
        _lock(engine, sid, "m", 1)
    return (time.perf_counter() - start) / n * 1e6


def chain(check: bool, k: int, n: int = 2_000) -> float:
    """µs per acquire (and cancel) of a new task at the head of a chain of k waits."""
    engine, _ = _engine(check)
    sids = [engine.apply(CreateSession("n", b"k"), 0.0).session_id for _ in range(k + 1)]
    for i in range(k):
        _lock(engine, sids[i], f"m{i}", 1)
    for i in range(k - 1):
        _lock(engine, sids[i], f"m{i + 1}", 1)  # sids[i] waits for sids[i + 1]
    asker = sids[k]
    start = time.perf_counter()
    for _ in range(n):
        rid = next(_ids)
        engine.apply(Acquire(asker, "m0", MAX_COUNT, rid, ephemeral=True, task=1), 0.0)
        engine.apply(CancelAcquire(asker, "m0", rid), 0.0)
        engine.take_effects()
    return (time.perf_counter() - start) / n * 1e6


def _queued_and_cancelled(engine: Engine, asker: int, n: int) -> float:
    """µs per acquire of ``pool`` by ``asker`` (which waits: it is queued) and its cancel."""
    start = time.perf_counter()
    for _ in range(n):
        rid = next(_ids)
        engine.apply(Acquire(asker, "pool", 1, rid, task=1), 0.0)
        engine.apply(CancelAcquire(asker, "pool", rid), 0.0)
        engine.take_effects()
    return (time.perf_counter() - start) / n * 1e6


def big_semaphore(check: bool, holds: int = 50_000, n: int = 200) -> float:
    """µs per queued acquire + cancel of a semaphore whose ``holds`` tokens are all held
    by tasks that wait for nothing."""
    engine, sid = _engine(check)
    engine.apply(CreateSemaphore(sid, "pool", holds), 0.0)
    for hold in range(holds):
        engine.apply(Acquire(sid, "pool", 1, next(_ids), hold=hold, task=hold + 1), 0.0)
    asker = engine.apply(CreateSession("n", b"k"), 0.0).session_id
    return _queued_and_cancelled(engine, asker, n)


def refused(n: int = 20_000) -> float:
    """µs per acquire refused for closing a two-task cycle."""
    engine, one = _engine(True)
    two = engine.apply(CreateSession("n", b"k"), 0.0).session_id
    _lock(engine, one, "a", 1)
    _lock(engine, two, "b", 1)
    _lock(engine, one, "b", 1)
    start = time.perf_counter()
    for _ in range(n):
        with contextlib.suppress(DeadlockError):
            _lock(engine, two, "a", 1)
    return (time.perf_counter() - start) / n * 1e6


def reduction(check: bool, ahead: int, n: int = 200) -> float:
    """µs per acquire (and cancel) that a reduction of ``ahead`` queued requests clears."""
    engine, free = _engine(check)
    stuck, asker = (engine.apply(CreateSession("n", b"k"), 0.0).session_id for _ in range(2))
    engine.apply(CreateSemaphore(free, "pool", 2), 0.0)
    engine.apply(Acquire(free, "pool", 1, next(_ids), task=1), 0.0)
    engine.apply(Acquire(stuck, "pool", 1, next(_ids), task=1), 0.0)
    _lock(engine, asker, "x", 1)
    _lock(engine, stuck, "x", 1)  # stuck waits for the asker
    others = [engine.apply(CreateSession("n", b"k"), 0.0).session_id for _ in range(ahead)]
    for sid in others:
        engine.apply(Acquire(sid, "pool", 1, next(_ids), task=1), 0.0)
    return _queued_and_cancelled(engine, asker, n)


async def ping_pong(check: bool, seconds: float = 3.0) -> float:
    """Locks a second, two tasks of one memory:// session taking one mutex in turn."""
    async with tenure.connect("memory://") as client:
        engine = client.backend.host.engine  # type: ignore[attr-defined]
        engine.deadlock_search_limit = 1_000 if check else 0
        await client.create_node("n")
        async with client.session("n") as session:
            done = 0
            stop = time.perf_counter() + seconds

            async def player() -> None:
                nonlocal done
                while time.perf_counter() < stop:
                    async with session.mutex("m").lock():
                        done += 1
                        await asyncio.sleep(0)  # the other asks meanwhile: it queues

            await asyncio.gather(player(), player())
            return done / seconds


def lookup_ns() -> float:
    """ns per task_number() of the current task (its number made already)."""

    async def run() -> float:
        task = asyncio.current_task()
        task_number(task)
        return min(timeit.repeat(lambda: task_number(task), number=200_000, repeat=5)) / 200_000

    return asyncio.run(run()) * 1e9


def _row(label: str, on: float, off: float, unit: str) -> None:
    print(f"{label:<28} {on:>10.2f} {off:>10.2f} {unit:<8} x{on / off:.2f}")


def main() -> None:
    """Run every case once and print the table."""
    print(f"{'case':<28} {'check on':>10} {'check off':>10} {'unit':<8} ratio")
    cases: list[tuple[str, Callable[[bool], float]]] = [
        ("contended mutex (64 queued)", contended),
        ("deep queue (10,000)", deep_queue),
        ("chain of 10", lambda c: chain(c, 10)),
        ("chain of 100", lambda c: chain(c, 100)),
        ("chain of 1000", lambda c: chain(c, 1000, n=200)),
        ("reduction, 100 ahead", lambda c: reduction(c, 100)),
        ("reduction, 5000 ahead", lambda c: reduction(c, 5000, n=20)),
        ("big semaphore (50,000 holds)", big_semaphore),
    ]
    for label, case in cases:  # (the best of 3 each way, taken in turn: least noise)
        runs = [(case(True), case(False)) for _ in range(3)]
        _row(label, min(r[0] for r in runs), min(r[1] for r in runs), "µs/op")
    print(f"{'refused 2-cycle':<28} {refused():>10.2f} {'-':>10} µs/op")
    rounds = [
        (asyncio.run(ping_pong(True, 1.0)), asyncio.run(ping_pong(False, 1.0))) for _ in range(5)
    ]
    on = statistics.median(r[0] for r in rounds)
    off = statistics.median(r[1] for r in rounds)
    _row("memory:// ping-pong (median of 5)", on, off, "locks/s")
    print(f"{'task number lookup':<28} {lookup_ns():>10.0f} {'-':>10} ns")


if __name__ == "__main__":
    main()
