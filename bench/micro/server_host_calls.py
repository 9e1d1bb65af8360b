"""Python calls and moves between source folders for one Acquire on the server's host (not a test).

A count, not a timing: what the server's host does for one command, as
``sys.setprofile`` sees it. A single server's host over a real data directory
(``--fsync off``: the disk is not what is counted), warmed up, applies one
``Acquire`` (of a new ephemeral semaphore, granted at once) as the native face hands
it over: with the command's bytes as decoded from its frame (``--encode``: without,
as another face's command, which the journal encodes), then commits the turn (the
flush that follows). Each ``call`` event is counted, and so is each call whose
caller's module or source folder (``server/_net``, ``_runtime``, ``_core``...;
outside tenure: ``(outside)``) differs from the callee's: the moves a reader follows
through the code. The engine's own calls (``_core`` to ``_core/handlers`` and back)
are shown apart, as they are the same whatever drives the engine.

Run on the pure build (``scripts/compile --clean``: compiled modules make no Python
calls): ``python -m bench.micro.server_host_calls [--encode] [--edges]``.

Internals: the server's host (``tenure.server._server_host.wal_host``), its group
commit, the journal, the native codec (``tenure._protocol``) for the command's bytes:
the path is the server's own, which no public API exposes.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tenure
from tenure._core import Acquire, CreateNode, CreateSession, Effect, Release
from tenure._protocol import ClientConnection, Hello, Request, ServerConnection, Welcome
from tenure.server import DataDir, FsyncMode, Journal, ServeConfig, wal_host

ROOT = Path(tenure.__file__).resolve().parent
ENGINE = {"_core", "_core/handlers", "_core/commands"}


def folder(filename: str) -> str:
    """The source folder of ``filename``, under ``src/tenure`` (``(outside)``: not tenure's)."""
    try:
        relative = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return "(outside)"
    return str(relative.parent)


class Calls:
    """A profile function counting calls and the moves between modules and folders."""

    def __init__(self) -> None:
        self.calls = 0
        self.module_moves = 0
        self.folder_moves = 0
        self.engine_moves = 0
        self.edges: collections.Counter[tuple[str, str]] = collections.Counter()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        self.calls += 1
        callee = frame.f_code.co_filename
        caller = frame.f_back.f_code.co_filename if frame.f_back is not None else callee
        if caller != callee:
            self.module_moves += 1
        source, target = folder(caller), folder(callee)
        if source != target:
            self.folder_moves += 1
            self.engine_moves += source in ENGINE and target in ENGINE
            self.edges[(source, target)] += 1

    def line(self, what: str) -> str:
        """One line of the counts."""
        return (
            f"{what}: {self.calls} calls, {self.module_moves} moves between modules, "
            f"{self.folder_moves} between folders ({self.engine_moves} inside the engine, "
            f"{self.folder_moves - self.engine_moves} outside it)"
        )


def counted(call: Callable[[], object]) -> Calls:
    """The calls ``call()`` makes."""
    calls = Calls()
    sys.setprofile(calls)
    try:
        call()
    finally:
        sys.setprofile(None)
    return calls


class _Nowhere:
    """Output with nobody to write to (the host's work is counted alone)."""

    def seal(self, batch: int, durable: int) -> None:
        """Nothing is queued."""

    def release(self, durable: int) -> None:
        """Nothing was sealed."""


def _as_received(command: Acquire) -> tuple[Acquire, bytes | None]:
    """``command`` through a client's codec and the server's, and its bytes as decoded."""
    client, server = ClientConnection(), ServerConnection()
    server.receive_data(client.send(Hello()))
    server.next_event()
    client.receive_data(server.send(Welcome()))
    client.next_event()
    server.receive_data(client.send(Request(1, command)))
    request = server.next_event()
    assert isinstance(request, Request)
    received = request.command
    assert isinstance(received, Acquire)
    return received, server.command_bytes(request)


async def measure(*, encode: bool) -> tuple[Calls, Calls]:
    """The calls of one Acquire's ``execute``, and of the flush after it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        journal = Journal(DataDir(path, FsyncMode.OFF))
        engine = journal.open(asyncio.get_running_loop().time())
        served = wal_host(ServeConfig(port=0, data_dir=path, fsync=FsyncMode.OFF), journal, engine)
        routed: list[Effect] = []
        served.attach(routed.extend, _Nowhere(), lambda: None)
        served.start()
        host = served.host
        try:
            host.execute(CreateNode("n"))
            session = host.execute(CreateSession("n", b"k")).session_id
            for i in range(50):  # warm: every path taken once, caches filled
                host.execute(Acquire(session, f"w{i}", 1, i + 1, ephemeral=True))
                host.execute(Release(session, f"w{i}"))
                served.flush()
            command, raw = _as_received(Acquire(session, "k", 1, 1000, ephemeral=True))
            if encode:
                raw = None
            execute = counted(lambda: host.execute(command, "", raw))
            flush = counted(served.commit.flush)  # (as the loop calls it)
        finally:
            served.shutdown()
    return execute, flush


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.micro.server_host_calls", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--encode", action="store_true", help="hand no bytes over: the journal encodes"
    )
    parser.add_argument("--edges", action="store_true", help="list the moves between folders")
    args = parser.parse_args()
    execute, flush = asyncio.run(measure(encode=args.encode))
    how = "encoded by the journal" if args.encode else "its frame's bytes handed over"
    for what, calls in ((f"execute(Acquire), {how}", execute), ("the flush after it", flush)):
        print(calls.line(what))
        if args.edges:
            for (source, target), count in sorted(calls.edges.items(), key=lambda kv: -kv[1]):
                print(f"    {source} -> {target}: {count}")


if __name__ == "__main__":
    main()
