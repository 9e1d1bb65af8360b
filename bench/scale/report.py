"""docs/scale.md from the scale run's rows: the targets, a table and a plot per dimension.

Plots are log-log (size against cost) PNGs beside the page (``docs/scale/``). The
targets are judged here from the rows (:data:`TARGETS`); the projection to a bigger
machine (:mod:`bench.scale.projection`) is computed from the same rows. The notes
between ``<!-- notes -->`` and ``<!-- /notes -->`` of an existing page are kept: they
are written by hand (what the numbers mean, why a target is missed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server

import matplotlib.pyplot as plt

from bench.scale.projection import projection

Rows = dict[str, list[dict[str, Any]]]
NOTES = re.compile(r"<!-- notes -->.*?<!-- /notes -->", re.DOTALL)

#: What each dimension's table shows: (column, row key, format).
COLUMNS: dict[str, list[tuple[str, str, str]]] = {
    "common": [
        ("RSS MB", "rss_mb", "{:,.0f}"),
        ("bytes/item (RSS)", "bytes_per_item", "{:,.0f}"),
        ("bytes/item (estimate)", "estimate_per_item", "{:,.0f}"),
        ("server CPU %", "server_cpu_pct", "{:.0f}"),
        ("server CPU µs/probe pair", "server_cpu_us_per_pair", "{:.0f}"),
        ("probe p50 ms", "p50_ms", "{:.2f}"),
        ("probe p99 ms", "p99_ms", "{:.2f}"),
        ("probe max ms", "max_ms", "{:.1f}"),
        ("health max ms", "health_max_ms", "{:.1f}"),
        ("health max ms (filling)", "fill_health_max_ms", "{:,.0f}"),
        ("loop stall max ms", "loop_stall_max_ms", "{:,.0f}"),
    ],
    "connections": [("open s", "open_s", "{:.1f}"), ("ping failures", "ping_failures", "{:.0f}")],
    "sessions": [("fill s", "fill_s", "{:.1f}")],
    "holds": [
        ("fill s", "fill_s", "{:.1f}"),
        ("stop s", "stop_s", "{:.2f}"),
        ("restart s", "restart_s", "{:.2f}"),
    ],
    "waiters": [
        ("fill s", "fill_s", "{:.1f}"),
        ("grant CPU ms", "grant_cpu_ms", "{:.3f}"),
        ("grant wall ms", "grant_wall_ms", "{:.3f}"),
    ],
    "watchers": [
        ("update answered ms", "answer_ms", "{:,.0f}"),
        ("last watcher told ms", "last_told_ms", "{:,.0f}"),
        ("told once", "told_once", "{:,.0f}"),
        ("told twice+", "told_twice_or_more", "{:,.0f}"),
        ("not told", "not_told", "{:,.0f}"),
    ],
    "failover": [
        ("failover p50 ms", "failover_ms", "{:,.0f}"),
        ("failover max ms", "failover_max_ms", "{:,.0f}"),
        ("election ms", "election_ms", "{:,.0f}"),
        ("past the TTL s", "over_ttl_s", "{:.2f}"),
        ("fill s", "fill_s", "{:.0f}"),
    ],
    "snapshot": [
        ("probe max ms", "stall_max_ms", "{:,.1f}"),
        ("probe p99 ms", "probe_p99_ms", "{:,.1f}"),
        ("snapshots", "snapshots", "{:.0f}"),
    ],
    "shards": [
        ("pairs/s", "pairs_per_s", "{:,.0f}"),
        ("par p50 ms", "par_p50_ms", "{:.2f}"),
        ("par p99 ms", "par_p99_ms", "{:.2f}"),
        ("server CPU µs/pair", "server_cpu_us_per_pair", "{:.1f}"),
    ],
    "cells": [
        ("pairs/s", "pairs_per_s", "{:,.0f}"),
        ("par p50 ms", "par_p50_ms", "{:.2f}"),
        ("par p99 ms", "par_p99_ms", "{:.2f}"),
        ("leaders' CPU µs/pair", "server_cpu_us_per_pair", "{:.1f}"),
        ("busiest cell's CPU µs/pair", "cell_cpu_us_per_pair", "{:.1f}"),
    ],
    "cell-failover": [
        ("probe p99 ms before", "baseline_p99_ms", "{:.2f}"),
        ("probe p99 ms during", "during_p99_ms", "{:.2f}"),
        ("p99 during / before", "p99_ratio", "{:.2f}"),
        ("other cell leaderless s", "leaderless_s", "{:.2f}"),
    ],
    "nodes": [
        ("list all s", "list_all_s", "{:.2f}"),
        ("list page max ms", "list_page_max_ms", "{:.1f}"),
    ],
}
COLUMNS["holds-always"] = COLUMNS["holds"]
#: Each dimension's heading (else its name, capitalized).
TITLES = {
    "holds": "Holds (`--fsync off`)",
    "holds-always": "Holds on a durable server (`--fsync always`)",
    "cell-failover": "One cell's failover, seen from another (two members a cell)",
}
#: The plots' series per dimension: (label, row key, factor) on the left (bytes) and the
#: right (ms) axes.
PLOTTED = {
    "bytes": [
        ("bytes/item (RSS)", "bytes_per_item", 1.0),
        ("bytes/item (estimate)", "estimate_per_item", 1.0),
    ],
    "ms": [
        ("probe p99 ms", "p99_ms", 1.0),
        ("probe max ms", "max_ms", 1.0),
        ("health max ms", "health_max_ms", 1.0),
        ("health max ms (filling)", "fill_health_max_ms", 1.0),
        ("update -> last watcher ms", "last_told_ms", 1.0),
        ("failover ms", "failover_ms", 1.0),
        ("snapshot: probe max ms", "stall_max_ms", 1.0),
        ("restart ms", "restart_s", 1e3),
        ("grant CPU ms", "grant_cpu_ms", 1.0),
    ],
    "per second": [("par pairs/s", "pairs_per_s", 1.0)],
}


def _row(rows: Rows, dimension: str, size: int) -> dict[str, Any]:
    return next((r for r in rows.get(dimension, []) if r.get("size") == size), {})


def _value(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    return float(value) if isinstance(value, int | float) else math.nan


def _alone_p99(rows: Rows) -> float:
    return _value(_row(rows, "connections", 0), "p99_ms")


#: Each target: (what, the row it reads, measured, the bound, the unit).
TARGETS: list[tuple[str, Callable[[Rows], float], float, str]] = [
    (
        "a connection costs at most 16 KiB (10k pinging)",
        lambda r: _value(_row(r, "connections", 10_000), "bytes_per_item"),
        16 * 1024,
        "bytes",
    ),
    (
        "10k pinging connections: probe p99 within 2x of alone",
        lambda r: _value(_row(r, "connections", 10_000), "p99_ms") / _alone_p99(r),
        2.0,
        "x",
    ),
    (
        "one change reaches 100k watchers of one semaphore in 1 s",
        lambda r: _value(_row(r, "watchers", 100_000), "last_told_ms") / 1e3,
        1.0,
        "s",
    ),
    (
        "a hold costs at most 300 bytes at 1M",
        lambda r: _value(_row(r, "holds", 1_000_000), "bytes_per_item"),
        300.0,
        "bytes",
    ),
    (
        "a grant from the head of a 100k queue in 1 ms of server time",
        lambda r: _value(_row(r, "waiters", 100_000), "grant_cpu_ms"),
        1.0,
        "ms",
    ),
    (
        "the cluster leader's snapshot at 1M holds keeps its loop at most 50 ms",
        lambda r: _value(_row(r, "snapshot", 1_000_000), "stall_max_ms"),
        50.0,
        "ms",
    ),
    (
        "failover at 1M holds within the lease TTL + 2 s",
        lambda r: _value(_row(r, "failover", 1_000_000), "over_ttl_s"),
        2.0,
        "s past the TTL",
    ),
    (
        "restart at 1M holds at most 5 s",
        lambda r: _value(_row(r, "holds", 1_000_000), "restart_s"),
        5.0,
        "s",
    ),
    (
        "a cell's CPU per pair beside another cell within 1.2x of alone",
        lambda r: (
            _value(_row(r, "cells", 2), "cell_cpu_us_per_pair")
            / _value(_row(r, "cells", 1), "cell_cpu_us_per_pair")
        ),
        1.2,
        "x",
    ),
    (
        "one cell's failover: another cell's probe p99 within 1.2x of before",
        lambda r: _value(_row(r, "cell-failover", 2), "p99_ratio"),
        1.2,
        "x",
    ),
    (
        "a health probe answered within 1 s at every size (filling included)",
        lambda r: _slowest_health(r),
        1.0,
        "s (slowest)",
    ),
]


def _slowest_health(rows: Rows) -> float:
    """The health probe's slowest answer of every size, in seconds; infinite if one
    was not answered within its 1 s timeout (a miss)."""
    found = [row for dimension in rows.values() for row in dimension if "error" not in row]
    keys = ("health_missed", "fill_health_missed")
    if any(_value(row, key) > 0 for row in found for key in keys):
        return math.inf
    slowest = [_value(row, k) for row in found for k in ("health_max_ms", "fill_health_max_ms")]
    slowest = [ms for ms in slowest if not math.isnan(ms)]
    return max(slowest) / 1e3 if slowest else math.nan


def _fmt(value: float, spec: str) -> str:
    return "-" if math.isnan(value) else spec.format(value)


def targets_table(rows: Rows) -> list[str]:
    """The targets, each measured and judged."""
    out = ["| target | measured | bound | met |", "|---|---|---|---|"]
    for what, read, bound, unit in TARGETS:
        try:
            value = read(rows)
        except (ZeroDivisionError, TypeError):
            value = math.nan
        met = "not measured" if math.isnan(value) else ("yes" if value <= bound else "**no**")
        out.append(f"| {what} | {_fmt(value, '{:,.3g}')} {unit} | {bound:g} | {met} |")
    return out


def dimension_table(dimension: str, found: list[dict[str, Any]]) -> list[str]:
    """One row per size: the common columns, the dimension's own, and any other key."""
    known = COLUMNS["common"] + COLUMNS.get(dimension, [])
    keys = {key for _, key, _ in known} | {"size", "took_s", "error"}
    extra = sorted({k for row in found for k in row if k not in keys})
    columns = [c for c in known if any(c[1] in row for row in found)]
    columns += [(k, k, "{:,.4g}") for k in extra if isinstance(found[0].get(k, 0), int | float)]
    out = ["| size | " + " | ".join(c[0] for c in columns) + " |"]
    out.append("|---" * (len(columns) + 1) + "|")
    for row in found:
        if "error" in row:
            out.append(f"| {row['size']:,} | failed: {row['error']} |" + " |" * (len(columns) - 1))
            continue
        cells = [_fmt(_value(row, key), spec) for _, key, spec in columns]
        out.append(f"| {row['size']:,} | " + " | ".join(cells) + " |")
    return out


def plot(dimension: str, found: list[dict[str, Any]], path: Path) -> bool:
    """Size against bytes per item (left) and against milliseconds (right), log-log."""
    good = [r for r in found if "error" not in r and r.get("size", 0) > 0]
    panels = [
        (unit, [(label, key, k) for label, key, k in series if any(key in r for r in good)])
        for unit, series in PLOTTED.items()
    ]
    panels = [(unit, series) for unit, series in panels if series]
    if not good or not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), dpi=110)
    for ax, (unit, series) in zip([axes] if len(panels) == 1 else axes, panels, strict=True):
        for label, key, factor in series:
            points = [(r["size"], factor * _value(r, key)) for r in good]
            points = [(x, y) for x, y in points if not math.isnan(y) and y > 0]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"{dimension} (log)")
        ax.set_ylabel(f"{unit} (log)")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", linewidth=0.3)
    fig.suptitle(dimension)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def render(rows: Rows, meta: dict[str, Any], images: Path, notes: str) -> str:
    """The page's text (plots written to ``images``)."""
    versions = meta.get("versions", {})
    lines = [
        "# How tenure's cost grows",
        "",
        "Written by `scripts/bench --scale` (bench/scale/, outside the test run); do not edit",
        "by hand outside the notes. Each size of each dimension ran on a fresh server",
        "(`tenure serve --fsync off`; `--fsync always` where it says so) loaded by",
        "client processes, while a probe client locked and released a mutex of its own",
        "one pair after another and asked `/readyz` every 0.1 s (the health probe).",
        "bench/README.md says how to run it.",
        "",
        f"- **Run**: `{meta.get('command', '')}`, {meta.get('date', '')}, "
        f"{meta.get('minutes', '?')} minutes; probe window {meta.get('probe_seconds')} s "
        "per size"
        + "".join(
            f"; then {again}, its dimensions measured again" for again in meta.get("then", [])
        )
        + ".",
        f"- **Machine**: {versions.get('cpu', '?')}, {versions.get('os', '?')}, "
        f"{versions.get('kernel', '?')}; open files limit {meta.get('file_limit', '?')}.",
        f"- **Build**: tenure {versions.get('tenure', '?')}; {versions.get('python', '')}, "
        f"uvloop {versions.get('uvloop', '')}.",
        "",
        "## Targets",
        "",
        *targets_table(rows),
        "",
        notes,
        "",
        "## Projection: a 16-core, 128 GB machine and a sharded fleet",
        "",
        *projection(rows),
        "",
    ]
    images.mkdir(parents=True, exist_ok=True)
    for dimension, found in rows.items():
        lines += [f"## {TITLES.get(dimension, dimension.capitalize())}", ""]
        if plot(dimension, found, images / f"{dimension}.png"):
            lines += [f"![{dimension}](scale/{dimension}.png)", ""]
        lines += [*dimension_table(dimension, found), ""]
    return "\n".join(lines)


def write(rows: Rows, meta: dict[str, Any], out: Path) -> None:
    """Write ``out`` (and its plots in ``out``'s folder/scale/), keeping its notes."""
    notes = "<!-- notes -->\n<!-- /notes -->"
    if out.exists():
        kept = NOTES.search(out.read_text())
        if kept:
            notes = kept.group(0)
    out.write_text(render(rows, meta, out.parent / "scale", notes))
