"""bench.peers.targets: each target met or missed from one run's Measures (fixture values).

No timing here: the Measures are made up, the logic that judges them is what is tested.
Targets are looked up by the workload they judge and their label.
"""

from __future__ import annotations

import math

import pytest
from bench.peers.targets import TARGETS, find, judge, target
from bench.tools.report import summary_table, targets_table
from bench.tools.results import Measure, client_each


def m(workload: str, system: str, metric: str, value: float, note: str = "") -> Measure:
    """A measure of one sample."""
    return Measure(workload, system, metric, value, "", [value], note)


def test_a_ratio_is_met_at_the_goal_and_missed_below_it() -> None:
    t = target("seq", ">= 2x redis-py Lock (block form)")
    met = judge(
        t, [m("seq", "tenure-off", "pairs_per_s", 2000), m("seq", "redis", "pairs_per_s", 1000)]
    )
    assert (met.value, met.met) == (2.0, True)
    missed = judge(
        t, [m("seq", "tenure-off", "pairs_per_s", 1999), m("seq", "redis", "pairs_per_s", 1000)]
    )
    assert missed.met is False
    assert missed.value is not None
    assert math.isclose(missed.value, 1.999)


def test_a_bound_at_most_and_its_context_peer() -> None:
    t = target("CPU per request", "server <= 60 µs per seq pair (30 µs a request; a pair is 2)")
    run = [m("seq", "tenure-off", "server_cpu_us", 60.0), m("seq", "redis", "server_cpu_us", 40.0)]
    v = judge(t, run)
    # The context peer is shown, but the verdict is tenure's value against the bound.
    assert (v.value, v.met) == (60.0, True)
    assert v.peer is not None
    assert v.peer.system == "redis"
    v = judge(t, [m("seq", "tenure-off", "server_cpu_us", 60.5)])
    assert (v.value, v.met, v.peer) == (60.5, False, None)


def test_the_client_each_shape_is_compared_with_the_peers_client_each() -> None:
    run = [
        m("par", "tenure-off", "pairs_per_s", 9000),
        m("par", "redis", "pairs_per_s", 1000),  # shared: 9x
        m("par", client_each("tenure-off"), "pairs_per_s", 5000),
        m("par", client_each("redis"), "pairs_per_s", 2500),  # each: 2x
    ]
    shared = judge(target("par", ">= 3x redis-py Lock (shared client)"), run)
    each = judge(target("par", ">= 3x redis-py Lock (client each)"), run)
    assert (shared.value, shared.met) == (9.0, True)
    assert (each.value, each.met) == (2.0, False)
    assert each.mine is not None
    assert each.mine.system == "tenure-off (client each)"


def test_every_par_and_cont_target_against_a_peer_exists_in_both_shapes() -> None:
    servers = ("tenure-off", "tenure-always")
    everything = [t for targets in TARGETS.values() for t in targets]
    # The server's targets (not the backends', set for the shared client only).
    ours = [t for t in everything if t.systems[0].split(" (")[0] in servers]
    for workload in ("par", "cont"):
        for peer in ("redis", "etcd"):
            found = [t for t in ours if t.workload == workload and t.peer is not None]
            shared = [t for t in found if t.peer == peer]
            each = [t for t in found if t.peer == client_each(peer)]
            assert len(shared) == len(each) == 1, (workload, peer)
            # Like for like: a client-each peer only against a client-each tenure.
            assert all(s.endswith("(client each)") for s in each[0].systems)
            assert not any(s.endswith("(client each)") for s in shared[0].systems)
    for fairness in ("max_overtaken", "jain"):
        shapes = {t.systems for t in ours if t.workload == "cont" and t.metric == fairness}
        assert shapes == {("tenure-off",), (client_each("tenure-off"),)}


def test_targets_are_keyed_by_workload_each_with_a_reason() -> None:
    for workload, targets in TARGETS.items():
        assert targets, workload
        assert "issue" not in workload.lower()
        labels = [t.label for t in targets]
        assert len(set(labels)) == len(labels), workload  # target() finds each one
        for t in targets:
            # A reason is one line of the report's table, about the threshold.
            assert t.reason.strip(), t
            assert "\n" not in t.reason, t
            assert "|" not in t.reason, t
            assert "issue" not in f"{t.label} {t.reason}".lower(), t
            assert target(workload, t.label) is t


def test_an_unknown_target_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="no target 'faster' under 'seq'"):
        target("seq", "faster")
    with pytest.raises(KeyError):
        target("no such workload", ">= 2x redis-py Lock (block form)")


def test_a_failed_or_missing_run_is_not_run_never_met() -> None:
    t = target("cont", ">= 1.5x redis-py Lock (shared client)")
    failed = Measure("cont", "tenure-off", "grants_per_s", float("nan"), "", [], "boom")
    v = judge(t, [failed, m("cont", "redis", "grants_per_s", 100)])
    assert (v.value, v.met, v.mine) == (None, None, None)
    v = judge(t, [m("cont", "tenure-off", "grants_per_s", 300)])  # no peer measured
    assert (v.value, v.met) == (None, None)
    assert find([failed], "cont", "tenure-off", "grants_per_s") is None


def test_the_first_measured_of_a_targets_systems_is_judged() -> None:
    t = target("hold memory", "<= 300 B per held lock at 100k")
    run = [
        m("hold", "tenure-always", "bytes_per_lock", 280),
        m("hold", "tenure-memory", "bytes_per_lock", 900),
    ]
    v = judge(t, run)
    assert v.mine is not None
    assert v.mine.system == "tenure-always"
    assert v.met is True
    run.append(m("hold", "tenure-off", "bytes_per_lock", 310))
    v = judge(t, run)
    assert v.mine is not None
    assert v.mine.system == "tenure-off"
    assert v.met is False


def test_a_comparison_without_a_goal_is_reported() -> None:
    t = target("seq, par, cont on postgres://", "cont vs pg_advisory_lock")
    v = judge(
        t,
        [
            m("cont", "tenure-postgres", "grants_per_s", 600),
            m("cont", "postgres", "grants_per_s", 4800),
        ],
    )
    assert (v.value, v.met) == (0.125, None)


def test_postgres_par_is_judged_against_its_own_seq() -> None:
    t = target("seq, par, cont on postgres://", "par >= 5x its own seq")
    run = [
        m("seq", "tenure-postgres", "pairs_per_s", 400),
        m("par", "tenure-postgres", "pairs_per_s", 1800),
        m("par", "postgres", "pairs_per_s", 6000),
    ]
    v = judge(t, run)
    assert (v.value, v.met) == (4.5, False)
    assert v.peer is not None
    assert (v.peer.workload, v.peer.system) == ("seq", "tenure-postgres")
    half = judge(target("seq, par, cont on postgres://", "par >= 0.5x pg_advisory_lock"), run)
    assert (half.value, half.met) == (0.3, False)


def test_the_echo_ceiling_scales_pairs_to_round_trips() -> None:
    t = target("seq", ">= 0.7x echo ceiling (round trips; a pair is 2)")
    run = [
        m("seq", "tenure-off", "pairs_per_s", 7000),
        m("ceiling", "echo-uvloop", "seq_rt_per_s", 20000),
    ]
    v = judge(t, run)
    assert (v.value, v.met) == (0.7, True)


def test_the_table_says_met_missed_reported_not_run_and_quick_size() -> None:
    targets = (
        target("seq", ">= 2x redis-py Lock (block form)"),
        target("cont", "zero overtakes (shared client)"),
        target("seq, par, cont on postgres://", "cont vs pg_advisory_lock"),
        target("recovery", "<= 1 s for 100k leases"),
        target("watch fan-out", "p99 <= 25 ms for 1,000 watchers"),
    )
    run = [
        m("seq", "tenure-off", "pairs_per_s", 3000),
        m("seq", "redis", "pairs_per_s", 1000),
        m("cont", "tenure-off", "max_overtaken", 2),
        m("cont", "tenure-postgres", "grants_per_s", 500),
        m("cont", "postgres", "grants_per_s", 1000),
        m(
            "recovery",
            "tenure-off",
            "restart_s",
            0.5,
            "N = 10,000 (quick mode; the full size is 100,000)",
        ),
    ]
    rows = targets_table(run, targets)[2:]
    verdicts = [row.rstrip(" |").rsplit("| ", 1)[1] for row in rows]
    assert verdicts == ["**met**", "**missed**", "reported", "**met** (quick size)", "not run"]
    assert "3.00x" in rows[0]
    assert ">= 2x" in rows[0]
    assert "0.50x" in rows[2]
    assert "| - |" in rows[2]
    assert targets[0].reason in rows[0]  # the why column


def test_the_summary_counts_each_workloads_verdicts() -> None:
    run = [
        m("seq", "tenure-off", "pairs_per_s", 3000),
        m("seq", "redis", "pairs_per_s", 1000),  # >= 2x redis: met
        m("ceiling", "echo-uvloop", "seq_rt_per_s", 20000),  # 0.3x the ceiling: missed
        m("seq", "tenure-postgres", "pairs_per_s", 500),
        m("seq", "postgres", "pairs_per_s", 1000),
    ]
    rows = {row.split(" | ")[0].removeprefix("| "): row for row in summary_table(run)[2:]}
    assert list(rows) == list(TARGETS)
    # The awaited form was not measured: not run, never met.
    assert rows["seq"] == "| seq | 1 | 1 | 0 | 1 |"
    assert (
        rows["seq, par, cont on postgres://"] == "| seq, par, cont on postgres:// | 1 | 0 | 0 | 3 |"
    )
    assert rows["hold memory"] == "| hold memory | 0 | 0 | 0 | 1 |"


CLUSTER_WORKLOAD = "seq, par, cont in a cluster"


def test_the_cluster_is_judged_against_etcds_lock_api_like_for_like() -> None:
    run = [
        m("seq", "tenure-cluster", "pairs_per_s", 840),
        m("seq", "etcd", "pairs_per_s", 700),  # 1.2x: met
        m("par", "tenure-cluster", "pairs_per_s", 9000),
        m("par", "etcd", "pairs_per_s", 3000),  # 3x: met
        m("par", client_each("tenure-cluster"), "pairs_per_s", 5000),
        m("par", client_each("etcd"), "pairs_per_s", 2000),  # 2.5x: missed
        m("cont", "tenure-cluster", "grants_per_s", 900),
        m("cont", "etcd", "grants_per_s", 300),
    ]
    seq = judge(target(CLUSTER_WORKLOAD, "seq >= 1.2x etcd's lock API"), run)
    assert seq.value is not None
    assert math.isclose(seq.value, 1.2)
    assert seq.met is True
    run[0] = m("seq", "tenure-cluster", "pairs_per_s", 700)  # 1x: not enough
    assert judge(target(CLUSTER_WORKLOAD, "seq >= 1.2x etcd's lock API"), run).met is False
    shared = judge(target(CLUSTER_WORKLOAD, "par >= 3x etcd's lock API (shared client)"), run)
    assert (shared.value, shared.met) == (3.0, True)
    each = judge(target(CLUSTER_WORKLOAD, "par >= 3x etcd's lock API (client each)"), run)
    assert (each.value, each.met) == (2.5, False)
    assert each.mine is not None
    assert each.peer is not None
    assert (each.mine.system, each.peer.system) == (
        "tenure-cluster (client each)",
        "etcd (client each)",
    )
    cont = judge(target(CLUSTER_WORKLOAD, "cont >= 3x etcd's lock API (shared client)"), run)
    assert (cont.value, cont.met) == (3.0, True)
    # Not run in this run: never met.
    cont_each = judge(target(CLUSTER_WORKLOAD, "cont >= 3x etcd's lock API (client each)"), run)
    assert (cont_each.value, cont_each.met) == (None, None)


def test_every_cluster_target_is_one_of_the_cluster_rows_and_each_shape_meets_its_own() -> None:
    cluster = ("tenure-cluster", client_each("tenure-cluster"))
    targets = TARGETS[CLUSTER_WORKLOAD]
    goals: dict[tuple[str, str | None], float | None] = {}
    for t in targets:
        assert len(t.systems) == 1, t  # only the cluster itself: never another tenure row
        assert t.systems[0] in cluster, t
        each = t.systems[0].endswith("(client each)")
        if t.peer is not None:
            # Like for like: a client-each row only against a client-each peer.
            assert t.peer.endswith("(client each)") == each, t
            assert t.peer.split(" (")[0] in ("etcd", "tenure-always"), t
            goals[(t.workload, t.peer)] = t.goal
    # The goals of the issue against etcd's v3 lock API, in both shapes for par and cont.
    assert goals[("seq", "etcd")] == 1.2
    for workload in ("par", "cont"):
        assert goals[(workload, "etcd")] == goals[(workload, client_each("etcd"))] == 3
        # Single-node tenure --fsync always: a ratio reported, without a goal.
        assert goals[(workload, "tenure-always")] is None
        assert goals[(workload, client_each("tenure-always"))] is None
    assert goals[("seq", "tenure-always")] is None
    overtakes = {t.systems for t in targets if t.metric == "max_overtaken"}
    assert overtakes == {(s,) for s in cluster}


def test_the_clusters_ratio_to_one_fsyncing_server_is_reported() -> None:
    t = target(CLUSTER_WORKLOAD, "cont vs tenure serve --fsync always (client each)")
    run = [
        m("cont", client_each("tenure-cluster"), "grants_per_s", 400),
        m("cont", client_each("tenure-always"), "grants_per_s", 800),
        m("cont", "tenure-always", "grants_per_s", 100),  # the other shape: not compared
    ]
    v = judge(t, run)
    assert (v.value, v.met) == (0.5, None)
    rows = targets_table(run, (t,))[2:]
    assert "0.50x" in rows[0]
    assert rows[0].rstrip(" |").endswith("reported")


def test_the_awaited_form_is_judged_on_seq_awaited_against_redis_pys_own() -> None:
    t = target("seq", ">= 1.5x redis-py Lock (release awaited)")
    run = [
        m("seq", "tenure-off", "pairs_per_s", 3000),  # the block form: not this target's
        m("seq", "redis", "pairs_per_s", 1000),
        m("seq-awaited", "tenure-off", "pairs_per_s", 1400),
        m("seq-awaited", "redis", "pairs_per_s", 1000),
    ]
    v = judge(t, run)
    assert v.value is not None
    assert math.isclose(v.value, 1.4)
    assert v.met is False
    assert v.mine is not None
    assert v.peer is not None
    assert (v.mine.workload, v.peer.workload) == ("seq-awaited", "seq-awaited")
    run[2] = m("seq-awaited", "tenure-off", "pairs_per_s", 1500)
    assert judge(t, run).met is True
    # Only the block form measured: the awaited form was not run, never met.
    assert judge(t, run[:2]).value is None
    block = judge(target("seq", ">= 2x redis-py Lock (block form)"), run)
    assert (block.value, block.met) == (3.0, True)


def test_cpu_per_request_is_bounded_per_pair_at_twice_the_requests_goal() -> None:
    bounds = {t.metric: t for t in TARGETS["CPU per request"] if t.workload == "seq"}
    assert set(bounds) == {"client_cpu_us", "server_cpu_us"}
    # seq measures µs per pair, and a pair is an acquire and a release: two requests.
    for metric, per_request in (("client_cpu_us", 40), ("server_cpu_us", 30)):
        t = bounds[metric]
        assert (t.workload, t.goal, t.at_most) == ("seq", 2 * per_request, True)
        assert f"{per_request} µs a request; a pair is 2" in t.label
    client = bounds["client_cpu_us"]
    assert judge(client, [m("seq", "tenure-off", "client_cpu_us", 80.0)]).met is True
    assert judge(client, [m("seq", "tenure-off", "client_cpu_us", 81.0)]).met is False


def test_a_lone_requests_server_cpu_is_judged_against_the_echos_round_trip() -> None:
    """seq-awaited's server CPU per pair is two requests; the echo's is per round trip."""
    t = target(
        "CPU per request",
        "server per lone request <= 1.3x the uvloop echo's per round trip (seq-awaited; a pair"
        " is 2)",
    )
    echo = m("ceiling", "echo-uvloop", "seq_server_cpu_us", 50.0)
    met = judge(t, [m("seq-awaited", "tenure-off", "server_cpu_us", 130.0), echo])
    assert met.value is not None
    assert math.isclose(met.value, 1.3)
    assert met.met is True
    missed = judge(t, [m("seq-awaited", "tenure-off", "server_cpu_us", 131.0), echo])
    assert missed.met is False
    # The block form's CPU is no lone request's: without seq-awaited it was not run.
    assert judge(t, [m("seq", "tenure-off", "server_cpu_us", 60.0), echo]).value is None


def test_the_backends_against_the_primitive_each_replaces() -> None:
    pg = "seq, par, cont on postgres://"
    run = [
        m("seq", "tenure-postgres", "pairs_per_s", 1500),
        m("seq", "postgres", "pairs_per_s", 3000),  # 0.5x: met
        m("par", "tenure-postgres", "pairs_per_s", 4000),
        m("par", "postgres", "pairs_per_s", 10000),  # 0.4x: missed
        m("par", "tenure-redis", "pairs_per_s", 900),
        m("par", "redis", "pairs_per_s", 1000),  # 0.9x: missed
        m("cont", "tenure-redis", "grants_per_s", 2000),
        m("cont", "redis", "grants_per_s", 1000),  # 2x: met
    ]
    seq = judge(target(pg, "seq >= 0.5x pg_advisory_lock"), run)
    assert (seq.value, seq.met) == (0.5, True)
    par = judge(target(pg, "par >= 0.5x pg_advisory_lock"), run)
    assert (par.value, par.met) == (0.4, False)
    own = judge(target(pg, "par >= 5x its own seq"), run)
    assert own.value is not None
    assert math.isclose(own.value, 4000 / 1500)
    assert own.met is False
    redis = "seq, par, cont on redis://"
    assert judge(target(redis, "par >= redis-py Lock"), run).met is False
    assert judge(target(redis, "cont >= 2x redis-py Lock"), run).met is True


def test_the_goals_of_this_round_are_stated() -> None:
    """Each goal as the workload, the system judged, its peer and the threshold."""
    stated = {
        (t.workload, t.systems[0], t.peer, t.metric): t.goal
        for targets in TARGETS.values()
        for t in targets
        if t.goal is not None
    }
    off, always, cluster = "tenure-off", "tenure-always", "tenure-cluster"
    wanted: dict[tuple[str, str, str | None, str], float] = {
        ("seq", off, "redis", "pairs_per_s"): 2,
        ("seq-awaited", off, "redis", "pairs_per_s"): 1.5,
        ("seq", off, None, "server_cpu_us"): 60,
        ("seq", off, None, "client_cpu_us"): 80,
        ("seq-awaited", off, "echo-uvloop", "server_cpu_us"): 1.3,
        ("seq", always, "etcd", "pairs_per_s"): 3,
        ("seq", cluster, "etcd", "pairs_per_s"): 1.2,
        ("seq", "tenure-postgres", "postgres", "pairs_per_s"): 0.5,
        ("par", "tenure-postgres", "postgres", "pairs_per_s"): 0.5,
        ("par", "tenure-postgres", "tenure-postgres", "pairs_per_s"): 5,
        ("par", "tenure-redis", "redis", "pairs_per_s"): 1,
        ("cont", "tenure-redis", "redis", "grants_per_s"): 2,
        ("hold", off, None, "bytes_per_lock"): 300,
    }
    for (workload, metric), goal in {
        ("par", "pairs_per_s"): 3.0,
        ("cont", "grants_per_s"): 1.5,
    }.items():
        for shape in (off, client_each(off)):
            peer = "redis" if shape == off else client_each("redis")
            wanted[(workload, shape, peer, metric)] = goal
    for workload, metric in (("par", "pairs_per_s"), ("cont", "grants_per_s")):
        for system, peer in ((always, "etcd"), (cluster, "etcd")):
            wanted[(workload, system, peer, metric)] = 3
            wanted[(workload, client_each(system), client_each(peer), metric)] = 3
    for workload, metric in (("seq", "pairs_per_s"), ("par", "pairs_per_s")):
        wanted[(workload, "tenure-etcd", "etcd", metric)] = 1
    wanted[("cont", "tenure-etcd", "etcd", "grants_per_s")] = 1
    for key, goal in wanted.items():
        assert stated.get(key) == goal, key
