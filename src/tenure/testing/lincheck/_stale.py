"""Stale reads: where each may take effect, and the order of its session it keeps.

A read whose invoke gives ``max_staleness`` S (seconds) is a *stale read*, as a
cluster's standby answers one (docs/cluster.md, "Reads from standbys"). It may take
effect at any point from S before its call to its return, and never before an
operation of its own *session* (the invoke's ``session``; absent: its process) that
had completed by its call: the client reads nothing older than what it wrote, was
told or read before (read your writes, monotonic reads). Both bounds are the search's
(:mod:`tenure.testing.lincheck._search`); the models stay step functions:

* **S back**: the read's call enters the search's list S earlier
  (:func:`earliest`), so the search may take it from there on;
* **after its session's earlier operations**: on its own key exactly, as an order
  the search keeps (:func:`session_waits`: the read is taken only once each of
  them is); on another key, where the check of one key cannot see them, as a
  bound that is necessary, not sufficient: the read took effect after their calls
  (each took effect after its call, and the read after it), so :func:`earliest`
  is never before them.

An operation of the session *precedes* a stale read when it returned by the read's
call (``ret <= call``: the client had its answer) and was called before it (ties of
call by the history's order); an operation whose outcome is unknown (``info``) never
does (its answer never came). One that failed does: the client had an answer, which
came after its call.

Times: a history's ``time`` is in :data:`TIME_UNIT` seconds (nanoseconds, as
:class:`~tenure.testing.lincheck.HistoryWriter` writes them) unless its header's
``time_unit`` says otherwise (``{"time_unit": 1}``: seconds).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from tenure.testing.lincheck._history import INFO, HistoryError, Operation

#: Seconds per unit of a history's ``time``, unless its header says (module docstring).
TIME_UNIT: Final = 1e-9


def time_unit(header: Mapping[str, Any]) -> float:
    """The seconds per unit of ``time`` the header gives (:data:`TIME_UNIT` if none).

    Raises:
        HistoryError: a ``time_unit`` that is not a positive finite number.
    """
    unit = header.get("time_unit", TIME_UNIT)
    if isinstance(unit, bool) or not isinstance(unit, int | float) or not 0 < unit < math.inf:
        raise HistoryError(f"the header's 'time_unit' is seconds per unit of time, not {unit!r}")
    return float(unit)


def session_of(op: Operation) -> Any:
    """Whose order ``op`` keeps: its ``session``, else its process (told apart)."""
    return ("process", op.process) if op.session is None else ("session", op.session)


def _order(op: Operation) -> tuple[float, int]:
    """The order of calls (ties by the history's order)."""
    return (op.call, op.index)


def earliest(operations: Iterable[Operation], unit: float = TIME_UNIT) -> dict[int, float]:
    """Each stale read's earliest instant (by its ``index``), in the history's time:
    ``max_staleness`` before its call, and never before what its session's preceding
    operations, on any key, took effect after (their calls; a stale one's own earliest
    instant): module docstring. ``unit``: seconds per unit of time."""
    found: dict[int, float] = {}
    sessions: dict[Any, list[Operation]] = {}
    for op in sorted(operations, key=_order):
        sessions.setdefault(session_of(op), []).append(op)
    for members in sessions.values():
        if all(op.max_staleness is None for op in members):
            continue
        answered: list[tuple[float, float]] = []  # (return, after when it took effect)
        floor = -math.inf
        for op in members:
            while answered and answered[0][0] <= op.call:
                floor = max(floor, heapq.heappop(answered)[1])
            took = op.call
            if op.max_staleness is not None:
                took = found[op.index] = max(op.call - op.max_staleness / unit, floor)
            if op.outcome != INFO:
                heapq.heappush(answered, (op.ret, took))
    return found


def calls(operations: Sequence[Operation], earliest_of: Mapping[int, float] | None) -> list[float]:
    """Where each operation's call enters the search's list: a stale read's earliest
    instant (``earliest_of``, by index; None: :func:`earliest` of ``operations``
    alone, in :data:`TIME_UNIT`), any other's call."""
    if earliest_of is None:
        earliest_of = earliest(operations)
    return [
        op.call if op.max_staleness is None else earliest_of.get(op.index, op.call)
        for op in operations
    ]


def session_waits(operations: Sequence[Operation], entered: Sequence[float]) -> list[int]:
    """For each of one key's operations (as the search keeps them; ``entered``: where
    each call enters its list), the bits of those it must follow besides real time: a
    stale read's session's preceding operations (module docstring). 0 for the others.

    Only those the search could take after the read are named (the *frontier*): one
    whose return comes before the call of another preceding operation in the list (it
    is taken before that one is), or that precedes a stale read which precedes this
    one too (that read follows it already), is implied and left out.
    """
    waits = [0] * len(operations)
    sessions: dict[Any, list[int]] = {}
    for i in sorted(range(len(operations)), key=lambda i: _order(operations[i])):
        sessions.setdefault(session_of(operations[i]), []).append(i)
    for members in sessions.values():
        if any(operations[i].max_staleness is not None for i in members):
            _frontiers(operations, entered, members, waits)
    return waits


def _frontiers(
    operations: Sequence[Operation], entered: Sequence[float], members: list[int], waits: list[int]
) -> None:
    """:func:`session_waits` for one session's ``members`` (in call order). The set of
    preceding operations only grows from one stale read to the next, and what implies
    one of them stays, so the frontier is kept and pruned as they come."""
    waiting: list[int] = []  # answered, not yet preceding a stale read met so far
    frontier: list[int] = []
    first = second = (-math.inf, -1)  # the two latest entries of the preceding ones
    newest = -1  # the preceding stale read called last

    def implied(a: int) -> bool:
        later = second[0] if first[1] == a else first[0]
        if later > operations[a].ret:
            return True
        if newest < 0 or newest == a:
            return False
        return operations[a].ret <= operations[newest].call and _order(operations[a]) < _order(
            operations[newest]
        )

    for i in members:
        op = operations[i]
        if op.max_staleness is not None:
            arrived = [a for a in waiting if operations[a].ret <= op.call]
            if arrived:
                waiting = [a for a in waiting if operations[a].ret > op.call]
                for a in arrived:
                    if entered[a] > first[0]:
                        first, second = (entered[a], a), first
                    elif entered[a] > second[0]:
                        second = (entered[a], a)
                    if operations[a].max_staleness is not None and (
                        newest < 0 or _order(operations[a]) > _order(operations[newest])
                    ):
                        newest = a
                frontier = [a for a in frontier + arrived if not implied(a)]
            for a in frontier:
                waits[i] |= 1 << a
        if op.outcome != INFO:
            waiting.append(i)
