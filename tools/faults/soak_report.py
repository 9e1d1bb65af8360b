"""The soak's verdict and report: did what the server keeps stay bounded?

A quantity is **bounded** over a stretch of samples when, past a warm-up, the
highest reading of the stretch's last third is at most the highest of its first
third times ``1 + growth`` plus ``slack`` (:data:`LIMITS`). A leak, however slow,
keeps raising the later maximum; a sawtooth (a log compacted by snapshots, a heap
that the allocator returns in bursts) does not. The stretch is each of the server's
lives for what a restart resets (memory, open files, threads), the whole run for
what survives one (the data directory) and for the engine's gauges (its state is
replayed at a restart). The load must also go on: every client (each of every
kind, :data:`~tools.faults.soak_load.CLIENT_NAMES`) made an operation after the
start of the run's last third and after the last fault was over, by the time of its
latest one (the soak waited for that, boundedly: a client slow to come back is
given the time, one stuck is not).

:func:`judge` gives the checks, :func:`write` the page (``tools/faults/soak.md``,
included by :mod:`tools.faults.report` in docs/reliability.md), its plot and the
samples.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tools.faults.report import SOAK
from tools.faults.soak_load import CLIENT_NAMES, KINDS
from tools.faults.soak_run import Sample, SoakRun

#: Per quantity: (what it is, its unit's divisor and name, growth, slack, per life?).
LIMITS: Final[dict[str, tuple[str, float, str, float, float, bool]]] = {
    "rss_kib": ("server RSS", 1024, "MiB", 0.10, 4 * 1024, True),
    "fds": ("server open files", 1, "", 0.10, 16, True),
    "threads": ("server threads", 1, "", 0.0, 4, True),
    "log_bytes": ("write-ahead log on disk", 2**20, "MiB", 0.50, 8 * 2**20, False),
    "snapshot_bytes": ("newest snapshot", 2**10, "KiB", 0.50, 64 * 2**10, False),
    "data_bytes": ("data directory", 2**20, "MiB", 0.50, 16 * 2**20, False),
    "connections": ("client connections open", 1, "", 0.50, 10, False),
    "sessions": ("sessions", 1, "", 0.50, 10, False),
    "semaphores": ("semaphores", 1, "", 0.50, 10, False),
    "holds": ("holds", 1, "", 0.50, 10, False),
    "waiters": ("waiters", 1, "", 0.50, 10, False),
    "watches": ("watches armed", 1, "", 0.50, 10, False),
}
#: Samples before this (seconds into a stretch) are the warm-up, not judged.
WARMUP: Final = 300.0
#: A stretch shorter than this (after its warm-up) is too short to judge alone.
SHORTEST: Final = 600.0
SOAK_PAGE: Final = SOAK
#: The plot's operation rates are averaged over this many seconds.
RATE_OVER: Final = 60.0


@dataclass(frozen=True)
class Check:
    """One quantity over one stretch."""

    quantity: str
    stretch: str
    first_max: float
    last_max: float
    limit: float
    per_hour: float  # the least-squares slope over the stretch, per hour

    @property
    def ok(self) -> bool:
        """Whether the quantity stayed bounded (module docstring)."""
        return self.last_max <= self.limit


def _value(sample: Sample, quantity: str) -> float:
    found = getattr(sample, quantity, None)
    return float(sample.gauges.get(quantity, 0) if found is None else found)


def bounded(
    quantity: str, stretch: str, times: Sequence[float], values: Sequence[float]
) -> Check | None:
    """The check of ``values`` (at ``times``, past the warm-up); None if too short."""
    if len(values) < 6 or times[-1] - times[0] < SHORTEST:
        return None
    _, _, _, growth, slack, _ = LIMITS[quantity]
    third = (times[-1] - times[0]) / 3
    first = [v for t, v in zip(times, values, strict=True) if t <= times[0] + third]
    last = [v for t, v in zip(times, values, strict=True) if t >= times[-1] - third]
    slope = statistics.linear_regression(times, values).slope if len(set(values)) > 1 else 0.0
    return Check(
        quantity=quantity,
        stretch=stretch,
        first_max=max(first),
        last_max=max(last),
        limit=max(first) * (1 + growth) + slack,
        per_hour=slope * 3600,
    )


def _stretches(samples: Sequence[Sample], per_life: bool) -> list[tuple[str, list[Sample]]]:
    if not per_life:
        return [("whole run", list(samples))]
    lives: dict[int, list[Sample]] = {}
    for sample in samples:
        lives.setdefault(sample.life, []).append(sample)
    return [(f"life {life}", found) for life, found in sorted(lives.items())]


def judge(run: SoakRun) -> list[Check]:
    """Every check of the run (a stretch too short to judge gives none)."""
    checks = []
    for quantity, (_, _, _, _, _, per_life) in LIMITS.items():
        for stretch, samples in _stretches(run.samples, per_life):
            if not samples:
                continue
            start = samples[0].t + WARMUP
            kept = [s for s in samples if s.t >= start]
            times = [s.t for s in kept]
            check = bounded(quantity, stretch, times, [_value(s, quantity) for s in kept])
            if check is not None:
                checks.append(check)
    return checks


def stalled(run: SoakRun) -> list[str]:
    """The clients (``kind-index``) with no operation since :func:`progress_since`."""
    if not run.samples:
        return list(CLIENT_NAMES)
    since, last_op = progress_since(run), run.samples[-1].last_op
    return [client for client in CLIENT_NAMES if last_op.get(client, since) <= since]


def progress_since(run: SoakRun) -> float:
    """After when every client must have made an operation: the later of the start of
    the run's last third and the end of its last fault (run time)."""
    first, end = run.samples[0].t, run.samples[-1].t
    since = end - (end - first) / 3
    return max(since, run.faults[-1].over) if run.faults else since


def _shown(quantity: str, value: float) -> str:
    _, divisor, unit, _, _, _ = LIMITS[quantity]
    return f"{value / divisor:,.1f} {unit}".strip() if divisor != 1 else f"{value:,.0f}"


def plot(run: SoakRun, path: Path) -> None:
    """The samples over time, four panels, the faults marked (a PNG at ``path``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = run.samples
    minutes = [s.t / 60 for s in samples]
    figure, axes = plt.subplots(4, 1, figsize=(11, 12), sharex=True)

    def series(axis: object, quantity: str, get: Callable[[Sample], float], label: str) -> None:
        axis.plot(minutes, [get(s) for s in samples], label=label, linewidth=1)  # type: ignore[attr-defined]

    rss, files, disk, rate = axes
    series(rss, "rss", lambda s: s.rss_kib / 1024, "server RSS (MiB)")
    for name in ("fds", "connections", "threads"):
        series(files, name, lambda s, n=name: _value(s, n), name)  # type: ignore[misc]
    for name in ("sessions", "holds", "waiters", "watches"):
        series(files, name, lambda s, n=name: _value(s, n), f"engine {name}")  # type: ignore[misc]
    series(disk, "log", lambda s: s.log_bytes / 2**20, "write-ahead log (MiB)")
    series(disk, "snapshot", lambda s: s.snapshot_bytes / 2**20, "newest snapshot (MiB)")
    series(disk, "data", lambda s: s.data_bytes / 2**20, "data directory (MiB)")
    # Rates over a minute: the load writes its counts every few seconds, so rates
    # between two neighbouring samples would be mostly zeros and spikes.
    step = max(1, round(RATE_OVER / run.settings["sample_every"]))
    for kind in KINDS:
        rates = [
            max(0, s.ops.get(kind, 0) - a.ops.get(kind, 0)) / max(s.t - a.t, 1e-9)
            for a, s in zip(samples[: -step or None], samples[step:], strict=True)
        ]
        rate.plot(minutes[step:], rates, label=kind, linewidth=0.8)
    colours = {
        "server-crash": "red",
        "server-pause": "orange",
        "client-kill": "grey",
        "client-pause": "lightblue",
    }
    for axis in axes:
        for fault in run.faults:
            axis.axvline(
                fault.t / 60, color=colours.get(fault.kind, "black"), linewidth=0.6, alpha=0.7
            )
        axis.legend(loc="upper left", fontsize=7, ncol=4)
        axis.grid(alpha=0.3)
    rss.set_title(
        "soak: one tenure serve, mixed load; lines mark faults (red: server "
        "crash, orange: server stopped, grey: client killed, blue: client stopped)",
        fontsize=9,
    )
    rate.set_ylabel("operations / s")
    rate.set_xlabel("minutes")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def page(run: SoakRun, checks: list[Check], generated: str, commit: str, image: str) -> str:
    """The report's Markdown (the section docs/reliability.md includes)."""
    faults = Counter(f.kind for f in run.faults)
    end = run.samples[-1] if run.samples else None
    errors = Counter(end.errors if end else {})
    broken = [c for c in checks if not c.ok]
    lost = stalled(run)
    s = run.settings
    lines = [
        f"`scripts/faults --soak {run.seconds / 3600:g}` ran on {generated} at commit "
        f"`{commit}`, on the project's machine (2 cores, shared): "
        f"{run.seconds / 3600:g} h of one `tenure serve` (fsync always, every face open) "
        "under a mixed load (`tools/faults/soak_load.py`: mutexes, a semaphore pool, "
        "watches, elections, dflockd's own client, YDB's Python SDK), each client closing "
        "its session and connection every few dozen operations. A fault about every "
        f"{s['fault_every']:g} s in turn (a load process killed, a load process stopped "
        f"past its {s['recovery_window']:g} s recovery window, the server stopped for a "
        f"few seconds) and a server crash (kill -9, restart) every {s['crash_every']:g} s. "
        f"A sample every {s['sample_every']:g} s; the rule (`tools/faults/soak_report.py`): "
        "past a 5-minute warm-up, the highest reading of a stretch's last third is at most "
        "that of its first third plus the growth and slack shown; memory, files and threads "
        "are judged per life of the server (a restart resets them), the rest over the run; "
        "every client made an operation in the last third and after the last fault (the run "
        f"waited up to {s.get('heal_within', 0):g} s after it for every client to work again).",
        "",
        f"**Verdict: {'bounded' if not broken and not lost else 'NOT bounded'}.** "
        f"{len(run.samples)} samples, {len(checks)} checks, {len(broken)} broken; "
        "clients without an operation in the last third and since the last fault: "
        f"{', '.join(lost) or 'none'}.",
        "",
        f"![the soak's samples]({image})",
        "",
        "* faults: " + ", ".join(f"{kind} {n}" for kind, n in sorted(faults.items())),
        "* operations: "
        + (", ".join(f"{kind} {end.ops.get(kind, 0):,}" for kind in KINDS) if end else "none"),
        "* what ended a client's life (counted by the load, then it started over): "
        + (", ".join(f"{name} {n}" for name, n in errors.most_common(8)) or "nothing"),
        "",
        "| quantity | stretch | max, first third | max, last third | limit | slope per hour "
        "| bounded |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in checks:
        what, _, _, growth, slack, _ = LIMITS[c.quantity]
        lines.append(
            f"| {what} | {c.stretch} | {_shown(c.quantity, c.first_max)} | "
            f"{_shown(c.quantity, c.last_max)} | {_shown(c.quantity, c.limit)} "
            f"(+{growth:.0%}, +{_shown(c.quantity, slack)}) | "
            f"{_shown(c.quantity, c.per_hour)} | {'yes' if c.ok else '**no**'} |"
        )
    return "\n".join(lines) + "\n"


def write(
    run: SoakRun, docs: Path, generated: str, commit: str, page_path: Path = SOAK_PAGE
) -> list[Check]:
    """Judge ``run``; write its page (``page_path``), and its plot and samples (the
    run's JSON) as ``soak.png`` and ``soak.json`` under ``docs``."""
    checks = judge(run)
    plot(run, docs / "soak.png")
    run.dump(docs / "soak.json")
    page_path.write_text(page(run, checks, generated, commit, "soak.png"))
    return checks
