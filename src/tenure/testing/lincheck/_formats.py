"""The formats a history is read from: ours (JSON lines), and the two of porcupine's
published test data (its ``test_data/``), each turned into our events.

* ``jsonl``: :mod:`tenure.testing.lincheck._history`'s format.
* ``jepsen-log``: the Jepsen etcd logs (``INFO  jepsen.util - 3  :invoke  :cas  [1 2]``);
  ``:timed-out`` completions are unknown (a timed-out read observed nothing: a
  ``fail``; a timed-out write or cas an ``info``); other log lines are skipped.
* ``porcupine-kv``: Jepsen EDN lines of a key-value test
  (``{:process 9, :type :invoke, :f :append, :key "0", :value "x 9 0 y"}``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from tenure.testing.lincheck._history import (
    FAIL,
    INFO,
    History,
    HistoryError,
    from_events,
    read_jsonl,
)

_JEPSEN_LINE: Final = re.compile(r"^INFO\s+jepsen\.util\s+-\s+(\d+)\s+:(\w+)\s+:(\w+)\s+(.*?)\s*$")
_EDN_LINE: Final = re.compile(
    r'^\{:process (\d+), :type :(\w+), :f :(\w+), :key "((?:[^"\\]|\\.)*)", '
    r':value (nil|"((?:[^"\\]|\\.)*)")\}\s*$'
)


def _jepsen_value(text: str) -> Any:
    if text == "nil" or text == ":timed-out":
        return None
    if text.startswith("[") and text.endswith("]"):
        return [int(part) for part in text[1:-1].split()]
    return int(text)


def _jepsen_events(lines: Iterable[str], source: str) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(lines, start=1):
        found = _JEPSEN_LINE.match(line)
        if found is None:
            continue
        process, kind, f, text = found.groups()
        try:
            value = _jepsen_value(text)
        except ValueError:
            why = f"{source}:{number}: a value that is not Jepsen's: {text!r}"
            raise HistoryError(why) from None
        if text == ":timed-out":
            kind = FAIL if f == "read" else INFO
        yield number, {"process": int(process), "type": kind, "f": f, "value": value}


def _kv_events(lines: Iterable[str], source: str) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        found = _EDN_LINE.match(line)
        if found is None:
            raise HistoryError(f"{source}:{number}: not a line of porcupine's kv histories")
        process, kind, f, key, raw, text = found.groups()
        value = None if raw == "nil" else text.replace('\\"', '"').replace("\\\\", "\\")
        yield number, {"process": int(process), "type": kind, "f": f, "key": key, "value": value}


def read_jepsen_log(lines: Iterable[str], source: str = "<jepsen-log>") -> History:
    """A history of a Jepsen etcd register log (module docstring)."""
    return from_events(_jepsen_events(lines, source), source)


def read_porcupine_kv(lines: Iterable[str], source: str = "<porcupine-kv>") -> History:
    """A history of a porcupine kv test's EDN lines (module docstring)."""
    return from_events(_kv_events(lines, source), source)


#: Every format by name (``--format NAME``).
FORMATS: Final[dict[str, Callable[[Iterable[str], str], History]]] = {
    "jsonl": read_jsonl,
    "jepsen-log": read_jepsen_log,
    "porcupine-kv": read_porcupine_kv,
}


def read_history(path: Path | str, format: str = "jsonl") -> History:
    """The history in file ``path`` (``-``: standard input), read as ``format``.

    Raises:
        HistoryError: the file cannot be read, or breaks the format (naming the line).
        KeyError: no such format.
    """
    reader = FORMATS[format]
    if str(path) == "-":
        import sys

        return reader(sys.stdin, "<stdin>")
    try:
        with open(path, encoding="utf-8") as file:
            return reader(file, str(path))
    except OSError as error:
        raise HistoryError(f"{path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise HistoryError(f"{path}: not UTF-8 text") from None
