"""Short mode: every scenario against a real ``tenure serve``, judged by every checker rule.

Each run is a few dozen seconds of faults (``Scenario.short_seconds``) plus the
heal phase; scripts/faults runs the same scenarios for ten minutes or more.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.conftest import require_tools
from tests.faults.harness import run_scenario
from tests.faults.scenarios import SCENARIOS
from tests.faults.target import TenureTarget

#: Generous: the faults, the heal phase (bounded by the liveness bound) and the stop.
pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_scenario_keeps_every_promise(name: str, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]
    require_tools(scenario)
    target = TenureTarget(tmp_path / "data", idle_timeout=scenario.idle_timeout)
    try:
        outcome = await run_scenario(
            scenario, target, tmp_path, seconds=scenario.short_seconds, seed=11
        )
    finally:
        target.kill()
    verdict = outcome.verdict
    assert verdict.ok, f"{verdict.summary()}\nstats: {verdict.stats}\nhistory: {tmp_path}"
    # Evidence that the faults happened and the work went on (a run that did nothing
    # would pass every rule).
    assert sum(verdict.stats["faults"].values()) > 0, verdict.stats
    assert verdict.stats["sections"] > 0, verdict.stats
    assert verdict.stats["register_reads"] > 0, verdict.stats
    if name == "crash":
        # The outage longer than the window: clients gave their sessions up.
        assert verdict.stats["faults"].get("outage", 0) > 0, verdict.stats
        assert verdict.stats["sessions_lost"] > 0, verdict.stats
    if name == "pause-clock":
        # A paused holder's write with its old token was refused by the resource.
        assert verdict.stats["stale_writes_refused"] > 0, verdict.stats
