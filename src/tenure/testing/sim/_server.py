"""tenure's own server on a simulated host: started, crashed and started again.

:class:`SimServer` composes the server as ``tenure serve`` does (the data directory's
journal replayed, the engine put on the process's clock, :func:`wal_host`,
:class:`~tenure.server._serve.Server`), with three differences a simulation needs:

* its listening socket is the simulated network's (given as ``tenure serve`` is given
  a bound socket);
* snapshots are written in the server's own process (``Journal(background=False)``:
  no fork), every :attr:`SimServer.compact_every` records, so that runs go through
  them and through restarts from them;
* its instance id is drawn from the run's seed, once per data directory, where
  ``tenure serve`` draws 16 random bytes (a restarted server keeps it, as from its
  file);
* its wall clock (the UNIX times it tells, a claim's and a rate limiter's time) is
  :data:`EPOCH` plus the simulated time.

The journal's files are real files in a directory of the run (their bytes are the
same for a seed); ``--fsync`` is ``off`` or ``batch`` (``always`` hands turns to a
writer thread: not simulated, docs/testing.md). A crash (:meth:`SimServer.crash`)
kills the process (:meth:`~tenure.testing.sim._loop.SimLoop.crash`) and closes the
journal's file without writing what it had queued: what the server had written stays,
as after a ``kill -9``.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

from tenure.server import DataDir, FsyncMode, Journal, ServeConfig, Server, wal_host
from tenure.server._reception import Sockets

if TYPE_CHECKING:
    from tenure.testing.sim._loop import SimLoop

__all__ = ["SERVER_PORT", "RestartError", "SimServer"]

#: The port the simulated server listens on.
SERVER_PORT: Final = 7390
#: The UNIX time at the simulation's start, as the server's wall clock reads it.
EPOCH: Final = 1_800_000_000.0
#: Records between two snapshots (``tenure serve``'s is 10,000: a run sees a few).
COMPACT_EVERY: Final = 2_000


class RestartError(RuntimeError):
    """The server could not start from its data directory (a finding: it must)."""


class SimServer:
    """One tenure server on host ``host`` of ``loop``'s network (module docstring)."""

    def __init__(
        self,
        loop: SimLoop,
        data: Path,
        *,
        host: str = "server",
        port: int = SERVER_PORT,
        fsync: FsyncMode = FsyncMode.OFF,
        compact_every: int = COMPACT_EVERY,
    ) -> None:
        if fsync is FsyncMode.ALWAYS:
            raise ValueError("--fsync always hands turns to a thread: not simulated")
        self.loop = loop
        self.data = data
        self.host = host
        self.port = port
        self.fsync = fsync
        self.compact_every = compact_every
        self.ident = random.Random(f"{loop.seed}-{host}-ident").randbytes(16)
        self.server: Server | None = None
        self.journal: Journal | None = None
        #: How many times it was started.
        self.starts = 0

    @property
    def url(self) -> str:
        """Where clients reach it."""
        return f"tenure://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether a process of it serves (not crashed, not stopped)."""
        return self.server is not None

    async def start(self) -> None:
        """Start a new process of the server from its data directory (RestartError: it
        could not recover it)."""
        process = self.loop.processes.new(self.host)
        await self.loop.processes.spawn(process, self._start())
        self.starts += 1

    async def _start(self) -> None:
        config = ServeConfig(
            port=self.port, data_dir=self.data, fsync=self.fsync, idle_timeout=0
        )
        journal = Journal(
            DataDir(self.data, self.fsync), compact_every=self.compact_every, background=False
        )
        try:
            engine = journal.open(self.loop.time())
        except Exception as error:
            raise RestartError(f"{self.host} could not recover {self.data}: {error!r}") from error
        listener = self.loop.network.listen(self.host, self.port)
        # (a simulated socket stands in for the bound socket ``tenure serve`` is given)
        sockets = Sockets([cast("socket.socket", listener)])
        served = wal_host(config, journal, engine)
        served.host.wall_clock = lambda: EPOCH + self.loop.time()
        server = Server(config, served, sockets, self.ident)
        await server.start()
        self.server, self.journal = server, journal

    def crash(self) -> None:
        """Kill the server's process (module docstring)."""
        if self.server is None:
            return
        self.loop.crash(self.host)
        if self.journal is not None:
            self.journal.data_dir.abort()
        self.server = self.journal = None

    async def stop(self) -> None:
        """Stop the server as SIGTERM does (the run's end)."""
        server, self.server, self.journal = self.server, None, None
        if server is not None:
            server.stop()
            await server.wait()
