"""The checkers against real mutants: tenure with one planted bug must fail the run.

Each mutant (:mod:`tools.faults.mutant`) is started through its wrapper module, in
a short run of the scenario that makes its bug bite, and the rule that claims to
catch it must be among the violations; a double grant and a token regression must
also be caught by lincheck's mutex model (``linearizable:mutex``), whose witness
file reproduces the verdict; a compare-and-set answered but not applied, by the
``linearizable`` scenario's counter and register models; a stale read of YDB's face,
by its register model, through YDB's SDK (the YDB clients' recording of holds and
losses is proven against a face in memory with a planted fault: test_lin_ydb.py).
(Synthetic histories test each rule on its own in test_checkers.py, the conversion to
lincheck's histories in test_lin_events.py.)
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tenure.testing import lincheck
from tools.faults.harness import run_scenario
from tools.faults.lin_harness import run_linearizable
from tools.faults.mutant import launcher
from tools.faults.scenarios import SCENARIOS, Scenario
from tools.faults.target import TenureTarget

pytestmark = pytest.mark.timeout(180)

#: A quiet run: the workload alone, no nemesis.
QUIET = Scenario("quiet", "no faults", (), workers=3, short_seconds=6.0)


async def _run(
    scenario: Scenario,
    tmp_path: Path,
    *,
    server: str | None = None,
    client: str | None = None,
    bound: float | None = None,
) -> set[str]:
    target = TenureTarget(
        tmp_path / "data",
        idle_timeout=scenario.idle_timeout,
        launcher=launcher(server) if server else ("-m", "tenure"),
    )
    worker = (*launcher(client), "worker") if client else ("-m", "tools.faults.worker")
    try:
        outcome = await run_scenario(
            scenario,
            target,
            tmp_path,
            seconds=scenario.short_seconds,
            seed=5,
            bound=bound,
            worker_launcher=worker,
        )
    finally:
        target.kill()
    return outcome.verdict.rules()


def _reproduced(tmp_path: Path, model: str) -> None:
    """The run's lincheck history of ``model`` is not linearizable when read back from
    its file (as ``python -m tenure.testing.lincheck --model MODEL FILE`` reads it), and
    the witness was written beside it."""
    found = lincheck.check(lincheck.read_history(tmp_path / "lincheck" / f"{model}.jsonl"), model)
    assert found.verdict == "not linearizable", found.explain()
    assert "could not linearize" in (tmp_path / "lincheck" / f"{model}.txt").read_text()


async def test_a_grant_beyond_the_limit_is_caught_as_an_overlap(tmp_path: Path) -> None:
    rules = await _run(replace(QUIET, keys=1), tmp_path, server="limit")
    assert {"overlap", "linearizable:mutex"} <= rules, rules
    _reproduced(tmp_path, "mutex")


async def test_a_fencing_counter_lost_in_a_restart_is_caught(tmp_path: Path) -> None:
    # The crash nemesis kills the server 3-8 s into the run: 12 s sees one restart.
    crash = Scenario("crash", "kill -9", ("crash",), workers=3, keys=1, short_seconds=12.0)
    rules = await _run(crash, tmp_path, server="token-reset")
    assert {"token-order", "fenced-write-refused", "linearizable:mutex"} <= rules, rules
    _reproduced(tmp_path, "mutex")


async def test_a_dropped_push_is_caught_as_a_hang(tmp_path: Path) -> None:
    # No faults at all: the mutant alone loses grants. A short bound (8 s, far
    # beyond any wait of a quiet run) keeps the test short.
    rules = await _run(QUIET, tmp_path, server="drop-push", bound=8.0)
    assert rules & {"hang", "no-progress"}, rules


async def test_a_loss_that_does_not_cancel_the_body_is_caught(tmp_path: Path) -> None:
    # Long holds, and holders paused past their window: each resumes mid-body
    # after its session expired on the server.
    pause = Scenario(
        "pause", "SIGSTOP of holders", ("pause",), workers=2, keys=1, window=2.0,
        idle_timeout=2.0, hold=(1.0, 1.5), short_seconds=14.0,
    )  # fmt: skip
    assert "loss-not-cancelled" in await _run(pause, tmp_path, client="no-cancel")


async def test_a_swap_answered_but_not_applied_is_caught_by_the_counter_and_register_models(
    tmp_path: Path,
) -> None:
    # No faults: the mutant alone loses adds and writes, which no rule but lincheck's
    # sees (the suite's own workload never swaps).
    scenario = replace(SCENARIOS["linearizable"], nemeses=(), workers=2, short_seconds=8.0)
    target = TenureTarget(
        tmp_path / "data", idle_timeout=scenario.idle_timeout, launcher=launcher("lost-swap")
    )
    try:
        outcome = await run_linearizable(
            scenario, target, tmp_path, seconds=scenario.short_seconds, seed=5
        )
    finally:
        target.kill()
    rules = outcome.verdict.rules()
    assert {"linearizable:counter", "linearizable:register"} <= rules, rules
    _reproduced(tmp_path, "counter")


async def test_a_stale_read_of_the_ydb_face_is_caught_by_the_register_model(
    tmp_path: Path,
) -> None:
    # No faults: YDB's clients (its SDK, tools/faults/lin_ydb.py) read the registers the
    # native clients write, and the mutant answers them with data up to three seconds old.
    scenario = replace(SCENARIOS["linearizable"], nemeses=(), workers=2, short_seconds=8.0)
    target = TenureTarget(
        tmp_path / "data", idle_timeout=scenario.idle_timeout, launcher=launcher("ydb-stale-read")
    )
    try:
        outcome = await run_linearizable(
            scenario, target, tmp_path, seconds=scenario.short_seconds, seed=5
        )
    finally:
        target.kill()
    assert "linearizable:register" in outcome.verdict.rules(), outcome.verdict.summary()
    _reproduced(tmp_path, "register")
    # The read that could not be linearized is one through YDB's face (its process: .y).
    stuck = (tmp_path / "lincheck" / "register.txt").read_text()
    assert ".y" in stuck.split("could not linearize")[1].splitlines()[0], stuck
