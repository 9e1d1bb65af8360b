"""What a listing page costs the engine when the state is large (issue 37).

``python -m bench.micro.listing`` builds an engine (pure or compiled: whichever this
checkout imports) with ``--nodes`` nodes (10,000) and, on one node, ``--semaphores``
semaphores (100,000), and times (median of ``--repeats`` runs, ms):

* ``ListNodes(limit=1), scoped, as before``: the page of a token limited to one
  node, ``z-jobs`` (named after every other), found as the server found it before
  issue 37: engine pages of ``limit`` names read on past the nodes it may not see
  (each page a walk of every node then: quadratic);
* ``ListNodes(limit=1), scoped, from the index``: the same page from the ranges of
  the token's patterns in the sorted node names (``visible_node_page``);
* ``ListSemaphores(limit=1000), last page``: the last page of the big node;
* ``acquire + release of an ephemeral mutex``: what keeping the index costs the hot
  path on the big node (its name comes into the sorted names and goes).

Run it with ``PYTHONPATH`` at an older checkout's ``src`` to measure that one (the
rows its engine lacks are skipped). Compare within one run: the machine is noisy.

Internals: the engine (``tenure._core``) and its listing handler, directly: what
is measured is the engine's own work per page, without a network.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from tenure._core import (
    MAX_COUNT,
    Acquire,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    Engine,
    ListNodes,
    ListSemaphores,
    NodeConfig,
    Release,
)

KEY = b"bench-key"


def _median_ms(run: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _scoped_as_before(engine: Engine, may_see: Callable[[str], bool], limit: int) -> list[str]:
    """The server's loop before issue 37 (native.py ``_visible_nodes``)."""
    names: list[str] = []
    after = ""
    for _ in range(engine.max_nodes // limit + 2):
        page = engine.apply(ListNodes(after, limit), engine.now).names
        names += [name for name in page if may_see(name)]
        if len(page) < limit or len(names) >= limit:
            break
        after = page[-1]
    return names[:limit]


def main() -> None:
    """Build the engine, time each row, print one line per row."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--nodes", type=int, default=10_000)
    args.add_argument("--semaphores", type=int, default=100_000)
    args.add_argument("--repeats", type=int, default=5)
    options = args.parse_args()
    engine = Engine(max_nodes=options.nodes + 2)
    for i in range(options.nodes):
        engine.apply(CreateNode(f"n{i:06d}"), 0.0)
    engine.apply(CreateNode("z-jobs"), 0.0)  # (after every other name: the worst case)
    big = NodeConfig(max_semaphores=options.semaphores + 1)
    engine.apply(CreateNode("big", big), 0.0)
    sid = engine.apply(CreateSession("big", KEY), 0.0).session_id
    for i in range(options.semaphores):
        engine.apply(CreateSemaphore(sid, f"s{i:06d}", 1), 0.0)

    def may_see(name: str) -> bool:
        return name == "z-jobs"

    rows: dict[str, Callable[[], object]] = {
        "ListNodes(limit=1), scoped, as before": lambda: _scoped_as_before(engine, may_see, 1),
    }
    try:
        from tenure._core.handlers.listing import visible_node_page
    except ImportError:
        pass
    else:
        rows["ListNodes(limit=1), scoped, from the index"] = lambda: visible_node_page(
            engine, "", 1, ("z-jobs",), may_see
        )
    last = f"s{options.semaphores - 1000:06d}"
    rows["ListSemaphores(limit=1000), last page"] = lambda: engine.apply(
        ListSemaphores("big", "", last, 1000), 0.0
    )
    ids = iter(range(1, 10**9))

    def acquire_release() -> None:
        for _ in range(1000):
            engine.apply(Acquire(sid, "m", MAX_COUNT, request_id=next(ids), ephemeral=True), 0.0)
            engine.apply(Release(sid, "m"), 0.0)

    rows["acquire + release of an ephemeral mutex (x1000)"] = acquire_release
    width = max(map(len, rows))
    print(f"{options.nodes} nodes, {options.semaphores} semaphores on one; median ms")
    for name, run in rows.items():
        print(f"{name:<{width}}  {_median_ms(run, options.repeats):10.3f}")


if __name__ == "__main__":
    main()
