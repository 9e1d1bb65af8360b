"""The report's PNG plots (matplotlib, Agg backend): bars per system, from Measures.

Each plot is drawn only when its numbers exist; :func:`draw` returns the files
written, by name, for the report to link.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server

import matplotlib.pyplot as plt

from bench.tools.results import Measure

#: Durable tenure and its durable peer, non-durable tenure and its peers, the rest.
COLORS = {
    "tenure-always": "#1f5fa8",
    "tenure-off": "#3d8bd9",
    "tenure-always (client each)": "#6f98cc",
    "tenure-off (client each)": "#8dbbe8",
    "tenure-memory": "#a5c8ec",
    "redis": "#d1493f",
    "redis (client each)": "#e8928b",
    "tenure-redis": "#b0306f",
    "tenure-etcd": "#a4c45a",
    "etcd": "#6b8e23",
    "etcd (client each)": "#9cb86a",
    "tenure-cluster": "#2a7f7a",
    "tenure-cluster (client each)": "#6fb5b0",
    "tenure-postgres": "#5a4fa3",
    "postgres": "#8f86c9",
    "dflockd": "#e39b2d",
    "echo-uvloop": "#888888",
    "echo-asyncio": "#bbbbbb",
}


def _find(measures: list[Measure], workload: str, metric: str) -> list[Measure]:
    return [
        m
        for m in measures
        if m.workload == workload and m.metric == metric and not math.isnan(m.value)
    ]


def _bars(
    found: list[Measure],
    title: str,
    ylabel: str,
    path: Path,
    *,
    lines: dict[str, float] | None = None,
) -> None:
    """One bar per system (the median) with the min-max of the repeats as error bars."""
    fig, ax = plt.subplots(figsize=(7.5, 3.8), dpi=110)
    names = [m.system for m in found]
    values = [m.value for m in found]
    low = [m.value - min(m.samples or [m.value]) for m in found]
    high = [max(m.samples or [m.value]) - m.value for m in found]
    colors = [COLORS.get(n, "#777777") for n in names]
    ax.bar(names, values, color=colors, yerr=[low, high], capsize=3)
    for i, v in enumerate(values):
        ax.annotate(f"{v:,.0f}" if v >= 10 else f"{v:.3g}", (i, v), ha="center", va="bottom",
                    fontsize=8, xytext=(0, 2), textcoords="offset points")  # fmt: skip
    for label, y in (lines or {}).items():
        ax.axhline(y, color="#555555", linestyle="--", linewidth=1)
        ax.annotate(label, (len(names) - 0.5, y), ha="right", va="bottom", fontsize=8)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _grouped(
    measures: list[Measure],
    workload: str,
    metrics: list[str],
    title: str,
    path: Path,
    *,
    ylabel: str = "ms (log scale)",
    log: bool = True,
) -> bool:
    """Grouped bars (log scale unless ``log=False``) of several metrics per system."""
    series = {
        metric: {m.system: m.value for m in _find(measures, workload, metric)} for metric in metrics
    }
    names = list(dict.fromkeys(n for values in series.values() for n in values))
    if not names:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 3.8), dpi=110)
    width = 0.8 / len(metrics)
    for k, metric in enumerate(metrics):
        xs = [i + (k - (len(metrics) - 1) / 2) * width for i in range(len(names))]
        ys = [series[metric].get(n, 0.0) for n in names]
        label = metric.removesuffix("_ms").removesuffix("_us").replace("_", " ")
        ax.bar(xs, ys, width, label=label)
    ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


SEQ_LATENCIES = ["acquire_p50_ms", "acquire_p99_ms", "release_p50_ms", "release_p99_ms"]


def draw(measures: list[Measure], out_dir: Path) -> dict[str, Path]:
    """Every plot the measures allow, into ``out_dir``: {name: file}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    echo = {m.system: m.value for m in _find(measures, "ceiling", "seq_rt_per_s")}
    echo_par = {m.system: m.value for m in _find(measures, "ceiling", "par_rt_per_s")}
    # A pair is two round trips: the ceiling in pairs/s is half the echo rate.
    bars = [
        ("seq", "seq", "pairs_per_s", "seq: one client, acquire + release", "pairs/s",
         {f"{k} / 2": v / 2 for k, v in echo.items()}),
        ("par", "par", "pairs_per_s", "par: 32 clients, distinct keys", "pairs/s",
         {f"{k} / 2": v / 2 for k, v in echo_par.items()}),
        ("cont", "cont", "grants_per_s", "cont: 32 clients, one key", "grants/s", {}),
        ("cont-jain", "cont", "jain", "cont: Jain fairness index (1 = even)", "index",
         {"0.99": 0.99}),
        ("hold", "hold", "bytes_per_lock", "hold: server memory per held lock", "bytes", {}),
        ("sessions", "sessions", "rss_mb", "sessions: server memory", "MB", {}),
        ("recovery", "recovery", "restart_s", "recovery: restart until serving", "s", {}),
        ("watch", "watch", "p99_ms", "watch: p99 notification latency", "ms", {}),
        ("ceiling", "ceiling", "seq_rt_per_s", "echo ceiling, one at a time", "round trips/s",
         {}),
    ]  # fmt: skip
    for name, workload, metric, title, ylabel, lines in bars:
        found = _find(measures, workload, metric)
        if found:
            path = out_dir / f"{name}.png"
            _bars(found, title, ylabel, path, lines=lines)
            written[name] = path
    latencies = [
        ("seq-latency", "seq", SEQ_LATENCIES, "seq: acquire and release latency"),
        ("par-latency", "par", ["p50_ms", "p99_ms"], "par: acquire + release latency"),
        ("cont-wait", "cont", ["wait_p50_ms", "wait_p99_ms"], "cont: wait for the grant"),
    ]  # fmt: skip
    for name, workload, metrics, title in latencies:
        path = out_dir / f"{name}.png"
        if _grouped(measures, workload, metrics, title, path):
            written[name] = path
    path = out_dir / "seq-cpu.png"
    cpu = ["client_cpu_us", "server_cpu_us"]
    title = "seq: CPU time per acquire + release pair"
    if _grouped(measures, "seq", cpu, title, path, ylabel="µs per pair", log=False):
        written["seq-cpu"] = path
    return written
