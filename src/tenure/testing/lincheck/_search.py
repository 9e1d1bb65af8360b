"""The search for a linearization of one key's operations (Wing and Gong, with Lowe's
and porcupine's improvements).

The calls and returns of the operations form one list in real-time order (a call
before a return at the same time: intervals are closed). The search walks it: at a
call, it tries to take that operation next (``lift`` it out of the list) if the
model allows it from the current states; at a return it has found an operation that
had to be taken by then and was not, so it undoes its latest choice and tries the
next operation instead. Lowe's cache makes it polynomial in practice: a set of
operations taken that reaches a set of states already reached that way is not
searched twice (each key a pair (the taken set as an integer's bits, the states)).

A stale read (:mod:`tenure.testing.lincheck._stale`) enters the list at its earliest
instant, before its call, and is taken only once the operations of its session that
precede it are (the same test as a watcher's items and twins: each operation's bits
of those it must follow, ``waits_for``); taking any operation starts the walk again
from the head, so a read held back is tried again as soon as they are.

The search is bounded: past ``deadline`` (a :func:`time.monotonic` instant) or past
``max_bytes`` of cache, it stops and answers *unknown*, never *linearizable*.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tenure.testing.lincheck._history import Operation
from tenure.testing.lincheck._model import INERT, WATCH, Model, State, watch_step
from tenure.testing.lincheck._stale import calls, session_waits

#: Outcomes of one key's search.
LINEARIZABLE: Final = "linearizable"
NOT_LINEARIZABLE: Final = "not linearizable"
UNKNOWN: Final = "unknown"

#: How many steps between two looks at the clock.
_CLOCK_EVERY: Final = 2048
#: What a cache entry costs besides its bit set (a tuple, a set slot, the state set).
_ENTRY_BYTES: Final = 200


@dataclass
class Blocked:
    """Where a search that failed got furthest: what it had taken, and what it could not.

    ``prefix`` is the longest sequence of operations it could take in order, each with
    the state after it; ``stuck`` the operation that had to be taken next (its
    return came) and could not be; ``pending`` the operations that were open then
    (concurrent with ``stuck``; each one tried); ``state`` what the prefix left.
    """

    prefix: list[tuple[Operation, State]]
    stuck: Operation
    pending: list[Operation]
    state: State


@dataclass
class KeyResult:
    """One key's verdict, what it cost, and its witness (a linearization, or where the
    search got furthest when none exists)."""

    key: str | None
    verdict: str
    operations: int
    steps: int
    cache_entries: int
    seconds: float
    #: With LINEARIZABLE: the operations in a linearized order, with the state after each.
    linearization: list[tuple[Operation, State]] = field(default_factory=list)
    #: With NOT_LINEARIZABLE: where it got furthest.
    blocked: Blocked | None = None
    #: With UNKNOWN: why (the bound that was passed).
    reason: str = ""


def search(
    model: Model,
    key: str | None,
    operations: Sequence[Operation],
    initial: State,
    deadline: float = math.inf,
    max_bytes: float = math.inf,
    after: Mapping[int, Sequence[int]] | None = None,
    earliest: Mapping[int, float] | None = None,
) -> KeyResult:
    """Whether ``operations`` (one key's) have a linearization from ``initial`` (module
    docstring); the verdict and its witness.

    ``after`` orders some operations beyond real time: operation i (an index into
    ``operations``) is taken only after every one of ``after[i]`` (a watcher's
    items, in the order it saw them). A ``watch`` operation is a read of the value it
    saw (its ``output``), through the model's ``observe``. ``earliest``: each stale
    read's earliest instant, by its ``index`` (:func:`~._stale.earliest` of the whole
    history; None: of ``operations`` alone, their time in nanoseconds).
    """
    started = time.monotonic()
    checked = len(operations)
    entered_all = calls(operations, earliest)
    # An inert operation (legal anywhere, changing nothing) could go anywhere in its
    # interval: the search leaves it out, and with it every choice of where it goes.
    prepared_all = [
        watch_step(model, op.output) if op.f == WATCH else model.prepare(op) for op in operations
    ]
    kept = [i for i, prepared in enumerate(prepared_all) if prepared != INERT]
    place = {old: new for new, old in enumerate(kept)}
    operations = [operations[i] for i in kept]
    prepared = [prepared_all[i] for i in kept]
    entered = [entered_all[i] for i in kept]
    count = len(operations)
    returns = [op.ret for op in operations]
    if model.bound_returns is not None:
        returns = model.bound_returns(operations, prepared, initial)
    waits_for = _symmetry(operations, prepared, returns)
    for i, session in enumerate(session_waits(operations, entered)):
        waits_for[i] |= session
    for first, befores in (after or {}).items():
        if first in place:
            for before in befores:
                if before in place:
                    waits_for[place[first]] |= 1 << place[before]
    # The list: node 0 is the head; node 2i+1 is operation i's call, 2i+2 its return.
    order = sorted(
        [(call, 0, i) for i, call in enumerate(entered)]
        + [(ret, 1, i) for i, ret in enumerate(returns)]
    )
    size = 2 * count + 1
    following = [0] * (size + 1)  # next node; `size` is the end
    preceding = [0] * (size + 1)
    previous = 0
    for _, is_return, i in order:
        node = 2 * i + 1 + is_return
        following[previous] = node
        preceding[node] = previous
        previous = node
    end = size
    following[previous] = end
    preceding[end] = previous

    step = model.step
    state = initial
    taken = 0  # the operations taken, as bits
    cache: set[tuple[int, State]] = set()
    cache_bytes = 0.0
    chosen: list[tuple[int, State, int]] = []  # (call node, state before, taken before)
    best = -1
    blocked: Blocked | None = None
    steps = 0
    node = following[0]

    def finish(verdict: str, reason: str = "") -> KeyResult:
        return KeyResult(
            key,
            verdict,
            checked,
            steps,
            len(cache),
            time.monotonic() - started,
            blocked=blocked,
            reason=reason,
        )

    while following[0] != end:
        steps += 1
        if steps % _CLOCK_EVERY == 0 and time.monotonic() > deadline:
            return finish(UNKNOWN, "the timeout passed")
        if node & 1:  # a call: try to take its operation now
            i = node >> 1
            if taken & waits_for[i] != waits_for[i]:
                # what must go first has not (a twin, a watch, a stale read's session)
                node = following[node]
                continue
            legal, after = step(state, prepared[i])
            if legal:
                now_taken = taken | (1 << i)
                entry = (now_taken, after)
                if entry not in cache:
                    cache.add(entry)
                    cache_bytes += now_taken.__sizeof__() + _ENTRY_BYTES
                    chosen.append((node, state, taken))
                    state, taken = after, now_taken
                    # lift the call and its return out of the list
                    ret = node + 1
                    following[preceding[node]] = following[node]
                    preceding[following[node]] = preceding[node]
                    following[preceding[ret]] = following[ret]
                    preceding[following[ret]] = preceding[ret]
                    node = following[0]
                    continue
            node = following[node]
            continue
        # A return: its operation had to be taken by now. Undo the latest choice.
        # (Past the memory bound the search stops; looked at here, where it backs up.)
        if cache_bytes > max_bytes:
            return finish(UNKNOWN, "the memory bound passed")
        if len(chosen) > best:
            best = len(chosen)
            blocked = _blocked(operations, chosen, state, node, following)
        if not chosen:
            return finish(NOT_LINEARIZABLE)
        node, state, taken = chosen.pop()
        ret = node + 1
        # put the return, then the call, back where they were
        following[preceding[ret]] = ret
        preceding[following[ret]] = ret
        following[preceding[node]] = node
        preceding[following[node]] = node
        node = following[node]
    result = finish(LINEARIZABLE)
    result.blocked = None
    result.linearization = _taken(operations, chosen, state)
    return result


def _symmetry(
    operations: Sequence[Operation], prepared: Sequence[Any], returns: Sequence[float]
) -> list[int]:
    """For each operation, the bit of the one it must follow (0: none): operations of
    unknown outcome that are twins (the same step, never returning) are taken in the
    order of their calls.

    Twins are interchangeable once both are called: a linearization that takes the
    later one at some point and the earlier one later (or never) becomes one that
    takes them the other way round, with the same states all along (each is called
    by then). So only one of the orders is searched: with k twins, k + 1 choices of
    how many are taken instead of 2**k sets (a counter's unknown adds of one delta).
    """
    waits_for = [0] * len(operations)
    last: dict[Any, int] = {}
    for i in sorted(range(len(operations)), key=lambda i: (operations[i].call, i)):
        if returns[i] != math.inf:
            continue
        twin = last.get(prepared[i])
        if twin is not None:
            waits_for[i] = 1 << twin
        last[prepared[i]] = i
    return waits_for


def _taken(
    operations: Sequence[Operation],
    chosen: list[tuple[int, State, int]],
    state: State,
) -> list[tuple[Operation, State]]:
    """The operations taken so far, in order, each with the state it left."""
    if not chosen:
        return []
    afters = [before for _, before, _ in chosen[1:]] + [state]
    return [
        (operations[node >> 1], after) for (node, _, _), after in zip(chosen, afters, strict=True)
    ]


def _blocked(
    operations: Sequence[Operation],
    chosen: list[tuple[int, State, int]],
    state: State,
    stuck_return: int,
    following: list[int],
) -> Blocked:
    pending: list[Operation] = []
    node = following[0]
    while node != stuck_return:
        if node & 1:
            pending.append(operations[node >> 1])
        node = following[node]
    stuck = operations[(stuck_return - 1) >> 1]
    return Blocked(_taken(operations, chosen, state), stuck, pending, state)
