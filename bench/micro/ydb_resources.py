"""What YDB's rate-limiter calls cost the server's loop on a node of deep limiters (issue 47).

``python -m bench.micro.ydb_resources`` builds an engine (pure or compiled: whichever
this checkout imports; the first line says which) with a node of ``--limiters``
(2,000) limiter semaphores whose paths are as deep as a name allows (``0000/x/x/...``,
about 500 levels, none a resource above another: every one is a root), made as a
native client makes them (``CreateSemaphore`` of ``ratelimiter/PATH`` holding a
bucket), and times YDB's calls on it through the face's own code
(:class:`tenure.compat.ydb.rate_limiter.RateLimiterCalls` over the engine, without
gRPC or a journal): the whole call, and the longest time another task waited for
its turn of the loop meanwhile (the call's longest step), in ms, with its turns.

Rows: ``ListResources`` of the roots and recursive (every resource), then
``DescribeResource``, ``AlterResource`` and ``DropResource`` of one of them (which
have no children), and ``AlterResource`` of a root with ``--limiters`` deep
descendants with YDB settings (which all follow it: the writes are the call's).

Run it as a file with ``PYTHONPATH`` at an older checkout's ``src`` to measure that
one. Compare within one run: the machine is noisy.

Internals: the engine (``tenure._core``) and the YDB face's calls
(``tenure.compat.ydb.rate_limiter``) over a stand-in host that applies commands at
once: what is measured is the face's and the engine's own work per step of the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from bench.micro._common import longest_turn
from tenure._core import (
    Command,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    Engine,
    NodeConfig,
)
from tenure._core import engine as engine_module
from tenure._core.rates import Bucket, bucket_data
from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.paths import Database
from tenure.compat.ydb.rate_limiter import RateLimiterCalls
from tenure.compat.ydb.tickets import Tickets

R = TypeVar("R")
BIG = NodeConfig(max_semaphores=1_000_000, max_sessions=1_000)
NODE = "deep"
#: A path as deep as a semaphore's name allows (16 bytes go to the longer prefix).
TAIL = "/x" * 500


class _Host:
    """The engine as a face's host: commands applied at once, nothing journaled."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dead = False
        self.step_budget = engine_module.DEFAULT_STEP_BUDGET

    def admit_request(self, actor: str) -> None:
        return None

    def execute(self, command: Command[R], actor: str = "") -> R:
        return self.engine.apply(command, time.monotonic())

    async def committed(self) -> None:
        return None

    async def caught_up(self) -> None:
        return None


class _Context:
    """A gRPC call's context, as far as the calls read it."""

    def invocation_metadata(self) -> tuple[()]:
        return ()

    def time_remaining(self) -> None:
        return None


def _calls(engine: Engine) -> RateLimiterCalls:
    host: Any = _Host(engine)
    database = Database("/local")
    tickets = Tickets(None, b"0" * 16, 60.0)
    made: Any = RateLimiterCalls  # (typed loosely: a face from before issue 47 takes less)
    calls: RateLimiterCalls
    try:
        calls = made(host, tickets, database, lambda: False, _peer, step_budget=host.step_budget)
    except TypeError:
        calls = made(host, tickets, database, lambda: False, _peer)
    return calls


def _peer(context: Any) -> str:
    return "ipv4:127.0.0.1:1"


def deep_roots(limiters: int) -> Engine:
    """A node of ``limiters`` deep limiters, every one a root."""
    engine = Engine()
    engine.apply(CreateNode(NODE, BIG), 0.0)
    sid = engine.apply(CreateSession(NODE, b"k"), 0.0).session_id
    data = bucket_data(Bucket(1.0, 1.0, 0.0))
    for i in range(limiters):
        engine.apply(CreateSemaphore(sid, f"ratelimiter/{i:04d}{TAIL}", 1, data), 0.0)
    return engine


def _row(
    rows: list[tuple[str, str]], name: str, work: Callable[[], Awaitable[Any]], check: str
) -> None:
    gc.collect()  # (the rows before leave garbage: not this row's pause)
    took, worst, turns, response = asyncio.run(longest_turn(work))
    status = pb.Status.StatusCode.Name(response.operation.status)
    assert status == check, response.operation
    rows.append((name, f"{took:.1f}  {worst:.1f} ({turns} turns)"))


def main() -> None:
    """Build the node, time each call, print one line per row."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--limiters", type=int, default=2_000)
    o = args.parse_args()
    compiled = not engine_module.__file__ or not engine_module.__file__.endswith(".py")
    print(f"engine: {'compiled' if compiled else 'pure'}; ms per call, longest step (turns)")
    rl = pb.rate_limiter
    node = f"/local/{NODE}"
    rows: list[tuple[str, str]] = []
    n = o.limiters

    calls = _calls(deep_roots(n))
    context: Any = _Context()
    request = rl.ListResourcesRequest(coordination_node_path=node)
    _row(
        rows,
        f"ListResources (roots) of {n}",
        lambda: calls.list_resources(request, context),
        "SUCCESS",
    )
    request = rl.ListResourcesRequest(coordination_node_path=node, recursive=True)
    _row(
        rows,
        f"ListResources (recursive) of {n}",
        lambda: calls.list_resources(request, context),
        "SUCCESS",
    )
    one = f"{n // 2:04d}{TAIL}"
    request = rl.DescribeResourceRequest(coordination_node_path=node, resource_path=one)
    _row(
        rows,
        "DescribeResource of one",
        lambda: calls.describe_resource(request, context),
        "SUCCESS",
    )
    settings = rl.HierarchicalDrrSettings(max_units_per_second=2.0)
    resource = {"resource_path": one, "hierarchical_drr": settings}
    request = rl.AlterResourceRequest(coordination_node_path=node, resource=resource)
    _row(
        rows,
        f"AlterResource of one among {n}",
        lambda: calls.alter_resource(request, context),
        "SUCCESS",
    )
    request = rl.DropResourceRequest(coordination_node_path=node, resource_path=one)
    _row(
        rows,
        f"DropResource of one among {n}",
        lambda: calls.drop_resource(request, context),
        "SUCCESS",
    )

    # A root over n deep descendants with YDB settings, each inheriting its rate.
    engine = Engine()
    engine.apply(CreateNode(NODE, BIG), 0.0)
    calls = _calls(engine)

    made = rl.CreateResourceRequest(
        coordination_node_path=node, resource={"resource_path": "r", "hierarchical_drr": settings}
    )
    _row(rows, "CreateResource of a root", lambda: calls.create_resource(made, context), "SUCCESS")
    # Its descendants as CreateResource leaves them (a limiter and its settings), made
    # directly: a chain of 500 creates per path would take long to build.
    sid = engine.apply(CreateSession(NODE, b"k"), 0.0).session_id
    ydb = rl.HierarchicalDrrSettings().SerializeToString()
    for i in range(n):
        path = f"r/{i:04d}{TAIL[: len(TAIL) - 2]}"
        engine.apply(
            CreateSemaphore(sid, f"ratelimiter/{path}", 1, bucket_data(Bucket(2.0, 2.0, 0.0))), 0.0
        )
        engine.apply(CreateSemaphore(sid, f"ydb.ratelimiter/{path}", 1, ydb), 0.0)
    resource = {
        "resource_path": "r",
        "hierarchical_drr": rl.HierarchicalDrrSettings(max_units_per_second=3.0),
    }
    request = rl.AlterResourceRequest(coordination_node_path=node, resource=resource)
    _row(
        rows,
        f"AlterResource of a root over {n} deep",
        lambda: calls.alter_resource(request, context),
        "SUCCESS",
    )
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>26}")


if __name__ == "__main__":
    main()
