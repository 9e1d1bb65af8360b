"""What one dashboard view costs the server's loop when a tenant's state is big (issue 47).

``python -m bench.micro.board`` builds an engine (pure or compiled: whichever this
checkout imports; the first line says which) with ``--groups`` groups (60) of
``--members`` members (1,000) on one node, and a node of 100 semaphores whose
names, holders' data and sessions' texts are as big as allowed (each character a
bidi override: six bytes once escaped), and times, the least of ``--repeats`` runs
(5), in ms:

* ``one go``: the view built in one step (:func:`board`), as every view was before
  issue 47 (run it at an older checkout to see that one's numbers: its rows the
  board lacks are skipped), with the holders it read and its bytes of JSON;
* ``sliced``: the view as the server builds it now (:func:`board_in_slices`,
  ``--budget`` items a turn, 1,000 by default: the server's step budget), the
  longest time another task of the loop waited for its turn meanwhile, and the
  number of turns it had;
* ``encode``: the view's JSON text (``json.dumps``; before issue 47, with every
  string escaped there too), the one step of a view that is not sliced (bounded by
  ``--dashboard-max-bytes`` now).

Internals: the engine (``tenure._core``) and the dashboard's board
(``tenure.server._http.board``), directly: what is measured is the view's own work on
the loop, without HTTP.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from bench.micro._common import longest_turn
from tenure._core import (
    MAX_COUNT,
    Acquire,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    Engine,
    NodeConfig,
)
from tenure._core import engine as engine_module
from tenure._core import kinds as kinds_module
from tenure._core.members import GROUP_DATA, Hold, Member, member_record, members_of
from tenure._core.values import ClientIdentity
from tenure.server._http import board as board_module

BIG = NodeConfig(max_sessions=100_000, max_semaphores=100_000, max_waiters=100_000)
WIDE = "\u202e"  # escaped as six characters: the widest a view shows a character


def groups(count: int, members: int) -> Engine:
    """One node of ``count`` groups of ``members`` members (one session a member)."""
    engine = Engine()
    engine.apply(CreateNode("n", BIG), 0.0)
    sids = [engine.apply(CreateSession("n", b"k", None), 0.0).session_id for _ in range(members)]
    for g in range(count):
        name = f"g{g:03d}"
        engine.apply(CreateSemaphore(sids[0], name, members, GROUP_DATA), 0.0)
        for i, sid in enumerate(sids):
            record = member_record(f"member-{i:04d}", b"10.0.0.1:80", weight=None, state="joined")
            engine.apply(Acquire(sid, name, 1, request_id=g + 1, data=record), 0.0)
    return engine


def big_texts() -> Engine:
    """100 semaphores of 1,024-byte names, 20 holders and 20 waiters each with 600
    bytes of data, sessions with the longest descriptions and client names."""
    engine = Engine()
    engine.apply(CreateNode("n", BIG), 0.0)
    who = ClientIdentity("h" * 200, 1, WIDE * 300)
    sids = [
        engine.apply(CreateSession("n", b"k", None, WIDE * 340, who), 0.0).session_id
        for _ in range(40)
    ]
    for s in range(100):
        name = f"s{s:03d}" + WIDE * 340
        engine.apply(CreateSemaphore(sids[0], name, MAX_COUNT), 0.0)
        for i, sid in enumerate(sids):
            count = 2**62 if i % 2 else 1  # every other one waits
            engine.apply(Acquire(sid, name, count, i + 1, data=WIDE.encode() * 200), 0.0)
    return engine


def _kwargs() -> dict[str, Any]:
    return {
        "now": 0.0,
        "shift": 0.0,
        "limits": board_module.BoardLimits(),
        "may_see": lambda node: True,
        "may_kill": lambda node: True,
    }


def rows_of(label: str, engine: Engine, budget: int, repeats: int) -> list[tuple[str, str]]:
    """The rows of one state (module docstring): the least time of ``repeats`` runs of
    each (the machine is noisy: the least is the one least disturbed)."""
    read = [0]

    def counted(holds: Iterable[Hold]) -> dict[str, Member]:
        held = list(holds)
        read[0] += len(held)
        return members_of(held)

    one_go = encode = math.inf
    sliced = getattr(board_module, "board_in_slices", None)
    for _ in range(repeats):
        read[0] = 0
        with mock.patch.object(kinds_module, "members_of", counted):
            start = time.perf_counter()
            view = board_module.board(engine, **_kwargs())
            one_go = min(one_go, (time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        if sliced is None:  # (before issue 47, the whole view was escaped here)
            text = json.dumps(board_module.shown_view(view), separators=(",", ":"))
        else:  # (now each entry is escaped as it is made, in its slice)
            text = json.dumps(view, separators=(",", ":"))
        encode = min(encode, (time.perf_counter() - start) * 1000)
    rows = [
        (f"{label}: one go", f"{one_go:.1f}"),
        (f"{label}: group holders read, bytes of JSON", f"{read[0]}, {len(text)}"),
        (f"{label}: encode (json.dumps of the view)", f"{encode:.1f}"),
    ]
    if sliced is not None:

        async def build() -> object:
            return await sliced(engine, **_kwargs(), budget=budget)

        runs = []
        for _ in range(repeats):
            start = time.perf_counter()
            _, worst, turns, _ = asyncio.run(longest_turn(build))
            runs.append((worst, turns, (time.perf_counter() - start) * 1000))
        worst, turns, total = min(runs)
        rows.append(
            (f"{label}: sliced, longest turn (turns; all)", f"{worst:.1f} ({turns}; {total:.0f})")
        )
    return rows


def main() -> None:
    """Build each state, time each row, print one line per row."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--groups", type=int, default=60)
    args.add_argument("--members", type=int, default=1_000)
    args.add_argument("--budget", type=int, default=1_000, help="the step budget")
    args.add_argument("--repeats", type=int, default=5, help="runs of each row (the least)")
    o = args.parse_args()
    compiled = not engine_module.__file__ or not engine_module.__file__.endswith(".py")
    print(f"engine: {'compiled' if compiled else 'pure'}; step budget: {o.budget}; ms")
    label = f"{o.groups} groups x {o.members}"
    rows = rows_of(label, groups(o.groups, o.members), o.budget, o.repeats)
    rows += rows_of("100 semaphores of big texts", big_texts(), o.budget, o.repeats)
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>22}")


if __name__ == "__main__":
    main()
