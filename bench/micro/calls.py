"""Python calls per mutex block on tenure://, client and server, and the server's folder hops.

A path's cost in calls is deterministic where its timing is not (its cost in
instructions: :mod:`bench.micro.instructions`). One client (this process) does
``async with session.mutex(name):`` on distinct names over one connection to a
``tenure serve --fsync off`` on a free loopback port; ``sys.setprofile`` counts, after
a warm-up, the ``call`` events (Python functions entered; apart, those of tenure's own
functions) and the ``c_call`` events (C functions called from Python code) of
``--blocks`` blocks, per block: in the client (the blocks' own run), and in the
server from the host's ``execute`` of the first block's Acquire to that of the block
after the last (whole turns of its loop). Both sides run on uvloop, as ``scripts/bench``
does (``--event-loop asyncio``: asyncio's loop, whose own Python calls then count).

The server is ``tenure serve`` itself in a child process started through this module
(``--profiled-server``: the real command, event loop and sockets); SIGUSR1 installs
the profiler on its main thread, SIGUSR2 removes it and writes what it saw. With
``--fsync off`` there is no writer thread: the main thread is the whole serving path.

*Folder hops*: calls whose callee's folder (its directory under ``src/tenure``:
``_core``, ``_core/handlers``, ``server``, ``server/_net``...) differs from its direct
caller's, both in tenure; also counted across top-level packages only (``_core``,
``server``...). A command's share runs from the host's ``execute`` of it to that of
the next command; each command's climb is printed hop by hop. The client leaves a
block without waiting for the Release's answer: the server reads that Release with
the next Acquire, serves both in one turn and commits both in one flush, so the
Release's share ends with the Acquire's checks and the Acquire's has the flush and the
reading of the next Release. Per block the counts are exact; per command, so shared.

A compiled module makes no frames: the calls inside it are not counted (those it
makes to C are not ``c_call`` events either), and a Python function it calls is seen
as called by the nearest Python frame below. So the pure build's hops are the
structure's; the compiled build's, what of it is left in Python. The build measured
is whichever this checkout imports (``scripts/compile``: compiled; ``scripts/compile
--clean``: pure); the first line says which.

Last, the count the unit tier holds to a budget (``tests/bench/test_call_budget.py``),
by the same counting (:mod:`bench.micro.block_calls`): a block on ``memory://``, and
one on ``tenure://`` with the server in this process on the same loop, client and
server together (always on uvloop).

Run: ``python -m bench.micro.calls [--blocks 200] [--warmup 50] [--event-loop asyncio]``
from the repository's root; about five seconds.

Internals: the host's ``execute`` (``tenure._runtime.host``), named to tell one
command from the next (by its ``command`` argument); otherwise the public client and
``tenure serve``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from tests.compiled import compiled_build
from tests.server.wire import free_port

import tenure
from bench.micro import block_calls

ROOT = Path(__file__).resolve().parents[2]
#: The directory folders are named from.
PACKAGE = Path(tenure.__file__).resolve().parent
#: Where a command starts: the host's ``execute`` (in both builds a Python function).
EXECUTE = ("_runtime", "Host.execute")
#: A function: (its folder, its qualified name).
Step = tuple[str, str]
#: A hop: (caller, callee).
Hop = tuple[Step, Step]


def folder_of(filename: str, package: Path = PACKAGE) -> str | None:
    """The directory of ``filename`` under ``package`` ("." the top), None outside it."""
    try:
        return Path(filename).resolve().relative_to(package).parent.as_posix()
    except ValueError:
        return None


class Recorder:
    """A ``sys.setprofile`` function: counts the calls, keeps the folder hops.

    ``commands`` has, where each command starts (``EXECUTE``), its type's name and
    the counts so far (:meth:`counts`).
    """

    def __init__(self, package: Path = PACKAGE) -> None:
        self.package = package
        self.calls = 0
        self.tenure_calls = 0  # (of tenure's own functions)
        self.c_calls = 0
        self.hops: list[Hop] = []
        self.commands: list[tuple[str, tuple[int, int, int, int]]] = []
        self._folders: dict[str, str | None] = {}

    def counts(self) -> tuple[int, int, int, int]:
        """Calls, calls of tenure's functions, c_calls and hops so far."""
        return self.calls, self.tenure_calls, self.c_calls, len(self.hops)

    def _step(self, frame: FrameType) -> Step | None:
        code = frame.f_code
        if code.co_filename not in self._folders:
            self._folders[code.co_filename] = folder_of(code.co_filename, self.package)
        where = self._folders[code.co_filename]
        return None if where is None else (where, code.co_qualname)

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        """Count ``event``; keep a call from one tenure folder into another."""
        if event == "c_call":
            self.c_calls += 1
        elif event == "call":
            self.calls += 1
            callee = self._step(frame)
            if callee is None:
                return
            self.tenure_calls += 1
            if callee == EXECUTE:  # (its first argument after self: the command)
                name = type(frame.f_locals.get(frame.f_code.co_varnames[1])).__name__
                self.commands.append((name, self.counts()))
            caller = None if frame.f_back is None else self._step(frame.f_back)
            if caller is not None and caller[0] != callee[0]:
                self.hops.append((caller, callee))


def top_level(hops: list[Hop]) -> list[Hop]:
    """The hops of ``hops`` from one top-level package into another."""
    return [(a, b) for a, b in hops if a[0].split("/")[0] != b[0].split("/")[0]]


def profiled_server(out: Path, argv: list[str]) -> int:
    """``tenure serve ARGV``, profiled between SIGUSR1 and SIGUSR2 (module docstring)."""
    from tenure.cli.server import serve_main

    recorder = Recorder()

    def start(signum: int, frame: object) -> None:
        out.with_suffix(".on").touch()  # (before the profiler: not counted)
        sys.setprofile(recorder)

    def stop(signum: int, frame: object) -> None:
        sys.setprofile(None)
        seen = {"hops": recorder.hops, "commands": recorder.commands}
        out.with_suffix(".tmp").write_text(json.dumps(seen))
        out.with_suffix(".tmp").rename(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    return serve_main(argv)


async def blocks(url: str, warmup: int, count: int, server: Callable[[bool], None]) -> Recorder:
    """``warmup`` blocks, then ``count`` counted here and one more; ``server(True)``
    before the counted ones, ``server(False)`` after the one more."""
    recorder = Recorder()
    async with tenure.connect(url) as client:
        await client.create_node("bench", exist_ok=True)
        async with client.session("bench") as session:
            for i in range(warmup):
                async with session.mutex(f"w{i}"):
                    pass
            server(True)
            sys.setprofile(recorder)
            for i in range(count):
                async with session.mutex(f"k{i}"):
                    pass
            sys.setprofile(None)
            recorder.c_calls -= 1  # (setprofile)
            async with session.mutex("last"):  # its Acquire ends the server's count
                server(False)
    return recorder


def _wait_for(ready: Callable[[], bool], server: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30.0
    while not ready():
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the server did not {what} (exit status {server.poll()})")
        time.sleep(0.01)


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
        return True
    return False


def measure(count: int, warmup: int, loop: str) -> tuple[Recorder, Recorder]:
    """The client's recorder and the server's (its hops and commands: read back)."""
    with tempfile.TemporaryDirectory(prefix="tenure-calls-") as tmp:
        out, port = Path(tmp) / "server.json", free_port()
        command = [sys.executable, "-m", "bench.micro.calls", "--profiled-server", str(out)]
        command += ["--", "--port", str(port), "--fsync", "off", "--data-dir", f"{tmp}/data"]
        log = (Path(tmp) / "server.log").open("wb")
        server = subprocess.Popen(
            [*command, "--event-loop", loop], cwd=ROOT, stdout=log, stderr=log
        )
        try:
            _wait_for(lambda: _listening(port), server, "listen")

            def counting(on: bool) -> None:
                server.send_signal(signal.SIGUSR1 if on else signal.SIGUSR2)
                done = out.with_suffix(".on") if on else out
                _wait_for(done.exists, server, "start counting" if on else "write its counts")

            run = blocks(f"tenure://127.0.0.1:{port}", warmup, count, counting)
            client = asyncio.run(run) if loop == "asyncio" else _uvloop_run(run)
            seen = json.loads(out.read_text())
        except RuntimeError as error:
            raise RuntimeError(f"{error}; its log: {Path(log.name).read_text()[-2000:]}") from None
        finally:
            log.close()
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    served = Recorder()
    served.hops = [((a[0], a[1]), (b[0], b[1])) for a, b in seen["hops"]]
    served.commands = [(name, (a, b, c, d)) for name, (a, b, c, d) in seen["commands"]]
    return client, served


def _uvloop_run(run: object) -> Recorder:
    import uvloop  # (as every client of scripts/bench runs)

    result: Recorder = uvloop.run(run)  # type: ignore[arg-type]
    return result


def _line(side: str, counts: tuple[float, float, float]) -> str:
    calls, tenure_calls, c_calls = counts
    return f"{side:7} {calls:6.1f} calls ({tenure_calls:.1f} of tenure's), {c_calls:6.1f} c_calls"


def report(client: Recorder, server: Recorder, count: int) -> None:
    """Print the calls per block of each side and the server's hops, per command too."""
    acquires = [i for i, (name, _) in enumerate(server.commands) if name == "Acquire"]
    if len(acquires) <= count:  # (EXECUTE names where a command starts: has it moved?)
        raise RuntimeError(f"{len(acquires)} Acquires seen at {EXECUTE}, {count + 1} sent")
    window = server.commands[acquires[0] : acquires[count] + 1]
    first, end = window[0][1], window[-1][1]
    mine = [n / count for n in client.counts()[:3]]
    theirs = [(end[i] - first[i]) / count for i in range(3)]
    print(_line("client:", (mine[0], mine[1], mine[2])))
    print(_line("server:", (theirs[0], theirs[1], theirs[2])))
    print(_line("both:", (mine[0] + theirs[0], mine[1] + theirs[1], mine[2] + theirs[2])))
    hops = server.hops[first[3] : end[3]]
    across = len(top_level(hops)) / count
    print(f"server: {len(hops) / count:.1f} folder hops ({across:.1f} across top-level packages)")
    shares: dict[str, list[tuple[int, list[Hop]]]] = {}
    for (name, at), (_, after) in itertools.pairwise(window):
        shares.setdefault(name, []).append((after[0] - at[0], server.hops[at[3] : after[3]]))
    for name, seen in shares.items():
        usual = Counter(len(h) for _, h in seen).most_common(1)[0][0]
        calls = Counter(c for c, _ in seen).most_common(1)[0][0]
        climb = next(h for _, h in seen if len(h) == usual)
        print(
            f"\n{name}'s share (x{len(seen)}, the most seen): {calls} calls, {usual} folder "
            f"hops ({len(top_level(climb))} across top-level packages):"
        )
        for (a_dir, a_name), (b_dir, b_name) in climb:
            print(f"  {a_dir}:{a_name} -> {b_dir}:{b_name}")


def main(argv: list[str] | None = None) -> int:
    """Measure, and print the counts (or, ``--profiled-server``: be the server)."""
    parser = argparse.ArgumentParser(prog="python -m bench.micro.calls", description=__doc__)
    parser.add_argument("--blocks", type=int, default=200, help="blocks counted (default 200)")
    parser.add_argument("--warmup", type=int, default=50, help="blocks before (default 50)")
    parser.add_argument("--event-loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--profiled-server", type=Path, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    if args.profiled_server is not None:
        return profiled_server(args.profiled_server, rest[1:] if rest[:1] == ["--"] else rest)
    if rest or args.blocks < 1 or args.warmup < 0:
        parser.error("--blocks must be at least 1 and --warmup at least 0")
    build = "compiled" if compiled_build() else "pure"
    print(f"build: {build}; event loop: {args.event_loop}; per block, over {args.blocks}:")
    client, server = measure(args.blocks, args.warmup, args.event_loop)
    report(client, server, args.blocks)
    print("\nin one process (tests/bench/test_call_budget.py's count), calls per block:")
    for scheme in ("memory", "tenure"):
        print(f"  {scheme}://: {block_calls.measure(scheme).usual}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
