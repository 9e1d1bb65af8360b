"""The server's Prometheus metrics: what the hot path counts, in a registry of its own.

:class:`ServerMetrics` is the server's :class:`~tenure.server._observe.Observer`.
It keeps its series in its own ``CollectorRegistry`` (never prometheus-client's
global one), so that one process may run several servers (the tests do). What it
counts as the server works:

* ``tenure_requests_total{command,result}``: native requests answered, by command
  (``acquire``, ``create_session``, ...) and result (``ok``, or the error code:
  ``not_found``, ``permission_denied``, ...);
* ``tenure_grant_wait_seconds``: from an Acquire's arrival to its grant (0 for a
  grant made at once), over every protocol;
* ``tenure_sessions_ended_total{reason}``: sessions the server ended
  (``session_expired``: the recovery window passed; ``session_closed``: its node
  was dropped);
* ``tenure_wal_commit_seconds``: each journal commit (write plus fsync, or the
  ``--fsync batch`` syncer's fsync);
* ``tenure_snapshot_seconds`` and ``tenure_snapshot_size_bytes``: snapshots written;
* ``tenure_dflockd_requests_total{command,result}``: dflockd requests answered.

The gauges (sessions, holds, waiters, watches, connections, readiness) are read
from the engine at scrape time by :class:`tenure.server._http.collector.StateCollector`.
The cost on the hot path is a dictionary lookup and a counter increment per
request (``bench/serve_seq.py --metrics`` measures it).
"""

from __future__ import annotations

import re
import time
from collections.abc import Container
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from tenure._core import (
    Acquire,
    AcquireFailed,
    AcquireResult,
    AcquireStatus,
    CancelAcquire,
    CloseSession,
    Command,
    Effect,
    Granted,
    SessionEnded,
)
from tenure.errors import ErrorCode

__all__ = ["MAX_TIMED_WAITS", "ServerMetrics"]

#: Queued acquires whose wait is being timed, at most; past this, new ones are not
#: timed (their grants are not in ``tenure_grant_wait_seconds``) until some end.
MAX_TIMED_WAITS: Final = 1_000_000

GRANT_WAIT_BUCKETS: Final = (
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
COMMIT_BUCKETS: Final = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
SNAPSHOT_BUCKETS: Final = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

#: dflockd's commands (other command lines count as ``unknown``, unframable ones as
#: ``invalid``) and the first words of its answers: the label values are bounded.
DFLOCKD_COMMANDS: Final = frozenset(
    {"l", "sl", "r", "sr", "n", "sn", "e", "se", "w", "sw"}
    | {"stats", "ping", "barrier", "auth", "stable-ref"}
)
DFLOCKD_RESULTS: Final = frozenset(
    {"ok", "acquired", "queued", "timeout", "error", "error_auth", "error_max_locks"}
    | {"error_max_waiters", "error_limit_mismatch", "error_not_enqueued"}
    | {"error_already_enqueued", "error_lease_expired", "error_draining"}
)

_CAMEL: Final = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(name: str) -> str:
    """``CreateSession`` -> ``create_session``."""
    return _CAMEL.sub("_", name).lower()


class ServerMetrics:
    """The counters and histograms of one server (see the module docstring)."""

    def __init__(self, *, version: str, instance_id: str = "") -> None:
        """``instance_id``: the data directory's (hex), if known yet (:meth:`identify`)."""
        self.registry = CollectorRegistry()
        registry = self.registry
        self.version = version
        self._info = Info(
            "tenure_server",
            "The server: its version and instance id (empty until recovered).",
            registry=registry,
        )
        self.identify(instance_id)
        self._requests = Counter(
            "tenure_requests",
            "Native requests answered, by command and result (ok, or the error code).",
            ["command", "result"],
            registry=registry,
        )
        self._grant_wait = Histogram(
            "tenure_grant_wait_seconds",
            "Seconds from an acquire's arrival to its grant (0: granted at once).",
            buckets=GRANT_WAIT_BUCKETS,
            registry=registry,
        )
        self._sessions_ended = Counter(
            "tenure_sessions_ended",
            "Sessions the server ended, by reason (session_expired: window passed).",
            ["reason"],
            registry=registry,
        )
        self._commit = Histogram(
            "tenure_wal_commit_seconds",
            "Seconds per journal commit: the write and, as --fsync says, the fsync.",
            buckets=COMMIT_BUCKETS,
            registry=registry,
        )
        self._snapshot = Histogram(
            "tenure_snapshot_seconds",
            "Seconds from beginning a snapshot to putting it in place.",
            buckets=SNAPSHOT_BUCKETS,
            registry=registry,
        )
        self._snapshot_size = Gauge(
            "tenure_snapshot_size_bytes",
            "Size of the latest snapshot written, in bytes (0: none since start-up).",
            registry=registry,
        )
        self._dflockd = Counter(
            "tenure_dflockd_requests",
            "dflockd requests answered, by command and the first word of the answer.",
            ["command", "result"],
            registry=registry,
        )
        # Label children, found once: a lookup here is cheaper than .labels() per call.
        self._request_children: dict[tuple[type, ErrorCode | None], Counter] = {}
        self._dflockd_children: dict[tuple[str, str], Counter] = {}
        #: Queued acquires being timed: session id -> request id -> time.monotonic().
        self._waiting: dict[int, dict[int, float]] = {}
        self._timed = 0

    def identify(self, instance_id: str) -> None:
        """The instance id of the server's state (known once the data directory is read)."""
        self._info.info({"version": self.version, "instance_id": instance_id})

    # -- the Observer hooks -----------------------------------------------------------

    def request(self, command: Command[object], code: ErrorCode | None) -> None:
        """Count a native request's answer."""
        key = (type(command), code)
        child = self._request_children.get(key)
        if child is None:
            result = "ok" if code is None else code.name.lower()
            child = self._requests.labels(_snake(type(command).__name__), result)
            self._request_children[key] = child
        child.inc()

    def applied(self, command: Command[object], value: object) -> None:
        """Start (or end) timing an acquire's wait."""
        if isinstance(command, Acquire) and isinstance(value, AcquireResult):
            if value.status is AcquireStatus.GRANTED:
                self._grant_wait.observe(0.0)
            elif value.status is AcquireStatus.QUEUED and self._timed < MAX_TIMED_WAITS:
                waits = self._waiting.setdefault(command.session_id, {})
                self._timed += command.request_id not in waits
                waits[command.request_id] = time.monotonic()
        elif isinstance(command, CancelAcquire):
            self._stop_timing(command.session_id, command.request_id)
        elif isinstance(command, CloseSession):
            self._timed -= len(self._waiting.pop(command.session_id, ()))

    def effects(self, effects: list[Effect]) -> None:
        """Time the grants, stop timing what ended, count the sessions ended."""
        for effect in effects:
            if isinstance(effect, Granted | AcquireFailed):
                started = self._stop_timing(effect.session_id, effect.request_id)
                if started is not None and isinstance(effect, Granted):
                    self._grant_wait.observe(time.monotonic() - started)
            elif isinstance(effect, SessionEnded):
                self._timed -= len(self._waiting.pop(effect.session_id, ()))
                self._sessions_ended.labels(effect.code.name.lower()).inc()

    def committed(self, seconds: float) -> None:
        """Time a journal commit."""
        self._commit.observe(seconds)

    def snapshot_written(self, seconds: float, size: int) -> None:
        """Time a snapshot and keep its size."""
        self._snapshot.observe(seconds)
        self._snapshot_size.set(size)

    def dflockd_request(self, command: str, answer: bytes) -> None:
        """Count a dflockd request's answer (label values from fixed sets only)."""
        word = answer.split(maxsplit=1)[0].decode("ascii", "replace") if answer.strip() else ""
        key = (
            command if command in DFLOCKD_COMMANDS else ("unknown" if command else "invalid"),
            word if word in DFLOCKD_RESULTS else "other",
        )
        child = self._dflockd_children.get(key)
        if child is None:
            child = self._dflockd_children[key] = self._dflockd.labels(*key)
        child.inc()

    # -- housekeeping -----------------------------------------------------------------

    @property
    def timed_waits(self) -> int:
        """How many queued acquires are being timed now."""
        return self._timed

    def forget_sessions_except(self, live: Container[int]) -> None:
        """Stop timing the waits of sessions that are gone (called at scrape time: a
        session can end without an effect the hooks see, e.g. in a dropped node)."""
        for session_id in [sid for sid in self._waiting if sid not in live]:
            self._timed -= len(self._waiting.pop(session_id))

    def _stop_timing(self, session_id: int, request_id: int) -> float | None:
        waits = self._waiting.get(session_id)
        if waits is None:
            return None
        started = waits.pop(request_id, None)
        if started is not None:
            self._timed -= 1
            if not waits:
                del self._waiting[session_id]
        return started
