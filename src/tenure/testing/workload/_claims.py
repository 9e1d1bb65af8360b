"""Checking the workload's claims against the promises with time in them.

A claim (``session.claim(name, at_least, at_most)``, docs/recipes.md "Claims") is
granted at some instant ``g`` between its call and its answer, and ends, by the
store's clock, at ``g + at_most``, or, released at ``p``, at the later of ``p`` and
``g + at_least`` (if that comes before ``g + at_most``). Downtime and stalls of the
store only make it last longer in real time (docs/guarantees.md 4 and 6e), and its
clock runs at a rate within :data:`RATE_SLACK` of the recording clock's, so each
granted claim ends no earlier than

* ``called + at_most * (1 - RATE_SLACK)`` if no release of it was ever sent,
* else the earlier of that and the later of ``called + at_least * (1 - RATE_SLACK)``
  and the first release's call,

where ``called`` is when its claim was called. (A store's clock that jumps forward
with no time passing is outside this: a tenure server counts the first quarter second
of a gap in its clock as time that passed, docs/guarantees.md 6e.) The rules, over
the events of the ``claim`` files (:mod:`tenure.testing.workload._claim_steps` says
what is recorded):

* ``claims:exclusive``: two claims of one name both granted whose lives cannot be
  put one after the other: neither ends, at the earliest, before the other's answer
  (the latest it can have been granted). Two holders of one slot at once, or a
  claim that ended before its ``at_least`` (a late replica would run the slot again);
* ``claims:token``: a claim answered before another was called has a smaller
  token (tokens are the node's fencing tokens: greater than every earlier grant's);
* ``claims:refused``: a claim answered None (claimed already) with no claim of that
  name called before the answer that could explain it (granted, or its outcome
  unknown).

An upper bound (a claim over by ``at_most``) is not checked: a store's downtime may
lengthen a claim without bound in real time.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["RATE_SLACK", "check_claims"]

#: How much slower than the recording clock a store's clock may run (the
#: simulation's hosts' rates are within 1%: :data:`~tenure.testing.sim._clocks.MAX_DRIFT`).
RATE_SLACK: Final = 0.01
#: Violations shown per rule.
SHOWN: Final = 3


@dataclass
class _Claim:
    """One claim call and what is known of it (times in seconds)."""

    process: str
    key: str
    called: float
    at_least: float
    at_most: float
    outcome: str | None = None  # ok, fail, info; None: never answered
    answered: float | None = None
    token: int | None = None
    claim_id: str | None = None
    released: float | None = None  # when its first release was called

    def earliest_end(self, slack: float) -> float:
        """The earliest its life can end (module docstring), granted at ``called``."""
        by_most = self.called + self.at_most * (1 - slack)
        if self.released is None:
            return by_most
        return min(by_most, max(self.released, self.called + self.at_least * (1 - slack)))

    def __str__(self) -> str:
        return (
            f"{self.process} (called {self.called:.6f}s, granted by {self.answered:.6f}s, "
            f"token {self.token}, at_least {self.at_least:g}s, at_most {self.at_most:g}s"
            + (f", released from {self.released:.6f}s)" if self.released is not None else ")")
        )


def check_claims(
    events: list[dict[str, Any]],
    *,
    rate_slack: float = RATE_SLACK,
) -> tuple[int, list[str]]:
    """How many claim operations were answered in ``events`` (one history of the
    ``claim`` files, in time order), and the violations of the module docstring's
    rules (at most :data:`SHOWN` of each)."""
    claims, answered = _claims(events)
    granted = [claim for claim in claims if claim.outcome == "ok"]
    found = (
        _not_exclusive(granted, rate_slack)[:SHOWN]
        + _tokens_out_of_order(granted)[:SHOWN]
        + _refused_alone(claims)[:SHOWN]
    )
    return answered, found


def _claims(events: list[dict[str, Any]]) -> tuple[list[_Claim], int]:
    """Each claim call with its outcome and its first release's call; how many
    operations (claims and releases) were answered."""
    pending: dict[str, _Claim | None] = {}  # by process: its claim, None for a release
    claims: list[_Claim] = []
    releases: dict[str, float] = {}  # claim id: its first release's call
    answered = 0
    for event in events:
        process, kind, at = str(event["process"]), event["type"], int(event["time"]) / 1e9
        if kind == "invoke":
            if event["f"] == "claim":
                at_least, at_most = event["value"]
                claim = _Claim(process, str(event["key"]), at, float(at_least), float(at_most))
                claims.append(claim)
                pending[process] = claim
            else:
                releases.setdefault(str(event["value"]), at)
                pending[process] = None
            continue
        answered += kind in ("ok", "fail")
        call = pending.pop(process, None)
        if call is None:
            continue
        call.outcome, call.answered = kind, at
        if kind == "ok":
            token, claim_id = event["value"]
            call.token, call.claim_id = int(token), str(claim_id)
    for claim in claims:
        if claim.claim_id is not None:
            claim.released = releases.get(claim.claim_id)
    return claims, answered


def _not_exclusive(granted: list[_Claim], slack: float) -> list[str]:
    found = []
    by_call = sorted(granted, key=lambda claim: claim.called)
    for number, first in enumerate(by_call):
        first_end = first.earliest_end(slack)
        for second in by_call[number + 1 :]:
            if second.called >= first_end:
                break  # (this one, and every later call, answered after first's end)
            assert first.answered is not None
            assert second.answered is not None
            if second.key != first.key or first_end <= second.answered:
                continue  # first, then second
            if second.earliest_end(slack) <= first.answered:
                continue  # second, then first
            found.append(
                f"claims:exclusive: {first.key!r}: {first} and {second} were both granted, "
                "and neither can have ended before the other's grant"
            )
    return found


def _tokens_out_of_order(granted: list[_Claim]) -> list[str]:
    found = []
    by_answer = sorted(granted, key=lambda claim: (claim.answered, claim.called))
    answers = [claim.answered or 0.0 for claim in by_answer]
    greatest: list[_Claim] = []  # of by_answer[:n + 1], the one of the greatest token
    for claim in by_answer:
        best = greatest[-1] if greatest else claim
        greatest.append(claim if (claim.token or 0) > (best.token or 0) else best)
    for after in granted:
        assert after.token is not None
        place = bisect.bisect_left(answers, after.called)  # (those answered before its call)
        before = greatest[place - 1] if place else None
        if before is not None and before.token is not None and before.token >= after.token:
            found.append(
                f"claims:token: {after} was granted a token no greater than {before}'s, "
                "answered before it was called"
            )
    return found


def _refused_alone(claims: list[_Claim]) -> list[str]:
    found = []
    for refused in claims:
        if refused.outcome != "fail":
            continue
        assert refused.answered is not None
        if not any(
            other is not refused
            and other.key == refused.key
            and other.outcome != "fail"
            and other.called <= refused.answered
            for other in claims
        ):
            found.append(
                f"claims:refused: {refused.key!r}: {refused.process}'s claim (called "
                f"{refused.called:.6f}s) was refused, and no claim of it that could hold "
                "it had been called by its answer"
            )
    return found
