"""Watches, checked against a linearization: what each watcher saw must be states of
its key in their linearized order, none repeated, and (for a watcher that lasted to
the end) ending at the final state.

A watch is not a register read: it may lag, and it may skip states (tenure's watches
coalesce the changes made while the watcher was busy: docs/guarantees.md, promise 7),
so what a watcher saw is checked as a subsequence of the key's states, the properties
of etcd's robustness suite (ordered, unique, reliable): each state seen comes after
the one seen before it; none is seen before the operation that made it was called;
the first is no older than what any operation completed before the watch was armed
left; and a watcher that watched to the end last saw the final state.

The states are those of the linearization the search found for the key. Where
concurrent writes could be ordered either way, it found one order; a watcher that saw
the other is reported (the key's writes are concurrent there: the message says so).

The watch records (JSON lines, the times on the history's clock)::

    {"watcher": "w1", "key": "k1", "event": "armed", "time": 1200}
    {"watcher": "w1", "key": "k1", "event": "saw", "value": 3, "time": 1250}
    {"watcher": "w1", "key": "k1", "event": "ended", "final": true, "time": 9000}

``final``: the watcher watched past the history's last change and until it was quiet
(its last item must be the final state).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tenure.testing.lincheck._check import CheckResult
from tenure.testing.lincheck._history import HistoryError
from tenure.testing.lincheck._search import LINEARIZABLE, KeyResult


@dataclass
class WatchRecord:
    """What one watcher of one key saw: when it was ``armed``, each value ``seen`` with
    when it arrived, and whether it watched to the end (``final``)."""

    watcher: str
    key: str | None
    armed: float
    seen: list[tuple[Any, float]] = field(default_factory=list)
    final: bool = False


@dataclass
class WatchCheck:
    """The verdict on the watchers: ``violations`` (empty: every watcher is explained)."""

    watchers: int
    items: int
    violations: list[str]

    @property
    def ok(self) -> bool:
        """Whether every watcher saw what the linearization allows."""
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON-able data."""
        return {"watchers": self.watchers, "items": self.items, "violations": self.violations}


def read_watches(lines: Iterable[str], source: str = "<watches>") -> list[WatchRecord]:
    """The watch records of JSON lines (module docstring).

    Raises:
        HistoryError: a line that breaks the format, naming it.
    """
    records: dict[tuple[str, str | None], WatchRecord] = {}
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            raise HistoryError(f"{source}:{number}: not JSON") from None
        if not isinstance(line, Mapping):
            raise HistoryError(f"{source}:{number}: a watch record is a JSON object")
        event, stamp = line.get("event"), line.get("time")
        if event not in ("armed", "saw", "ended"):
            raise HistoryError(f"{source}:{number}: 'event' is armed, saw or ended")
        if isinstance(stamp, bool) or not isinstance(stamp, int | float):
            raise HistoryError(f"{source}:{number}: 'time' is a number")
        key = None if line.get("key") is None else str(line["key"])
        ident = (str(line.get("watcher")), key)
        if event == "armed":
            records[ident] = WatchRecord(ident[0], key, float(stamp))
            continue
        record = records.get(ident)
        if record is None:
            raise HistoryError(f"{source}:{number}: watcher {ident[0]!r} was never armed")
        if event == "saw":
            record.seen.append((line.get("value"), float(stamp)))
        else:
            record.final = bool(line.get("final", False))
    return list(records.values())


def check_watches(result: CheckResult, records: Iterable[WatchRecord]) -> WatchCheck:
    """Check each watcher against ``result``'s linearization of its key (module
    docstring).

    Raises:
        HistoryError: the model cannot compare what a watch sees with its states, or a
            key was not found linearizable (there is no order to hold watchers to).
    """
    observe = result.model.observe
    if observe is None:
        raise HistoryError(f"model {result.model.name} has no state a watch can see")
    keys = {key.key: key for key in result.keys}
    violations: list[str] = []
    watchers = items = 0
    for record in records:
        watchers += 1
        items += len(record.seen)
        key = keys.get(record.key)
        if key is None:  # a key no operation touched: it stays in its initial state
            initial = result.model.init(result.header, record.key)
            violations += _check_one(record, [(initial, -math.inf, -math.inf)], observe)
            continue
        if key.verdict != LINEARIZABLE:
            raise HistoryError(f"key {record.key!r} is {key.verdict}: no order to check watchers")
        initial = result.model.init(result.header, record.key)
        violations += _check_one(record, _states(key, initial), observe)
    return WatchCheck(watchers, items, violations)


def _states(key: KeyResult, initial: Any) -> list[tuple[Any, float, float]]:
    """The key's states in linearized order: (state, its operation's call and return);
    the initial state first. An operation that changed nothing makes no new state."""
    states = [(initial, -math.inf, -math.inf)]
    for op, after in key.linearization:
        if after != states[-1][0]:
            states.append((after, op.call, op.ret))
    return states


def _check_one(
    record: WatchRecord, states: list[tuple[Any, float, float]], observe: Any
) -> list[str]:
    name = f"watcher {record.watcher!r} of key {record.key!r}"
    # The first item is no older than the state left by operations done before arming.
    position = max((i for i, (_, _, ret) in enumerate(states) if ret < record.armed), default=0)
    previous: int | None = None
    for index, (value, arrived) in enumerate(record.seen):
        seen = observe(value)
        start = position if previous is None else previous + 1
        found = next(
            (
                i
                for i in range(start, len(states))
                if states[i][0] == seen and states[i][1] <= arrived
            ),
            None,
        )
        if found is None:
            return [_why(name, index, value, states, start, previous, arrived, observe)]
        previous = found
    if record.final and (previous is None or previous != len(states) - 1):
        last = "nothing" if previous is None else repr(record.seen[-1][0])
        return [f"{name}: watched to the end but last saw {last}, not the final state"]
    return []


def _why(
    name: str,
    index: int,
    value: Any,
    states: list[tuple[Any, float, float]],
    start: int,
    previous: int | None,
    arrived: float,
    observe: Any,
) -> str:
    seen = observe(value)
    anywhere = [i for i, (state, _, _) in enumerate(states) if state == seen]
    if not anywhere:
        return f"{name}: item {index} saw {value!r}, which the key never held"
    if all(states[i][1] > arrived for i in anywhere):
        return f"{name}: item {index} saw {value!r} before the operation that made it was called"
    if previous is not None and any(i <= previous for i in anywhere):
        return (
            f"{name}: item {index} saw {value!r} again or out of order (after the state "
            f"at position {previous} of {len(states) - 1}; writes of the key may be "
            "concurrent: this is the order the search found)"
        )
    return f"{name}: item {index} saw {value!r}, older than the state when it was armed"
