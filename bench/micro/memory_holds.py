"""Bytes per held lock: a real server's RSS and the engine's heap, at 100k and 1M holds.

``python -m bench.micro.memory_holds [--holds N ...] [--sessions S] [--no-server]``

For each ``--holds`` N (default 100,000 and 1,000,000) it prints:

* **the server**: a real ``tenure serve --fsync off`` (the build this checkout has:
  ``scripts/compile`` makes it the compiled one; the line says which), one node,
  ``--sessions`` sessions (default 4) each holding N / S distinct mutexes, acquired
  over the test suite's wire client the way a client's ``session.mutex(name).lock()``
  asks (an ephemeral Acquire of limit MAX_COUNT, hold 0, a task number), pipelined a
  batch at a time; the process's RSS (from /proc) before the first acquire and after
  the last, its growth divided by N;
* **the engine's heap**: the same acquires applied to an ``Engine`` in this process
  (tracemalloc's growth, divided by N), and where those bytes are: each part of a
  hold (the semaphore, its owner, the name's string, the node's dict and sorted
  index of names, the session's table of holds), measured with ``sys.getsizeof`` on
  the objects themselves, the rest left unexplained.

With ``--snapshot``, also the time a dump and pack of that state takes (the cycle
collector paused): what a cluster's snapshot process spends on it
(``tenure.server._cluster.state_process``, off the leader's loop since issue 50;
before, the leader's loop paid it: ``bench.micro.cluster_snapshot`` measures the
loop itself).

With ``--restart``, also how long ``tenure serve`` takes to come back on that state:
:func:`restart_seconds` (which ``bench/scale`` calls) fills a server, stops it
(SIGTERM), starts it again on its data directory and times the process's start to
its first answered request (a ``DescribeNode``, tried every 5 ms); then the parts
of a recovery, timed in this process on a copy of that directory
(:func:`restart_parts`: reading the files, unpacking and loading the snapshot,
replaying the log after it, putting the engine on a new clock).

What each hold is made of is the engine's business (:mod:`tenure._core.semaphore`,
:mod:`tenure._core.holders`, :mod:`tenure._core.session`, :mod:`tenure._core.state`);
the issue's target is at most 300 bytes per held lock, RSS and heap, at both sizes.
It also prints the memory budget's estimate per hold (the engine's own, what
``--memory-budget`` is charged), and :func:`bytes_per_hold` gives a caller
(``bench/scale``) the RSS and the estimate at one size.

Internals: ``tenure._core``'s Engine and its commands (the heap alone and its parts),
its snapshot's ``dump`` and the server's ``collector_paused`` (a leader's snapshot,
as the leader makes it), the data directory's ``DataDir``, ``apply_record`` and the
snapshot's ``load`` and ``resume`` (a recovery's parts, as the server runs them),
and the test suite's wire client and server process (no
public client: a million of its lock objects would weigh on this process, not on
the server measured).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import signal
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from tests.compiled import compiled_build
from tests.server.wire import Clients, ServerProcess, WireClient

from tenure._core import (
    MAX_COUNT,
    Acquire,
    CreateNode,
    CreateSession,
    DescribeNode,
    Engine,
    NodeConfig,
)
from tenure._core.many_holds import ManyHolds, Numbers
from tenure._core.semaphore_fields import SemaphoreRest
from tenure._core.snapshot import dump, load, resume
from tenure._protocol import Failure, Reply
from tenure.server._durability.journal import collector_paused
from tenure.server._durability.records import apply_record
from tenure.server._durability.storage import DataDir

KEY = b"bench-key"
#: Requests in flight per connection (each batch is sent, then its answers read).
BATCH = 2_000
#: The task number a client's one asyncio task sends (a client numbers its tasks).
TASK = 1_000_001
#: A node roomy enough for a million holds, whose sessions outlive a slow fill.
ROOMY = NodeConfig(max_semaphores=1_000_000, max_sessions=1_000, recovery_window=3_600.0)
MiB = 2**20


def _name(session: int, i: int) -> str:
    return f"lock-{session}-{i}"


def _acquire(sid: int, name: str, request_id: int) -> Acquire:
    return Acquire(sid, name, MAX_COUNT, request_id, b"", None, True, hold=0, task=TASK)


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def _hold_many(client: WireClient, sid: int, session: int, count: int) -> None:
    """Acquire ``count`` distinct mutexes for session ``sid``, a batch in flight at a time."""
    done = 0
    while done < count:
        batch = min(BATCH, count - done)
        ids = [client.send(_acquire(sid, _name(session, done + i), done + i)) for i in range(batch)]
        for request_id in ids:
            answer = await client.answer(request_id)
            if not isinstance(answer, Reply):
                assert isinstance(answer, Failure)
                raise RuntimeError(f"acquire {done} refused: {answer.message}")
        client.events.clear()  # (the wire client keeps every event: not here)
        client.pushes.clear()
        done += batch


async def server_rss(holds: int, sessions: int) -> tuple[int, int, float]:
    """A real server holding ``holds`` mutexes: (RSS before, RSS after, seconds to fill)."""
    clients = Clients()
    with (
        tempfile.TemporaryDirectory() as scratch,
        ServerProcess(Path(scratch) / "data", "--fsync", "off") as server,
    ):
        try:
            admin = await clients.connect(server.port)
            await admin.call(CreateNode("n", ROOMY))
            conns = [await clients.connect(server.port) for _ in range(sessions)]
            sids = [(await c.call(CreateSession("n", KEY))).session_id for c in conns]
            await asyncio.sleep(0.5)  # (the server settles after its start)
            before = _rss(server.proc.pid)
            started = time.perf_counter()
            share = holds // sessions
            await asyncio.gather(
                *(
                    _hold_many(c, sid, s, share + (holds % sessions if s == 0 else 0))
                    for s, (c, sid) in enumerate(zip(conns, sids, strict=True))
                )
            )
            took = time.perf_counter() - started
            return before, _rss(server.proc.pid), took
        finally:
            await clients.close_all()


async def _filled(data_dir: Path, holds: int, sessions: int) -> None:
    """A server on ``data_dir`` given ``holds`` held mutexes, then stopped (SIGTERM)."""
    clients = Clients()
    with ServerProcess(data_dir, "--fsync", "off") as server:
        try:
            admin = await clients.connect(server.port)
            await admin.call(CreateNode("n", ROOMY))
            conns = [await clients.connect(server.port) for _ in range(sessions)]
            sids = [(await c.call(CreateSession("n", KEY))).session_id for c in conns]
            share = holds // sessions
            await asyncio.gather(
                *(
                    _hold_many(c, sid, s, share + (holds % sessions if s == 0 else 0))
                    for s, (c, sid) in enumerate(zip(conns, sids, strict=True))
                )
            )
        finally:
            await clients.close_all()
        code = server.signal(signal.SIGTERM)
        if code != 0:
            raise RuntimeError(f"the filled server exited {code}: {server.output()[-2000:]}")


async def _first_answer(data_dir: Path) -> float:
    """Start a server on ``data_dir``: seconds from its start to its first answer."""
    started = time.perf_counter()
    server = ServerProcess(data_dir, "--fsync", "off")
    clients = Clients()
    try:
        while True:
            if server.proc.poll() is not None:
                raise RuntimeError(f"the server exited: {server.output()[-2000:]}")
            try:
                client = await clients.connect(server.port)
                await client.call(DescribeNode("n"))
                return time.perf_counter() - started
            except (TimeoutError, OSError, AssertionError):
                await clients.close_all()
                await asyncio.sleep(0.005)
    finally:
        await clients.close_all()
        server.kill()


def restart_seconds(holds: int, sessions: int = 4, *, keep: Path | None = None) -> float:
    """Seconds from the start of ``tenure serve`` on the data directory of a server that
    held ``holds`` mutexes (in ``sessions`` sessions, stopped by SIGTERM) to its first
    answered request; ``keep``: where to leave a copy of that directory (for
    :func:`restart_parts`)."""
    with tempfile.TemporaryDirectory(prefix="tenure-restart-") as scratch:
        data_dir = Path(scratch) / "data"
        asyncio.run(_filled(data_dir, holds, sessions))
        if keep is not None:
            shutil.copytree(data_dir, keep)
        return asyncio.run(_first_answer(data_dir))


def restart_parts(data_dir: Path) -> dict[str, float]:
    """The parts of a recovery of ``data_dir``, in seconds, timed in this process (the
    directory is recovered for real: its log is opened for appending)."""
    gc.collect()
    found: dict[str, float] = {}
    started = time.perf_counter()
    recovered = DataDir(data_dir).recover()
    found["reading the files"] = time.perf_counter() - started
    engine = Engine()
    with collector_paused():
        if recovered.snapshot is not None:
            started = time.perf_counter()
            state = msgpack.unpackb(recovered.snapshot, raw=False)
            found["unpacking the snapshot"] = time.perf_counter() - started
            started = time.perf_counter()
            engine = load(state, counted=False)  # (as the server loads it)
            found["loading the snapshot"] = time.perf_counter() - started
            del state
        started = time.perf_counter()
        for index, record in enumerate(recovered.records):
            apply_record(engine, record, f"logged record {index}", data_dir)
        found[f"replaying {len(recovered.records):,} records"] = time.perf_counter() - started
        started = time.perf_counter()
        engine.take_effects()
        resume(engine, time.monotonic())
        found["resuming on a new clock"] = time.perf_counter() - started
    return found


def _engine_with_sessions(sessions: int) -> tuple[Engine, list[int]]:
    engine = Engine()
    engine.apply(CreateNode("n", ROOMY), 0.0)
    sids = [int(engine.apply(CreateSession("n", KEY), 0.0).session_id) for _ in range(sessions)]
    return engine, sids


def _fill(engine: Engine, sids: list[int], holds: int) -> None:
    share = holds // len(sids)
    for s, sid in enumerate(sids):
        for i in range(share + (holds % len(sids) if s == 0 else 0)):
            # A name made afresh, as a decoded request brings it.
            engine.apply(_acquire(sid, _name(s, i), i), 1.0)
        engine.take_effects()


def engine_heap(holds: int, sessions: int) -> float:
    """tracemalloc's growth per hold of an in-process Engine given the same acquires."""
    engine, sids = _engine_with_sessions(sessions)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    _fill(engine, sids, holds)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / holds


def snapshot_block(holds: int, sessions: int) -> tuple[float, int]:
    """A leader's snapshot of ``holds`` held mutexes, as it runs on its loop: (seconds, bytes)."""
    engine, sids = _engine_with_sessions(sessions)
    _fill(engine, sids, holds)
    started = time.perf_counter()
    with collector_paused():
        data = msgpack.packb(dump(engine), use_bin_type=True)
    return time.perf_counter() - started, len(data)


def _deep(objects: Iterable[object]) -> int:
    return sum(sys.getsizeof(o) for o in objects)


def _table_bytes(table: dict[str, Numbers] | ManyHolds | None) -> int:
    """A session's table of holds: its dict, or (past MANY names) its sorted runs."""
    if not isinstance(table, ManyHolds):
        return 0 if table is None else sys.getsizeof(table)
    runs = table._names.runs
    return sys.getsizeof(runs) + _deep(runs) + sys.getsizeof(table._numbers)


def engine_estimate(holds: int, sessions: int) -> float:
    """The memory budget's estimate (``--memory-budget``: the engine's own) per hold of
    an Engine given the same acquires (its growth over the sessions' alone)."""
    engine, sids = _engine_with_sessions(sessions)
    before = engine.ledger.estimate()
    _fill(engine, sids, holds)
    return (engine.ledger.estimate() - before) / holds


@dataclass(frozen=True)
class HoldCost:
    """What a held lock costs at one size: a real server's RSS and the engine's estimate."""

    holds: int
    #: The server's RSS growth per hold (``tenure serve --fsync off``, this build).
    rss_bytes: float
    #: The memory budget's estimate per hold (what ``--memory-budget`` is charged).
    estimate_bytes: float
    #: The server's build: "compiled" or "pure".
    build: str
    #: Seconds the server took to be given them.
    fill_seconds: float


def bytes_per_hold(holds: int, sessions: int = 4) -> HoldCost:
    """Bytes per held lock at ``holds`` (for ``bench/scale``): RSS and the engine's estimate."""
    before, after, took = asyncio.run(server_rss(holds, sessions))
    estimate = engine_estimate(holds, sessions)
    build = "compiled" if compiled_build() else "pure"
    return HoldCost(holds, (after - before) / holds, estimate, build, took)


def parts(holds: int, sessions: int) -> dict[str, float]:
    """Where an Engine's bytes per hold are: each part's ``sys.getsizeof`` over N."""
    engine, sids = _engine_with_sessions(sessions)
    _fill(engine, sids, holds)
    state = engine
    node = state.nodes["n"]
    sems = list(node.semaphores.values())
    owners = [owner for sem in sems for owner in sem.each_owner()]
    found: dict[str, int] = {
        "semaphore objects": _deep(sems),
        "owner objects": _deep(owners),
        "semaphores' rests": _deep(s._rest for s in sems if isinstance(s._rest, SemaphoreRest)),
        "owners' rests": _deep(o._rest for o in owners if o._rest is not None),
        "names (str)": _deep({id(s.name): s.name for s in sems}.values()),
        "node.semaphores (dict)": sys.getsizeof(node.semaphores),
        "node.semaphore_index": sys.getsizeof(node.semaphore_index.runs)
        + _deep(node.semaphore_index.runs)
        + sys.getsizeof(node.semaphore_index.lasts),
        "sessions' holds tables": sum(_table_bytes(state.sessions[sid]._holds) for sid in sids),
        "deadline heap": sys.getsizeof(state.deadlines._heap),
    }
    return {part: size / holds for part, size in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.micro.memory_holds", description=__doc__)
    parser.add_argument("--holds", type=int, action="append", help="held mutexes (repeatable)")
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--no-server", action="store_true", help="the engine's heap only")
    parser.add_argument("--snapshot", action="store_true", help="time a leader's snapshot too")
    parser.add_argument("--restart", action="store_true", help="time a server's restart too")
    args = parser.parse_args()
    build = "compiled" if compiled_build() else "pure"
    print(f"bytes per held lock ({build} build), {args.sessions} sessions:")
    for holds in args.holds or [100_000, 1_000_000]:
        if not args.no_server:
            before, after, took = asyncio.run(server_rss(holds, args.sessions))
            print(
                f"  {holds:>9,} holds: server RSS {before / MiB:.0f} -> {after / MiB:.0f} MiB, "
                f"{(after - before) / holds:,.0f} B per hold (filled in {took:.0f} s)"
            )
        heap = engine_heap(holds, args.sessions)
        estimate = engine_estimate(holds, args.sessions)
        print(f"  {holds:>9,} holds: the memory budget's estimate {estimate:,.0f} B per hold")
        print(f"  {holds:>9,} holds: engine heap {heap:,.0f} B per hold, of which:")
        found = parts(holds, args.sessions)
        for part, size in found.items():
            print(f"      {part:<26} {size:>6,.1f}")
        print(f"      {'(the rest)':<26} {heap - sum(found.values()):>6,.1f}")
        if args.restart:
            with tempfile.TemporaryDirectory(prefix="tenure-restart-") as scratch:
                kept = Path(scratch) / "data"
                seconds = restart_seconds(holds, args.sessions, keep=kept)
                print(
                    f"  {holds:>9,} holds: restart to the first answer {seconds:.2f} s; "
                    "its parts, timed in this process:"
                )
                for part, took in restart_parts(kept).items():
                    print(f"      {part:<32} {took:>6.2f} s")
        if args.snapshot:
            seconds, size = snapshot_block(holds, args.sessions)
            print(
                f"  {holds:>9,} holds: a leader's snapshot keeps its loop {seconds * 1e3:,.0f} ms "
                f"({size / MiB:.0f} MiB packed)"
            )


if __name__ == "__main__":
    main()
