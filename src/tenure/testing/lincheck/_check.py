"""Checking a whole history: split by key, each key searched, one verdict.

Linearizability is compositional (Herlihy and Wing's locality; porcupine's
P-compositionality): a history is linearizable if and only if each key's
operations are, so each key is searched alone, smallest first. One key that is not
linearizable decides the verdict; a key whose search passed a bound makes it
*unknown* unless another key is not linearizable. The time and memory bounds are
the whole check's.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tenure.testing.lincheck._history import History, HistoryError, Operation
from tenure.testing.lincheck._model import Model
from tenure.testing.lincheck._models import MODELS
from tenure.testing.lincheck._search import (
    LINEARIZABLE,
    NOT_LINEARIZABLE,
    UNKNOWN,
    KeyResult,
    search,
)
from tenure.testing.lincheck._stale import earliest, time_unit

#: The default bounds (the command line's ``--timeout`` and ``--memory``).
DEFAULT_TIMEOUT: Final = 60.0
DEFAULT_MEMORY_MB: Final = 4096
#: How many operations of a prefix a witness shows (its end: where it went wrong).
WITNESS_PREFIX: Final = 20


@dataclass
class CheckResult:
    """The verdict on a history, each key's, and what the check cost."""

    model: Model
    verdict: str
    keys: list[KeyResult]
    seconds: float
    header: dict[str, Any] = field(default_factory=dict)
    #: Each key's operations, as checked (what a check of watchers searches again).
    by_key: dict[str | None, list[Operation]] = field(default_factory=dict)
    #: The bounds it was checked within: seconds, MiB (0: none).
    bounds: tuple[float, float] = (DEFAULT_TIMEOUT, DEFAULT_MEMORY_MB)
    #: Each stale read's earliest instant, by its index (:func:`~._stale.earliest`).
    earliest: dict[int, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the history is linearizable (``unknown`` is not)."""
        return self.verdict == LINEARIZABLE

    @property
    def operations(self) -> int:
        """How many operations were checked."""
        return sum(key.operations for key in self.keys)

    def failed(self) -> KeyResult | None:
        """The first key that is not linearizable, if any."""
        return next((key for key in self.keys if key.verdict == NOT_LINEARIZABLE), None)

    def explain(self) -> str:
        """The verdict for people; a violation's witness (the module docstring of
        :mod:`tenure.testing.lincheck` says what it shows)."""
        lines = [
            f"{self.verdict}: {self.operations} operations on {len(self.keys)} key(s), "
            f"model {self.model.name}, {self.seconds:.2f} s"
        ]
        bad = self.failed()
        if bad is not None and bad.blocked is not None:
            lines += witness_lines(self.model, bad)
        for key in self.keys:
            if key.verdict == UNKNOWN:
                lines.append(
                    f"key {key.key!r}: unknown ({key.reason}; {key.operations} operations, "
                    f"{key.cache_entries} cached configurations)"
                )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON-able data: what a fault scenario's result records."""
        bad = self.failed()
        data: dict[str, Any] = {
            "model": self.model.name,
            "verdict": self.verdict,
            "checked_operations": self.operations,
            "keys": len(self.keys),
            "seconds": round(self.seconds, 3),
        }
        if bad is not None:
            data["key"] = bad.key
            data["witness"] = "\n".join(witness_lines(self.model, bad))
        unknown = [key.key for key in self.keys if key.verdict == UNKNOWN]
        if unknown:
            data["unknown_keys"] = unknown
            data["reason"] = self.keys[[k.key for k in self.keys].index(unknown[0])].reason
        return data


def witness_lines(model: Model, key: KeyResult) -> list[str]:
    """Why ``key`` is not linearizable: the longest prefix that could be linearized, the
    operation that could not follow it, the operations concurrent with that one, and
    the states they were tried from."""
    blocked = key.blocked
    if blocked is None:
        return []
    lines = [f"key {key.key!r}: not linearizable"]
    shown = blocked.prefix[-WITNESS_PREFIX:]
    skipped = len(blocked.prefix) - len(shown)
    lines.append(
        f"  the longest linearizable prefix: {len(blocked.prefix)} operation(s)"
        + (f" (the last {len(shown)} shown)" if skipped else "")
    )
    for op, state in shown:
        lines.append(f"    {_where(op)} {op.describe()}  => {model.show(state)}")
    lines.append(f"  then, from {model.show(blocked.state)}:")
    lines.append(f"    could not linearize {_where(blocked.stuck)} {blocked.stuck.describe()}")
    others = [op for op in blocked.pending if op is not blocked.stuck]
    if others:
        lines.append("  nor any operation concurrent with it (each tried first):")
        lines += [f"    {_where(op)} {op.describe()}" for op in others]
    return lines


def _where(op: Operation) -> str:
    return f"[line {op.line}]"


def check(
    history: History | Sequence[Operation],
    model: Model | str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: float = DEFAULT_MEMORY_MB,
    header: Mapping[str, Any] | None = None,
) -> CheckResult:
    """Whether ``history`` is linearizable under ``model`` (a :class:`Model` or its name
    in :data:`MODELS`), within ``timeout`` seconds and ``memory_mb`` MiB of search
    cache; past either the verdict is ``unknown``.

    ``header`` adds to (and overrides) the history's header: ``{"limit": 3}`` for a
    semaphore, ``{"initial": v}`` for a register's first value, ``{"time_unit": 1}``
    for times in seconds (a stale read's ``max_staleness`` is; nanoseconds otherwise).

    Raises:
        HistoryError: an operation the model does not know, or malformed for it
            (naming its line), a stale read of an operation the model reads no stale;
            a header the model cannot start from.
    """
    started = time.monotonic()
    chosen = MODELS[model] if isinstance(model, str) else model
    if isinstance(history, History):
        operations, facts = history.operations, dict(history.header)
    else:
        operations, facts = list(history), {}
    facts.update(header or {})
    by_key: dict[str | None, list[Operation]] = {}
    for op in operations:
        if op.f not in chosen.operations:
            known = ", ".join(chosen.operations)
            raise HistoryError(
                f"line {op.line}: model {chosen.name} has no operation {op.f!r} ({known})"
            )
        why = chosen.validate(op)
        if why is not None:
            raise HistoryError(f"line {op.line}: {why}")
        if op.max_staleness is not None and op.f not in chosen.stale_reads:
            reads = ", ".join(sorted(chosen.stale_reads)) or "none"
            raise HistoryError(
                f"line {op.line}: model {chosen.name} has no stale {op.f!r} (its stale "
                f"reads: {reads})"
            )
        by_key.setdefault(op.key, []).append(op)
    stale = earliest(operations, time_unit(facts))
    initial: dict[str | None, Any] = {}
    for key in by_key:
        try:
            initial[key] = chosen.init(facts, key)
        except (ValueError, TypeError) as error:
            raise HistoryError(str(error)) from None
    deadline = started + timeout if timeout > 0 else math.inf
    budget = memory_mb * 2**20 if memory_mb > 0 else math.inf
    results: list[KeyResult] = []
    for key in sorted(by_key, key=lambda k: len(by_key[k])):
        found = search(chosen, key, by_key[key], initial[key], deadline, budget, earliest=stale)
        results.append(found)
        if found.verdict == NOT_LINEARIZABLE:
            break
    verdict = LINEARIZABLE
    if any(r.verdict == NOT_LINEARIZABLE for r in results):
        verdict = NOT_LINEARIZABLE
    elif any(r.verdict == UNKNOWN for r in results):
        verdict = UNKNOWN
    return CheckResult(
        chosen,
        verdict,
        results,
        time.monotonic() - started,
        facts,
        by_key,
        (timeout, memory_mb),
        stale,
    )


def result_json(result: CheckResult) -> str:
    """:meth:`CheckResult.to_dict` as one JSON document."""
    return json.dumps(result.to_dict(), indent=2, default=str)
