"""Where a worker of the linearizable workload records its operations: lincheck's files.

A worker process keeps one :class:`~tenure.testing.lincheck.HistoryWriter` per model
(``w<index>-<model>.jsonl``: ``register``, ``counter``, ``mutex``, ``membership``, and
``semaphore``, whose holds the native clients make, and YDB's face where the target
serves it: the fault suite's ``tools/faults/lin_ydb.py``; an election's leadership is a
``mutex``'s), one of the claims (``w<index>-claim.jsonl``: checked by
:func:`~tenure.testing.workload.check_claims`, whose promises have time in them, not by
a lincheck model) and
one per watcher (``watch-w<index>c<n>.jsonl``, the ``watch`` events' shape in
:mod:`tenure.testing.workload._watcher`), all in one directory of the run. Every event's time is
the clock the books are given, in nanoseconds (the fault suite's: the raw
``CLOCK_MONOTONIC``, shared by every process and out of libfaketime's reach; the
simulation's: its loop's), so the files of every worker merge into one history per
model (the fault suite's ``tools/faults/check_lin_workload.py``).

A loss (a mutex's ``lost``, a member's ``leave`` when its session ended it) is
written when the client hears of it, but invoked at the client's last confirmation
that it held (the grant it saw): :meth:`Books.record_at` writes an event at a time
of the past (the writer's clock returns it for that one event; a worker's writers
are used from one thread, its event loop).

A client's process ids are its label (``w0c1``) and a generation after each
operation whose outcome is unknown (``w0c1.3``: that one may still be in flight, so
the client's next is another process's, lincheck's rule); a loss has a process of its
own (``w0c1/lost-<key>-<token>``), since it spans the client's other steps, and so has
the release of a hold a session taken back kept (``w0c1/resumed-<key>-<token>``), and the
end the service may give a hold by itself, untold (``w0c1/untold-<key>-<token>``). What a client
does through YDB's face has process ids of their own, marked (``w0c1.y``, ``w0c1.y.2``:
:func:`through_ydb`), sequential with the client's others all the same.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from tenure.testing.lincheck import HistoryWriter

#: The semaphores held, with their limits: through YDB's face (the fault suite's
#: ``tools/faults/lin_ydb.py``), and natively (``sem-0``: the workload's semaphore steps).
SEMAPHORES: Final = {"ydb-mtx": 1, "ydb-sem": 3, "sem-0": 3}
#: The models a worker records, with the header of each one's files.
MODELS: Final[dict[str, dict[str, Any] | None]] = {
    "register": {"initial": 0},  # the harness creates each register with data "0"
    "counter": None,  # a counter never written reads 0: the model's own start
    "mutex": None,
    "membership": None,
    "semaphore": {"limit": SEMAPHORES},
}
#: The file of the claims (module docstring): not a lincheck model.
CLAIM: Final = "claim"
#: Every file a worker writes its operations in: the models' and the claims'.
RECORDED: Final = (*MODELS, CLAIM)
#: What marks the process id of an end a hold may be given untold (:meth:`ProcessIds.untold`).
UNTOLD_MARK: Final = "/untold-"
#: What marks the process ids of a client's operations through YDB's face.
YDB_MARK: Final = ".y"


def through_ydb(process: str) -> bool:
    """Whether ``process`` (an operation's or a loss's) is a client's through YDB's face."""
    return str(process).split("/")[0].split(".")[1:2] == [YDB_MARK[1:]]


def model_file(out_dir: Path, worker: int, model: str) -> Path:
    """The file of worker ``worker``'s operations of ``model``."""
    return out_dir / f"w{worker}-{model}.jsonl"


def watch_file(out_dir: Path, label: str) -> Path:
    """The file of what watcher ``label`` saw."""
    return out_dir / f"watch-{label}.jsonl"


class Books:
    """A worker's writers, one per model (module docstring)."""

    def __init__(self, out_dir: Path, worker: int, clock: Callable[[], int]) -> None:
        self.out_dir = out_dir
        #: Now, in nanoseconds (module docstring).
        self.now_ns = clock
        self._at: int | None = None
        self.writers = {
            model: HistoryWriter(model_file(out_dir, worker, model), header, clock=self._clock)
            for model, header in {**MODELS, CLAIM: None}.items()
        }
        #: The holds the worker's clients offer (name, hand-off string), oldest first,
        #: for another of them to adopt (:mod:`tenure.testing.workload._hold_steps`).
        self.offers: list[tuple[str, str]] = []

    def _clock(self) -> int:
        return self.now_ns() if self._at is None else self._at

    def writer(self, model: str) -> HistoryWriter:
        """The writer of ``model``."""
        return self.writers[model]

    def watcher(self, label: str, key: str) -> HistoryWriter:
        """A new writer for what watcher ``label`` sees of ``key``."""
        header = {"watch": "data", "model": "register", "key": key, "initial": 0}
        return HistoryWriter(watch_file(self.out_dir, label), header, clock=self.now_ns)

    def record_at(
        self, at: int, model: str, kind: str, process: str, f: str, value: Any, key: str
    ) -> None:
        """Write one event of ``kind`` (invoke, ok, fail, info) with time ``at`` (ns)."""
        writer = self.writers[model]
        self._at = at
        try:
            getattr(writer, kind)(process, f, value, key)
        finally:
            self._at = None

    def close(self) -> None:
        """Close every writer (idempotent)."""
        for writer in self.writers.values():
            writer.close()


class ProcessIds:
    """A client's lincheck process ids (module docstring)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.generation = 0

    @property
    def current(self) -> str:
        """The process id of the client's next operation."""
        return self.label if self.generation == 0 else f"{self.label}.{self.generation}"

    def unknown(self) -> None:
        """The last operation's outcome is unknown: the next one is another process's."""
        self.generation += 1

    def loss(self, key: str, token: int) -> str:
        """The process id of the loss of the hold of ``token`` on ``key``."""
        return f"{self.label}/lost-{key}-{token}"

    def untold(self, key: str, token: int) -> str:
        """The process id of an end the service may give the hold of ``token`` on
        ``key`` by itself, untold (an adoption once it is offered, its ``max_hold``:
        :meth:`~tenure.testing.workload.LinRecorder._untold`)."""
        return f"{self.label}{UNTOLD_MARK}{key}-{token}"

    def resumed(self, key: str, token: int) -> str:
        """The process id of the release of the hold of ``token`` on ``key`` that a
        session taken back kept (and of its grant, if the client before never heard
        of it): one of its own, as it may begin before the client's others."""
        return f"{self.label}/resumed-{key}-{token}"
