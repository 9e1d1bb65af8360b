"""``tenure top [NODE]``: the most contended names, refreshed like top.

Each refresh asks the store for its statistics per name (``client.top``:
Capability.NAME_STATS, ``memory://`` and ``tenure://``): the names with the most
``--sort`` (the seconds waited, by default) over the last ``--window`` seconds (60 or
300). ``--once`` prints one snapshot; ``--json`` prints each as one JSON document per
line (:func:`report_json`). Without ``--once`` it refreshes every ``--interval``
seconds until ^C or ``--count`` snapshots: in place on a terminal, each snapshot
after the last into a pipe.
"""

from __future__ import annotations

import asyncio
import sys

import click
from rich.console import Group
from rich.live import Live
from rich.text import Text

from tenure._core.top_report import SORTS, TOP_PAGE, NameStat, TopReport
from tenure._core.values import MAX_PAGE
from tenure.cli import _render
from tenure.cli._common import (
    connect,
    json_option,
    print_json,
    run_until_interrupted,
    url_option,
)
from tenure.cli._status import Status

__all__ = ["report_json", "report_table", "top"]

#: The columns of the table, and what each shows of a NameStat.
_COLUMNS = (
    "node", "name", "waited", "queued", "grants", "timeouts", "cancelled", "lost",
    "queue", "holders", "longest hold", "wait p50/p99", "hold p50/p99",
)  # fmt: skip


@click.command()
@click.argument("node", required=False, default="")
@click.option(
    "--window",
    type=click.Choice(["60", "300"]),
    default="60",
    show_default=True,
    help="the seconds the counts are over",
)
@click.option(
    "--sort",
    type=click.Choice(SORTS),
    default="wait",
    show_default=True,
    help="wait: seconds waited; queue: requests waiting now; hold: the longest hold now; "
    "grants; timeouts",
)
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_PAGE),
    default=TOP_PAGE,
    show_default=True,
    metavar="N",
    help="names listed at most",
)
@click.option("--once", is_flag=True, help="print one snapshot and exit")
@click.option(
    "--interval",
    type=click.FloatRange(0.1, 3600),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="seconds between refreshes",
)
@click.option(
    "--count",
    "snapshots",
    type=click.IntRange(1),
    metavar="N",
    help="stop after N snapshots (default: until ^C)",
)
@json_option
@url_option
def top(
    node: str,
    window: str,
    sort: str,
    limit: int,
    once: bool,
    interval: float,
    snapshots: int | None,
    as_json: bool,
    url: str,
) -> int:
    """The most contended names of NODE (of every node without one): the most seconds
    waited (--sort) over the last minute (--window), each with its queued requests,
    grants, timeouts, cancelled waits, lost holds, queue, holders, longest hold and wait
    and hold percentiles. Refreshes every --interval seconds until ^C or --count
    snapshots; --once prints one."""
    if once:
        snapshots = 1
    seconds = float(window)

    async def main() -> int:
        async with connect(url, node=node or None) as client:
            report = await client.top(node, window=seconds, sort=sort, limit=limit)
            if as_json:
                print_json(report_json(report))
            if snapshots == 1:
                if not as_json:
                    _render.console().print(report_table(report))
                return Status.OK
            shown = 1
            if as_json:
                while snapshots is None or shown < snapshots:
                    await asyncio.sleep(interval)
                    report = await client.top(node, window=seconds, sort=sort, limit=limit)
                    print_json(report_json(report))
                    shown += 1
                return Status.OK
            console = _render.console()
            if not sys.stdout.isatty():  # (a pipe, a log: each snapshot after the last)
                console.print(report_table(report))
                sys.stdout.flush()
                while snapshots is None or shown < snapshots:
                    await asyncio.sleep(interval)
                    report = await client.top(node, window=seconds, sort=sort, limit=limit)
                    console.print(Text(""), report_table(report))
                    sys.stdout.flush()
                    shown += 1
                return Status.OK
            with Live(report_table(report), console=console, auto_refresh=False) as live:
                while snapshots is None or shown < snapshots:
                    await asyncio.sleep(interval)
                    report = await client.top(node, window=seconds, sort=sort, limit=limit)
                    live.update(report_table(report), refresh=True)
                    shown += 1
        return Status.OK

    return run_until_interrupted(main())


def report_json(report: TopReport) -> dict[str, object]:
    """The report as ``--json`` prints it: :class:`tenure.TopReport`'s fields, each
    name's as :class:`tenure.NameStat`'s."""
    return {
        "node": report.node or None,
        "window": report.window,
        "sort": report.sort,
        "names": [_stat_json(stat) for stat in report.names],
        "kept": report.kept,
        "capacity": report.capacity,
        "evicted": report.evicted,
    }


def _stat_json(stat: NameStat) -> dict[str, object]:
    return {
        "node": stat.node,
        "name": stat.name,
        "wait_seconds": stat.wait_seconds,
        "queued": stat.queued,
        "grants": stat.grants,
        "timeouts": stat.timeouts,
        "cancelled": stat.cancelled,
        "losses": stat.losses,
        "queue": stat.queue,
        "holders": stat.holders,
        "longest_hold": stat.longest_hold,
        "wait_p50": stat.wait_p50,
        "wait_p99": stat.wait_p99,
        "hold_p50": stat.hold_p50,
        "hold_p99": stat.hold_p99,
        "kept_for": stat.kept_for,
        "error": stat.error,
    }


def report_table(report: TopReport) -> Group:
    """A heading line and a row per name, as people read it."""
    where = f"node {report.node!r}" if report.node else "every node"
    heading = (
        f"the most contended names of {where}, by {report.sort}, over the last "
        f"{report.window:g}s ({report.kept} of at most {report.capacity} names kept; "
        f"{report.evicted} pushed out since the server started)"
    )
    rows = [
        [
            stat.node,
            stat.name,
            _render.duration_text(stat.wait_seconds),
            str(stat.queued),
            str(stat.grants),
            str(stat.timeouts),
            str(stat.cancelled),
            str(stat.losses),
            str(stat.queue),
            str(stat.holders),
            _render.duration_text(stat.longest_hold),
            _pair(stat.wait_p50, stat.wait_p99),
            _pair(stat.hold_p50, stat.hold_p99),
        ]
        for stat in report.names
    ]
    return Group(Text(_render.safe(heading)), _render.table(None, _COLUMNS, rows))


def _pair(p50: float | None, p99: float | None) -> str:
    return f"{_short(p50)}/{_short(p99)}"


def _short(seconds: float | None) -> str:
    """A percentile (a bucket's bound): milliseconds under a second."""
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else _render.duration_text(seconds)
