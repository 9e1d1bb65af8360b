"""The soak (tools/faults/soak.py): its rule of boundedness, and a short run end to end.

The long run (``scripts/faults --soak 2``) is in docs/reliability.md; here the rule
is held to what it must catch (a leak, slow or reset by restarts) and let pass (a
flat line, a sawtooth), and a run of seconds checks that every load kind works
against a real server through every fault kind, and that the report is written.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tools.faults import soak_report
from tools.faults.soak import Sample, Soak, SoakRun
from tools.faults.soak_load import KINDS

pytestmark = pytest.mark.timeout(180)

MIB = 1024  # RSS is in KiB


def _run(rss: list[float], lives: list[int] | None = None, every: float = 10.0) -> SoakRun:
    lives = lives or [1] * len(rss)
    samples = [
        Sample(
            t=n * every,
            life=life,
            rss_kib=int(value),
            fds=40,
            threads=13,
            log_bytes=2**20,
            snapshot_bytes=4096,
            data_bytes=2**20,
            connections=20,
            gauges={"sessions": 30},
            ops=dict.fromkeys(KINDS, n * 10),
        )
        for n, (value, life) in enumerate(zip(rss, lives, strict=True))
    ]
    return SoakRun(seconds=len(rss) * every, settings={"sample_every": every}, samples=samples)


def _rss_checks(run: SoakRun) -> list[soak_report.Check]:
    return [c for c in soak_report.judge(run) if c.quantity == "rss_kib"]


def test_a_flat_line_and_a_sawtooth_are_bounded() -> None:
    hour = 360  # samples of 10 s
    flat = _run([80 * MIB] * hour)
    saw = _run([80 * MIB + (n % 60) * 0.3 * MIB for n in range(hour)])
    for run in (flat, saw):
        checks = soak_report.judge(run)
        assert checks
        assert all(c.ok for c in checks), [c for c in checks if not c.ok]
        assert soak_report.stalled(run) == []


def test_a_slow_leak_is_not_bounded() -> None:
    # 20 MiB an hour on 80 MiB: past +10 % and 4 MiB between the thirds of 2 hours.
    leak = _run([80 * MIB + n * (20 * MIB / 360) for n in range(720)])
    [check] = _rss_checks(leak)
    assert not check.ok
    assert math.isclose(check.per_hour, 20 * MIB, rel_tol=0.01)


def test_a_leak_that_each_restart_resets_is_caught_per_life() -> None:
    # Three lives of 40 min, each growing 30 MiB from 80: every life peaks alike,
    # so only the per-life rule sees it.
    per_life = 240
    rss = [80 * MIB + (n % per_life) * (30 * MIB / per_life) for n in range(3 * per_life)]
    lives = [1 + n // per_life for n in range(3 * per_life)]
    checks = _rss_checks(_run(rss, lives))
    assert [c.stretch for c in checks] == ["life 1", "life 2", "life 3"]
    assert not any(c.ok for c in checks)


def test_a_load_kind_that_stopped_is_named() -> None:
    run = _run([80 * MIB] * 90)
    for sample in run.samples[60:]:
        sample.ops["ydb"] = run.samples[59].ops["ydb"]
    assert soak_report.stalled(run) == ["ydb"]


def test_a_short_soak_runs_every_load_and_fault_and_writes_its_report(tmp_path: Path) -> None:
    # The time gives two turns; the server's pause and crash come after it, as owed
    # (the rule that keeps a loaded machine's short run testing every fault).
    soak = Soak(tmp_path / "work", seconds=8.0, fault_every=3.0, crash_every=60.0, sample_every=1.0)
    run = soak.execute()
    assert [f.kind for f in run.faults] == [
        "client-kill",
        "client-pause",
        "server-pause",
        "server-crash",
    ]
    assert all(f.t >= 8.0 for f in run.faults[2:])
    assert soak.server.exit_code() is not None  # stopped
    assert {f.kind for f in run.faults} == {
        "client-kill",
        "client-pause",
        "server-pause",
        "server-crash",
    }
    assert {s.life for s in run.samples} == {1, 2}
    last = run.samples[-1]
    assert all(s.rss_kib > 0 and s.fds > 0 and s.threads > 0 for s in run.samples)
    assert last.log_bytes > 0
    assert last.gauges["sessions"] > 0
    assert last.connections > 0
    assert all(last.ops[kind] > 0 for kind in KINDS), last.ops
    assert soak_report.stalled(run) == [], [s.ops for s in run.samples[-12:]]
    page = tmp_path / "soak.md"
    soak_report.write(run, tmp_path, "today", "abc1234", page_path=page)
    text = page.read_text()
    assert "**Verdict: bounded.**" in text
    assert "![the soak's samples](soak.png)" in text
    assert (tmp_path / "soak.png").read_bytes().startswith(b"\x89PNG")
    again = SoakRun.load(tmp_path / "soak.json")
    assert again.samples == run.samples
    assert again.faults == run.faults
