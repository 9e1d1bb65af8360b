"""Watches: what each watcher saw must be states of its key in a linearized order,
none repeated, and (for a watcher that lasted to the end) ending at the final state.

A watch is not a register read: it may lag, and it may skip states (tenure's watches
coalesce the changes made while the watcher was busy: docs/guarantees.md, promise 7),
so the properties are etcd's robustness suite's (ordered, unique, reliable): each
item seen is a read of the key that took effect after the watch was armed and
before the item arrived, after the item before it; the last item of a watcher that
watched to the end comes after every other operation of the key (it is the final
state); and no one change is seen twice. The key is searched again with those items
among its operations, so the verdict is whether *some* linearization explains both
the operations and every watcher (a watcher that saw two concurrent writes in either
order is explained), not only the one the first search happened to find.

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
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tenure.testing.lincheck._check import CheckResult
from tenure.testing.lincheck._history import OK, HistoryError, Operation
from tenure.testing.lincheck._model import WATCH, Model
from tenure.testing.lincheck._search import LINEARIZABLE, UNKNOWN, KeyResult, search


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
    """The verdict on the watchers: ``violations`` (empty: some linearization explains
    every watcher), and ``unknown`` (a key whose search passed a bound: not ok either)."""

    watchers: int
    items: int
    violations: list[str]
    unknown: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether some linearization explains what every watcher saw."""
        return not self.violations and not self.unknown

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON-able data."""
        return {
            "watchers": self.watchers,
            "items": self.items,
            "violations": self.violations,
            "unknown": self.unknown,
        }


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
    """Check the watchers against ``result``'s keys (module docstring): each watched
    key is searched again, its operations with every item its watchers saw, so that
    the verdict is whether *some* linearization explains both.

    Raises:
        HistoryError: the model cannot compare what a watch sees with its states, or a
            watched key was not found linearizable (nothing to hold watchers to).
    """
    model = result.model
    if model.observe is None:
        raise HistoryError(f"model {model.name} has no state a watch can see")
    verdicts = {key.key: key.verdict for key in result.keys}
    watched: dict[str | None, list[WatchRecord]] = {}
    for record in records:
        watched.setdefault(record.key, []).append(record)
    timeout, memory_mb = result.bounds
    deadline = time.monotonic() + timeout if timeout > 0 else math.inf
    budget = memory_mb * 2**20 if memory_mb > 0 else math.inf
    check = WatchCheck(0, 0, [])
    for key, watchers in watched.items():
        verdict = verdicts.get(key, LINEARIZABLE)  # a key nobody wrote keeps its first state
        if verdict != LINEARIZABLE:
            raise HistoryError(f"key {key!r} is {verdict}: no order to check watchers")
        check.watchers += len(watchers)
        check.items += sum(len(record.seen) for record in watchers)
        check.violations += _repeats(model, result.by_key.get(key, []), watchers)
        check.violations += [
            f"watcher {record.watcher!r} of key {key!r}: watched to the end and saw nothing"
            for record in watchers
            if record.final and not record.seen
        ]
        operations = list(result.by_key.get(key, []))
        after = _watch_items(operations, watchers)
        found = search(
            model,
            key,
            operations,
            model.init(result.header, key),
            deadline,
            budget,
            after,
            result.earliest,
        )
        if found.verdict == UNKNOWN:
            check.unknown.append(f"watchers of key {key!r}: unknown ({found.reason})")
        elif found.verdict != LINEARIZABLE:
            initial = model.init(result.header, key)
            check.violations.append(_why(model, key, found, operations, initial))
    return check


def _watch_items(operations: list[Operation], watchers: list[WatchRecord]) -> dict[int, list[int]]:
    """Add each item seen to ``operations`` as a ``watch`` operation from the watch's
    arming to the item's arrival; what each must follow: the item before it, and for
    the last item of a watcher that watched to the end, every operation that returns."""
    returning = [i for i, op in enumerate(operations) if op.ret != math.inf]
    after: dict[int, list[int]] = {}
    for record in watchers:
        previous: int | None = None
        for number, (value, arrived) in enumerate(record.seen):
            index = len(operations)
            operations.append(
                Operation(
                    index,
                    f"watch {record.watcher}",
                    WATCH,
                    record.key,
                    None,
                    OK,
                    value,
                    record.armed,
                    max(arrived, record.armed),
                    number + 1,
                )
            )
            after[index] = [] if previous is None else [previous]
            previous = index
        if record.final:
            if previous is None:
                continue
            after[previous] = after[previous] + returning
    return after


def _repeats(model: Model, operations: list[Operation], watchers: list[WatchRecord]) -> list[str]:
    """A watcher given one value twice in a row, where at most one operation of the
    key could have made that value: the same change seen twice. (A value written again
    is a new change; models whose changes do not name their values, a counter's adds,
    a group's joins, are not held to this.)"""
    observe = model.observe
    if observe is None or model.name not in ("register", "kv"):
        return []
    makers: dict[Any, int] = {}
    for op in operations:
        made = op.input[1] if op.f == "cas" and isinstance(op.input, list) else op.input
        if op.f in ("write", "put", "cas"):
            makers[observe(made)] = makers.get(observe(made), 0) + 1
    found: list[str] = []
    for record in watchers:
        values = [observe(value) for value, _ in record.seen]
        for number in range(1, len(values)):
            if values[number] == values[number - 1] and makers.get(values[number], 0) <= 1:
                found.append(
                    f"watcher {record.watcher!r} of key {record.key!r}: item {number} saw "
                    f"{record.seen[number][0]!r} again (one change, seen twice)"
                )
                break
    return found


def _why(
    model: Model, key: str | None, found: KeyResult, operations: list[Operation], initial: Any
) -> str:
    """A watch violation in one line: what no linearization explains, and why where the
    history alone says so (a value nothing made, one seen before its making)."""
    text = f"watchers of key {key!r}: no linearization explains what they saw"
    if found.blocked is None:
        return text
    stuck = found.blocked.stuck
    text += f"; could not linearize {stuck.describe()}"
    if stuck.f != WATCH or model.observe is None:
        return text
    text += f" (item {stuck.line} of watcher {str(stuck.process)[len('watch ') :]!r})"
    seen = model.observe(stuck.output)
    makers = [op for op in operations if _may_make(model, op, seen)]
    if seen != initial and not makers:
        return text + ": a value the key never held"
    if seen != initial and all(op.call > stuck.ret for op in makers):
        return text + ": seen before the operation that made it was called"
    return text + (
        ": out of order (after what it saw before, or older than the state when it was "
        "armed), or, for a watcher that watched to the end, not the final state"
    )


def _may_make(model: Model, op: Operation, value: Any) -> bool:
    """Whether ``op`` could leave its key holding ``value`` (a write or cas to it, or any
    change where the model's values are not named by the operations: a counter's)."""
    if op.f == WATCH or op.f in ("read", "get", "members"):
        return False
    if op.f in ("write", "put"):
        return model.observe is not None and model.observe(op.input) == value
    if op.f == "cas" and isinstance(op.input, list) and len(op.input) == 2:
        return model.observe is not None and model.observe(op.input[1]) == value
    return True
