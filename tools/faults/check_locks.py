"""Checker rules for mutual exclusion and fencing tokens (see docs/reliability.md).

Times are the history's (one monotonic clock for every process). A critical
section is the interval from the moment its client saw the grant (the
``acquire`` completed; the server granted before that) to the moment its body
ended (the release is sent only after that; a lost section ends when the loss
error reached the client). That interval lies inside the server's own hold, so
two sections that overlap are two bodies that really ran at once.

* ``overlap``: two sections of one mutex overlap, and the earlier holder (the
  lower token) was not told of its loss with its body cancelled (outcome
  ``lost``). A paused or partitioned holder may overlap the next one (no lease can
  stop a paused process) but only if tenure then cancels its body with the loss.
* ``loss-not-cancelled``: a section whose lease was lost while its body ran, and
  whose body still ran to its end (promise 5).
* ``token-order``: a grant completed before another acquire of the same key was
  invoked has the larger token (tokens must grow in real-time order, across
  restarts).
* ``token-reuse``: two grants carry the same token.
* ``fenced-write-refused``: the fenced resource refused a write of a holder that
  was never told of a loss: someone with a higher token wrote during its hold
  (an overlap, or tokens that went backwards).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Final

from tools.faults.history import History, Op

#: Outcomes of a section that ended with the body running to its end or stopped.
NOT_LOST: Final = frozenset(
    {"released", "lost-not-cancelled", "lost-after-body", "release-failed", "info"}
)


@dataclass(frozen=True)
class Violation:
    """One broken rule: its name, what happened, and when (history time)."""

    rule: str
    message: str
    t: float


@dataclass(frozen=True)
class Section:
    """A critical section: from the grant seen to the body's end (see the module)."""

    op: Op
    start: float
    end: float

    @property
    def token(self) -> int:
        """The section's fencing token."""
        assert self.op.token is not None
        return self.op.token

    def describe(self) -> str:
        """Who held what, and how it ended."""
        return (
            f"{self.op.process} (session {self.op.session}, token {self.token}, "
            f"{self.op.outcome or 'pending'})"
        )


def sections(history: History, until: float) -> list[Section]:
    """The critical sections of ``history``; one still open ends at ``until``."""
    found = []
    for op in history.of_kind("section"):
        if op.token is None or op.key is None:
            continue
        end = op.t1 if op.t1 is not None else until
        found.append(Section(op, op.t0, end))
    return found


def check_overlap(found: list[Section]) -> list[Violation]:
    """The ``overlap`` rule (module docstring), per key, in one sweep."""
    violations = []
    by_key: dict[str, list[Section]] = {}
    for section in found:
        by_key.setdefault(section.op.key or "", []).append(section)
    for key, group in by_key.items():
        group.sort(key=lambda s: s.start)
        active: list[Section] = []
        for section in group:
            active = [a for a in active if a.end > section.start]
            for other in active:
                if other.token == section.token:
                    continue  # token-reuse reports it
                earlier = min(other, section, key=lambda s: s.token)
                if earlier.op.outcome != "lost":
                    later = section if earlier is other else other
                    overlap = min(other.end, section.end) - section.start
                    violations.append(
                        Violation(
                            "overlap",
                            f"{key}: {earlier.describe()} and {later.describe()} held it at "
                            f"once for {overlap:.3f}s, and the earlier holder's body was not "
                            "cancelled by a loss",
                            section.start,
                        )
                    )
            active.append(section)
    return violations


def check_loss_cancels(found: list[Section]) -> list[Violation]:
    """The ``loss-not-cancelled`` rule."""
    return [
        Violation(
            "loss-not-cancelled",
            f"{s.op.key}: {s.describe()}: the lease was lost ({s.op.error}) but the body "
            "ran to its end",
            s.end,
        )
        for s in found
        if s.op.outcome == "lost-not-cancelled"
    ]


def check_tokens(history: History) -> list[Violation]:
    """The ``token-order`` and ``token-reuse`` rules, over the granted acquires."""
    granted = [
        op
        for op in history.of_kind("acquire")
        if op.outcome == "ok" and op.token is not None and op.t1 is not None
    ]
    violations = []
    owner: dict[int, Op] = {}
    for op in granted:
        assert op.token is not None
        first = owner.setdefault(op.token, op)
        if first is not op:
            violations.append(
                Violation(
                    "token-reuse",
                    f"token {op.token} granted twice: to {first.process} on {first.key} "
                    f"and to {op.process} on {op.key}",
                    op.t0,
                )
            )
    by_key: dict[str, list[Op]] = {}
    for op in granted:
        by_key.setdefault(op.key or "", []).append(op)
    for key, ops in by_key.items():
        done = sorted(ops, key=lambda op: op.t1 or 0.0)
        ends = [op.t1 or 0.0 for op in done]
        best: list[Op] = []  # best[i]: the op with the highest token among done[: i + 1]
        for op in done:
            best.append(op if not best or (op.token or 0) > (best[-1].token or 0) else best[-1])
        for op in ops:
            count = bisect.bisect_left(ends, op.t0)  # grants seen before op was invoked
            if count and (best[count - 1].token or 0) >= (op.token or 0):
                earlier = best[count - 1]
                violations.append(
                    Violation(
                        "token-order",
                        f"{key}: {op.process} was granted token {op.token} after "
                        f"{earlier.process} had been granted token {earlier.token}",
                        op.t1 or op.t0,
                    )
                )
    return violations


def check_fenced_writes(history: History) -> tuple[list[Violation], int]:
    """The ``fenced-write-refused`` rule; also how many stale writes were refused rightly."""
    outcome = {(op.process, op.op_id): op for op in history.of_kind("section")}
    violations = []
    stale = 0
    for write in history.of_kind("write"):
        if write.outcome != "rejected":
            continue
        section = outcome.get((write.process, int(write.fields.get("section", -1))))
        if section is not None and section.outcome == "lost":
            stale += 1  # a stale holder, refused: fencing at work
            continue
        how = "pending" if section is None else (section.outcome or "pending")
        violations.append(
            Violation(
                "fenced-write-refused",
                f"{write.key}: the resource refused token {write.token} of {write.process}, "
                f"whose section ended {how} (never told of a loss)",
                write.t0,
            )
        )
    return violations, stale
