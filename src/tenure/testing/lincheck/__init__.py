"""lincheck: is a history of concurrent operations linearizable?

A linearizability checker (Wing and Gong's search with Lowe's and porcupine's
improvements: the history split by key, each (set of operations taken, model
state) searched once) for histories in Jepsen's shape, one JSON object a line::

    {"process": 3, "type": "invoke", "f": "cas", "key": "k1", "value": [1, 2], "time": 1234567}
    {"process": 3, "type": "ok", "f": "cas", "key": "k1", "value": [1, 2], "time": 1234570}

(:mod:`~tenure.testing.lincheck._history` has the format's rules; docs/testing.md the
models' operations.) From Python::

    from tenure.testing import lincheck

    history = lincheck.read_history("run.jsonl")
    result = lincheck.check(history, "register", timeout=60)
    assert result.ok, result.explain()

From a shell (exit 0: linearizable; 1: not, the witness printed; 2: unknown, or a
history that cannot be read, the line named)::

    python -m tenure.testing.lincheck --model register run.jsonl
    python -m tenure.testing.lincheck --format jepsen-log --model register etcd_000.log
    python -m tenure.testing.lincheck --model mutex --html timeline.html run.jsonl

The verdict is ``linearizable``, ``not linearizable`` or ``unknown``: the search is
bounded by a timeout and a memory bound, and past either it never says
linearizable. A violation's witness names the key, the longest prefix that could
be linearized (with the state after each operation), the operation that could not
follow it and the operations concurrent with that one, each tried first.
:func:`check_watches` checks what watchers saw against a linearization.
"""

from __future__ import annotations

from tenure.testing.lincheck._check import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT,
    CheckResult,
    check,
)
from tenure.testing.lincheck._formats import (
    FORMATS,
    read_history,
    read_jepsen_log,
    read_porcupine_kv,
)
from tenure.testing.lincheck._history import (
    FAIL,
    INFO,
    INVOKE,
    OK,
    History,
    HistoryError,
    Operation,
    from_events,
    read_jsonl,
)
from tenure.testing.lincheck._model import Model
from tenure.testing.lincheck._models import MODELS
from tenure.testing.lincheck._search import (
    LINEARIZABLE,
    NOT_LINEARIZABLE,
    UNKNOWN,
    Blocked,
    KeyResult,
)
from tenure.testing.lincheck._watches import WatchCheck, WatchRecord, check_watches, read_watches
from tenure.testing.lincheck._writer import HistoryWriter, read_histories

__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT",
    "FAIL",
    "FORMATS",
    "INFO",
    "INVOKE",
    "LINEARIZABLE",
    "MODELS",
    "NOT_LINEARIZABLE",
    "OK",
    "UNKNOWN",
    "Blocked",
    "History",
    "HistoryError",
    "HistoryWriter",
    "KeyResult",
    "Model",
    "Operation",
    "WatchCheck",
    "WatchRecord",
    "CheckResult",
    "check",
    "check_watches",
    "from_events",
    "read_histories",
    "read_history",
    "read_jepsen_log",
    "read_jsonl",
    "read_porcupine_kv",
    "read_watches",
]
