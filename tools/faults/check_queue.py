"""Checker rule for first-come first-served under faults (see docs/reliability.md).

What a client can observe of the server's queue is ``describe(waiters=True)``:
the observer records, many times a second, each mutex's owners and its waiters
in the server's queue order. Each listed waiter (a session) is matched to the
one acquire of that session on that key that was pending during the describe
(invoked before it returned, not completed before it was sent). Then:

* ``fifo``: of two matched waiters that were both granted, the one ahead in the
  queue got the smaller token (tokens follow grant order, so it was served
  first); and every granted waiter's token exceeds every token the snapshot
  lists as owning the key.

Waiters whose acquire failed (their session ended: expired or closed), or never
completed, are left out: FIFO holds "except where a session ended". A waiter
that cannot be matched to exactly one acquire is skipped and counted. What is
not checked: requests that arrived and were granted between two snapshots (the
queue was never seen with them in it).
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass

from tools.faults.check_locks import Violation
from tools.faults.history import History, Op


@dataclass
class QueueStats:
    """How much the FIFO rule saw."""

    snapshots: int = 0
    pairs: int = 0
    skipped: int = 0


def _pending_during(ops: list[Op], starts: list[float], start: float, end: float) -> list[Op]:
    # A session's acquires of one key run one after another (its gate), so only the
    # last two invoked before ``end`` can still have been pending at ``start``.
    last = bisect.bisect_right(starts, end)
    return [op for op in ops[max(0, last - 2) : last] if op.t1 is None or op.t1 >= start]


def check_fifo(history: History) -> tuple[list[Violation], QueueStats]:
    """The ``fifo`` rule (module docstring)."""
    acquires: dict[tuple[int | None, str | None], list[Op]] = {}
    for op in history.of_kind("acquire"):
        acquires.setdefault((op.session, op.key), []).append(op)
    starts = {key: [op.t0 for op in ops] for key, ops in acquires.items()}
    stats = QueueStats()
    seen: set[tuple[tuple[str, int], tuple[str, int]]] = set()
    violations = []
    for snapshot in history.of_kind("snapshot"):
        if snapshot.outcome != "ok" or snapshot.t1 is None or not snapshot.value["waiters"]:
            continue
        stats.snapshots += 1
        queue: list[Op] = []
        for session in snapshot.value["waiters"]:
            key = (session, snapshot.key)
            found = _pending_during(
                acquires.get(key, []), starts.get(key, []), snapshot.t0, snapshot.t1
            )
            if len(found) != 1:
                stats.skipped += 1
                continue
            if found[0].outcome == "ok" and found[0].token is not None:
                queue.append(found[0])
        owned = [token for _session, token in snapshot.value["owners"]]
        if owned and queue and min(op.token or 0 for op in queue) <= max(owned):
            first = min(queue, key=lambda op: op.token or 0)
            violations.append(
                Violation(
                    "fifo",
                    f"{snapshot.key}: {first.process} queued behind the owner with token "
                    f"{max(owned)} was granted the smaller token {first.token}",
                    snapshot.t0,
                )
            )
        for ahead, behind in itertools.pairwise(queue):
            stats.pairs += 1
            pair = ((ahead.process, ahead.op_id), (behind.process, behind.op_id))
            if (ahead.token or 0) < (behind.token or 0) or pair in seen:
                continue
            seen.add(pair)
            violations.append(
                Violation(
                    "fifo",
                    f"{snapshot.key}: {behind.process} (token {behind.token}) was served "
                    f"before {ahead.process} (token {ahead.token}), which was ahead of it "
                    "in the queue",
                    snapshot.t0,
                )
            )
    return violations, stats
