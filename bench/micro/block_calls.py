"""Python calls per warm mutex block, counted in one process: the hot path's budget.

One client does ``async with session.mutex(name):`` on distinct names, on uvloop (as
``scripts/bench`` and ``tenure serve`` run), after a warm-up; ``sys.setprofile``
counts the ``call`` events (Python functions entered, a coroutine resumed) from
just before each block to just after it, by the callee's source file and function.
On ``memory://`` that is the whole path (the engine runs in the caller's loop). On
``tenure://`` the server is a real :class:`~tenure.server._serve.Server` over a
journal with ``--fsync off`` (no writer thread) in this process, on the same loop,
so a block's count is the client's and the server's together: both ends of the
socket, read and written by the one loop, which runs uvloop's C code between them.

This is what ``tests/bench/test_call_budget.py`` holds to a budget (and checks the
modules of), and what ``python -m bench.micro.calls`` prints beside its own count
(the server in a process of its own, profiled there): one counting, in one place.

A compiled module makes no frames (its calls are not counted); a Python function it
calls is. Each block's count is kept: a timer of the session (a keep-alive) that
happens to fire inside one block adds to that block alone, so the budget reads the
count most blocks have (:attr:`Blocks.usual`).

Run: ``python -m bench.micro.block_calls [--modules]`` from the repository's root.

Internals: for ``tenure://`` the server's parts as ``tenure serve`` composes them
(``Journal``, ``wal_host``, ``Server``, ``listening_sockets``), since the unit tier
may start no process; otherwise the public client.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import tenure

#: The directory whose files are tenure's modules.
PACKAGE = Path(tenure.__file__).resolve().parent
#: Where a file outside ``src/tenure`` is named from: the standard library's files
#: by their module, uvloop's by its package; anything else by its path.
STDLIB = Path(asyncio.__file__).resolve().parent.parent


#: This module, by its name (run as ``-m``, its ``__name__`` is ``__main__``).
HERE = Path(__file__).resolve()


def module_of(filename: str) -> str:
    """The module a code object's file is: ``tenure._core.engine``, ``asyncio.tasks``,
    ``uvloop``, ``bench.micro.block_calls`` (the counting coroutine, resumed); code
    made at run time (a dataclass's ``__init__``) as its file says, ``<string>``."""
    if filename.startswith("<"):
        return filename
    path = Path(filename).resolve()
    if path == HERE:
        return "bench.micro.block_calls"
    for root, prefix in ((PACKAGE, "tenure"), (STDLIB, "")):
        if path.is_relative_to(root):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join([prefix, *parts] if prefix else parts)
    if "uvloop" in path.parts:
        return "uvloop"
    return str(path)


class Counting:
    """A ``sys.setprofile`` function: counts ``call`` events, by file and function."""

    def __init__(self) -> None:
        self.calls = 0
        self.by_function: Counter[tuple[str, str]] = Counter()

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        """Count a ``call`` event under its code's file and qualified name."""
        if event == "call":
            self.calls += 1
            code = frame.f_code
            self.by_function[(code.co_filename, code.co_qualname)] += 1


@dataclass
class Blocks:
    """What ``count`` blocks called: each block's count, and all of them by function."""

    per_block: list[int] = field(default_factory=list)
    #: (file, qualified name) -> calls, over every counted block.
    by_function: Counter[tuple[str, str]] = field(default_factory=Counter)

    @property
    def usual(self) -> int:
        """The count most blocks have (one that a timer fired in is not one of them)."""
        return Counter(self.per_block).most_common(1)[0][0]

    @property
    def steady(self) -> bool:
        """Whether more than half of the blocks have :attr:`usual` (else the count is
        not one figure: the blocks differ, and no budget can be read from them)."""
        return self.per_block.count(self.usual) * 2 > len(self.per_block)

    def by_module(self) -> Counter[str]:
        """Calls by module (:func:`module_of`), over every counted block."""
        modules: Counter[str] = Counter()
        for (filename, _), calls in self.by_function.items():
            modules[module_of(filename)] += calls
        return modules


async def count_blocks(url: str, *, warmup: int = 30, count: int = 30) -> Blocks:
    """``warmup`` blocks on ``url``, then ``count`` counted ones (module docstring)."""
    blocks, counting = Blocks(), Counting()
    async with tenure.connect(url) as client:
        await client.create_node("bench", exist_ok=True)
        async with client.session("bench") as session:
            for i in range(warmup):
                async with session.mutex(f"w{i}"):
                    pass
            # No collection while counting: its callbacks (gc.callbacks; hypothesis
            # installs one in a test run) would count as the block's calls, in whichever
            # block an allocation happened to start one.
            collecting = gc.isenabled()
            gc.disable()
            try:
                for i in range(count):
                    before = counting.calls
                    sys.setprofile(counting)
                    async with session.mutex(f"k{i}"):
                        pass
                    sys.setprofile(None)
                    blocks.per_block.append(counting.calls - before)
            finally:
                if collecting:
                    gc.enable()
    blocks.by_function = counting.by_function
    return blocks


@asynccontextmanager
async def in_process_server() -> AsyncIterator[str]:
    """A ``tenure serve --fsync off --port 0`` in this process, on this loop: its URL."""
    from tenure.server import DataDir, FsyncMode, Journal, ServeConfig, Server, wal_host
    from tenure.server._reception import listening_sockets

    with tempfile.TemporaryDirectory(prefix="tenure-block-calls-") as tmp:
        path = Path(tmp) / "data"
        config = ServeConfig(port=0, data_dir=path, fsync=FsyncMode.OFF)
        journal = Journal(DataDir(path, FsyncMode.OFF))
        engine = journal.open(asyncio.get_running_loop().time())
        sockets = listening_sockets(config)
        try:
            server = Server(config, wal_host(config, journal, engine), sockets, b"\x01" * 16)
            _, port = await server.start()
            try:
                yield f"tenure://127.0.0.1:{port}"
            finally:
                server.stop()
                await server.wait()
        finally:
            sockets.close()


async def _measure(scheme: str, warmup: int, count: int) -> Blocks:
    if scheme == "memory":
        return await count_blocks("memory://", warmup=warmup, count=count)
    async with in_process_server() as url:
        return await count_blocks(url, warmup=warmup, count=count)


def measure(scheme: str, *, warmup: int = 30, count: int = 30) -> Blocks:
    """The blocks of ``scheme`` (``memory`` or ``tenure``), on a uvloop loop of their own."""
    import uvloop  # (a dependency wherever it builds: CPython off Windows)

    if scheme not in ("memory", "tenure"):
        raise ValueError(f"scheme must be memory or tenure, got {scheme!r}")
    result: Blocks = uvloop.run(_measure(scheme, warmup, count))
    return result


def main(argv: list[str] | None = None) -> int:
    """Print each scheme's calls per block (``--modules``: by module and function too)."""
    parser = argparse.ArgumentParser(prog="python -m bench.micro.block_calls", description=__doc__)
    parser.add_argument("--blocks", type=int, default=30, help="blocks counted (default 30)")
    parser.add_argument("--modules", action="store_true", help="calls per block by module")
    args = parser.parse_args(argv)
    for scheme in ("memory", "tenure"):
        blocks = measure(scheme, count=args.blocks)
        print(f"{scheme}://: {blocks.usual} calls per block (in process, client and server)")
        if args.modules:
            for module, calls in blocks.by_module().most_common():
                print(f"  {calls / len(blocks.per_block):7.2f} {module}")
                for (filename, name), each in sorted(blocks.by_function.items()):
                    if module_of(filename) == module:
                        print(f"  {'':7} {each / len(blocks.per_block):7.2f} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
