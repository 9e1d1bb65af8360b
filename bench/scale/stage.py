"""One size of one dimension, staged: a fresh server, its load's workers, the probe.

:func:`staged` starts ``tenure serve`` (this checkout's build; ``--fsync`` as asked,
``--http-port`` for the health probe and the engine's estimate), spawns the load's
workers (:mod:`bench.scale.load`) and waits until they have filled, then measures
the server while they hold still: resident memory and the engine's own estimate
(``tenure_state_estimate_bytes``) against the same server before the load, its CPU
over the probe's window, and the probe's numbers (:mod:`bench.scale.probe`). Every
wait is bounded; every process is stopped by whoever started it.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.tools import systems
from bench.tools.workers import Worker

#: Seconds the server is left to settle after the load is in place (its RSS, its GC).
SETTLE = 1.0
#: The longest any one step may take: opening 20,000 connections, a million holds.
STEP_TIMEOUT = 600.0
#: The keepalive of the load's connections: the client's own (tenure's _link).
PING_INTERVAL = 5.0


def _metric(http_port: int, name: str) -> float:
    """One unlabelled gauge of the server's ``/metrics`` (NaN if it has none)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{http_port}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else float("nan")


@dataclass
class Stage:
    """A server with its probe, measured before and after a load."""

    server: systems.Server
    http_port: int
    probe: Worker
    workdir: Path
    probe_seconds: float
    workers: list[Worker] = field(default_factory=list)
    #: The health probe's numbers while the load was filled (``watched``).
    filling: dict[str, Any] = field(default_factory=dict)
    rss_before: int = 0
    estimate_before: float = 0.0

    @property
    def port(self) -> int:
        """The server's native port."""
        return self.server.port

    def estimate(self) -> float:
        """The engine's own estimate of its state, in bytes."""
        return _metric(self.http_port, "tenure_state_estimate_bytes")

    def mark(self) -> None:
        """The server's memory before the load (after it settled)."""
        time.sleep(SETTLE)
        self.rss_before = self.server.rss_bytes()
        self.estimate_before = self.estimate()

    def load(self, kind: str, count: int, workers: int, **options: Any) -> list[dict[str, Any]]:
        """``count`` of ``kind`` spread over ``workers`` processes; their ``filled`` events."""
        share, extra = divmod(count, workers)
        options.setdefault("ping", PING_INTERVAL)
        self.probe.send("watch")
        for index in range(workers):
            argv = ["--kind", kind, "--port", str(self.port), "--index", str(index)]
            argv += ["--count", str(share + (index < extra)), "--timeout", str(STEP_TIMEOUT)]
            for key, value in options.items():
                argv += [f"--{key}", str(value)]
            log = self.workdir / f"load-{kind}-{count}-{index}.log"
            self.workers.append(Worker("bench.scale.load", argv, log))
        filled = [w.expect("filled", STEP_TIMEOUT + 30) for w in self.workers]
        self.probe.send("unwatch")
        self.filling = self.probe.expect("watched", 30)
        return filled

    def measure(self, items: int) -> dict[str, float]:
        """Memory per item, the server's CPU over the probe's window, the probe's numbers."""
        time.sleep(SETTLE)
        rss = self.server.rss_bytes()
        estimate = self.estimate()
        cpu0, t0 = self.server.cpu_seconds(), time.monotonic()
        self.probe.send("go")
        probed = self.probe.expect("probed", self.probe_seconds + 60)
        cpu1, t1 = self.server.cpu_seconds(), time.monotonic()
        stalls = self.stalls()
        row: dict[str, float] = {
            "loop_stalls": len(stalls),
            "loop_stall_max_ms": 1e3 * max(stalls, default=0.0),
            "fill_health_max_ms": float(self.filling.get("health_max_ms", math.nan)),
            "fill_health_missed": float(self.filling.get("health_missed", math.nan)),
            "rss_mb": rss / 1e6,
            "server_cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
            # The server's CPU over the window per probe pair: a request's cost while
            # the load holds still (its keepalives included: an upper bound).
            "server_cpu_us_per_pair": 1e6 * (cpu1 - cpu0) / max(1, int(probed["pairs"])),
            **{k: float(v) for k, v in probed.items() if k != "event"},
        }
        if items:
            row["bytes_per_item"] = (rss - self.rss_before) / items
            row["estimate_per_item"] = (estimate - self.estimate_before) / items
        return row

    def stalls(self) -> list[float]:
        """Seconds of each stall of the server's loop so far, as it logged them
        (``loop_stalled``: a turn of the loop a second late or more), the load's filling
        included: the probe asks only once the load is in place."""
        found = []
        for line in self.server.log().splitlines():
            if '"event": "loop_stalled"' in line:
                found.append(float(json.loads(line)["stalled_for"]))
        return found

    def end_load(self) -> list[dict[str, Any]]:
        """Tell the workers to end; their ``ended`` events (pongs, failures)."""
        ended: list[dict[str, Any]] = []
        for worker in self.workers:
            worker.send("end")
        for worker in self.workers:
            with contextlib.suppress(RuntimeError):
                ended.append(worker.expect("ended", 60))
            worker.finish()
        self.workers.clear()
        return ended


@contextlib.contextmanager
def staged(
    workdir: Path,
    extra_args: Sequence[str] = (),
    *,
    fsync: str = "off",
    probe_seconds: float = 3.0,
) -> Iterator[Stage]:
    """A fresh ``tenure serve --fsync FSYNC`` with ``extra_args`` and a ready probe."""
    http_port = systems.free_port()
    args = ["--http-port", str(http_port), "--log-format", "json", *extra_args]
    server = systems.start(f"tenure-{fsync}", workdir, extra_args=args)
    probe: Worker | None = None
    stage: Stage | None = None
    try:
        argv = ["--url", server.url, "--http-port", str(http_port)]
        argv += ["--seconds", str(probe_seconds)]
        probe = Worker("bench.scale.probe", argv, workdir / f"probe-{server.port}.log")
        probe.expect("ready", 60)
        stage = Stage(server, http_port, probe, workdir, probe_seconds)
        stage.mark()
        yield stage
    finally:
        if stage is not None:
            for worker in stage.workers:
                worker.kill()
        if probe is not None:
            probe.finish()
        server.stop()
