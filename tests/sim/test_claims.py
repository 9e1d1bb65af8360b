"""The claims' check (tenure.testing.workload.check_claims): histories written by hand
that break each rule, or keep to it at its edge, and a simulated run's claims."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

from tenure.testing.sim._run import SimOptions, run_seed
from tenure.testing.sim._verdicts import merged_histories
from tenure.testing.workload import CLAIM, RATE_SLACK, check_claims

NS = 1_000_000_000


class History:
    """Claim events, written as the workload's clients write them (times in seconds)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def _add(self, process: str, kind: str, f: str, value: Any, at: float) -> None:
        self.events.append(
            {
                "process": process,
                "type": kind,
                "f": f,
                "key": "slot",
                "value": value,
                "time": round(at * NS),
            }
        )

    def claim(
        self, process: str, called: float, answered: float, at_least: float, at_most: float,
        token: int | None = None, *, kind: str = "ok",
    ) -> str:  # fmt: skip
        """A claim call and its answer (``token`` None: refused, unless ``kind`` says)."""
        self._add(process, "invoke", "claim", [at_least, at_most], called)
        claim_id = f"id-{process}-{called}"
        if kind == "ok" and token is None:
            kind = "fail"
        value = [token, claim_id] if kind == "ok" else [at_least, at_most]
        self._add(process, kind, "claim", value, answered)
        return claim_id

    def release(self, process: str, claim_id: str, called: float, answered: float) -> None:
        self._add(process, "invoke", "release", claim_id, called)
        self._add(process, "ok", "release", [claim_id, True], answered)

    def check(self) -> list[str]:
        self.events.sort(key=lambda event: int(event["time"]))
        return check_claims(self.events)[1]


def rules(found: list[str]) -> set[str]:
    return {problem.split(":")[0] + ":" + problem.split(":")[1] for problem in found}


def test_claims_one_after_another_keep_every_rule() -> None:
    h = History()
    first = h.claim("a", 0.0, 0.01, at_least=0.2, at_most=1.0, token=1)
    h.release("a", first, 0.05, 0.06)  # early: it still holds until at_least
    h.claim("b", 0.1, 0.11, at_least=0.2, at_most=1.0)  # refused: the first holds
    h.claim("b", 0.2, 0.21, at_least=0.0, at_most=0.3, token=2)  # at_least after its call
    h.claim("c", 0.25, 0.26, at_least=0.1, at_most=0.5)  # refused
    h.claim("c", 0.5, 0.52, at_least=0.1, at_most=0.5, token=3)  # at_most ended b's
    assert h.check() == []
    assert check_claims(h.events)[0] == 6  # five claims and a release answered


def test_two_claims_held_at_once_break_exclusive() -> None:
    h = History()
    h.claim("a", 0.0, 0.01, at_least=0.1, at_most=1.0, token=1)
    h.claim("b", 0.5, 0.51, at_least=0.1, at_most=1.0, token=2)  # a's at_most not over
    assert rules(h.check()) == {"claims:exclusive"}


def test_a_release_that_ends_a_claim_before_its_at_least_breaks_exclusive() -> None:
    h = History()
    first = h.claim("a", 0.0, 0.01, at_least=0.3, at_most=1.0, token=1)
    h.release("a", first, 0.05, 0.06)
    # (granted 0.25 s after the first's call: its at_least was 0.3 s; the slack for the
    # clocks' rates is 1% of it)
    h.claim("b", 0.2, 0.25, at_least=0.0, at_most=1.0, token=2)
    found = h.check()
    assert rules(found) == {"claims:exclusive"}, found
    assert "'slot'" in found[0]
    assert "at_least 0.3s" in found[0]
    # At the edge of the slack it holds:
    edge = History()
    first = edge.claim("a", 0.0, 0.01, at_least=0.3, at_most=1.0, token=1)
    edge.release("a", first, 0.05, 0.06)
    edge.claim("b", 0.2, 0.3 * (1 - RATE_SLACK), at_least=0.0, at_most=1.0, token=2)
    assert edge.check() == []


def test_a_later_claim_with_a_smaller_token_breaks_token() -> None:
    h = History()
    h.claim("a", 0.0, 0.01, at_least=0.0, at_most=0.1, token=5)
    h.claim("b", 0.2, 0.21, at_least=0.0, at_most=0.1, token=4)
    assert rules(h.check()) == {"claims:token"}


def test_a_refusal_with_no_claim_to_explain_it_breaks_refused() -> None:
    h = History()
    h.claim("a", 0.0, 0.01, at_least=0.0, at_most=0.1)
    assert rules(h.check()) == {"claims:refused"}
    # A claim whose answer was lost may hold the name: it explains a refusal.
    h = History()
    h.claim("a", 0.0, 0.5, at_least=0.1, at_most=0.3, kind="info")
    h.claim("b", 0.1, 0.11, at_least=0.1, at_most=0.3)
    assert h.check() == []


def test_a_run_claims_its_slot_and_holds_each_rule(tmp_path: Path) -> None:
    options = SimOptions(3, minutes=0.5, clients=6)
    result = run_seed(options, tmp_path)
    assert result.ok, result.verdicts.violations
    events = merged_histories(tmp_path / "lin")[CLAIM]
    outcomes = Counter((e["f"], e["type"]) for e in events if e["type"] != "invoke")
    assert outcomes["claim", "ok"] > 5, outcomes
    assert outcomes["claim", "fail"] > 5, outcomes  # (one slot: claims meet)
    assert outcomes["release", "ok"] > 2, outcomes
    assert result.verdicts.operations[CLAIM] == sum(
        n for (_, kind), n in outcomes.items() if kind in ("ok", "fail")
    )
    assert run_seed(dataclasses.replace(options)).digest == result.digest
