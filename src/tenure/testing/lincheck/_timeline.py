"""The geometry of one key's timeline: which operations are drawn, and where.

Time is warped as porcupine's visualisation warps it: each distinct instant (a call
or a return) gets a place, in order, at least :data:`GAP` pixels after the one
before and far enough after an operation's call for its label to fit its bar.
The order of calls and returns is kept (what linearizability is about); the lengths
of intervals are not. Intervals are closed: a return at the same instant as a call
overlaps it by :data:`EPS`. An ``info`` operation never returned: its bar runs to
the right edge.

Each process is a row; an operation that overlaps an earlier one of its process
(one invoked again after an ``info``, whose bar never ends) takes another lane of
the row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from tenure.testing.lincheck._history import Operation

#: The width of one character of the labels' monospace font (12 px), in pixels.
CHAR_W: Final = 7.25
#: The least distance between two distinct instants.
GAP: Final = 14.0
#: How far a bar reaches past its return when an operation is called at that instant
#: (so that two closed intervals that touch are seen to overlap); under GAP / 2.
EPS: Final = 5.0
#: A lane's bar height, and the distance from one lane to the next.
LANE_H: Final = 22.0
LANE_STEP: Final = 28.0
#: Space above the first row (for the failure's marker) and between rows.
TOP: Final = 20.0
ROW_GAP: Final = 6.0
#: Space after the last instant, where open-ended bars fade out.
TAIL: Final = 80.0


@dataclass
class Bar:
    """One operation drawn: from ``x0`` to ``x1`` in lane ``lane`` of its row."""

    op: Operation
    x0: float
    x1: float
    lane: int = 0

    @property
    def open_ended(self) -> bool:
        """Whether it never returned (``info``): drawn to the right edge, faded."""
        return self.op.ret == math.inf


@dataclass
class Row:
    """One process's row: its bars and how many lanes they needed."""

    process: int | str
    y: float
    lanes: int
    bars: list[Bar] = field(default_factory=list)

    @property
    def height(self) -> float:
        """The row's height in pixels."""
        return self.lanes * LANE_STEP


@dataclass
class Timeline:
    """Every row, and the drawing's size."""

    rows: list[Row]
    width: float
    height: float
    #: The x of each instant placed (for markers such as the stuck operation's return).
    places: dict[float, float]


def window(
    ops: Sequence[Operation], cap: int, focus: Operation | None, keep: Sequence[Operation] = ()
) -> tuple[list[Operation], int, int]:
    """At most ``cap`` of ``ops`` (in call order) to draw, and how many were left out
    before and after them: the first ``cap``, or with ``focus`` the ``cap`` around it
    (three quarters before it: what led there), plus ``keep`` (the operations
    concurrent with the focus, which may have been called long before; at most a
    quarter of ``cap`` more, the latest called)."""
    if len(ops) <= cap:
        return list(ops), 0, 0
    start = 0
    if focus is not None:
        at = next((i for i, op in enumerate(ops) if op.index == focus.index), 0)
        start = max(0, min(at - cap * 3 // 4, len(ops) - cap))
    chosen = list(ops[start : start + cap])
    inside = {op.index for op in chosen}
    extra = [op for op in keep if op.index not in inside][-(cap // 4) :]
    drawn = sorted(chosen + extra, key=lambda op: (op.call, op.index))
    return drawn, start, len(ops) - start - cap


def _places(ops: Sequence[Operation], width: Callable[[Operation], float]) -> dict[float, float]:
    """Each instant's x: a left-to-right scan (porcupine's), each instant placed as
    early as the gap and the labels of the bars that end there allow."""
    calls = {op.call for op in ops}
    ending: dict[float, list[Operation]] = {}
    for op in ops:
        if op.ret != math.inf:
            ending.setdefault(op.ret, []).append(op)
    places: dict[float, float] = {}
    last: float | None = None
    for instant in sorted(calls | ending.keys()):
        x = 0.0 if last is None else places[last] + GAP
        reach = EPS if instant in calls else 0.0
        for op in ending.get(instant, ()):
            if op.call < instant:  # (a bar of no length is widened when drawn)
                x = max(x, places[op.call] + width(op) - reach)
        places[instant] = x
        last = instant
    return places


def _sort_key(process: int | str) -> tuple[int, int, str]:
    return (1, 0, process) if isinstance(process, str) else (0, process, "")


def lay_out(ops: Sequence[Operation], width: Callable[[Operation], float]) -> Timeline:
    """The rows of ``ops`` (one key's, to draw), each bar at least ``width(op)`` wide."""
    places = _places(ops, width)
    calls = {op.call for op in ops}
    bars: list[Bar] = []
    for op in ops:
        x0 = places[op.call]
        if op.ret == math.inf:
            bars.append(Bar(op, x0, math.inf))
            continue
        x1 = places[op.ret] + (EPS if op.ret in calls else 0.0)
        bars.append(Bar(op, x0, max(x1, x0 + width(op))))
    reach = [b.x1 for b in bars if b.x1 != math.inf] + [b.x0 + width(b.op) for b in bars]
    right = max(reach) + TAIL if reach else 0.0
    by_process: dict[int | str, list[Bar]] = {}
    for bar in sorted(bars, key=lambda b: (b.x0, b.op.index)):
        if bar.x1 == math.inf:
            bar.x1 = right
        by_process.setdefault(bar.op.process, []).append(bar)
    rows: list[Row] = []
    y = TOP
    for process in sorted(by_process, key=_sort_key):
        ends: list[float] = []  # each lane's last x1 (inf: an open-ended bar took it)
        for bar in by_process[process]:
            # touching bars of one process (a return and the next call at one
            # instant) overlap by EPS: they still share the lane
            free = [i for i, end in enumerate(ends) if end <= bar.x0 + EPS + 0.5]
            bar.lane = free[0] if free else len(ends)
            if not free:
                ends.append(0.0)
            ends[bar.lane] = math.inf if bar.open_ended else bar.x1
        row = Row(process, y, max(1, len(ends)), by_process[process])
        rows.append(row)
        y += row.height + ROW_GAP
    return Timeline(rows, right, y, places)
