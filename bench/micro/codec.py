"""The native protocol's codec on the hot messages: ns per message, one run (not a test).

Encodes (message -> frame bytes) and decodes (frame body -> message) the messages
every lock pays for: the Acquire request, its Reply (granted at once) or its
Granted push (after a wait), the Release request and its Reply. Each message is
timed over ``--count`` distinct objects (the codec must not get to reuse a previous
result), the best of ``--repeats`` passes, in ns per message.

``--against REV`` (repeatable) times the codec of that git revision as well, in the
same run: its ``src/`` is exported to a temporary directory and measured in a child
process, one after the other, so both run on the same machine under the same load::

    python -m bench.micro.codec --against 45a3fe9     # the codec before msgspec, and this one

Each codec is measured in its own process (``--measure``, JSON on stdout) so neither
one's imports or caches touch the other's.

Internals: the messages of ``tenure._core`` and the codec of ``tenure._protocol``
(frames, messages): the codec has no public face, and timing it through a client
would bury it under the network and the event loop.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: The hot messages, in the order a contended lock sees them.
NAMES = (
    "Request(Acquire)",
    "Reply(AcquireResult)",
    "Push(Granted)",
    "Request(Release)",
    "Reply(bool)",
)


def hot_messages(count: int) -> dict[str, list[Any]]:
    """``count`` distinct objects of each hot message."""
    from tenure._core import MAX_COUNT, Acquire, AcquireResult, AcquireStatus, Granted, Release
    from tenure._protocol import Push, Reply, Request

    return {
        "Request(Acquire)": [
            Request(i, Acquire(7, f"lock-{i}", MAX_COUNT, i + 1, ephemeral=True))
            for i in range(count)
        ],
        "Reply(AcquireResult)": [
            Reply(i, AcquireResult(AcquireStatus.GRANTED, token=i + 1, count=MAX_COUNT))
            for i in range(count)
        ],
        "Push(Granted)": [
            Push(Granted(7, i + 1, f"lock-{i}", i + 100, MAX_COUNT)) for i in range(count)
        ],
        "Request(Release)": [Request(i, Release(7, f"lock-{i}")) for i in range(count)],
        "Reply(bool)": [Reply(i, True) for i in range(count)],
    }


def codec() -> tuple[Callable[[Any], bytes], Callable[[bytes], Any]]:
    """(message -> whole frame, frame body -> message) of the tenure on ``sys.path``."""
    from tenure._protocol.frames import encode_frame
    from tenure._protocol.messages import decode_message, encode_message

    def encode(message: Any) -> bytes:
        return encode_frame(encode_message(message))

    from tenure._protocol import frames

    if hasattr(frames, "decode_body"):  # before msgspec: msgpack, then schema.py on lists
        decode_body = frames.decode_body
        return encode, lambda body: decode_message(decode_body(body))
    return encode, decode_message  # msgspec: the body's bytes straight into the message


def best_ns(run: Callable[[], None], count: int, repeats: int) -> float:
    """The fastest of ``repeats`` calls of ``run`` (``count`` operations), in ns per operation."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter_ns()
        run()
        best = min(best, time.perf_counter_ns() - started)
    return best / count


def measure(count: int, repeats: int) -> dict[str, tuple[float, float]]:
    """``{message: (encode ns, decode ns)}`` for the tenure on ``sys.path``."""
    encode, decode = codec()
    results: dict[str, tuple[float, float]] = {}
    for name, batch in hot_messages(count).items():
        frames = [encode(message) for message in batch]
        bodies = [frame[4:] for frame in frames]
        assert [decode(body) for body in bodies] == batch, name  # the codec round-trips

        def encode_all(batch: list[Any] = batch) -> None:
            for message in batch:
                encode(message)

        def decode_all(bodies: list[bytes] = bodies) -> None:
            for body in bodies:
                decode(body)

        results[name] = (best_ns(encode_all, count, repeats), best_ns(decode_all, count, repeats))
    return results


def run_child(src: Path, count: int, repeats: int) -> dict[str, tuple[float, float]]:
    """:func:`measure` in a child process whose ``tenure`` comes from ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, __file__, "--measure", f"--count={count}", f"--repeats={repeats}"]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True, timeout=600)
    return {name: (enc, dec) for name, (enc, dec) in json.loads(out.stdout).items()}


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
    """Measure this checkout's codec (and each ``--against``), and print the table."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.micro.codec", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--count", type=int, default=20_000, help="distinct messages per pass")
    parser.add_argument("--repeats", type=int, default=5, help="passes; the best is kept")
    parser.add_argument("--against", action="append", default=[], metavar="REV")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.count, args.repeats)))
        return
    columns: dict[str, dict[str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for revision in args.against:
            into = Path(scratch) / revision.replace("/", "_")
            into.mkdir()
            columns[revision] = run_child(export(revision, into), args.count, args.repeats)
    columns["this checkout"] = run_child(ROOT / "src", args.count, args.repeats)
    print(f"ns per message (encode + decode = total), best of {args.repeats} x {args.count}")
    width = max(map(len, NAMES))
    for label, results in columns.items():
        print(f"\n{label}")
        for name in NAMES:
            enc, dec = results[name]
            print(f"  {name:<{width}}  {enc:7.0f} + {dec:7.0f} = {enc + dec:7.0f}")
        total = sum(enc + dec for enc, dec in results.values())
        print(f"  {'all five':<{width}}  {total:25.0f}")


if __name__ == "__main__":
    main()
