"""bench.targets: each target met or missed from one run's Measures (fixture values).

No timing here: the Measures are made up, the logic that judges them is what is tested.
"""

from __future__ import annotations

import math

from bench.report import targets_table
from bench.results import Measure, client_each
from bench.targets import BACKENDS, EARLIER, ISSUE_15, TARGET_TABLES, Target, find, judge


def m(workload: str, system: str, metric: str, value: float, note: str = "") -> Measure:
    """A measure of one sample."""
    return Measure(workload, system, metric, value, "", [value], note)


def by_label(label: str) -> Target:
    """The target of ``label`` in any of the report's tables."""
    for _heading, targets in TARGET_TABLES:
        for t in targets:
            if t.label == label:
                return t
    raise KeyError(label)


def test_a_ratio_is_met_at_the_goal_and_missed_below_it() -> None:
    t = by_label("seq non-durable >= 2x redis-py Lock")
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
    t = by_label("server CPU <= 100 µs per seq pair")
    run = [m("seq", "tenure-off", "server_cpu_us", 100.0), m("seq", "redis", "server_cpu_us", 40.0)]
    v = judge(t, run)
    # The context peer is shown, but the verdict is tenure's value against the bound.
    assert (v.value, v.met) == (100.0, True)
    assert v.peer is not None
    assert v.peer.system == "redis"
    v = judge(t, [m("seq", "tenure-off", "server_cpu_us", 100.5)])
    assert (v.value, v.met, v.peer) == (100.5, False, None)


def test_the_client_each_shape_is_compared_with_the_peers_client_each() -> None:
    run = [
        m("par", "tenure-off", "pairs_per_s", 9000),
        m("par", "redis", "pairs_per_s", 1000),  # shared: 9x
        m("par", client_each("tenure-off"), "pairs_per_s", 5000),
        m("par", client_each("redis"), "pairs_per_s", 2500),  # each: 2x
    ]
    shared = judge(by_label("par non-durable >= 3x redis-py Lock (shared client)"), run)
    each = judge(by_label("par non-durable >= 3x redis-py Lock (client each)"), run)
    assert (shared.value, shared.met) == (9.0, True)
    assert (each.value, each.met) == (2.0, False)
    assert each.mine is not None
    assert each.mine.system == "tenure-off (client each)"


def test_every_par_and_cont_target_of_issue_15_exists_in_both_shapes() -> None:
    for workload in ("par", "cont"):
        for peer in ("redis", "etcd"):
            found = [t for t in ISSUE_15 if t.workload == workload and t.peer is not None]
            shared = [t for t in found if t.peer == peer]
            each = [t for t in found if t.peer == client_each(peer)]
            assert len(shared) == len(each) == 1, (workload, peer)
            # Like for like: a client-each peer only against a client-each tenure.
            assert all(s.endswith("(client each)") for s in each[0].systems)
            assert not any(s.endswith("(client each)") for s in shared[0].systems)
    for fairness in ("max_overtaken", "jain"):
        shapes = {t.systems for t in ISSUE_15 if t.workload == "cont" and t.metric == fairness}
        assert shapes == {("tenure-off",), (client_each("tenure-off"),)}


def test_a_failed_or_missing_run_is_not_run_never_met() -> None:
    t = by_label("cont >= 1.5x redis-py Lock (shared client)")
    failed = Measure("cont", "tenure-off", "grants_per_s", float("nan"), "", [], "boom")
    v = judge(t, [failed, m("cont", "redis", "grants_per_s", 100)])
    assert (v.value, v.met, v.mine) == (None, None, None)
    v = judge(t, [m("cont", "tenure-off", "grants_per_s", 300)])  # no peer measured
    assert (v.value, v.met) == (None, None)
    assert find([failed], "cont", "tenure-off", "grants_per_s") is None


def test_the_first_measured_of_a_targets_systems_is_judged() -> None:
    t = by_label("hold <= 300 B per held lock at 100k")
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
    t = by_label("seq on postgres vs pg_advisory_lock")
    v = judge(
        t,
        [
            m("seq", "tenure-postgres", "pairs_per_s", 600),
            m("seq", "postgres", "pairs_per_s", 4800),
        ],
    )
    assert (v.value, v.met) == (0.125, None)
    assert t in BACKENDS


def test_the_echo_ceiling_scales_pairs_to_round_trips() -> None:
    t = next(t for t in EARLIER if t.peer == "echo-uvloop")
    run = [
        m("seq", "tenure-off", "pairs_per_s", 7000),
        m("ceiling", "echo-uvloop", "seq_rt_per_s", 20000),
    ]
    v = judge(t, run)
    assert (v.value, v.met) == (0.7, True)


def test_the_table_says_met_missed_reported_not_run_and_quick_size() -> None:
    targets = (
        by_label("seq non-durable >= 2x redis-py Lock"),
        by_label("cont: zero overtakes (shared client)"),
        by_label("seq on postgres vs pg_advisory_lock"),
        by_label("recovery <= 1 s for 100k leases"),
        by_label("watch p99 <= 25 ms for 1,000 watchers"),
    )
    run = [
        m("seq", "tenure-off", "pairs_per_s", 3000),
        m("seq", "redis", "pairs_per_s", 1000),
        m("cont", "tenure-off", "max_overtaken", 2),
        m("seq", "tenure-postgres", "pairs_per_s", 500),
        m("seq", "postgres", "pairs_per_s", 1000),
        m(
            "recovery",
            "tenure-off",
            "restart_s",
            0.5,
            "N = 10,000 (quick mode; the issue's size is 100,000)",
        ),
    ]
    rows = targets_table(run, targets)[2:]
    verdicts = [row.rstrip(" |").rsplit("| ", 1)[1] for row in rows]
    assert verdicts == ["**met**", "**missed**", "reported", "**met** (quick size)", "not run"]
    assert "3.00x" in rows[0]
    assert ">= 2x" in rows[0]
    assert "0.50x" in rows[2]
    assert "| - |" in rows[2]
