"""The hostile-tenant scenario's rules (tools/faults/check_tenant.py) on synthetic
histories: each fires on what it forbids, none on a calm run or on another scenario."""

from __future__ import annotations

from tenure.errors import LimitExceededError
from tests.faults.test_checkers import Build
from tools.faults.abuses import refusal_name
from tools.faults.check_tenant import (
    FLOOR,
    JUDGED_FROM,
    MIN_SAMPLES,
    RATIO,
    STALL,
    percentile,
)
from tools.faults.checker import Verdict
from tools.faults.report import Result, render
from tools.faults.report_texts import TENANT_NOTES
from tools.faults.tenant import quota_refusals


def tenant_build() -> Build:
    """A history of a tenant run: its params say ``tokens``."""
    b = Build()
    b.note("harness", "params", 0.0, liveness_bound=10.0, tokens=True)
    return b


def phases(b: Build, quiet: float, hostile: float, n: int = MIN_SAMPLES, rounds: int = 2) -> None:
    """``rounds`` of a quiet then a hostile phase of 10 s each, ``n`` probes in each
    kind of phase (spread over its rounds) taking ``quiet`` and ``hostile`` seconds."""
    for r in range(rounds):
        for kind, latency, start in (
            ("quiet", quiet, 20.0 * r),
            ("hostile", hostile, 20.0 * r + 10),
        ):
            b.note("tenant", "phase", start + 10, phase=kind, start=start, end=start + 10)
            for i in range(n // rounds):
                t0 = start + 10 * i / (n // rounds)
                b.op(f"w{i % 3}c0", "probe", t0, t0 + latency, "ok", session=1)


def rules(verdict: Verdict) -> set[str]:
    return verdict.rules() & {
        "honest-latency", "honest-session-lost", "honest-lock-lost", "honest-refused",
        "honest-stall",
    }  # fmt: skip


def test_a_calm_tenant_run_passes_and_is_measured() -> None:
    b = tenant_build()
    phases(b, 0.002, 0.003)
    b.hold("w0c0", 1, 1, 1.0, 2.0)
    b.note(
        "tenant",
        "abuse",
        15.0,
        abuse="flood",
        phase=0,
        done=10,
        refused={"requests_per_second": 4},
        failed={},
    )
    b.note(
        "tenant",
        "abuse",
        35.0,
        abuse="flood",
        phase=1,
        done=5,
        refused={"requests_per_second": 1},
        failed={"TimeoutError": 1},
    )
    b.note(
        "tenant",
        "abuse",
        35.0,
        abuse="sessions",
        phase=1,
        done=3,
        refused={"sessions": 2},
        failed={},
    )
    b.note("tenant", "server-memory", 40.0, peak_kib=102400, before_kib=51200, rss_kib=60000)
    b.note("tenant", "quota-metrics", 40.0, refusals={"sessions mallory": 2}, served=True)
    verdict = b.verdict()
    assert verdict.ok, verdict.summary()
    tenant = verdict.stats["tenant"]
    assert tenant["latency_ms"]["samples"] == {"quiet": MIN_SAMPLES, "hostile": MIN_SAMPLES}
    assert tenant["latency_ms"]["hostile"]["p99"] == 3.0
    assert tenant["abuses"]["flood"] == {
        "done": 15, "refused": {"requests_per_second": 5}, "failed": {"TimeoutError": 1}
    }  # fmt: skip
    assert tenant["refusals"] == {"requests_per_second": 5, "sessions": 2}
    assert (tenant["rss_peak_mib"], tenant["rss_before_mib"]) == (100.0, 50.0)
    assert tenant["quota_metrics"] == {"sessions mallory": 2}


def test_a_slow_hostile_phase_breaks_the_latency_rule() -> None:
    b = tenant_build()
    phases(b, 0.030, 0.100)  # quiet p99 above the floor: the bound is 2 x 30 ms
    verdict = b.verdict()
    assert rules(verdict) == {"honest-latency"}, verdict.summary()
    assert "100.0 ms with the hostile tenant, 30.0 ms without" in verdict.violations[0].message


def test_a_short_run_keeps_its_percentiles_and_leaves_them_unjudged() -> None:
    short = Build()
    short.note("harness", "params", 0.0, liveness_bound=10.0, tokens=True, seconds=18.0)
    phases(short, 0.037, 0.169)  # CI's test run beside three other workers, once
    verdict = short.verdict()
    assert verdict.ok, verdict.summary()
    latency = verdict.stats["tenant"]["latency_ms"]
    assert latency["hostile"]["p99"] == 169.0
    assert latency["judged"] == f"no: 18 s of faults, under {JUDGED_FROM:g} (long mode judges)"
    long = Build()
    long.note("harness", "params", 0.0, liveness_bound=10.0, tokens=True, seconds=JUDGED_FROM)
    phases(long, 0.037, 0.169)
    assert rules(long.verdict()) == {"honest-latency"}
    # A stall is judged in a short run all the same.
    stalled = Build()
    stalled.note("harness", "params", 0.0, liveness_bound=10.0, tokens=True, seconds=18.0)
    phases(stalled, 0.002, 0.002)
    stalled.op("w1c1", "probe", 12.0, 12.0 + STALL * 2, "ok", session=2)
    assert rules(stalled.verdict()) == {"honest-stall"}


def test_the_quiet_p99_is_taken_as_at_least_the_floor() -> None:
    inside = tenant_build()
    phases(inside, 0.001, RATIO * FLOOR * 0.95)
    assert inside.verdict().ok
    over = tenant_build()
    phases(over, 0.001, RATIO * FLOOR * 1.05)
    assert rules(over.verdict()) == {"honest-latency"}


def test_one_slow_probe_in_a_hundred_is_the_p99() -> None:
    b = tenant_build()
    phases(b, 0.002, 0.002)
    # 1% of the hostile probes stalled (a scan of every node): the p99 is theirs
    # (and each is a stall past the absolute bound too).
    for i in range(MIN_SAMPLES // 100 + 1):
        b.op("w1c1", "probe", 12.0 + i, 12.0 + i + 3.5, "ok", session=2)
    verdict = b.verdict()
    assert rules(verdict) == {"honest-latency", "honest-stall"}, verdict.summary()


def test_one_hostile_probe_past_the_stall_bound_breaks_the_stall_rule() -> None:
    b = tenant_build()
    phases(b, 0.002, 0.002)
    # One honest probe of a hostile phase took 0.6 s: the p99 does not see one in
    # two hundred, the absolute bound does (issue 47: answers under 0.5 s throughout).
    b.op("w2c1", "probe", 13.0, 13.0 + STALL + 0.1, "ok", session=3)
    verdict = b.verdict()
    assert rules(verdict) == {"honest-stall"}, verdict.summary()
    (stall,) = [v for v in verdict.violations if v.rule == "honest-stall"]
    assert "1 honest probes took more than 500 ms with the hostile tenant" in stall.message
    assert "600.0 ms (w2c1)" in stall.message
    assert verdict.stats["tenant"]["stalls"] == {"over_ms": 500.0, "quiet": 0, "hostile": 1}


def test_probes_within_the_stall_bound_pass() -> None:
    b = tenant_build()
    phases(b, 0.002, 0.002)
    b.op("w2c1", "probe", 13.0, 13.0 + STALL - 0.05, "ok", session=3)
    verdict = b.verdict()
    assert verdict.ok, verdict.summary()
    assert verdict.stats["tenant"]["stalls"]["hostile"] == 0


def test_a_stall_in_a_quiet_phase_too_is_the_machines_not_the_tenants() -> None:
    b = tenant_build()
    phases(b, 0.002, 0.002)
    b.op("w2c1", "probe", 13.0, 13.0 + STALL + 0.1, "ok", session=3)  # hostile
    b.op("w0c0", "probe", 23.0, 23.0 + STALL + 0.2, "ok", session=1)  # quiet (20-30 s)
    verdict = b.verdict()
    assert verdict.ok, verdict.summary()
    assert verdict.stats["tenant"]["stalls"] == {"over_ms": 500.0, "quiet": 1, "hostile": 1}


def test_the_bystander_must_keep_its_lock() -> None:
    kept = tenant_build()
    phases(kept, 0.002, 0.002)
    kept.note("bystander", "bystander", 40.0, kept=True, error=None)
    verdict = kept.verdict()
    assert verdict.ok, verdict.summary()
    assert verdict.stats["tenant"]["bystander_kept"] is True
    lost = tenant_build()
    phases(lost, 0.002, 0.002)
    lost.note("bystander", "bystander", 40.0, kept=False, error="LeaseLostError('...')")
    verdict = lost.verdict()
    assert rules(verdict) == {"honest-lock-lost"}, verdict.summary()
    assert "the bystander did not keep its lock: LeaseLostError" in verdict.violations[0].message
    assert verdict.stats["tenant"]["bystander_kept"] is False


def test_too_few_probes_cannot_pass() -> None:
    b = tenant_build()
    phases(b, 0.002, 0.002, n=MIN_SAMPLES - 2)
    verdict = b.verdict()
    assert rules(verdict) == {"honest-latency"}
    assert "too few probes" in verdict.violations[0].message
    bare = tenant_build()  # no phase at all (the nemesis never ran)
    assert rules(bare.verdict()) == {"honest-latency"}


def test_an_honest_session_lost_or_lock_lost_or_refused_is_caught() -> None:
    b = tenant_build()
    phases(b, 0.002, 0.002)
    b.note("w0c1", "session-lost", 12.0, session=4, error="SessionExpiredError('...')")
    b.hold("w1c0", 2, 7, 13.0, 14.0, outcome="lost")
    over_quota = "LimitExceededError(\"token 'honest' is over its quota sessions (9)\")"
    b.op("w2c0", "session-open", 15.0, 15.1, "info", done={"error": over_quota})
    b.op("w2c1", "probe", 16.0, 16.1, "info", done={"error": "UnavailableError('...')"})
    verdict = b.verdict()
    assert rules(verdict) == {"honest-session-lost", "honest-lock-lost", "honest-refused"}
    refused = [v for v in verdict.violations if v.rule == "honest-refused"]
    assert len(refused) == 2, verdict.summary()


def test_operations_ended_by_the_workers_stop_are_not_refusals() -> None:
    b = tenant_build()
    phases(b, 0.002, 0.002)
    b.op("w0c0", "probe", 39.0, 39.5, "info", done={"error": "stopped"})
    b.op("w0c1", "acquire", 39.0, 39.5, "info", key="m1", done={"error": "stopped"})
    verdict = b.verdict(stop=40.0)
    assert verdict.ok, verdict.summary()


def test_other_scenarios_are_not_judged_by_these_rules() -> None:
    b = Build()  # params without tokens: a crash run, say, where sessions are lost
    b.note("w0c1", "session-lost", 12.0, session=4, error="SessionExpiredError('...')")
    verdict = b.verdict()
    assert not rules(verdict)
    assert "tenant" not in verdict.stats


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 0.99) == 99.0
    assert percentile(values, 0.5) == 50.0
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([], 0.99) == 0.0


def test_refusals_are_named_by_their_quota_or_limit() -> None:
    quota = LimitExceededError("token 'mallory' is over its quota data_bytes (2097152)")
    assert refusal_name(quota) == "data_bytes"
    budget = LimitExceededError("the server's memory budget (1000000 bytes) is used up")
    assert refusal_name(budget) == "memory_budget"
    assert refusal_name(LimitExceededError("max_nodes (10000) reached")) == "max_nodes"


def test_the_servers_quota_refusals_are_read_from_its_metrics() -> None:
    text = (
        "# HELP tenure_quota_refusals_total ...\n"
        "# TYPE tenure_quota_refusals_total counter\n"
        'tenure_quota_refusals_total{quota="sessions",token="reader"} 40.0\n'
        'tenure_quota_refusals_total{token="mallory",quota="data_bytes"} 3.0\n'
        'tenure_quota_refusals_total{quota="nodes",token="mallory"} 0.0\n'
        'tenure_requests_total{command="acquire",result="ok"} 9.0\n'
    )
    assert quota_refusals(text) == {"sessions reader": 40, "data_bytes mallory": 3}
    assert quota_refusals("tenure_requests_total 1.0\n") == {}


def test_the_report_shows_the_tenants_numbers() -> None:
    b = tenant_build()
    phases(b, 0.002, 0.004)
    b.note("tenant", "abuse", 15.0, abuse="sessions", phase=0, done=3,
           refused={"sessions": 2}, failed={})  # fmt: skip
    b.note("tenant", "server-memory", 40.0, peak_kib=102400, before_kib=51200, rss_kib=6000)
    b.note("tenant", "quota-metrics", 40.0, refusals={"sessions mallory": 2}, served=True)
    verdict = b.verdict()
    result = Result("tenant", 3.0, 8, 2, verdict.stats, [], 0)
    page = render([result], "2026-11-25 04:00 UTC", "abc1234")
    assert "p99 2.0 ms" in page
    assert "p99 4.0 ms" in page
    assert "honest probes over 500 ms: 0 without the tenant, 0 with it" in page
    assert "peak 100.0 MiB" in page
    assert "sessions 2; the server's tenure_quota_refusals_total: sessions mallory 2" in page
    assert "sessions: 3 answered, refused sessions 2" in page
    assert TENANT_NOTES in page
