"""A history: the events of the JSON-lines format paired into operations.

The format (a contract; docs/testing.md): one JSON object a line, in Jepsen's shape::

    {"process": 3, "type": "invoke", "f": "cas", "key": "k1", "value": [1, 2], "time": 1234567}
    {"process": 3, "type": "ok", "f": "cas", "key": "k1", "value": [1, 2], "time": 1234570}

``type`` is ``invoke``, ``ok``, ``fail`` or ``info``; a completion closes its
process's open invoke (so one process runs one operation at a time); ``key`` is
optional (absent: every operation is on one key) and is read from the invoke;
``time`` is optional (absent: the order of the lines is the order in real time;
present: a finite number smaller than 2**63 in size, on every event; ``NaN`` and
``Infinity``, which are not JSON, are refused like any line that is not);
the ``value`` of an ``invoke`` is the operation's input, the ``value`` of an ``ok`` its
result. ``info`` (or an invoke never completed, or one whose process invokes again)
means the outcome is unknown: the operation may take effect at any point after its
call, or never. A line with no ``type`` before the first event is the *header*, a
set of facts about the history (``{"limit": 3}``: a semaphore's limit).

A read may be *stale* (:mod:`tenure.testing.lincheck._stale`): its invoke's
``max_staleness`` (seconds, at least 0; the history timed) lets it take effect that
long before its call, and its ``session`` (a number or a string; absent: its process)
names whose operations it must not go back before.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tenure.errors import InvalidArgumentError

#: The four event types.
INVOKE: Final = "invoke"
OK: Final = "ok"
FAIL: Final = "fail"
INFO: Final = "info"
_COMPLETIONS: Final = frozenset((OK, FAIL, INFO))


#: Every time is finite and smaller than this in size (nanoseconds since 1970 fit until
#: 2262): a NaN compares false with every time, and made operations that were not
#: concurrent look so (a broken history said "linearizable").
TIME_LIMIT: Final = 2**63


class HistoryError(InvalidArgumentError):
    """A history that cannot be read: the message names the line (1-based) and why."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_event(text: str, where: str) -> Any:
    """The JSON value of one line (``where`` names it in the error).

    Raises:
        HistoryError: not JSON: malformed, ``NaN`` or ``Infinity`` (Python's, not JSON's),
            nested deeper than the interpreter can read, or an integer too long to read.
    """
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as error:
        raise HistoryError(f"{where}: not JSON ({error.msg})") from None
    except RecursionError:
        raise HistoryError(f"{where}: not JSON this reader can take (nested too deeply)") from None
    except ValueError as error:  # NaN, Infinity; an integer past Python's digit limit
        raise HistoryError(f"{where}: not JSON ({error})") from None


def event_time(stamp: object, where: str) -> float:
    """An event's ``time``, checked: a number, finite, smaller than :data:`TIME_LIMIT`.

    Raises:
        HistoryError: anything else, naming ``where``.
    """
    if isinstance(stamp, bool) or not isinstance(stamp, int | float):
        shown = repr(stamp) if not isinstance(stamp, list | dict) else type(stamp).__name__
        raise HistoryError(f"{where}: 'time' is a number, not {shown[:80]}")
    if isinstance(stamp, float) and not math.isfinite(stamp):
        raise HistoryError(f"{where}: 'time' is a finite number, not {stamp}")
    if abs(stamp) >= TIME_LIMIT:
        size = f"{stamp:.3g}" if isinstance(stamp, float) else f"{stamp.bit_length()} bits"
        raise HistoryError(f"{where}: 'time' out of range ({size}: at most 2**63 in size)")
    return float(stamp)


@dataclass(frozen=True)
class Operation:
    """One operation: called at ``call``, returned at ``ret`` (``inf`` when ``outcome`` is
    ``info``: it may take effect any time after its call, or never).

    ``input`` is the invoke's value, ``output`` the completion's (``None`` unless ``ok``
    or ``fail`` said one); ``line`` is the invoke's line, ``index`` its place in the
    history (what a witness names it by). A stale read has ``max_staleness`` (seconds);
    ``session`` is whose order a stale read keeps (None: its process's).
    """

    index: int
    process: int | str
    f: str
    key: str | None
    input: Any
    outcome: str
    output: Any
    call: float
    ret: float
    line: int
    max_staleness: float | None = None
    session: int | str | None = None

    def describe(self) -> str:
        """The operation in one line, e.g. ``p3 cas('k1', [1, 2]) -> ok`` (a stale read:
        ``p3 read(max_staleness=0.5) -> ok 7``)."""
        shown = "" if self.input is None else json.dumps(self.input)
        if self.max_staleness is not None:
            shown += f"{', ' if shown else ''}max_staleness={self.max_staleness:g}"
        result = self.outcome
        if self.outcome == OK and self.output is not None and self.output != self.input:
            result = f"ok {json.dumps(self.output)}"
        return f"p{self.process} {self.f}({shown}) -> {result}"


@dataclass
class History:
    """Every operation of a history, in call order, and its header's facts."""

    operations: list[Operation]
    header: dict[str, Any] = field(default_factory=dict)

    def key_names(self) -> list[str | None]:
        """The keys the operations touch, in the order first seen."""
        return list(dict.fromkeys(op.key for op in self.operations))

    def by_key(self) -> dict[str | None, list[Operation]]:
        """The operations of each key (P-compositionality: each checked alone)."""
        found: dict[str | None, list[Operation]] = {}
        for op in self.operations:
            found.setdefault(op.key, []).append(op)
        return found


@dataclass
class _Open:
    line: int
    process: int | str
    f: str
    key: str | None
    value: Any
    time: float
    max_staleness: float | None = None
    session: int | str | None = None


def read_jsonl(lines: Iterable[str], source: str = "<history>") -> History:
    """The history of JSON lines (the module docstring's format).

    Raises:
        HistoryError: a line that is not JSON, or not an event, naming it.
    """

    def events() -> Iterator[tuple[int, Any]]:
        for number, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            yield number, parse_event(text, f"{source}:{number}")

    return from_events(events(), source)


def from_events(events: Iterable[tuple[int, Any]], source: str = "<history>") -> History:
    """The history of events already parsed: ``(line number, the event's object)`` pairs.

    Raises:
        HistoryError: an event that breaks the format, naming its line.
    """
    header: dict[str, Any] = {}
    builder = _Builder(source)
    for number, event in events:
        if not isinstance(event, Mapping):
            raise HistoryError(f"{source}:{number}: an event is a JSON object, not {event!r}")
        if "type" not in event:
            if builder.started:
                raise HistoryError(f"{source}:{number}: no 'type' (a header comes first)")
            header.update(event)
            continue
        builder.add(number, event)
    return History(builder.finish(), header)


class _Builder:
    """Pairs invokes with completions, process by process."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.open: dict[int | str, _Open] = {}
        self.done: list[tuple[_Open, str, Any, float]] = []
        self.started = False
        self.last_time = -math.inf
        self.timed: bool | None = None

    def _time(self, number: int, event: Mapping[str, Any]) -> float:
        stamp = event.get("time")
        timed = stamp is not None
        if self.timed is None:
            self.timed = timed
        elif self.timed != timed:
            raise HistoryError(f"{self.source}:{number}: 'time' on some events only")
        if not timed:
            return float(number)
        return event_time(stamp, f"{self.source}:{number}")

    def add(self, number: int, event: Mapping[str, Any]) -> None:
        self.started = True
        kind, process, f = event.get("type"), event.get("process"), event.get("f")
        if kind != INVOKE and kind not in _COMPLETIONS:
            raise HistoryError(
                f"{self.source}:{number}: 'type' is invoke, ok, fail or info, not {kind!r}"
            )
        if isinstance(process, bool) or not isinstance(process, int | str):
            raise HistoryError(f"{self.source}:{number}: 'process' is a number or a string")
        if not isinstance(f, str):
            raise HistoryError(f"{self.source}:{number}: 'f' (the operation) is a string")
        key = event.get("key")
        if key is not None and not isinstance(key, str | int):
            raise HistoryError(f"{self.source}:{number}: 'key' is a string or a number")
        key_text = None if key is None else str(key)
        time = self._time(number, event)
        value = event.get("value")
        if kind == INVOKE:
            previous = self.open.pop(process, None)
            if previous is not None:  # invoked again: the first one's outcome is unknown
                self.done.append((previous, INFO, None, math.inf))
            stale, session = self._stale(number, event)
            self.open[process] = _Open(number, process, f, key_text, value, time, stale, session)
            return
        opened = self.open.pop(process, None)
        if opened is None:
            raise HistoryError(
                f"{self.source}:{number}: a completion ({kind}) of process {process!r}, "
                "which has no operation open"
            )
        if opened.f != f:
            raise HistoryError(
                f"{self.source}:{number}: completes {f!r}, but process {process!r} "
                f"invoked {opened.f!r} (line {opened.line})"
            )
        if key is not None and key_text != opened.key:
            raise HistoryError(
                f"{self.source}:{number}: key {key_text!r}, but the invoke (line "
                f"{opened.line}) said {opened.key!r}"
            )
        if time < opened.time:
            raise HistoryError(
                f"{self.source}:{number}: returns at {time}, before its call at {opened.time}"
            )
        if kind == INFO:
            self.done.append((opened, INFO, None, math.inf))
        else:
            self.done.append((opened, kind, value, time))

    def _stale(self, number: int, event: Mapping[str, Any]) -> tuple[float | None, Any]:
        """An invoke's ``max_staleness`` and ``session`` (module docstring), checked."""
        where = f"{self.source}:{number}"
        stale, session = event.get("max_staleness"), event.get("session")
        if isinstance(session, bool) or not isinstance(session, int | str | None):
            raise HistoryError(f"{where}: 'session' is a number or a string")
        if stale is None:
            return None, session
        if (
            isinstance(stale, bool)
            or not isinstance(stale, int | float)
            or not math.isfinite(stale)
            or stale < 0
        ):
            raise HistoryError(f"{where}: 'max_staleness' is a number of seconds, at least 0")
        if not self.timed:  # (seconds mean nothing where the lines' order is the time)
            raise HistoryError(f"{where}: a read with 'max_staleness' needs 'time' on the events")
        return float(stale), session

    def finish(self) -> list[Operation]:
        for opened in self.open.values():
            self.done.append((opened, INFO, None, math.inf))
        self.open.clear()
        self.done.sort(key=lambda item: (item[0].time, item[0].line))
        return [
            Operation(
                index,
                opened.process,
                opened.f,
                opened.key,
                opened.value,
                outcome,
                output,
                opened.time,
                ret,
                opened.line,
                opened.max_staleness,
                opened.session,
            )
            for index, (opened, outcome, output, ret) in enumerate(self.done)
        ]
