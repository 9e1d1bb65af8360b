"""ServerMetrics' bookkeeping, fed as the server feeds it, and the gauges read at scrape
time from a cluster's role (no process, no HTTP)."""

from __future__ import annotations

import asyncio

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
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DropNode,
    Engine,
    Granted,
    NodeConfig,
    SessionEnded,
)
from tenure.compat.dflockd.metrics import DflockdCounts
from tenure.errors import DeadlockError, ErrorCode
from tenure.server._cluster.keys import ServerRecord
from tenure.server._cluster.role import ClusterRole
from tenure.server._cluster.store import Leader
from tenure.server._http.collector import StateCollector
from tenure.server._http.metrics import ServerMetrics
from tenure.server._http.readiness import Readiness
from tenure.server._http.tally import LoopHistogram
from tenure.server._role import STANDALONE_ROLE, Role

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(metrics: ServerMetrics) -> Samples:
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
    counts = DflockdCounts()
    metrics = ServerMetrics(version="0", faces={"dflockd": counts})
    assert metrics.face("dflockd") is counts
    counts.request("l", b"ok 00ff 33\n")
    counts.request("l", b"ok 00aa 33\n")
    counts.request("\x00evil-label", b"error\n")
    counts.request("", b"error_auth\n")
    counts.request("stats", b'ok {"locks":[]}\n')
    counts.request("se", b"surprise\n")
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


def test_a_cluster_member_times_its_appends_not_a_wal() -> None:
    single = ServerMetrics(version="0")
    single.committed(0.0002)
    assert not single.clustered
    got = samples(single)
    assert got[("tenure_wal_commit_seconds_count", frozenset())] == 1
    assert not any(name.startswith("tenure_cluster_") for name, _ in got)

    member = ServerMetrics(version="0")
    member.in_cluster()
    member.committed(0.004)  # a round of appends to etcd, as the leader's host reports it
    member.committed(0.3)
    got = samples(member)
    assert member.clustered
    assert got[("tenure_cluster_append_seconds_count", frozenset())] == 2
    assert got[("tenure_cluster_append_seconds_bucket", frozenset({("le", "0.005")}))] == 1
    assert got[("tenure_cluster_append_seconds_sum", frozenset())] == pytest.approx(0.304)
    # No write-ahead log on a cluster's server: no series that would name one.
    assert not any(name.startswith("tenure_wal_commit") for name, _ in got)


def scraped(role: Role | None) -> Samples:
    """A scrape of the gauges read from ``role`` (the engine still being recovered)."""
    metrics = ServerMetrics(version="0")
    readiness = Readiness()
    metrics.registry.register(StateCollector(readiness, metrics, lambda: None, dict, lambda: role))
    return samples(metrics)


def gauge(got: Samples, name: str, **labels: str) -> float:
    return got[(name, frozenset(labels.items()))]


def test_a_standalone_server_shows_no_cluster_series() -> None:
    for role in (STANDALONE_ROLE, None):  # (None: no server yet)
        got = scraped(role)
        assert ("tenure_ready", frozenset()) in got
        assert not [name for name, _ in got if name.startswith("tenure_cluster_")]


def three_members() -> ClusterRole:
    """ServerRecord b's role as a standby that applied 5 entries, with a leads (term 42,
    recorded 8 applied) and c (recorded 7)."""
    leader = ServerRecord("a", "10.0.0.1:6388", "leader", 8, 0.0, http="10.0.0.1:9100")
    role = ClusterRole("prod", ServerRecord("b", "10.0.0.2:6388", http="10.0.0.2:9100"))
    role.members = [leader, ServerRecord("c", "10.0.0.3:6388", "standby", 7, 0.0)]
    role.applied = lambda: 5
    role.saw(Leader(leader, term=42, lease=1))
    return role


def test_a_standby_reports_its_role_term_log_and_lag() -> None:
    role = three_members()
    got = scraped(role)
    assert gauge(got, "tenure_cluster_role", role="standby") == 1
    assert gauge(got, "tenure_cluster_role", role="leader") == 0
    assert gauge(got, "tenure_cluster_term") == 42
    assert gauge(got, "tenure_cluster_log_index") == 8  # the furthest record known
    assert gauge(got, "tenure_cluster_applied_index") == 5
    assert gauge(got, "tenure_cluster_lag_entries") == 3
    assert gauge(got, "tenure_cluster_members") == 3
    assert gauge(got, "tenure_cluster_leader_changes_total") == 0  # the first term seen

    # A new leader (c, term 50), and this member catches up.
    role.saw(Leader(role.members[1], term=50, lease=2))
    role.applied = lambda: 9
    got = scraped(role)
    assert gauge(got, "tenure_cluster_term") == 50
    assert gauge(got, "tenure_cluster_leader_changes_total") == 1
    assert gauge(got, "tenure_cluster_log_index") == 9
    assert gauge(got, "tenure_cluster_lag_entries") == 0


def test_the_leader_reports_itself_leading_without_lag() -> None:
    role = three_members()
    role.name = "leader"  # (what the member sets when it is elected)
    role.applied = lambda: 11  # the appender's last index
    got = scraped(role)
    assert gauge(got, "tenure_cluster_role", role="leader") == 1
    assert gauge(got, "tenure_cluster_role", role="standby") == 0
    assert gauge(got, "tenure_cluster_log_index") == 11
    assert gauge(got, "tenure_cluster_applied_index") == 11
    assert gauge(got, "tenure_cluster_lag_entries") == 0


async def test_a_scrape_counts_the_semaphores_a_step_budget_at_a_time() -> None:
    # /metrics counts with StateCollector.count before it encodes: a budget of
    # semaphores per turn of the loop, other tasks served between (issue 37: the
    # whole walk was one step). Shown by order: a task that counts loop turns runs
    # during the walk, and drops a node part-way, which the walk survives.
    engine = Engine()
    big = NodeConfig(max_semaphores=10_000, max_waiters=10_000)
    for node in ("a", "b"):
        engine.apply(CreateNode(node, big), 0.0)
        owner = engine.apply(CreateSession(node, b"k"), 0.0).session_id
        other = engine.apply(CreateSession(node, b"k"), 0.0).session_id
        for i in range(1_000):
            engine.apply(CreateSemaphore(owner, f"s{i:04d}", 1), 0.0)
        for i in range(300):
            engine.apply(Acquire(owner, f"s{i:04d}", 1, i + 1), 0.0)
            engine.apply(Acquire(other, f"s{i:04d}", 1, i + 1, timeout=1e6), 0.0)
    metrics = ServerMetrics(version="0")
    collector = StateCollector(Readiness(), metrics, lambda: engine, dict)
    metrics.registry.register(collector)
    inline = samples(metrics)
    assert inline[("tenure_semaphores", frozenset())] == 2_000
    assert inline[("tenure_holds", frozenset())] == 600
    assert inline[("tenure_waiters", frozenset())] == 600

    turns = 0

    async def meanwhile() -> None:
        nonlocal turns
        while True:
            turns += 1
            if turns == 15:  # part-way through node b
                engine.apply(DropNode("b", force=True), 0.0)
            await asyncio.sleep(0)

    task = asyncio.ensure_future(meanwhile())
    await asyncio.sleep(0)
    before = turns
    await collector.count(100)
    during = turns - before
    task.cancel()
    assert during >= 14  # 2,000 semaphores a hundred at a time: a turn for others each
    walked = samples(metrics)
    assert 1_000 <= walked[("tenure_semaphores", frozenset())] < 2_000
    assert walked[("tenure_nodes", frozenset())] == 1
    # The counts serve one scrape: the next one counts again (here inline).
    assert samples(metrics)[("tenure_semaphores", frozenset())] == 1_000


def test_deadlock_checks_are_shown_by_the_token_that_asked() -> None:
    # A refused acquire costs its sender no quota and may be asked again at once
    # (issue 47): the series say whose acquires made the server search, and how much.
    engine = Engine()
    engine.apply(CreateNode("n", NodeConfig()), 0.0)
    engine.actor = "evil"  # (the sessions' quota owner, as a server's host sets it)
    one, two = (engine.apply(CreateSession("n", b"k"), 0.0).session_id for _ in range(2))
    engine.actor = ""

    def lock(sid: int, name: str) -> None:
        engine.apply(Acquire(sid, name, MAX_COUNT, 1, ephemeral=True, task=1), 0.0)

    lock(one, "a")
    lock(two, "b")
    lock(one, "b")
    for _ in range(2):
        with pytest.raises(DeadlockError):
            lock(two, "a")
    metrics = ServerMetrics(version="0")
    metrics.registry.register(StateCollector(Readiness(), metrics, lambda: engine, dict))
    got = samples(metrics)
    refused = (
        "tenure_deadlock_checks_total",
        frozenset({("outcome", "refused"), ("token", "evil")}),
    )
    assert got[refused] == 2
    work = got[("tenure_deadlock_search_work_total", frozenset({("token", "evil")}))]
    assert work == sum(n for (what, _), n in engine.deadlock_counts.items() if what == "looked")
    assert work >= 2 * 4  # (each check: two holds and two requests at least)


def test_the_memory_budget_is_shown_beside_the_estimate_only_when_set() -> None:
    # An alert on the state nearing --memory-budget (deploy/prometheus/alerts.yaml)
    # divides the estimate by the budget: both must be on /metrics, the budget only
    # when there is one (no series rather than a 0 to divide by).
    engine = Engine()
    engine.apply(CreateNode("n", NodeConfig()), 0.0)
    metrics = ServerMetrics(version="0")
    metrics.registry.register(StateCollector(Readiness(), metrics, lambda: engine, dict))
    assert ("tenure_memory_budget_bytes", frozenset()) not in samples(metrics)
    engine.ledger.budget = 1 << 20
    got = samples(metrics)
    assert got[("tenure_memory_budget_bytes", frozenset())] == 1 << 20
    assert 0 < got[("tenure_state_estimate_bytes", frozenset())] < 1 << 20
