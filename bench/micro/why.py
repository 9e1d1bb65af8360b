"""How long one answer of who blocks a name takes the engine, with a long queue (issue 60).

``python -m bench.micro.why`` builds an engine (pure or compiled: whichever this
checkout imports; the first line says which) where mutex ``A`` has ``--waiters``
(100,000) waiters queued, its holder holds it and waits on ``B`` at the back of a
queue of as many (so that its place in that queue is found at the far end), and
``B``'s holder waits on ``C``, held by a root; then times, once each, one
``Engine.apply(WhyName)``: the first page (100, the client's default), a page of
10,000 (the most), the last page (``after`` 99,900), and the holder's place past
``--why-look-limit`` (the look limit at its default, 10,000: the place reads 0).
Each is one step of the server's loop (a request); issue 60 asks for at most 50 ms.

Internals: the engine (``tenure._core``) directly, and its ``why_look_limit`` set by
hand: the engine's own work per answer, without a network (a request's codec adds the
page's encoding, measured apart in ``bench.micro.codec``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, Engine, WhyName
from tenure._core import engine as engine_module
from tenure._core.values import NodeConfig

NODE = "n"


def _session(engine: Engine) -> int:
    return int(engine.apply(CreateSession(NODE, b"k" * 16), 0.0).session_id)


def _lock(engine: Engine, sid: int, name: str, rid: int, task: int = 0) -> None:
    engine.apply(Acquire(sid, name, MAX_COUNT, rid, ephemeral=True, task=task), 0.0)


def build(waiters: int) -> Engine:
    """The state of the module docstring."""
    engine = Engine()
    engine.apply(
        CreateNode(NODE, NodeConfig(max_sessions=10 * waiters, max_waiters=10 * waiters)), 0.0
    )
    root, b_holder, a_holder = _session(engine), _session(engine), _session(engine)
    rid = 1
    _lock(engine, root, "C", rid)
    _lock(engine, b_holder, "B", rid + 1, task=2)
    _lock(engine, b_holder, "C", rid + 2, task=2)
    _lock(engine, a_holder, "A", rid + 3, task=1)
    rid += 4
    for _ in range(waiters):
        _lock(engine, _session(engine), "A", rid)
        _lock(engine, _session(engine), "B", rid + 1)
        rid += 2
    _lock(engine, a_holder, "B", rid, task=1)  # (at the back of B's queue)
    return engine


def _ms(engine: Engine, command: WhyName) -> tuple[float, str]:
    started = time.perf_counter()
    report = engine.apply(command, 1.0)
    took = (time.perf_counter() - started) * 1000
    place = report.holders[0].waiting_for[0].position if report.holders[0].waiting_for else 0
    return took, f"{len(report.waiters)} waiters, {len(report.chain or ())} links, place {place}"


def main() -> None:
    """Build the state, time each answer, print one line per answer."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--waiters", type=int, default=100_000)
    o = args.parse_args()
    file = engine_module.__file__ or ""
    print(f"engine: {'pure' if file.endswith('.py') else 'compiled'}; ms per WhyName")
    engine = build(o.waiters)
    engine.why_look_limit = o.waiters * 3  # (room to find the holder's place)
    rows = [
        ("first page (limit 100), place found", WhyName(NODE, "A")),
        ("a page of 10,000", WhyName(NODE, "A", limit=10_000)),
        (f"the last page (after {o.waiters - 100})", WhyName(NODE, "A", after=o.waiters - 100)),
    ]
    for name, command in rows:
        took, what = _ms(engine, command)
        print(f"{name:<44} {took:8.1f}  ({what})")
    engine.why_look_limit = 10_000
    took, what = _ms(engine, WhyName(NODE, "A"))
    print(f"{'first page, look limit 10,000 (the default)':<44} {took:8.1f}  ({what})")


if __name__ == "__main__":
    main()
