"""Recording a history in the JSON-lines format, as it happens.

:class:`HistoryWriter` writes one event a line and flushes each, so a process
killed mid-run leaves every line it began (an invoke with no completion reads as
``info``: it may or may not have happened). Several processes may write their own
files of one history: their times must come from one clock (the default,
``time.monotonic_ns``, is the machine's monotonic clock, shared by its processes)
and their ``process`` ids must differ; the files are read back with
:func:`read_histories`.
"""

from __future__ import annotations

import heapq
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Final

from tenure.testing.lincheck._history import (
    FAIL,
    INFO,
    INVOKE,
    OK,
    History,
    HistoryError,
    event_time,
    from_events,
    parse_event,
)


class HistoryWriter:
    """Appends events to ``path`` (module docstring); safe to share between threads.

    ``header`` (a semaphore's ``limit``...) is written first when the file is new.
    ``clock`` gives each event's ``time`` (integer nanoseconds), unless the event is
    given one (``time=``: something learnt later, e.g. when a loss began). ``fields=``
    adds fields of an event's own (a stale read's ``max_staleness`` and ``session`` on
    its invoke; what a reader of the file wants to know: lincheck reads no others),
    never the format's.
    """

    def __init__(
        self,
        path: Path | str,
        header: dict[str, Any] | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.Lock()
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._file: IO[str] = self.path.open("a", buffering=1, encoding="utf-8")
        if header and new:
            self._file.write(json.dumps(header, separators=(",", ":")) + "\n")

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def invoke(
        self,
        process: int | str,
        f: str,
        value: Any = None,
        key: str | None = None,
        *,
        time: int | None = None,
        fields: Mapping[str, Any] | None = None,
    ) -> None:
        """``process`` calls ``f`` with ``value`` (on ``key``). ``time``: when, if not now."""
        self._event(INVOKE, process, f, value, key, time, fields)

    def ok(
        self,
        process: int | str,
        f: str,
        value: Any = None,
        key: str | None = None,
        *,
        time: int | None = None,
        fields: Mapping[str, Any] | None = None,
    ) -> None:
        """``process``'s ``f`` returned ``value``. ``time``: when, if not now."""
        self._event(OK, process, f, value, key, time, fields)

    def fail(
        self,
        process: int | str,
        f: str,
        value: Any = None,
        key: str | None = None,
        *,
        time: int | None = None,
        fields: Mapping[str, Any] | None = None,
    ) -> None:
        """``process``'s ``f`` certainly did not take effect (a cas that did not swap).
        ``time``: when, if not now."""
        self._event(FAIL, process, f, value, key, time, fields)

    def info(
        self,
        process: int | str,
        f: str,
        value: Any = None,
        key: str | None = None,
        *,
        time: int | None = None,
        fields: Mapping[str, Any] | None = None,
    ) -> None:
        """``process``'s ``f`` ended without telling whether it took effect. ``time``:
        when, if not now."""
        self._event(INFO, process, f, value, key, time, fields)

    def close(self) -> None:
        """Close the file (idempotent); later events are dropped."""
        with self._lock:
            self._file.close()

    def _event(
        self,
        kind: str,
        process: int | str,
        f: str,
        value: Any,
        key: str | None,
        at: int | None,
        fields: Mapping[str, Any] | None,
    ) -> None:
        event: dict[str, Any] = {"process": process, "type": kind, "f": f}
        if key is not None:
            event["key"] = key
        event["value"] = value
        if fields:
            if _OWN.intersection(fields):
                raise ValueError(f"fields {sorted(_OWN.intersection(fields))} are the format's")
            event.update(fields)
        with self._lock:
            if self._file.closed:
                return
            event["time"] = self._clock() if at is None else at
            self._file.write(_COMPACT.encode(event) + "\n")


#: The fields every event has, which ``fields=`` may not give.
_OWN: Final = frozenset({"process", "type", "f", "key", "value", "time"})

#: ``json.dumps(..., separators=(",", ":"))``'s encoder, made once (``dumps`` makes one a
#: call when given separators: a simulated run writes tens of thousands of events).
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def read_histories(paths: Iterable[Path | str]) -> History:
    """One history of several files written by :class:`HistoryWriter` (each process's
    own), interleaved by ``time`` (each file's own order kept); the first file's header
    is the history's.

    Raises:
        HistoryError: a line that breaks the format, naming its file and line.
    """
    files: list[list[tuple[float, int, int, Any]]] = []  # each (time, file, line, event)
    header: dict[str, Any] = {}
    sources: list[str] = []
    for index, path in enumerate(paths):
        sources.append(str(path))
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise HistoryError(f"{path}: {error.strerror or error}") from None
        except UnicodeDecodeError as error:
            raise HistoryError(f"{path}: not UTF-8 text (byte {error.start})") from None
        lines = text.splitlines()
        found: list[tuple[float, int, int, Any]] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                event = parse_event(line, f"{path}:{number}")
            except HistoryError:
                if number == len(lines) and not text.endswith("\n"):
                    continue  # a process killed mid-line: its last line cut short
                raise
            if isinstance(event, dict) and "type" not in event:
                header = header or event
                continue
            if not isinstance(event, dict) or event.get("time") is None:
                raise HistoryError(f"{path}:{number}: merged files need every event's 'time'")
            stamp = event_time(event["time"], f"{path}:{number}")
            found.append((stamp, index, number, event))
        files.append(found)
    # Each file keeps its own order (a process's events pair in the order written, even
    # one given an earlier time); the files are interleaved by time.
    merged = heapq.merge(*files, key=lambda item: (item[0], item[1], item[2]))

    def events() -> Iterator[tuple[int, Any]]:
        if header:
            yield 0, header
        for position, (_, _, _, event) in enumerate(merged, start=1):
            yield position, event

    return from_events(events(), " + ".join(sources))
