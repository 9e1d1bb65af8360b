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
same for a seed). ``--fsync always`` (the default, as ``tenure serve``'s) is made
durable by the simulated disk (:class:`~tenure.testing.sim._disk.SimDisk`) in place of
the writer thread; ``off`` and ``batch`` by the server's own loop writer. A crash
(:meth:`SimServer.crash`) kills the process
(:meth:`~tenure.testing.sim._loop.SimLoop.crash`) and closes the journal's file
without writing what it had queued: what the server had written stays, as after a
``kill -9``; with ``power`` (``--fsync always`` only) the segment keeps only what its
fsyncs made durable and a torn part of the rest.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

from tenure.server import DataDir, FsyncMode, Journal, ServeConfig, Server, wal_host
from tenure.server._reception import Sockets
from tenure.server._server_host import server_host
from tenure.testing.sim._clocks import EPOCH
from tenure.testing.sim._disk import SimDisk

if TYPE_CHECKING:
    from tenure.testing.sim._loop import SimLoop

__all__ = ["SERVER_PORT", "RestartError", "SimServer"]

#: The port the simulated server listens on.
SERVER_PORT: Final = 7390
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
        fsync: FsyncMode = FsyncMode.ALWAYS,
        compact_every: int = COMPACT_EVERY,
    ) -> None:
        self.loop = loop
        self.data = data
        self.host = host
        self.port = port
        self.fsync = fsync
        self.compact_every = compact_every
        self.ident = random.Random(f"{loop.seed}-{host}-ident").randbytes(16)
        self.server: Server | None = None
        self.journal: Journal | None = None
        self.disk: SimDisk | None = None
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
        config = ServeConfig(port=self.port, data_dir=self.data, fsync=self.fsync, idle_timeout=0)
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
        if self.fsync is FsyncMode.ALWAYS:
            rng = random.Random(f"{self.loop.seed}-{self.host}-disk-{self.starts}")
            self.disk = SimDisk(journal.data_dir, rng)
            served = server_host(config, engine, journal, self.disk)
        else:
            served = wal_host(config, journal, engine)
        served.host.wall_clock = lambda: EPOCH + self.loop.time()
        server = Server(config, served, sockets, self.ident)
        await server.start()
        self.server, self.journal = server, journal

    def crash(self, *, power: bool = False) -> tuple[int, int]:
        """Kill the server's process (module docstring; ``power``: a power loss as
        well, under ``--fsync always``); the bytes of the segment's tail past its last
        fsync that were kept, and those lost."""
        if self.server is None:
            return 0, 0
        self.loop.crash(self.host)
        torn = (0, 0)
        if power and self.disk is not None:
            torn = self.disk.lose_power()
        if self.journal is not None:
            self.journal.data_dir.abort()
        self.server = self.journal = self.disk = None
        return torn

    # -- what the nemesis faults (:class:`~tenure.testing.sim._nemesis.SimTarget`) -----

    kind = "server"

    @property
    def hosts(self) -> list[str]:
        """Its host, alone."""
        return [self.host]

    def leaders(self) -> list[str]:
        """Its host, while it runs (a single server leads itself)."""
        return [self.host] if self.running else []

    def runs(self, host: str) -> bool:
        """Whether it runs."""
        return self.running

    def kill(self, host: str, *, power: bool = False) -> tuple[int, int]:
        """:meth:`crash`."""
        return self.crash(power=power)

    async def restart(self, host: str) -> None:
        """:meth:`start`."""
        await self.start()

    def etcd_fault(self, rng: random.Random, host: str, fault: str, length: float) -> None:
        """Nothing: a single server has no etcd (ValueError)."""
        raise ValueError(f"a single server has no {fault!r} fault")

    def move(self, node: str) -> None:
        """Nothing: a single server has no cells (ValueError)."""
        raise ValueError(f"a single server has no cell to move node {node!r} to")

    async def stop(self) -> None:
        """Stop the server as SIGTERM does (the run's end)."""
        server, self.server, self.journal = self.server, None, None
        if server is not None:
            server.stop()
            await server.wait()
