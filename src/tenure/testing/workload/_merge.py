"""Merging a workload's files into one history per model, and closing the holds left open.

Each worker writes a file per model (:mod:`tenure.testing.workload._books`); a model's
files are **merged** by time (:func:`read_events`: a loss is written when it is told
but invoked at the grant seen, so it sorts to its place), then **closed**
(:func:`close_holds`): a hold (of a mutex, or of a semaphore through YDB's face) whose
client never recorded its end (its worker was stopped holding it, or its session ended
untold) gets a ``lost`` invoked at its grant and never completed; a membership whose
client never recorded its end, or a ``join`` whose outcome is unknown (it may have
joined: answered ``info``, or never answered, its client killed meanwhile), gets a
``leave`` invoked at the join and never completed. Either may take
effect any time after, or never (``info``): without it the model would keep the hold
or the member for ever, though its session ended.

An end a hold may have been given untold (``w0c1/untold-<key>-<token>``, recorded as
soon as it may: an offer made, a ``max_hold`` asked) stands unless the hold's release
was answered ``ok`` or ``fail``: that answer tells how the hold ended, and the untold
end is dropped, so that a release answered ``ok`` after an adoption ended its hold is
the mutex model's violation, not explained away. It stands when the release is
``info`` or never answered (its client killed meanwhile).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from tenure.testing import lincheck
from tenure.testing.workload._books import UNTOLD_MARK

__all__ = ["close_holds", "read_events", "watch_records"]

#: The operations whose end closes a hold, per model (module docstring).
_ENDS: Final = {
    "mutex": ("release", "lost"),
    "semaphore": ("release", "lost"),
    "membership": ("leave",),
}


def read_events(paths: list[Path]) -> list[dict[str, Any]]:
    """Every event of ``paths``, merged by time (headers dropped; a line cut short by a
    killed process skipped)."""
    found: list[tuple[int, int, int, dict[str, Any]]] = []
    for index, path in enumerate(paths):
        if not path.exists():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict) and "type" in event and "time" in event:
                found.append((int(event["time"]), index, number, event))
    found.sort(key=lambda item: item[:3])
    return [event for _, _, _, event in found]


def _label(process: str) -> str:
    """The client of a process id (``w0c1.3`` and ``w0c1/lost-m0-7``: ``w0c1``)."""
    return process.split("/")[0].split(".")[0]


def close_holds(model: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` with an end never completed for every hold or membership left open
    (module docstring), in time order."""
    if model not in _ENDS:
        return events
    events = _without_told_untold(model, events)
    grant_f, end_fs = ("join" if model == "membership" else "acquire"), _ENDS[model]
    invoked: dict[str, dict[str, Any]] = {}
    open_holds: dict[tuple[str, str, Any], dict[str, Any]] = {}
    added: list[dict[str, Any]] = []
    for event in events:
        process, kind, f = str(event["process"]), event["type"], event["f"]
        if kind == "invoke":
            invoked[process] = event
            if f in end_fs:
                open_holds.pop(_hold(model, event, process), None)
            continue
        call = invoked.pop(process, None)
        if call is None or f != grant_f:
            continue
        if kind == "ok":
            value = call["value"] if model == "membership" else event["value"]  # the token
            opened = {**event, "value": value}
            open_holds[_hold(model, opened, process)] = opened
        elif kind == "info" and model == "membership":
            added.append(_end(call, "leave", call["value"], "maybe"))
    for (_, _, value), opened in open_holds.items():
        added.append(_end(opened, end_fs[-1], value, "open"))
    if model == "membership":  # a join never answered (its client was killed): as info
        for call in invoked.values():
            if call["f"] == grant_f:
                added.append(_end(call, "leave", call["value"], "maybe"))
    merged = events + added
    merged.sort(key=lambda event: int(event["time"]))
    return merged


def _without_told_untold(model: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` less the untold ends of the holds whose release was answered ``ok`` or
    ``fail`` (module docstring)."""
    invoked: dict[str, dict[str, Any]] = {}
    answered: set[tuple[str, str, Any]] = set()
    for event in events:
        process = str(event["process"])
        if event["type"] == "invoke":
            invoked[process] = event
            continue
        call = invoked.pop(process, None)
        if call is not None and call["f"] == "release" and event["type"] in ("ok", "fail"):
            answered.add(_hold(model, call, process))
    return [
        event
        for event in events
        if not (
            UNTOLD_MARK in str(event["process"])
            and _hold(model, event, str(event["process"])) in answered
        )
    ]


def _hold(model: str, event: dict[str, Any], process: str) -> tuple[str, str, Any]:
    """A hold's identity: its client, key and token (mutex) or member id (membership)."""
    return (_label(process), str(event.get("key")), event["value"])


def _end(start: dict[str, Any], f: str, value: Any, why: str) -> dict[str, Any]:
    """An end of a hold, invoked at ``start``'s time and never completed."""
    process = f"{_label(str(start['process']))}/{why}-{start.get('key')}-{value}"
    return {"process": process, "type": "invoke", "f": f, "key": start.get("key"),
            "value": value, "time": start["time"]}  # fmt: skip


def watch_records(paths: list[Path]) -> list[lincheck.WatchRecord]:
    """The watch records of the watchers' files: each watch (a process of a watcher, from
    its first call for a state) armed at that call, each state it was given seen when it
    came."""
    records: dict[str, lincheck.WatchRecord] = {}
    for event in read_events(paths):
        process, key = str(event["process"]), event.get("key")
        record = records.get(process)
        if record is None and event["type"] == "invoke":
            records[process] = lincheck.WatchRecord(process, key, float(event["time"]))
        elif record is not None and event["type"] == "ok":
            record.seen.append((event["value"], float(event["time"])))
    return list(records.values())
