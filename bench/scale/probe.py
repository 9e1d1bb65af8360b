"""The probe: one client that times its own requests while a dimension's load runs.

``python -m bench.scale.probe worker --url URL --http-port P --seconds S`` (spawned by
:mod:`bench.scale.dimensions`, a process of its own so that the load's workers do
not share its loop). It says ``ready`` once its session is open, waits for ``go``,
then for ``--seconds``:

* locks and releases one mutex of its own, one pair after the other (the public
  client: ``session.mutex(name).lock()`` and ``release()``), timing each pair;
* asks the server's ``/readyz`` every :data:`HEALTH_EVERY` seconds, as a health
  probe would, each with a :data:`HEALTH_LIMIT` timeout (an answer later than that,
  or none, is a miss),

and says ``probed`` with the pairs' p50, p99 and max, and the health probe's
slowest answer and misses. Between ``watch`` and ``unwatch`` (while the load is being
put in place) it runs the health probe alone, and says ``watched`` with its numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

import aiohttp

import tenure
from bench.tools.workers import next_word, say

NODE = "probe"
#: Seconds between two health probes, and the longest answer that counts as one.
HEALTH_EVERY = 0.1
HEALTH_LIMIT = 1.0


async def health(
    http_port: int, seconds: float, stop: asyncio.Event | None = None
) -> tuple[float, int, int]:
    """``/readyz`` every HEALTH_EVERY s for ``seconds`` (or until ``stop`` is set):
    slowest answer, answers, misses."""
    slowest, answered, missed = 0.0, 0, 0
    end = time.monotonic() + seconds
    timeout = aiohttp.ClientTimeout(total=HEALTH_LIMIT)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        while time.monotonic() < end and not (stop is not None and stop.is_set()):
            started = time.perf_counter()
            try:
                async with http.get(f"http://127.0.0.1:{http_port}/readyz") as reply:
                    await reply.read()
                    ok = reply.status == 200
            except (TimeoutError, aiohttp.ClientError):
                ok = False
            took = time.perf_counter() - started
            slowest = max(slowest, took)
            if ok:
                answered += 1
            else:
                missed += 1
            await asyncio.sleep(max(0.0, HEALTH_EVERY - took))
    return slowest, answered, missed


async def pairs(session: tenure.Session, seconds: float) -> list[float]:
    """Lock and release one mutex, one pair after another, for ``seconds``: each pair's s."""
    took: list[float] = []
    mutex = session.mutex("probe")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        lock = await mutex.lock()
        await lock.release()
        took.append(time.perf_counter() - started)
    return took


async def work(args: argparse.Namespace) -> None:
    """Open, ready; go -> probe, probed; end."""
    async with tenure.connect(args.url) as client:
        await client.create_node(NODE, exist_ok=True)
        async with client.session(NODE) as session:
            await pairs(session, 0.3)  # warm: the first requests pay for imports
            say(event="ready")
            watching: tuple[asyncio.Event, asyncio.Task[tuple[float, int, int]]] | None = None
            while (word := await next_word()) in (
                "go",
                "watch",
                "unwatch",
            ):
                if word == "watch":  # the health probe alone, while the load is filled
                    stop = asyncio.Event()
                    watching = stop, asyncio.create_task(health(args.http_port, 3600.0, stop))
                    continue
                if word == "unwatch" and watching is not None:
                    watching[0].set()
                    slowest, answered, missed = await watching[1]
                    say(
                        event="watched",
                        health_max_ms=slowest * 1e3,
                        health_answered=answered,
                        health_missed=missed,
                    )
                    continue
                checks = asyncio.create_task(health(args.http_port, args.seconds))
                took = await pairs(session, args.seconds)
                slowest, answered, missed = await checks
                cuts = statistics.quantiles(took, n=100)  # (a second holds hundreds)
                say(
                    event="probed",
                    pairs=len(took),
                    p50_ms=cuts[49] * 1e3,
                    p99_ms=cuts[98] * 1e3,
                    max_ms=max(took) * 1e3,
                    health_max_ms=slowest * 1e3,
                    health_answered=answered,
                    health_missed=missed,
                )
            if word != "end":
                raise RuntimeError(f"unknown word {word!r}")


def main(argv: list[str] | None = None) -> int:
    """``worker``: the probe process (spawned by bench.scale)."""
    parser = argparse.ArgumentParser(prog="python -m bench.scale.probe", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="the probe (spawned by bench.scale)")
    w.add_argument("--url", required=True)
    w.add_argument("--http-port", type=int, required=True)
    w.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(argv)
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(work(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
