"""Checker rules for linearizability: the clients' operations against lincheck's models.

The old rules (:mod:`~tools.faults.check_locks`, :mod:`~tools.faults.check_data`)
each test one property and name it; these test the whole history of each model at
once (:mod:`tenure.testing.lincheck`, porcupine's search), so that what no single
rule foresaw (a read that goes back in time, a hold that outlives its release, a
token granted below one already seen) is caught too. The histories are derived
from the suite's own (:mod:`~tools.faults.lin_events` says how, and why that is
sound):

* ``linearizable:mutex``: the grants, releases and losses of each mutex are those
  of a lock with fencing tokens: at most one holder at a time, tokens strictly
  increasing (lincheck's ``mutex`` model, a key per mutex);
* ``linearizable:register``: the creates, updates and reads of each client's
  register are those of one register (the ``register`` model, a key per register).

Each search is bounded (:func:`search_bound`, :data:`MEMORY_MB`): past a bound the
verdict is ``unknown``, which breaks the rule as well (a bound never passes a run).
With a directory given, each model's lincheck history is written there
(``<model>.jsonl``: ``python -m tenure.testing.lincheck --model <model> FILE``
reproduces the verdict), and a verdict other than linearizable writes its
explanation with the witness beside it (``<model>.txt``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from tenure.testing import lincheck
from tools.faults.check_locks import Violation
from tools.faults.history import History
from tools.faults.lin_events import LinOp, events, mutex_ops, register_ops

#: The models checked, each with how its operations are derived from a history.
MODELS: Final[dict[str, Callable[[History], list[LinOp]]]] = {
    "mutex": mutex_ops,
    "register": register_ops,
}
#: Bounds of one model's search (the whole check of it), past which it is unknown: the
#: greater of TIMEOUT seconds and TIMEOUT_PER_OPERATION per operation checked (a
#: long run's history is longer, and operations of unknown outcome make each one
#: costlier: a 10-minute run's counter, 8,637 operations on one key, took 19 s alone
#: and 73 s beside a CPU hog), so that only a search that runs away passes it.
TIMEOUT: Final = 60.0
TIMEOUT_PER_OPERATION: Final = 0.02
MEMORY_MB: Final = 2048
#: Operations of the linearized prefix, and of those concurrent with the one that
#: could not follow it, that a violation's message shows (the file has them all).
MESSAGE_PREFIX: Final = 4
MESSAGE_CONCURRENT: Final = 6


def search_bound(operations: int) -> float:
    """Seconds the search of a model's ``operations`` may take (:data:`TIMEOUT`)."""
    return max(TIMEOUT, operations * TIMEOUT_PER_OPERATION)


def check_linearizability(
    history: History, out_dir: Path | None = None
) -> tuple[list[Violation], dict[str, dict[str, Any]]]:
    """Every ``linearizable:<model>`` rule (module docstring), and each model's numbers:
    lincheck's :meth:`~tenure.testing.lincheck.CheckResult.to_dict`, with the files
    written (``history``, and ``explanation`` when it is not linearizable)."""
    violations: list[Violation] = []
    stats: dict[str, dict[str, Any]] = {}
    for model, derive in MODELS.items():
        broken, stats[model], _ = check_events(model, events(derive(history)), out_dir)
        violations += broken
    return violations, stats


def check_events(
    model: str,
    found: list[dict[str, Any]],
    out_dir: Path | None = None,
    header: dict[str, Any] | None = None,
) -> tuple[list[Violation], dict[str, Any], lincheck.CheckResult | None]:
    """The ``linearizable:<model>`` rule on lincheck's events ``found`` (in time order),
    lincheck's numbers and its result (None: the history is malformed); with
    ``out_dir``, the history written there as ``<model>.jsonl`` (``header`` first)
    and, if it is not linearizable, the explanation as ``<model>.txt`` (module
    docstring)."""
    rule = f"linearizable:{model}"
    history_file = None
    lines = ([header] if header else []) + found
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        history_file = out_dir / f"{model}.jsonl"
        history_file.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in lines))
    try:
        result = lincheck.check(
            lincheck.from_events(enumerate(lines, start=1), str(history_file or model)),
            model,
            timeout=search_bound(len(found) // 2),
            memory_mb=MEMORY_MB,
        )
    except lincheck.HistoryError as error:  # the recording's bug, not tenure's
        broken = Violation(rule, f"the history is malformed: {error}", 0.0)
        return [broken], {"model": model, "verdict": "malformed", "error": str(error)}, None
    numbers = result.to_dict()
    numbers.pop("witness", None)  # in the explanation's file and the message
    if history_file is not None:
        numbers["history"] = str(history_file)
    if result.ok:
        return [], numbers, result
    explanation = result.explain()
    where = ""
    if out_dir is not None:
        explained = out_dir / f"{model}.txt"
        explained.write_text(explanation + "\n")
        numbers["explanation"] = str(explained)
        where = f" (history {history_file}, witness {explained})"
    message = f"{_shortened(explanation)}{where}"
    return [Violation(rule, message, _when(result, found))], numbers, result


def _shortened(explanation: str) -> str:
    """A violation's message: the explanation's verdict and key, the end of the
    linearized prefix, the operation that could not follow and the first few
    concurrent with it (an explanation without a witness whole)."""
    lines = explanation.splitlines()
    then = next((i for i, line in enumerate(lines) if line.startswith("  then, from")), None)
    if then is None:
        return explanation
    head, prefix, rest = lines[:3], lines[3:then], lines[then:]
    shown = prefix[-MESSAGE_PREFIX:]
    kept = rest[: 3 + MESSAGE_CONCURRENT]
    more = len(rest) - len(kept)
    return "\n".join(
        head
        + (["    ..."] if len(prefix) > len(shown) else [])
        + shown
        + kept
        + ([f"    ... and {more} more"] if more > 0 else [])
    )


def _when(result: lincheck.CheckResult, found: list[dict[str, Any]]) -> float:
    """The history time (seconds) of the operation the search could not linearize (of
    the first event, for an unknown verdict)."""
    bad = result.failed()
    if bad is not None and bad.blocked is not None and math.isfinite(bad.blocked.stuck.call):
        return bad.blocked.stuck.call / 1e9
    return float(found[0]["time"]) / 1e9 if found else 0.0
