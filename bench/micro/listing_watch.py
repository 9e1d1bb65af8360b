"""What a watch that lists owners or waiters costs the changes of others (issue 47).

``python -m bench.micro.listing_watch`` builds engines (pure or compiled: whichever
this checkout imports; the first line says which) and measures, with the bound on
a firing's listing lifted (``max_listed_per_firing`` past any group: the code before
it) and at ``--listed`` (the default, 1,000):

* **step**: one Acquire that queues on a mutex ``--waiters`` (10,000) others wait
  for, while one read-only repeating watch lists its owners and waiters
  (DescribeSemaphore(owners, waiters, watch_waiters, watch_repeat)): the median of
  ``--enqueues`` (50) steps, in ms, and with no such watch for scale. Each step is
  somebody else's change: the watch's firing is built in it.
* **queued**: ``--watchers`` (500) sessions each arm a one-shot watch listing the
  owners of a semaphore ``--holders`` (2,000) hold, and are detached: the firings
  wait in their queues. Either one change fires them all (``shared``: one
  description for all) or each is armed after the previous fired (``distinct``:
  each its own). tracemalloc's growth of the heap, in MB, for the firings kept as
  the engine made them (what a detached session's queue kept before: ``as made``)
  and as the server's session table keeps them now (``table``).

Internals: the engine (``tenure._core``) and the server's session table
(``tenure.server._session_table``) directly: no network, no codec.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from tenure._core import (
    MAX_COUNT,
    Acquire,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeSemaphore,
    Effect,
    Engine,
    NodeConfig,
    Release,
)
from tenure._core import engine as engine_module
from tenure._core.values import MAX_LISTED_PER_FIRING
from tenure.server._session_table import SessionTable

KEY = b"bench-key"
BIG = NodeConfig(max_sessions=1_000_000, max_waiters=1_000_000, max_watches_per_session=100_000)
LIFTED = 10**9  # no group is this big: every firing lists (the code before the bound)
_ids = iter(range(1, 10**12))


def _engine(listed: int) -> Engine:
    engine = Engine()
    engine.max_listed_per_firing = listed
    engine.apply(CreateNode("n", BIG), 0.0)
    return engine


def _session(engine: Engine) -> int:
    sid: int = engine.apply(CreateSession("n", KEY), 0.0).session_id
    return sid


def _acquire(engine: Engine, sid: int, name: str, count: int = 1) -> None:
    engine.apply(Acquire(sid, name, count, request_id=next(_ids), timeout=1e6), 0.0)


def step(waiters: int, enqueues: int, listed: int | None) -> float:
    """The median ms of one enqueue behind ``waiters`` (``listed`` None: no watch)."""
    engine = _engine(LIFTED if listed is None else listed)
    holder = _session(engine)
    engine.apply(CreateSemaphore(holder, "q", 1), 0.0)
    _acquire(engine, holder, "q")
    for _ in range(waiters):
        _acquire(engine, _session(engine), "q")
    if listed is not None:
        reader = _session(engine)
        asked = DescribeSemaphore(
            reader, "q", owners=True, waiters=True, watch_waiters=True, watch_repeat=True
        )
        engine.apply(asked, 0.0)
    engine.take_effects()
    times = []
    for _ in range(enqueues):
        sid = _session(engine)
        start = time.perf_counter()
        _acquire(engine, sid, "q")
        times.append((time.perf_counter() - start) * 1000)
        engine.take_effects()
    return statistics.median(times)


def queued(holders: int, watchers: int, listed: int, *, shared: bool, table: bool) -> float:
    """MB the detached watchers' firings keep (see the module docstring)."""
    engine = _engine(listed)
    first = _session(engine)
    engine.apply(CreateSemaphore(first, "g", MAX_COUNT), 0.0)
    for _ in range(holders):
        _acquire(engine, _session(engine), "g")
    sessions = [_session(engine) for _ in range(watchers)]
    engine.take_effects()
    as_made: list[Effect] = []
    routes: SessionTable[str] = SessionTable()  # (no session attached: all detached)
    changer = _session(engine)
    routes.attach(changer, "changer")  # (its own effects go out, not kept)

    def keep() -> None:
        effects = engine.take_effects()
        if table:
            routes.route(effects)
        else:
            as_made.extend(e for e in effects if e.session_id != changer)

    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for sid in sessions:
        engine.apply(DescribeSemaphore(sid, "g", owners=True, watch_owners=True), 0.0)
        engine.take_effects()
        if not shared:
            _acquire(engine, changer, "g")  # each watcher's own firing
            engine.apply(Release(changer, "g"), 0.0)
            keep()
    if shared:
        _acquire(engine, changer, "g")
        keep()
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert sum(routes.queued(sid) for sid in sessions) + len(as_made) == watchers
    return grown / 1e6


def main() -> None:
    """Print the rows (module docstring)."""
    args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    args.add_argument("--waiters", type=int, default=10_000)
    args.add_argument("--enqueues", type=int, default=50)
    args.add_argument("--holders", type=int, default=2_000)
    args.add_argument("--watchers", type=int, default=500)
    args.add_argument("--listed", type=int, default=MAX_LISTED_PER_FIRING)
    o = args.parse_args()
    build = "compiled" if engine_module.__file__.endswith((".so", ".pyd")) else "pure"
    print(f"engine: {build} build; max_listed_per_firing {o.listed:,} (lifted: before it)")
    print(f"step: one enqueue behind {o.waiters:,} waiters (median of {o.enqueues})")
    print(f"  no listing watch        {step(o.waiters, o.enqueues, None):9.3f} ms")
    print(f"  one, bound lifted       {step(o.waiters, o.enqueues, LIFTED):9.3f} ms")
    print(f"  one, bound {o.listed:<12,} {step(o.waiters, o.enqueues, o.listed):9.3f} ms")
    print(f"queued: {o.watchers} detached one-shot watchers of {o.holders:,} holders' owners")
    for shared in (True, False):
        how = "shared  " if shared else "distinct"
        made = queued(o.holders, o.watchers, LIFTED, shared=shared, table=False)
        lifted = queued(o.holders, o.watchers, LIFTED, shared=shared, table=True)
        bound = queued(o.holders, o.watchers, o.listed, shared=shared, table=True)
        print(
            f"  {how} as made, bound lifted {made:7.1f} MB; table: bound lifted"
            f" {lifted:6.1f} MB, bound {o.listed:,} {bound:6.1f} MB"
        )


if __name__ == "__main__":
    main()
