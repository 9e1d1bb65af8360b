"""A real ``tenure serve --cluster`` for the tests: several servers over a real etcd.

:class:`TenureCluster` starts ``size`` ``tenure serve`` processes on free loopback
ports (each with its own data directory and HTTP port, and with ``ydb=True`` a YDB
port of its own), all members of one cluster whose log lives in the etcd given (the
run's shared member, or an :class:`~tests.etcd.cluster.EtcdCluster` of the test's
own). Each server keeps its ports across restarts, so a client's URL stays true;
servers are killed (``-9``), stopped (SIGTERM) and started again by PID, each wait
bounded.

Who leads is asked of the servers themselves: each answers ClusterStatus
(:meth:`TenureCluster.status`), and ``/readyz`` is 200 on the leader only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from tenure._protocol.cluster import ClusterStatus, ClusterView
from tests.server.wire import WireClient, free_port

__all__ = ["ClusterServer", "TenureCluster", "until"]

#: Bound of a start, of an election, of a stop, in seconds.
WAIT: Final = 30.0
_OPENER: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ClusterServer:
    """One member: ``python -m tenure serve --cluster URL`` on fixed ports (``ydb``:
    with ``--ydb-port``, on a port of its own too).

    ``host``: the address it listens (and is reached) on; ``prefix``: what its
    command line runs under (``ip netns exec NAME``: tools/faults/netns.py), which
    execs it in place (its PID is the server's).
    """

    def __init__(
        self,
        index: int,
        root: Path,
        cluster: str,
        extra: tuple[str, ...],
        *,
        ydb: bool = False,
        host: str = "127.0.0.1",
        prefix: tuple[str, ...] = (),
    ) -> None:
        self.index = index
        self.host = host
        self.prefix = prefix
        self.port = free_port()
        self.http_port = free_port()
        #: Its YDB face's port (0: it has none).
        self.ydb_port = free_port() if ydb else 0
        self.data_dir = root / f"member-{index}"
        self.log_path = root / f"member-{index}.log"
        self.cluster = cluster
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        #: Variables set for its next starts on top of this process's environment
        #: (``PYTHONPATH``: which build of tenure it runs; tests/cluster/test_upgrade.py).
        self.env: dict[str, str] = {}

    @property
    def address(self) -> str:
        """``HOST:PORT``: its native face (and its name in the cluster)."""
        return f"{self.host}:{self.port}"

    @property
    def ydb_address(self) -> str:
        """``HOST:PORT``: its YDB face (as discovery names it)."""
        assert self.ydb_port, f"member {self.index} has no YDB face"
        return f"{self.host}:{self.ydb_port}"

    @property
    def ydb_endpoint(self) -> str:
        """Its YDB face as ``ydb.Driver``'s ``endpoint``."""
        return f"grpc://{self.ydb_address}"

    @property
    def pid(self) -> int | None:
        """Its process id while it runs."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    @property
    def running(self) -> bool:
        """Whether its process runs."""
        return self.proc is not None and self.proc.poll() is None

    def start(self, *, wait: bool = True) -> None:
        """Start it (again, on its ports); wait until it listens, if ``wait``."""
        assert not self.running, f"member {self.index} runs already"
        args = [
            "--cluster",
            self.cluster,
            "--port",
            str(self.port),
            "--http-port",
            str(self.http_port),
            "--data-dir",
            str(self.data_dir),
            "--log-format",
            "json",
            *(("--ydb-port", str(self.ydb_port)) if self.ydb_port else ()),
            *(("--host", self.host) if self.host != "127.0.0.1" else ()),
            *self.extra,
        ]
        self.starts += 1
        with self.log_path.open("ab") as out:
            out.write(f"== start {self.starts}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [*self.prefix, sys.executable, "-m", "tenure", "serve", *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
            )
        if wait:
            self.wait_listening()

    def wait_listening(self) -> None:
        """Until this start logged that it listens (bounded)."""
        deadline = time.monotonic() + WAIT
        while '"msg": "listening"' not in self.output(this_start=True):
            if not self.running:
                raise AssertionError(f"member {self.index} exited: {self.output()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"member {self.index} did not listen: {self.output()[-3000:]}")
            time.sleep(0.05)

    def output(self, *, this_start: bool = False) -> str:
        """What it logged (since its latest start, if ``this_start``)."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text.rsplit(f"== start {self.starts}\n", 1)[-1] if this_start else text

    def ready(self) -> bool:
        """Whether ``/readyz`` answers 200 (it leads)."""
        try:
            with _OPENER.open(f"http://{self.host}:{self.http_port}/readyz", timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def kill(self) -> None:
        """``kill -9`` and reap (nothing if it does not run)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=WAIT)

    def stop(self) -> int | None:
        """SIGTERM and wait (bounded); its exit code (None if it did not run)."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.kill()
            why = f"member {self.index} did not stop: {self.output()[-3000:]}"
            raise AssertionError(why) from None

    def pause(self) -> None:
        """SIGSTOP (resume with :meth:`resume`)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)


class TenureCluster:
    """``size`` members of one cluster over the etcd at ``endpoints`` (module docstring)."""

    def __init__(
        self,
        root: Path,
        endpoints: list[str],
        *,
        size: int = 3,
        lease_ttl: int = 2,
        extra: tuple[str, ...] = (),
        name: str | None = None,
        ydb: bool = False,
    ) -> None:
        """``ydb``: every member also serves YDB's protocol, on a port of its own."""
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.name = name or f"t{uuid.uuid4().hex[:12]}"
        self.etcd_url = f"etcd://{','.join(endpoints)}/{self.name}"
        args = ("--cluster-lease-ttl", str(lease_ttl), "--fsync", "off", *extra)
        self.servers = [ClusterServer(i, root, self.etcd_url, args, ydb=ydb) for i in range(size)]

    def url(self, scheme: str = "tenure") -> str:
        """The client URL listing every member."""
        return f"{scheme}://{','.join(server.address for server in self.servers)}"

    def open(self) -> TenureCluster:
        """Start every member; return once one leads."""
        try:
            for server in self.servers:
                server.start(wait=False)
            for server in self.servers:
                server.wait_listening()
            self.leader()
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> TenureCluster:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill every member."""
        for server in self.servers:
            server.kill()

    def leader(
        self, timeout: float = WAIT, *, excluding: ClusterServer | None = None
    ) -> ClusterServer:
        """The member whose ``/readyz`` is 200 (waits until one is, bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            for server in self.servers:
                if server is not excluding and server.running and server.ready():
                    return server
            if time.monotonic() > deadline:
                logs = "\n".join(s.output()[-2000:] for s in self.servers)
                raise AssertionError(f"no member leads within {timeout}s:\n{logs}")
            time.sleep(0.05)

    def standbys(self) -> list[ClusterServer]:
        """The running members that do not lead."""
        leader = self.leader()
        return [s for s in self.servers if s is not leader and s.running]

    async def status(self, server: ClusterServer) -> ClusterView:
        """What ``server`` answers ClusterStatus (raw protocol, version 3)."""
        reader, writer = await asyncio.open_connection(server.host, server.port)
        try:
            client = WireClient(reader, writer)
            await client.hello()
            view = await client.call(ClusterStatus())
            assert isinstance(view, ClusterView)
            return view
        finally:
            writer.close()


async def until(check: Callable[[], Awaitable[Any]], what: str, seconds: float = WAIT) -> Any:
    """Until ``await check()`` returns something true (within ``seconds``): that."""
    deadline = time.monotonic() + seconds
    while True:
        got = await check()
        if got:
            return got
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.05)
