"""Histories: what every process of a fault run did, when, and how it ended.

Each process (worker, harness) appends JSON lines to its own file, flushed line by
line, so a process killed with ``kill -9`` or hung forever still leaves everything
it began. Three kinds of line:

* ``{"ev": "inv", "id": N, "p": PROC, "kind": K, "t": T, ...}``: an operation
  was invoked (fields such as ``key``, ``session``, ``token``, ``value``);
* ``{"ev": "done", "id": N, "p": PROC, "t": T, "outcome": O, ...}``: it ended.
  ``O`` is ``ok``, ``fail`` (it certainly did not happen), ``info`` (it may or may
  not have happened), or a kind-specific word (a critical section ends
  ``released``, ``lost``, ``lost-not-cancelled``, ``lost-after-body`` or
  ``release-failed``; a fenced write ``rejected``);
* ``{"ev": "note", "p": PROC, "kind": K, "t": T, ...}``: something that is not an
  operation (a session opened, a fault began, the heal phase started).

An operation with no ``done`` line was still pending when its process stopped
(or hung, or was killed).

**Times** are :func:`now`: ``CLOCK_MONOTONIC`` read with the raw system call. It is
one clock for every process of the machine, so times of different processes
compare, and libfaketime (which replaces the C library's ``clock_gettime``, and
with it ``time.monotonic``, in the processes whose clocks the clock nemesis
moves) cannot touch it.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

_SYS_CLOCK_GETTIME: Final = 228  # x86_64; see _syscall_number for others
_CLOCK_MONOTONIC: Final = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _syscall_number() -> int:
    machine = os.uname().machine
    return {"x86_64": _SYS_CLOCK_GETTIME, "aarch64": 113}.get(machine, -1)


_LIBC: Final = ctypes.CDLL(None, use_errno=True)
_NUMBER: Final = _syscall_number()


def now() -> float:
    """Seconds on the machine's monotonic clock, past any libfaketime (module docstring)."""
    seconds, nanoseconds = _monotonic()
    return float(seconds) + float(nanoseconds) / 1e9


def now_ns() -> int:
    """:func:`now` in integer nanoseconds (lincheck's histories' times)."""
    seconds, nanoseconds = _monotonic()
    return seconds * 1_000_000_000 + nanoseconds


def _monotonic() -> tuple[int, int]:
    if _NUMBER < 0:  # an architecture we do not know the number of: the libc path
        import time

        total = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        return total // 1_000_000_000, total % 1_000_000_000
    spec = _Timespec()
    if _LIBC.syscall(_NUMBER, _CLOCK_MONOTONIC, ctypes.byref(spec)) != 0:
        raise OSError(ctypes.get_errno(), "clock_gettime failed")
    return int(spec.tv_sec), int(spec.tv_nsec)


class Recorder:
    """Appends one process's history lines to ``path`` (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] = path.open("a", buffering=1, encoding="utf-8")
        self._next = 0
        self._lock = threading.Lock()  # workers also record from a thread

    def invoke(self, process: str, kind: str, **fields: Any) -> int:
        """Record that ``process`` began an operation; returns its id."""
        with self._lock:
            self._next += 1
            op_id = self._next
        self._write({"ev": "inv", "id": op_id, "p": process, "kind": kind, **fields})
        return op_id

    def complete(self, process: str, op_id: int, outcome: str, **fields: Any) -> None:
        """Record how operation ``op_id`` of ``process`` ended."""
        self._write({"ev": "done", "id": op_id, "p": process, "outcome": outcome, **fields})

    def note(self, process: str, kind: str, **fields: Any) -> None:
        """Record something that is not an operation."""
        self._write({"ev": "note", "p": process, "kind": kind, **fields})

    def close(self) -> None:
        """Close the file (idempotent); later records are dropped."""
        with self._lock:
            self._file.close()

    def _write(self, line: dict[str, Any]) -> None:
        line.setdefault("t", now())
        text = json.dumps(line, separators=(",", ":")) + "\n"
        with self._lock:
            if not self._file.closed:
                self._file.write(text)


@dataclass
class Op:
    """One operation: invoked at ``t0``; ended at ``t1`` with ``outcome`` (None: pending)."""

    process: str
    op_id: int
    kind: str
    t0: float
    key: str | None = None
    session: int | None = None
    token: int | None = None
    value: Any = None
    t1: float | None = None
    outcome: str | None = None
    error: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """Whether the operation ended (with any outcome)."""
        return self.outcome is not None


@dataclass(frozen=True)
class Note:
    """A note line (see the module docstring)."""

    process: str
    kind: str
    t: float
    fields: dict[str, Any]


@dataclass
class History:
    """Every operation and note of a run, operations in invocation order."""

    ops: list[Op]
    notes: list[Note]

    def of_kind(self, kind: str) -> list[Op]:
        """The operations of one kind, in invocation order."""
        return [op for op in self.ops if op.kind == kind]

    def notes_of(self, kind: str) -> list[Note]:
        """The notes of one kind, in time order."""
        return [note for note in self.notes if note.kind == kind]


_OP_FIELDS: Final = ("key", "session", "token", "value")


def parse(lines: Iterable[str]) -> History:
    """Build a history from history lines (of any number of files, in any order).

    A line that does not parse is skipped: only the last line of a killed process
    can be cut short.
    """
    # A process label belongs to one file, and ids are unique within a file.
    ops: dict[tuple[str, int], Op] = {}
    ends: list[dict[str, Any]] = []
    notes: list[Note] = []
    for line in lines:
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        event = data.pop("ev", None)
        if event == "inv":
            op = Op(data.pop("p"), data.pop("id"), data.pop("kind"), data.pop("t"))
            for name in _OP_FIELDS:
                setattr(op, name, data.pop(name, None))
            op.fields = data
            ops[(op.process, op.op_id)] = op
        elif event == "done":
            ends.append(data)
        elif event == "note":
            notes.append(Note(data.pop("p"), data.pop("kind"), data.pop("t"), data))
    for end in ends:
        op_or_none = ops.get((end.pop("p"), end.pop("id")))
        if op_or_none is None:
            continue
        op_or_none.t1 = end.pop("t")
        op_or_none.outcome = end.pop("outcome")
        op_or_none.error = end.pop("error", None)
        for name in ("token", "value"):
            if name in end:
                setattr(op_or_none, name, end.pop(name))
        op_or_none.fields.update(end)
    return History(
        sorted(ops.values(), key=lambda op: op.t0), sorted(notes, key=lambda note: note.t)
    )


def load(paths: Iterable[Path]) -> History:
    """The history of every file in ``paths`` (see :func:`parse`)."""

    def lines() -> Iterable[str]:
        for path in paths:
            if path.exists():
                with path.open(encoding="utf-8", errors="replace") as file:
                    yield from file

    return parse(lines())
