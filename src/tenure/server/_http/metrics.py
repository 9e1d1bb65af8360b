"""The server's Prometheus metrics: what the hot path counts, in a registry of its own.

:class:`ServerMetrics` is the server's :class:`~tenure.server._observe.ServerObserver`.
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
  ``--fsync batch`` syncer's fsync); on a cluster's server (:meth:`ServerMetrics.in_cluster`)
  ``tenure_cluster_append_seconds`` instead: each round of appends to the cluster's
  log in etcd (the leader's group commit);
* ``tenure_snapshot_seconds`` and ``tenure_snapshot_size_bytes``: snapshots written;
* each face's counters (``tenure_<face>_requests_total``), as the observer its registry
  entry makes counts them (:class:`~tenure.server._observe.FaceObserver`: their names,
  labels and bounded label values are the face's).

The gauges (sessions, holds, waiters, watches, connections, readiness) are read
from the engine at scrape time by :class:`tenure.server._http.collector.StateCollector`.
The counts are plain numbers (:mod:`tenure.server._http.tally`): the cost on the hot
path is a dictionary increment per request (``bench/micro/metrics_cost.py`` and
``bench/micro/serve_seq.py --metrics`` measure it).
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Container, Iterator, Mapping
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)

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
from tenure.server._http.tally import LoopHistogram
from tenure.server._observe import FaceObserver

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
#: An append is a Txn through etcd's Raft (a network round trip and the fsync of a
#: quorum): milliseconds when all is well, seconds when etcd struggles.
APPEND_BUCKETS: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
SNAPSHOT_BUCKETS: Final = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

_CAMEL: Final = re.compile(r"(?<!^)(?=[A-Z])")


@functools.cache
def _snake(name: str) -> str:
    """``CreateSession`` -> ``create_session``."""
    return _CAMEL.sub("_", name).lower()


def _request_order(item: tuple[tuple[type, ErrorCode | None], int]) -> tuple[str, int]:
    (kind, code), _ = item
    return kind.__name__, 0 if code is None else int(code)


class ServerMetrics:
    """The counters and histograms of one server (see the module docstring).

    They are plain numbers updated on the event loop (:mod:`tenure.server._http.tally`
    says why), exposed by :meth:`collect`, a collector of its own :attr:`registry`.
    """

    def __init__(
        self,
        *,
        version: str,
        instance_id: str = "",
        faces: Mapping[str, FaceObserver] | None = None,
    ) -> None:
        """``instance_id``: the data directory's (hex), if known yet (:meth:`identify`);
        ``faces``: what each face counts its requests in, by name (the face registry's
        :func:`~tenure.server._faces.observers`), shown in that order."""
        self.version = version
        self.instance_id = instance_id
        #: (command type, error code or None) -> native requests answered.
        self._requests: dict[tuple[type, ErrorCode | None], int] = {}
        self._faces = dict(faces or {})
        #: ErrorCode -> sessions the server ended with it.
        self._sessions_ended: dict[ErrorCode, int] = {}
        self._grant_wait = LoopHistogram(
            "tenure_grant_wait_seconds",
            "Seconds from an acquire's arrival to its grant (0: granted at once).",
            GRANT_WAIT_BUCKETS,
        )
        self._commit = LoopHistogram(
            "tenure_wal_commit_seconds",
            "Seconds per journal commit: the write and, as --fsync says, the fsync.",
            COMMIT_BUCKETS,
        )
        # A histogram of its own, not the commit's with a label: it times a network
        # round trip through etcd's consensus, not a local write and fsync (other
        # buckets, other alerts), and a cluster's server has no write-ahead log, so a
        # tenure_wal_commit_seconds there would name something that does not exist.
        self._append = LoopHistogram(
            "tenure_cluster_append_seconds",
            "Seconds per round of appends to the cluster's log in etcd (the leader's "
            "group commit: one fenced Txn per entry, retries included).",
            APPEND_BUCKETS,
        )
        #: What :meth:`committed` times: the journal's commits, or a cluster's appends.
        self._commits = self._commit
        self._snapshot = LoopHistogram(
            "tenure_snapshot_seconds",
            "Seconds from beginning a snapshot to putting it in place.",
            SNAPSHOT_BUCKETS,
        )
        self._snapshot_size = 0
        #: Queued acquires being timed: session id -> request id -> time.monotonic().
        self._waiting: dict[int, dict[int, float]] = {}
        self._timed = 0
        self.registry = CollectorRegistry()
        self.registry.register(self)

    def identify(self, instance_id: str) -> None:
        """The instance id of the server's state (known once the data directory is read)."""
        self.instance_id = instance_id

    def in_cluster(self) -> None:
        """The server is a member of a cluster (``--cluster``): its commits are appends
        to the cluster's log in etcd, timed as ``tenure_cluster_append_seconds`` (and
        ``tenure_wal_commit_seconds`` is not shown). Told before its first leader term:
        a member starts as a standby, which commits nothing."""
        self._commits = self._append

    @property
    def clustered(self) -> bool:
        """Whether :meth:`in_cluster` was called."""
        return self._commits is self._append

    # -- the ServerObserver hooks -----------------------------------------------------------

    def face(self, name: str) -> FaceObserver | None:
        """What face ``name`` counts its requests in (None: it counts nothing)."""
        return self._faces.get(name)

    def request(self, command: Command[object], code: ErrorCode | None) -> None:
        """Count a native request's answer."""
        key = (type(command), code)
        requests = self._requests
        requests[key] = requests.get(key, 0) + 1

    def applied(self, command: Command[object], value: object) -> None:
        """Start (or end) timing an acquire's wait."""
        if isinstance(command, Acquire) and isinstance(value, AcquireResult):
            if value.status is AcquireStatus.GRANTED:
                self._grant_wait.observe_zero()
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
                ended = self._sessions_ended
                ended[effect.code] = ended.get(effect.code, 0) + 1

    def committed(self, seconds: float) -> None:
        """Time a journal commit (a cluster's leader: a round of appends to etcd)."""
        self._commits.observe(seconds)

    def snapshot_written(self, seconds: float, size: int) -> None:
        """Time a snapshot and keep its size."""
        self._snapshot.observe(seconds)
        self._snapshot_size = size

    # -- the scrape -------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        """The series as they are now (prometheus-client calls it for each scrape)."""
        yield InfoMetricFamily(
            "tenure_server",
            "The server: its version and instance id (empty until recovered).",
            value={"version": self.version, "instance_id": self.instance_id},
        )
        requests = CounterMetricFamily(
            "tenure_requests",
            "Native requests answered, by command and result (ok, or the error code).",
            labels=["command", "result"],
        )
        for (kind, code), count in sorted(self._requests.items(), key=_request_order):
            result = "ok" if code is None else code.name.lower()
            requests.add_metric([_snake(kind.__name__), result], float(count))
        yield requests
        yield self._grant_wait.family()
        ended = CounterMetricFamily(
            "tenure_sessions_ended",
            "Sessions the server ended, by reason (session_expired: window passed).",
            labels=["reason"],
        )
        for code, count in sorted(self._sessions_ended.items()):
            ended.add_metric([code.name.lower()], float(count))
        yield ended
        yield self._commits.family()
        yield self._snapshot.family()
        yield GaugeMetricFamily(
            "tenure_snapshot_size_bytes",
            "Size of the latest snapshot written, in bytes (0: none since start-up).",
            value=float(self._snapshot_size),
        )
        for observer in self._faces.values():
            for family in observer.families():
                counter = CounterMetricFamily(family.name, family.help, labels=family.labels)
                for values, count in sorted(family.counts.items()):
                    counter.add_metric(values, float(count))
                yield counter

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
