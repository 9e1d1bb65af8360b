"""ServerMetrics' bookkeeping, fed as the server feeds it (no process, no HTTP)."""

from __future__ import annotations

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireFailed,
    AcquireResult,
    AcquireStatus,
    CancelAcquire,
    CloseSession,
    Granted,
    SessionEnded,
)
from tenure.errors import ErrorCode
from tenure.server._http.metrics import ServerMetrics
from tenure.server._http.tally import LoopHistogram


def samples(metrics: ServerMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


QUEUED = AcquireResult(AcquireStatus.QUEUED)


def queue(metrics: ServerMetrics, session_id: int, request_id: int) -> None:
    metrics.applied(Acquire(session_id, "m", MAX_COUNT, request_id), QUEUED)


def test_every_way_a_wait_ends_stops_timing_it() -> None:
    metrics = ServerMetrics(version="0", instance_id="ab")
    for request_id in (1, 2, 3):
        queue(metrics, 7, request_id)
    queue(metrics, 8, 1)
    queue(metrics, 9, 1)
    queue(metrics, 10, 1)
    assert metrics.timed_waits == 6
    queue(metrics, 7, 3)  # the same request again: still one wait
    assert metrics.timed_waits == 6
    metrics.effects([Granted(7, 1, "m", 5, 1)])
    metrics.effects([AcquireFailed(7, 2, "m", ErrorCode.TIMEOUT, "timed out")])
    metrics.applied(CancelAcquire(7, "m", 3), True)
    metrics.applied(CloseSession(8), None)
    metrics.effects([SessionEnded(9, ErrorCode.SESSION_EXPIRED, "expired")])
    assert metrics.timed_waits == 1
    metrics.forget_sessions_except({1, 2})  # session 10 ended unseen
    assert metrics.timed_waits == 0
    got = samples(metrics)
    assert got[("tenure_grant_wait_seconds_count", frozenset())] == 1  # only the grant
    assert got[("tenure_sessions_ended_total", frozenset({("reason", "session_expired")}))] == 1


def test_dflockd_labels_come_from_fixed_sets() -> None:
    metrics = ServerMetrics(version="0")
    metrics.dflockd_request("l", b"ok 00ff 33\n")
    metrics.dflockd_request("l", b"ok 00aa 33\n")
    metrics.dflockd_request("\x00evil-label", b"error\n")
    metrics.dflockd_request("", b"error_auth\n")
    metrics.dflockd_request("stats", b'ok {"locks":[]}\n')
    metrics.dflockd_request("se", b"surprise\n")
    got = samples(metrics)

    def count(command: str, result: str) -> float:
        key = frozenset({("command", command), ("result", result)})
        return got.get(("tenure_dflockd_requests_total", key), 0.0)

    assert count("l", "ok") == 2
    assert count("unknown", "error") == 1
    assert count("invalid", "error_auth") == 1
    assert count("stats", "ok") == 1
    assert count("se", "other") == 1


def test_a_loop_histogram_counts_as_prometheus_client_would() -> None:
    from prometheus_client import CollectorRegistry, Histogram

    ours = LoopHistogram("h_seconds", "help", (0.5, 1.0, 2.0))
    registry = CollectorRegistry()
    theirs = Histogram("h_seconds", "help", buckets=(0.5, 1.0, 2.0), registry=registry)
    for observed in (0.0, 0.5, 0.7, 1.0, 3.0, 1e9):
        ours.observe(observed)
        theirs.observe(observed)
    ours.observe_zero()
    theirs.observe(0.0)
    mine = {(s.name, frozenset(s.labels.items())): s.value for s in ours.family().samples}
    reference = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    }
    assert mine == reference
    assert ours.count == 7


def test_bucket_bounds_must_ascend() -> None:
    with pytest.raises(ValueError, match="ascend"):
        LoopHistogram("h", "help", (1.0, 0.5))
