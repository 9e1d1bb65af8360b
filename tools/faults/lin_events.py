"""The suite's history as lincheck's operations: one history per model.

Every scenario's clients already record what lincheck needs in the suite's own
history (:mod:`tools.faults.history`): each acquire (``ok`` with its token), each
critical section and how it ended, each register update, and the observer's reads.
So the lincheck histories are *derived* from it, not recorded a second time:

* one record, so the two checkers judge the same facts (a second recorder in the
  workers could disagree with the first about a time or an outcome, and the
  disagreement would be the recorders', not tenure's);
* the times are the suite's: ``CLOCK_MONOTONIC`` read with the raw system call in
  every process (:func:`tools.faults.history.now`), which libfaketime cannot move,
  so a faked client's times compare with everyone's. lincheck gets them as integer
  nanoseconds (:func:`stamp`), as a :class:`~tenure.testing.lincheck.HistoryWriter`
  given that clock would write them;
* a history recorded before this module existed converts the same way.

What is derived, and why it is sound (every interval is the real one or wider,
which only ever allows more: a violation found is one of the real history):

**mutex** (a key per mutex). A granted ``acquire`` is an ``acquire`` ``ok`` with its
token, over the acquire's own interval. Its critical section says how the hold
ended:

* ``released``: a ``release`` of the token ``ok``, invoked when the body ended (the
  release is sent after it) and returned when the block's exit returned
  (``returned``, recorded by the worker; a history without it leaves the release's
  return unknown: ``info``);
* ``release-failed``: a ``release`` ``info`` from the body's end: it may have landed;
* ``lost``, ``lost-not-cancelled``, ``lost-after-body``: a ``lost`` ``ok`` (lincheck's
  loss of a hold), invoked at the client's last confirmation that it held, which is
  the grant it saw (the acquire's return: renewals are not recorded), and completed
  when the client was told (the section's end for ``lost``; ``lost_at``, else
  ``returned``, for the two others), so the hold ends once, somewhere in between;
* a section cut off by the stop (``info``), never ended (its process stopped or
  killed), or never begun: a ``lost`` invoked at the grant and never completed,
  which the model may place anywhere after it, or nowhere.

A loss the client declared itself (its session's window passed on its own clock,
promise 6a) ends the hold on the server a little *after* the telling, not before:
completing it then claims an end earlier than the real one. That is sound for this
model all the same: only a grant to another client, which must come after the end,
and the holder's own release, which it no longer makes, are ordered against a hold's
end; an end placed earlier than the real one contradicts neither. (The
``linearizable`` scenario's membership reads do see a member after its client gave
it up, so its workload completes only the losses the service told:
:mod:`tenure.testing.workload`.)

Acquires that were not granted, or whose outcome is unknown, are left out: the
mutex model takes them as doing nothing (a grant nobody heard of binds nobody).

**register** (a key per client's register: its persistent semaphore's data, which
only that client writes). A ``create`` (``exist_ok``, data ``0``) is a ``write`` of 0:
the client creates before its first update and never again once acknowledged, so
whether it made the semaphore or found one made by an earlier unknown create of
its own, the data is 0 when it returns. An ``update`` of ``n`` is a ``write`` of
``n``; the observer's ``read`` ``ok`` a ``read`` of what it found (``null``: no such
semaphore, never written). Unknown creates and updates are ``info`` writes; reads
that failed observed nothing and are left out.

A client's operations keep its label as their process (``w0c1``), with a
generation after each operation whose outcome is unknown (``w0c1.2``): that one
may still be in flight, so the client's next one is another process's. A ``lost``
has a process of its own (the label, ``/lost`` and its token): it spans the body,
beside the client's own steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from tools.faults.history import History, Op

#: lincheck's outcomes (tenure.testing.lincheck's event types).
OK: Final = "ok"
FAIL: Final = "fail"
INFO: Final = "info"
#: The value a register's create writes (the worker's ``data=b"0"``).
CREATED: Final = 0
#: The section outcomes whose loss the client was told of.
TOLD_LOSSES: Final = frozenset({"lost", "lost-not-cancelled", "lost-after-body"})


def stamp(seconds: float) -> int:
    """A history time (seconds) as lincheck's time: integer nanoseconds."""
    return round(seconds * 1e9)


@dataclass(frozen=True)
class LinOp:
    """One derived operation: ``process`` called ``f`` with ``value`` on ``key`` at ``call``;
    it returned ``result`` at ``ret`` with ``outcome`` (None: it never returned)."""

    process: str
    f: str
    key: str
    value: Any
    call: float
    outcome: str | None = None
    ret: float | None = None
    result: Any = None

    @property
    def certain(self) -> bool:
        """Whether its outcome is known (``ok`` or ``fail``)."""
        return self.outcome in (OK, FAIL)


class _Processes:
    """Each client's current lincheck process: its label, then a new generation
    after each operation whose outcome is unknown (module docstring)."""

    def __init__(self) -> None:
        self._generation: dict[str, int] = {}

    def of(self, label: str) -> str:
        generation = self._generation.get(label, 0)
        return label if generation == 0 else f"{label}.{generation}"

    def after(self, label: str, certain: bool) -> None:
        if not certain:
            self._generation[label] = self._generation.get(label, 0) + 1


def _time(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _told_at(section: Op) -> float | None:
    """When the client of a section that ended with a told loss heard of it."""
    if section.outcome == "lost":
        return section.t1
    lost_at = section.fields.get("lost_at")
    if isinstance(lost_at, list) and lost_at:
        return _time(lost_at[0])
    return _time(section.fields.get("returned"))


def _hold_end(section: Op | None, process: str, key: str, token: int, grant: float) -> LinOp:
    """How the hold of ``token``, seen granted at ``grant``, ended (module docstring)."""
    lost = f"{process}/lost{token}"
    if section is None or section.outcome is None or section.outcome == INFO:
        return LinOp(lost, "lost", key, token, grant)
    if section.outcome in TOLD_LOSSES:
        told = _told_at(section)
        if told is None:
            return LinOp(lost, "lost", key, token, grant, INFO)
        return LinOp(lost, "lost", key, token, grant, OK, max(told, grant))
    body_end = section.t1 if section.t1 is not None else section.t0
    if section.outcome == "released":
        returned = _time(section.fields.get("returned"))
        if returned is None:
            return LinOp(process, "release", key, token, body_end, INFO)
        return LinOp(process, "release", key, token, body_end, OK, max(returned, body_end))
    # release-failed: the release may have landed, or may land later
    return LinOp(process, "release", key, token, body_end, INFO)


def mutex_ops(history: History) -> list[LinOp]:
    """The mutex model's operations of ``history`` (module docstring), in call order."""
    processes = _Processes()
    found: list[LinOp] = []
    # Each acquire's next step of its own client (its section, if it began one).
    following: dict[tuple[str, int], Op] = {}
    last: dict[str, Op] = {}
    for op in history.ops:
        if op.kind in ("acquire", "section"):
            previous = last.get(op.process)
            if previous is not None and previous.kind == "acquire":
                following[(previous.process, previous.op_id)] = op
            last[op.process] = op
    for acquire in history.of_kind("acquire"):
        key, token, grant = acquire.key, acquire.token, acquire.t1
        label = acquire.process
        if acquire.outcome != OK or key is None or token is None or grant is None:
            # not granted, or unknown: the model's no-op (module docstring)
            processes.after(label, acquire.outcome == FAIL)
            continue
        found.append(LinOp(processes.of(label), "acquire", key, None, acquire.t0, OK, grant, token))
        section = _section_of(acquire, following.get((label, acquire.op_id)))
        end = _hold_end(section, processes.of(label), key, token, grant)
        found.append(end)
        if end.f == "release":
            processes.after(label, end.certain)
    return sorted(found, key=lambda op: op.call)


def _section_of(acquire: Op, step: Op | None) -> Op | None:
    """The section of the granted ``acquire``: its client's next ``step``, if that is a
    section of the same key and token (a token granted twice has two sections)."""
    if step is None or step.kind != "section":
        return None
    return step if (step.key, step.token) == (acquire.key, acquire.token) else None


def register_ops(history: History) -> list[LinOp]:
    """The register model's operations of ``history`` (module docstring), in call order."""
    processes = _Processes()
    found: list[LinOp] = []
    for op in history.ops:  # in call order: each client's own in the order it made them
        if op.kind not in ("create", "update", "read") or op.key is None:
            continue
        certain = op.outcome in (OK, FAIL)
        process = processes.of(op.process)
        processes.after(op.process, certain)
        if op.kind == "read":
            if op.outcome == OK and op.t1 is not None:
                found.append(LinOp(process, "read", op.key, None, op.t0, OK, op.t1, op.value))
            continue
        value = CREATED if op.kind == "create" else op.value
        if op.outcome == OK and op.t1 is not None:
            found.append(LinOp(process, "write", op.key, value, op.t0, OK, op.t1))
        elif op.outcome == FAIL and op.t1 is not None:
            found.append(LinOp(process, "write", op.key, value, op.t0, FAIL, op.t1))
        else:
            found.append(LinOp(process, "write", op.key, value, op.t0, INFO if op.done else None))
    return found


def events(ops: Iterable[LinOp]) -> list[dict[str, Any]]:
    """lincheck's events of ``ops`` (JSON-able objects), in time order.

    An operation whose outcome is unknown gets its ``info`` at its call's time (lincheck
    lets it take effect any time after its call); one that never returned gets none.
    Events of one time keep the operations' call order, each invoke before its own
    completion, so that a process's next call made the instant its last one returned
    reads as the next one.
    """
    timed: list[tuple[int, int, int, dict[str, Any]]] = []
    for index, op in enumerate(sorted(ops, key=lambda op: op.call)):
        call = stamp(op.call)
        invoke = {"process": op.process, "type": "invoke", "f": op.f, "key": op.key}
        invoke["value"] = op.value
        timed.append((call, index, 0, invoke))
        if op.outcome is None:
            continue
        ret = call if op.outcome == INFO or op.ret is None else max(stamp(op.ret), call)
        value = op.result if op.outcome == OK and op.f in ("acquire", "read") else op.value
        done = {"process": op.process, "type": op.outcome, "f": op.f, "key": op.key}
        done["value"] = value
        timed.append((ret, index, 1, done))
    timed.sort(key=lambda item: item[:3])
    return [{**event, "time": time} for time, _, _, event in timed]
