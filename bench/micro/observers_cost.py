"""What the client's observers cost an acquire: with none (the hook's own cost, against
the code before it), with observers that do nothing, and with OpenTelemetry's.

One task locks and releases a mutex on ``memory://`` (no network: the client's and
the engine's CPU alone, so the hook's share is the largest it can be), ``--pairs``
times; CPU time (``time.process_time``) per pair, the best of ``--repeats`` passes.
Each setting runs in a child process of its own, and the settings take turns
(``--rounds``), so that the machine's drift hits all alike; the median of the
rounds is shown, and each setting's ratio to this checkout with no observer:

* ``none``: no observer (the hot path's test of two empty tuples);
* ``--against REV``: the same at a git revision (its ``src/`` exported to a temporary
  directory), e.g. the commit before the hook: the hook's cost when unused;
* ``noop``: one observer whose ``acquire_started`` returns None;
* ``watching``: one that hears the outcome and each hold's end (``lease.lost``);
* ``otel-api``: ``tenure.contrib.otel.Instrumentation()`` with no SDK configured
  (OpenTelemetry's no-op tracer and meter);
* ``otel-sdk``: the same with the SDK's tracer and meter providers (spans to a
  processor that drops them, histograms to an in-memory reader).

Run: ``python -m bench.micro.observers_cost [--against REV] [--pairs N] [--rounds R]``
(the OpenTelemetry settings need ``tenure[otel]`` and opentelemetry-sdk).

Internals: none; the public API (``tenure.connect(observers=)``) and the integration
``tenure.contrib.otel``, itself written over the public API.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ("none", "noop", "watching", "otel-api", "otel-sdk")


def observers(setting: str) -> list[Any]:
    """The observers of ``setting`` (made in the child process)."""
    if setting == "none":
        return []
    if setting == "noop":

        class Noop:
            def acquire_started(self, attempt: Any) -> None:
                return None

        return [Noop()]
    if setting == "watching":

        class Watch:
            def granted(self, leases: tuple[Any, ...]) -> None:
                for lease in leases:
                    lease.lost.add_callback(lambda reason: None)

            def failed(self, error: BaseException) -> None:
                pass

        class Watching:
            def acquire_started(self, attempt: Any) -> Watch:
                return Watch()

        return [Watching()]
    from tenure.contrib.otel import Instrumentation

    if setting == "otel-api":
        return [Instrumentation()]
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SpanProcessor())  # (drops what ends)
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return [Instrumentation(tracer_provider=tracer_provider, meter_provider=meter_provider)]


async def seconds_per_pair(setting: str, pairs: int, repeats: int) -> float:
    """CPU seconds per lock + release pair (the best pass) with ``setting``'s observers."""
    import tenure

    options: dict[str, Any] = {"observers": observers(setting)} if setting != "none" else {}
    best = float("inf")
    async with tenure.connect("memory://", **options) as client:
        await client.create_node("bench")
        async with client.session("bench") as session:
            mutex = session.mutex("job")
            for _ in range(pairs // 10):  # warm up
                await (await mutex.lock()).release()
            for _ in range(repeats):
                started = time.process_time()
                for _ in range(pairs):
                    lock = await mutex.lock()
                    await lock.release()
                best = min(best, time.process_time() - started)
    return best / pairs


def run_child(src: Path, setting: str, pairs: int, repeats: int) -> float:
    """:func:`seconds_per_pair` in a child process whose ``tenure`` comes from ``src``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(ROOT)])}
    command = [
        sys.executable,
        "-m",
        "bench.micro.observers_cost",
        "--measure",
        setting,
        f"--pairs={pairs}",
        f"--repeats={repeats}",
    ]
    out = subprocess.run(
        command, cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=900
    )
    result: float = json.loads(out.stdout)
    return result


def export(revision: str, into: Path) -> Path:
    """``src/`` of a git revision, written under ``into``; the directory to import from."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "src"],
        check=True,
        capture_output=True,
        timeout=120,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True, timeout=120)
    return into / "src"


def main() -> None:
    """Measure each setting in turns, and print the table."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.micro.observers_cost", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--pairs", type=int, default=20_000, help="pairs per pass")
    parser.add_argument("--repeats", type=int, default=3, help="passes per process; the best")
    parser.add_argument("--rounds", type=int, default=5, help="turns of every setting")
    parser.add_argument("--against", action="append", default=[], metavar="REV")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--measure", choices=SETTINGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(asyncio.run(seconds_per_pair(args.measure, args.pairs, args.repeats))))
        return
    with tempfile.TemporaryDirectory() as scratch:
        runs: dict[str, tuple[Path, str]] = {}
        for revision in args.against:
            into = Path(scratch) / revision.replace("/", "_")
            into.mkdir()
            runs[f"{revision} (none)"] = (export(revision, into), "none")
        for setting in args.settings.split(","):
            runs[setting] = (ROOT / "src", setting)
        found: dict[str, list[float]] = {label: [] for label in runs}
        for _ in range(args.rounds):
            for label, (src, setting) in runs.items():
                found[label].append(run_child(src, setting, args.pairs, args.repeats))
    medians = {label: statistics.median(values) for label, values in found.items()}
    base = medians.get("none") or next(iter(medians.values()))
    print(
        f"CPU per mutex lock + release on memory:// (median of {args.rounds} rounds, "
        f"each the best of {args.repeats} x {args.pairs} pairs); ratio to 'none'"
    )
    width = max(map(len, medians))
    for label, value in medians.items():
        spread = f"{min(found[label]) * 1e6:.2f}-{max(found[label]) * 1e6:.2f}"
        print(f"  {label:<{width}}  {value * 1e6:7.2f} us  x{value / base:.3f}  ({spread})")


if __name__ == "__main__":
    main()
