"""``top``: the most contended names of a node, or of every node (TopNames).

Made from the kept names of the statistics per name (:mod:`tenure._core.name_stats`)
and, for what is true now (the queue, the holders, the longest hold), from the
state. Only kept names are looked at: at most the sketch's capacity, whatever the
number of names (a name never queued on is not contended, and is not kept).
"""

from __future__ import annotations

import heapq
import math

from tenure._core.checks import check_page_limit
from tenure._core.name_stats import BUCKETS, SLOT_SECONDS, NameEntry, bucket_top
from tenure._core.state import EngineState
from tenure._core.top_report import SORTS, TOP_WINDOWS, NameStat, TopReport
from tenure.errors import InvalidArgumentError

__all__ = ["merge_reports", "top"]


def _measure(stat: NameStat, sort: str) -> float:
    """What ``sort`` sorts ``stat`` by (largest first)."""
    if sort == "queue":
        return float(stat.queue)
    if sort == "hold":
        return -1.0 if stat.longest_hold is None else stat.longest_hold
    if sort == "grants":
        return float(stat.grants)
    if sort == "timeouts":
        return float(stat.timeouts)
    return stat.wait_seconds


def top(
    state: EngineState, node: str, window: float, sort: str, limit: int, now: float
) -> TopReport:
    """The ``limit`` kept names of ``node`` (``""``: every node) with the most of
    ``sort`` over the last ``window`` seconds (one of :data:`TOP_WINDOWS`).
    NotFoundError for a node that does not exist; InvalidArgumentError for a window,
    sort or limit out of range."""
    if node:
        state.lookup_node(node)
    if isinstance(window, bool) or not isinstance(window, int | float) or window not in TOP_WINDOWS:
        windows = ", ".join(f"{w:g}" for w in TOP_WINDOWS)
        raise InvalidArgumentError(f"window must be one of {windows} seconds, got {window!r}")
    if sort not in SORTS:
        raise InvalidArgumentError(f"sort must be one of {', '.join(SORTS)}, got {sort!r}")
    limit = check_page_limit(limit)
    stats = state.name_stats
    number = int(now // SLOT_SECONDS)
    slots = math.ceil(window / SLOT_SECONDS)
    if node:
        entries = list(stats.nodes.get(node, {}).values())
    else:
        entries = [entry for names in stats.nodes.values() for entry in names.values()]

    # Every kept name is looked at, but only for what it is sorted by: a row is made
    # of the ``limit`` first alone (a sum over a window's slots each, not a report).
    def order(entry: NameEntry) -> tuple[float, float, str, str]:
        recent = entry.in_window(number, slots)
        wait = sum(slot.wait for slot in recent)
        if sort == "wait":
            measure = wait
        elif sort == "grants":
            measure = float(sum(slot.grants for slot in recent))
        elif sort == "timeouts":
            measure = float(sum(slot.timeouts for slot in recent))
        else:
            queue, _, held = _now(state, entry, now)
            measure = float(queue) if sort == "queue" else -1.0 if held is None else held
        return -measure, -wait, entry.node, entry.name

    chosen = heapq.nsmallest(limit, entries, key=order)
    rows = [_stat(state, entry, number, slots, now) for entry in chosen]
    _sort(rows, sort)  # (the same order, from the rows: as merge_reports sorts them)
    return TopReport(
        node, float(window), sort, tuple(rows), stats.kept, stats.capacity, stats.evicted
    )


def merge_reports(reports: list[TopReport], limit: int) -> TopReport:
    """One report of several servers' (a sharded store's, each of its own nodes), of
    the same node, window and sort: their names sorted together, the first ``limit``;
    their sketches' counts added."""
    first = reports[0]
    rows = [stat for report in reports for stat in report.names]
    _sort(rows, first.sort)
    return TopReport(
        first.node,
        first.window,
        first.sort,
        tuple(rows[:limit]),
        sum(report.kept for report in reports),
        sum(report.capacity for report in reports),
        sum(report.evicted for report in reports),
    )


def _sort(rows: list[NameStat], sort: str) -> None:
    """Largest ``sort`` first; then the most waited, then by node and name."""
    rows.sort(key=lambda s: (-_measure(s, sort), -s.wait_seconds, s.node, s.name))


def _stat(state: EngineState, entry: NameEntry, number: int, slots: int, now: float) -> NameStat:
    """What ``entry`` says over its last ``slots`` slots, and its name's state now."""
    recent = entry.in_window(number, slots)
    queue, holders, longest = _now(state, entry, now)
    return NameStat(
        entry.node,
        entry.name,
        sum(slot.wait for slot in recent),
        sum(slot.queued for slot in recent),
        sum(slot.grants for slot in recent),
        sum(slot.timeouts for slot in recent),
        sum(slot.cancelled for slot in recent),
        sum(slot.losses for slot in recent),
        queue,
        holders,
        longest,
        _percentile(entry.wait_buckets, 0.5),
        _percentile(entry.wait_buckets, 0.99),
        _percentile(entry.hold_buckets, 0.5),
        _percentile(entry.hold_buckets, 0.99),
        max(0.0, now - entry.since),
        entry.error,
    )


def _now(state: EngineState, entry: NameEntry, now: float) -> tuple[int, int, float | None]:
    """``entry``'s name now: its queue, its holders, its longest hold (None: not held)."""
    node = state.nodes.get(entry.node)
    sem = None if node is None else node.semaphores.get(entry.name)
    if sem is None:
        return 0, 0, None
    owners = sem.owners
    # (Owners are in grant order: the first is the oldest hold, however many.)
    oldest = next(iter(owners.values()), None)
    return sem.queue_length(), len(owners), None if oldest is None else max(0.0, now - oldest.since)


def _percentile(buckets: list[int], q: float) -> float | None:
    """The upper bound of the bucket where the ``q`` quantile of ``buckets`` falls."""
    total = sum(buckets)
    if not total:
        return None
    wanted = q * total
    seen = 0
    for bucket in range(BUCKETS):
        seen += buckets[bucket]
        if seen >= wanted:
            return bucket_top(bucket)
    return bucket_top(BUCKETS - 1)
