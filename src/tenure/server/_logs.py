"""The server's log: one event per line on stderr, as text to a terminal, else as JSON.

Every line carries the time, the level, an **event name** and the event's fields.
A log call names its event with ``extra={"event": "slow_commit", "fields": {...}}``;
one that does not gets a name made from its message template ("connection lost;
sessions detached" -> ``connection_lost_sessions_detached``), so every line can be
selected by name (docs/operations.md, "Metrics, health and logs", lists them).

* ``json``: ``{"ts": 1795322191.735, "level": "info", "logger": "tenure.server",
  "event": "listening", "msg": "listening", "host": ..., ...}``: a machine reads it.
* ``text``: ``2026-11-22T23:14:05.123Z info     listening: listening host=127.0.0.1
  port=6388``: a person reads it; field values are JSON where they are not one plain
  word, and a traceback is one quoted field, so an event stays one line.
* ``auto`` (the default): ``text`` when stderr is a terminal, ``json`` otherwise (a
  file, a pipe, a log collector).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Callable
from typing import Final, TextIO

__all__ = [
    "LOG_FORMATS",
    "JsonFormatter",
    "TextFormatter",
    "announce_settings",
    "event_name",
    "hold_settings_line",
    "setup_logging",
]

#: The formats ``--log-format`` accepts (``auto``: text to a terminal, else JSON).
LOG_FORMATS: Final = ("auto", "json", "text")

_PLACEHOLDER: Final = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[a-zA-Z%]")
_NOT_WORD: Final = re.compile(r"[^a-z0-9]+")
_PLAIN: Final = re.compile(r"[A-Za-z0-9_.:/@+-]+")


def event_name(record: logging.LogRecord) -> str:
    """The record's event: its ``event`` extra, else a name made from its template."""
    named = getattr(record, "event", None)
    if isinstance(named, str) and named:
        return named
    template = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
    return _NOT_WORD.sub("_", _PLACEHOLDER.sub("", template).lower()).strip("_") or "log"


def _fields(record: logging.LogRecord) -> dict[str, object]:
    fields = getattr(record, "fields", None)
    return dict(fields) if isinstance(fields, dict) else {}


class JsonFormatter(logging.Formatter):
    """One JSON object per log line: ts, level, logger, event, msg and any ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        out: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": event_name(record),
            "msg": record.getMessage(),
        }
        out.update(_fields(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """One line per event for people: UTC time, level, event, message, ``key=value`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of text."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        millis = int(record.created * 1000) % 1000
        parts = [
            f"{stamp}.{millis:03d}Z",
            f"{record.levelname.lower():<8}",
            f"{event_name(record)}: {record.getMessage()}",
        ]
        fields = _fields(record)
        if record.exc_info:
            fields["exc"] = self.formatException(record.exc_info)
        parts.extend(f"{key}={_text_value(value)}" for key, value in fields.items())
        return " ".join(parts)


def _text_value(value: object) -> str:
    """A field's value as one word: itself if plain, else JSON (quoted, newlines escaped)."""
    if isinstance(value, str) and _PLAIN.fullmatch(value):
        return value
    if isinstance(value, bool | int | float) or value is None:
        return json.dumps(value)
    return json.dumps(value, default=str)


def setup_logging(log_format: str = "auto", stream: TextIO | None = None) -> str:
    """Send the ``tenure`` loggers to ``stream`` (stderr) in ``log_format``, INFO and up;
    aiohttp's (the HTTP endpoint's errors) too, from WARNING, so every line has one shape.
    Returns the format used: ``auto`` is ``text`` if ``stream`` is a terminal, else ``json``.

    Raises:
        ValueError: ``log_format`` is not one of :data:`LOG_FORMATS`.
    """
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}: {log_format!r}")
    out = sys.stderr if stream is None else stream
    if log_format == "auto":
        log_format = "text" if out.isatty() else "json"
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    for name, level in (("tenure", logging.INFO), ("aiohttp", logging.WARNING)):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
    return log_format


#: The settings' line of ``tenure serve``, held until the start's outcome is known.
_held: list[Callable[[], None]] = []


def hold_settings_line(emit: Callable[[], None]) -> None:
    """Hold ``emit`` (it logs the ``config`` line) until :func:`announce_settings`.

    A start that fails must say why on stderr's first line (issue 50: a config
    record came first, and the reason after it): the line is logged just before
    ``listening``, or after the reason a start failed.
    """
    _held[:] = [emit]


def announce_settings() -> None:
    """Log the held settings' line, if it was not logged yet (once)."""
    while _held:
        _held.pop()()
