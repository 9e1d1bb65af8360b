"""The cluster's state read from etcd by a process of its own: a leader's backups and snapshots.

A single server forks a child that walks its copy-on-write engine, for its snapshots
and backups alike; a cluster's leader cannot fork (a child forked beside gRPC's
threads crashed now and then: :mod:`tenure.server._cluster.journal`), and walking
its engine on its event loop paused every client: 85 ms at 100,000 holds, 877 ms at
1,000,000 for each snapshot, and as long for each backup. Its state is in etcd
anyway (the newest snapshot and the log after it), so the leader starts this module
as a new process (``python -m``: a fork that execs at once, which gRPC's threads
allow), which reads that state as a starting standby does (:meth:`Follower.load`,
at one etcd revision) and then, by its ``act``:

* ``backup``: writes a backup file's preamble and snapshot to standard output (the
  leader relays and hashes it: :mod:`tenure.server._http.backup`), and its last line
  on standard error is ``{"last_token": N}``;
* ``snapshot``: writes the state's snapshot into etcd in chunks, named by the index
  of the last log entry it holds and the leader's ``term`` (not yet in use), and
  prints ``{"pointer": [index, term, chunks, size, crc]}`` (or ``{"pointer": null}``
  when the log has nothing past the newest snapshot); the leader puts it in use by
  its fenced Txn, which also trims the log (:meth:`ClusterStore.install`).

Either way the leader's loop walks none of the state. What the process reads is the
cluster's state as etcd had it: every entry acknowledged before it was started is in
it (the leader answers only once its entry is in etcd).

What it is told comes on standard input, one JSON map: ``act``, ``cluster`` (the
``--cluster`` URL, whose etcd credentials stay off the command line), ``cell`` and
``cell_etcd`` (the leader's ``--cell`` and ``--cell-etcd``: whose state), ``max_nodes``;
``version`` for a backup; ``term`` and ``max_entry`` for a snapshot. Exit code 0:
done; 1: it failed, the reason on standard error (the leader logs it; a backup's
client gets no digest, so no file; a snapshot is tried again later).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import IO, Any, BinaryIO, Final, Protocol

import msgpack

from tenure._core.snapshot import dump
from tenure._etcd.client import EtcdClient, EtcdClientOptions
from tenure._etcd.streams import WatchHub
from tenure.server._cluster.follower import Follower
from tenure.server._cluster.keys import DEFAULT_CELL
from tenure.server._cluster.links import cell_keys
from tenure.server._cluster.store import ClusterStore
from tenure.server._config.cluster_url import parse_cluster_url
from tenure.server._durability.backup import BackupHeader, preamble
from tenure.server._durability.journal import collector_paused

__all__ = ["NICENESS", "Spawned", "StateProcess", "StateProcessStarter", "main", "run", "spawn"]

#: How much lower the process's CPU priority is than the leader's (``nice``).
NICENESS: Final = 10


class StateProcess(Protocol):
    """What a leader uses of a started state process (:class:`Spawned`, or the
    simulation's in-process stand-in, :mod:`tenure.testing.sim`)."""

    @property
    def returncode(self) -> int | None:
        """Its exit code (None: it still runs)."""
        ...

    def kill(self) -> None:
        """End it now (nothing if it has exited already)."""
        ...

    async def communicate(self) -> tuple[bytes, bytes]:
        """Its whole standard output and error, once it exited."""
        ...


#: What starts a state process told ``asked`` (module docstring): :func:`spawn`.
StateProcessStarter = Callable[[dict[str, Any]], Awaitable[StateProcess]]


async def run(
    asked: dict[str, Any], out: BinaryIO, connection: EtcdClientOptions | None = None
) -> dict[str, Any]:
    """Do what ``asked`` says (module docstring), writing a backup to ``out``; what
    the process prints at its end (``last_token``, or ``pointer``). ``connection``:
    how to reach etcd, in place of the cluster URL's (the simulation's channels)."""
    service = parse_cluster_url(str(asked["cluster"]))
    cell = str(asked.get("cell", DEFAULT_CELL))
    url, keys = cell_keys(service, cell, str(asked.get("cell_etcd", "")))
    conn = EtcdClient(url.connection if connection is None else connection)
    try:
        await conn.authenticate()  # (with a user and password in the URL; else nothing)
        store = ClusterStore(conn, keys)
        follower = Follower(store, WatchHub(conn), max_nodes=int(asked.get("max_nodes", 10_000)))
        await follower.load()
        engine = follower.engine
        if asked["act"] == "snapshot":
            newest, _ = await store.pointer(revision=follower.revision)
            if newest is not None and follower.applied <= newest.index:
                return {"pointer": None}  # nothing past the newest snapshot
            with collector_paused():
                data: bytes = msgpack.packb(dump(engine), use_bin_type=True)
            pointer = await store.write_chunks(
                follower.applied, int(asked["term"]), data, int(asked["max_entry"])
            )
            return {
                "pointer": [pointer.index, pointer.term, pointer.chunks, pointer.size, pointer.crc]
            }
        header = BackupHeader(
            created_at=time.time(),
            instance_id=(await store.instance_id()).hex(),
            version=str(asked.get("version", "")),
            role="leader",
            last_token=engine.last_token,
        )
        with collector_paused():
            data = msgpack.packb(dump(engine), use_bin_type=True)
    finally:
        await conn.close()
    out.write(preamble(header))
    out.write(data)
    out.flush()
    return {"last_token": header.last_token}


class Spawned:
    """A process of this module started by :func:`spawn`: its output read on the loop,
    its exit waited for by a thread (the interface of asyncio's ``Process`` that its
    callers use)."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
    ) -> None:
        self.popen = popen
        #: Its standard output, read on the loop.
        self.stdout = stdout
        #: Its standard error, read on the loop.
        self.stderr = stderr

    @property
    def returncode(self) -> int | None:
        """Its exit code (None: it still runs)."""
        return self.popen.poll()

    async def wait(self) -> int:
        """Until it exits; its exit code (the wait is a thread's: the loop never blocks)."""
        code = self.popen.poll()
        return code if code is not None else await asyncio.to_thread(self.popen.wait)

    def kill(self) -> None:
        """SIGKILL it (nothing if it has exited already)."""
        if self.popen.poll() is None:
            self.popen.kill()

    async def communicate(self) -> tuple[bytes, bytes]:
        """Its whole standard output and error, once it exited."""
        out, err = await asyncio.gather(self.stdout.read(), self.stderr.read())
        await self.wait()
        return out, err


async def spawn(asked: dict[str, Any]) -> Spawned:
    """Start this module as a process of its own, told ``asked`` (module docstring);
    its standard output and error are read on the loop, its input is given and closed.

    Started by :class:`subprocess.Popen`, which execs the interpreter from a
    ``vfork`` (``posix_spawn``): the leader's page tables are not copied. uvloop's
    own spawn forks, and a fork copies them while the loop waits: 67 ms for a parent of
    1.2 GB (``bench.micro.cluster_snapshot``'s leader at a million holds is about
    that), the longest stall a snapshot left on the leader's loop.
    """
    loop = asyncio.get_running_loop()
    # (Blocking in name only: a vfork and an exec, under a millisecond; the child's
    # exit is waited for by a thread, :meth:`Spawned.wait`.)
    popen = subprocess.Popen(  # noqa: ASYNC220
        [sys.executable, "-m", __name__],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert popen.stdin is not None
    assert popen.stdout is not None
    assert popen.stderr is not None
    try:
        readers = [await _reader(loop, popen.stdout), await _reader(loop, popen.stderr)]
        # (A few hundred bytes: far below a pipe's buffer, so this write cannot block.)
        popen.stdin.write(json.dumps(asked).encode())
        popen.stdin.close()
    except BaseException:
        popen.kill()
        raise
    return Spawned(popen, readers[0], readers[1])


async def _reader(loop: asyncio.AbstractEventLoop, pipe: IO[bytes]) -> asyncio.StreamReader:
    """A reader of ``pipe`` on ``loop``."""
    reader = asyncio.StreamReader(limit=2**20)
    await loop.connect_read_pipe(partial(asyncio.StreamReaderProtocol, reader), pipe)
    return reader


def main() -> int:
    """The process's entry (module docstring): its exit code."""
    act = "work"
    # The leader's clients come first: on a machine with few cores, this process's
    # minute of work must not take their CPU (its result is wanted, not urgent).
    os.nice(NICENESS)
    try:
        asked = json.loads(sys.stdin.read())
        act = str(asked.get("act", act))
        said = asyncio.run(run(asked, sys.stdout.buffer))
    except Exception as error:  # (the leader logs it; nothing half-made is trusted)
        print(f"the cluster's {act} failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    # (A backup's bytes are on standard output: what it says goes to standard error.)
    print(json.dumps(said), file=sys.stdout if "pointer" in said else sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
