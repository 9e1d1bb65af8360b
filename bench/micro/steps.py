"""The longest step each big-but-allowed request or piece of server work takes (issue 37).

``python -m bench.micro.steps`` builds engines (pure or compiled: whichever this
checkout imports; the first line says which) with state at the sizes issue 37
names and times, once each (the state changes), what the event loop would run as
one step: one ``Engine.apply`` (a request) or one ``Engine.tick`` (the server's
timer), in ms. ``sliced`` rows work as the server does since the step budget
(``--step-budget`` items per turn of its loop): the longest slice is shown, with
the number of slices (the loop serves everybody else between two).

Rows (``--scale`` divides every size, for a quick look):

* mass expiry: ``--sessions`` (10,000) detached sessions ending at one instant,
  each holding a mutex another session waits for (each end grants a waiter);
* one session holding ``--holds`` (10,000) mutexes, each with a waiter: its
  expiry (a tick), CloseSession, KillSession;
* DropNode(force) of a node of ``--semaphores`` (100,000) semaphores;
* a Release that grants ``--waiters`` (10,000) waiters at once (a semaphore of
  that limit, held whole); DescribeSemaphore with owners and waiters of a mutex
  with ``--waiters`` waiters; ListSessions(limit=1000) of sessions holding 10 each;
* WatchPrefix("") on the big node (its first answer); one change of a semaphore
  that ``--watches`` (100,000) watches wait on (1,000 per session; the bound per
  token and name lifted), and of one that a token's most
  (``--max-watches-per-semaphore``, 1,000) wait on;
* AcquireAll of 64 names (its most);
* ListNodes of a token whose pattern starts with a wildcard (``*-jobs``: the
  range of "" is every node) among ``--nodes`` (100,000) nodes, read whole and
  (``sliced``) a step budget of names per turn, as the server reads it now;
* a /metrics scrape (its collector walks every semaphore) of the big node; the
  dashboard's view for a '*-jobs' token (in one go, and as the server builds it: a
  step budget of names per turn) and for an unscoped one among the nodes;
* snapshot.dump of the big node's engine (a snapshot is dumped in a forked child:
  shown for scale, not a step of the loop), and the fork itself (which is), with
  the child's wait.

Internals: the engine (``tenure._core``), its snapshot and the listing handler,
directly: the engine's own work per step, without a network (a request's codec
and outbox add little beside these).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fnmatch
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from bench.micro._common import longest_turn
from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireAll,
    CloseSession,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeSemaphore,
    DetachSession,
    DropNode,
    Engine,
    KillSession,
    ListSessions,
    NodeConfig,
    Release,
    UpdateSemaphore,
    WatchPrefix,
)
from tenure._core import engine as engine_module
from tenure._core.handlers.listing import visible_node_page
from tenure.errors import LimitExceededError

KEY = b"bench-key"
BIG = NodeConfig(
    max_semaphores=1_000_000,
    max_sessions=1_000_000,
    max_waiters=1_000_000,
    max_watches_per_session=100_000,
)
_ids = iter(range(1, 10**12))


def _ms(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1000


def _session(engine: Engine, node: str) -> int:
    return engine.apply(CreateSession(node, KEY), engine.now).session_id


def _hold(engine: Engine, sid: int, name: str) -> None:
    engine.apply(Acquire(sid, name, MAX_COUNT, request_id=next(_ids), ephemeral=True), engine.now)


def _wait(engine: Engine, sid: int, name: str) -> None:
    engine.apply(
        Acquire(sid, name, MAX_COUNT, request_id=next(_ids), timeout=1e6, ephemeral=True),
        engine.now,
    )


def _sliced(engine: Engine, now: float, budget: int | None) -> tuple[float, int]:
    """Tick to ``now`` as the host does: slices of ``budget`` items (the longest, how many)."""
    worst, slices = 0.0, 0
    while True:
        start = time.perf_counter()
        if budget is None:
            engine.tick(now)
        else:
            engine.tick(now, budget)
        worst = max(worst, (time.perf_counter() - start) * 1000)
        slices += 1
        if budget is None or not engine.behind():
            return worst, slices


def mass_expiry(sessions: int, budget: int | None) -> tuple[float, int]:
    """``sessions`` holders ending at one instant, each with a waiter behind it."""
    engine = Engine()
    engine.apply(CreateNode("n", BIG), 0.0)
    waiter = _session(engine, "n")
    for i in range(sessions):
        sid = _session(engine, "n")
        _hold(engine, sid, f"m{i:06d}")
        _wait(engine, waiter, f"m{i:06d}")
        engine.apply(DetachSession(sid), 0.0)  # all due at the node's window, one instant
    return _sliced(engine, 1e5, budget)


def big_session(holds: int) -> tuple[Engine, int]:
    """A session holding ``holds`` mutexes, each with a waiter of another session."""
    engine = Engine()
    engine.apply(CreateNode("n", BIG), 0.0)
    sid, other = _session(engine, "n"), _session(engine, "n")
    for i in range(holds):
        _hold(engine, sid, f"m{i:06d}")
        _wait(engine, other, f"m{i:06d}")
    return engine, sid


def big_node(semaphores: int) -> tuple[Engine, int]:
    """A node of ``semaphores`` semaphores (made by one session)."""
    engine = Engine()
    engine.apply(CreateNode("big", BIG), 0.0)
    sid = _session(engine, "big")
    for i in range(semaphores):
        engine.apply(CreateSemaphore(sid, f"s{i:06d}", 1), 0.0)
    return engine, sid


def _collector(engine: Engine) -> Any:
    """The server's /metrics collector over ``engine`` (the server extra's)."""
    from tenure.server._http.collector import StateCollector
    from tenure.server._http.metrics import ServerMetrics
    from tenure.server._http.readiness import Readiness

    metrics = ServerMetrics(version="bench")
    return StateCollector(Readiness(), metrics, lambda: engine, lambda: {"native": 1})


def _fork() -> None:
    """What starting a snapshot's child costs the loop: the fork (the child leaves at once)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def _applying(engine: Engine, command: Any) -> Callable[[], object]:
    """What applies ``command`` to ``engine`` when called (bound now, not in a loop's end)."""
    return lambda: engine.apply(command, 0.0)


def _board(engine: Engine, may_see: Callable[[str], bool], *, every: bool = False) -> object:
    """The dashboard's view of ``engine`` for a viewer who sees what ``may_see`` lets by
    (``every``: every node, told to a board that can be told)."""
    from tenure.server._http.board import BoardLimits, board

    limits = BoardLimits()
    if every:
        try:
            return board(
                engine, now=0.0, shift=0.0, limits=limits, may_see=may_see,
                may_kill=may_see, prefixes=None,
            )  # fmt: skip
        except TypeError:  # (a board before issue 37's prefixes)
            pass
    return board(engine, now=0.0, shift=0.0, limits=limits, may_see=may_see, may_kill=may_see)


def main() -> None:
    """Build each state, time each row, print one line per row."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--sessions", type=int, default=10_000)
    args.add_argument("--holds", type=int, default=10_000)
    args.add_argument("--waiters", type=int, default=10_000)
    args.add_argument("--semaphores", type=int, default=100_000)
    args.add_argument("--nodes", type=int, default=100_000)
    args.add_argument("--watches", type=int, default=100_000)
    args.add_argument("--budget", type=int, help="step budget (default: the server's)")
    args.add_argument("--scale", type=int, default=1, help="divide every size by this")
    o = args.parse_args()
    s = o.scale
    compiled = not engine_module.__file__ or not engine_module.__file__.endswith(".py")
    budget: int | None = o.budget
    if budget is None:  # (None with an engine from before the budget)
        budget = getattr(engine_module, "DEFAULT_STEP_BUDGET", None)
    sliced = budget is not None and hasattr(Engine, "behind")
    print(f"engine: {'compiled' if compiled else 'pure'}; step budget: {budget}; ms per step")
    rows: list[tuple[str, str]] = []

    def timed(name: str, run: Callable[[], object]) -> None:
        rows.append((name, f"{_ms(run):.1f}"))

    worst, _ = mass_expiry(o.sessions // s, None)
    rows.append((f"mass expiry of {o.sessions // s} sessions, one tick", f"{worst:.1f}"))
    if sliced:
        worst, slices = mass_expiry(o.sessions // s, budget)
        name = f"mass expiry of {o.sessions // s} sessions, sliced"
        rows.append((name, f"{worst:.1f} ({slices} slices)"))

    engine, sid = big_session(o.holds // s)
    engine.apply(DetachSession(sid), 0.0)
    due = engine.sessions[sid].expires_at
    assert due is not None
    worst, _ = _sliced(engine, due, None)
    rows.append((f"expiry of a session holding {o.holds // s}", f"{worst:.1f}"))
    engine, sid = big_session(o.holds // s)
    timed(
        f"CloseSession of a session holding {o.holds // s}",
        lambda: engine.apply(CloseSession(sid), 0.0),
    )
    engine, sid = big_session(o.holds // s)
    timed(
        f"KillSession of a session holding {o.holds // s}",
        lambda: engine.apply(KillSession("n", sid), 0.0),
    )

    engine = Engine()
    engine.apply(CreateNode("n", BIG), 0.0)
    owner = _session(engine, "n")
    _hold(engine, owner, "m")
    for _ in range(o.waiters // s):
        _wait(engine, _session(engine, "n"), "m")
    shared = o.waiters // s
    engine.apply(CreateSemaphore(owner, "shared", shared), 0.0)
    engine.apply(Acquire(owner, "shared", shared, next(_ids)), 0.0)
    for _ in range(shared):
        engine.apply(Acquire(_session(engine, "n"), "shared", 1, next(_ids), timeout=1e6), 0.0)
    timed(
        f"Release granting {shared} waiters at once",
        lambda: engine.apply(Release(owner, "shared"), 0.0),
    )
    describe = DescribeSemaphore(owner, "m", owners=True, waiters=True)
    timed(
        f"DescribeSemaphore of a mutex with {o.waiters // s} waiters",
        lambda: engine.apply(describe, 0.0),
    )
    many = _session(engine, "n")
    for i in range(10):
        _hold(engine, many, f"h{i}")
    timed("ListSessions(limit=1000)", lambda: engine.apply(ListSessions("n", 0, 1000), 0.0))

    for bound in (o.watches // s, None):
        # First what any number of tokens' watches on one name cost (the bound lifted
        # to fit them), then what one token may arm now (--max-watches-per-semaphore).
        engine = Engine()
        if bound is not None and hasattr(engine, "max_watches_per_semaphore"):
            engine.max_watches_per_semaphore = bound
        engine.apply(CreateNode("n", BIG), 0.0)
        watchers = [_session(engine, "n") for _ in range(o.watches // s // 1000 or 1)]
        changer = _session(engine, "n")
        engine.apply(CreateSemaphore(changer, "w", 1), 0.0)
        with contextlib.suppress(LimitExceededError):  # (one token's room is full)
            for watcher in watchers:
                for _ in range(min(1000, o.watches // s)):
                    engine.apply(DescribeSemaphore(watcher, "w", watch_data=True), 0.0)
        whose = "any tokens'" if bound is not None else "one token's (its most)"
        change = UpdateSemaphore(changer, "w", b"x")
        timed(
            f"one change firing {len(engine.watches)} watches, {whose}", _applying(engine, change)
        )

    engine, sid = big_node(o.semaphores // s)
    timed(
        f"WatchPrefix('') on a node of {o.semaphores // s}",
        lambda: engine.apply(WatchPrefix(sid, ""), 0.0),
    )
    names = tuple(f"a{i:04d}" for i in range(64))
    acquire_all = AcquireAll(sid, names, (0,) * 64, tuple(next(_ids) for _ in names), MAX_COUNT)
    timed("AcquireAll of 64 names (its most)", lambda: engine.apply(acquire_all, 0.0))
    timed(
        f"/metrics scrape (StateCollector) of {o.semaphores // s} semaphores",
        lambda: list(_collector(engine).collect()),
    )
    collector = _collector(engine)
    if budget is not None and hasattr(collector, "count"):
        _, worst, turns, _ = asyncio.run(longest_turn(lambda: collector.count(budget)))
        name = f"/metrics scrape of {o.semaphores // s} semaphores, counted in slices"
        rows.append((name, f"{worst:.1f} ({turns} turns)"))
    from tenure._core import snapshot

    timed(
        f"snapshot.dump of a node of {o.semaphores // s} (in a child)",
        lambda: snapshot.dump(engine),
    )
    timed("fork() of the process holding it (a snapshot's child, on the loop)", _fork)
    timed(
        f"DropNode(force) of a node of {o.semaphores // s}",
        lambda: engine.apply(DropNode("big", force=True), 0.0),
    )

    engine = Engine(max_nodes=o.nodes // s + 2)
    for i in range(o.nodes // s):
        engine.apply(CreateNode(f"n{i:06d}"), 0.0)
    engine.apply(CreateNode("z-jobs"), 0.0)

    def may_see(name: str) -> bool:
        return fnmatch.fnmatchcase(name, "*-jobs")

    timed(
        f"ListNodes(limit=1) of a '*-jobs' token among {o.nodes // s} nodes",
        lambda: visible_node_page(engine, "", 1, ("",), may_see),
    )
    if budget is not None:
        try:
            from tenure._core.handlers.listing import visible_node_slice
        except ImportError:
            pass
        else:
            worst, slices, after = 0.0, 0, ""
            while True:
                start = time.perf_counter()
                _, resume = visible_node_slice(engine, after, 1, ("",), may_see, budget)
                worst = max(worst, (time.perf_counter() - start) * 1000)
                slices += 1
                if resume is None:
                    break
                after = resume
            name = f"ListNodes(limit=1) of a '*-jobs' token among {o.nodes // s}, sliced"
            rows.append((name, f"{worst:.1f} ({slices} slices)"))
    timed(
        f"dashboard view (board) of a '*-jobs' token among {o.nodes // s} nodes",
        lambda: _board(engine, may_see),
    )
    if budget is not None:
        from tenure.server._http.board import BoardLimits, board_in_slices

        async def sliced_board() -> None:
            await board_in_slices(
                engine, now=0.0, shift=0.0, limits=BoardLimits(), may_see=may_see,
                may_kill=may_see, budget=budget,
            )  # fmt: skip

        _, worst, turns, _ = asyncio.run(longest_turn(sliced_board))
        name = f"dashboard view (board) of a '*-jobs' token among {o.nodes // s}, sliced"
        rows.append((name, f"{worst:.1f} ({turns} turns)"))
    timed(
        f"dashboard view (board) of an unscoped token among {o.nodes // s} nodes",
        lambda: _board(engine, lambda name: True, every=True),
    )
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>18}")


if __name__ == "__main__":
    main()
