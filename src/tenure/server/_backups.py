"""A backup of the running server's state, as its bytes, a chunk at a time; and how many
are being taken at once.

A backup file (:mod:`tenure.server._durability.backup`: header, snapshot, digest) is
taken for an admin over the HTTP endpoint (``POST /admin/backup``,
:mod:`tenure.server._http.backup`) or over the native protocol (ReadBackup,
:mod:`tenure.server._server_acts`); both read one :class:`BackupStream`, which gives
the file's bytes in order, its digest last. The server's loop walks none of the
state: a single server forks when the stream is made (so the header's token and the
snapshot are of one instant: nothing is served between them) and the child walks and
encodes its copy-on-write view; a cluster's leader cannot fork (gRPC's threads:
:mod:`tenure.server._cluster.journal`) and starts a process of its own
(:mod:`tenure.server._cluster.state_process`) that reads the cluster's state from
etcd as a starting standby does. Either way the loop relays the pipe
:data:`CHUNK` bytes at a time, one read a turn, hashing as it goes, at the pace its
reader asks: what the reader does not take stays in the pipe, and the child waits.

:class:`BackupSlots` bounds the backups taken at once (``--max-backups``): each holds
a child's copy-on-write view of the state, or a process reading etcd.

**A backup that does not move is given up** (``--backup-timeout``,
:meth:`BackupStream.watch`): each :data:`CHUNK` the stream gives starts its clock
again, and a backup that gives less in ``--backup-timeout`` seconds is stalled: its
door closes its connection and the stream is closed (the child killed and reaped, the
process killed), which frees its place. A rule on progress, not on the whole
transfer: a backup of any size goes on while it moves (a deadline on the whole would
have to be set for the largest state and the slowest link, so would free a stalled
place only after that long), and a client that stops reading, or takes less than a
chunk a period (a trickle), loses its place as surely as one that left. The clock runs
whatever holds the backup up, its reader or its child (a process stuck on etcd holds
a place just as long).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from tenure._core import Engine
from tenure.server._durability.backup import BackupHeader, fork_dump, preamble

if TYPE_CHECKING:
    from tenure.server._cluster.state_process import Spawned

__all__ = [
    "CHUNK",
    "BackupFailedError",
    "BackupSlots",
    "BackupSource",
    "BackupStream",
    "log_backup",
    "log_stalled",
]

log = logging.getLogger("tenure.server")

#: The most bytes relayed per read (one a turn of the loop).
CHUNK: Final = 256 * 1024


class BackupFailedError(RuntimeError):
    """The child or process taking a backup failed (the server's log says why): its
    reader gets no digest, so no file it would keep."""


@dataclass(frozen=True, slots=True)
class BackupSource:
    """What a backup is taken of: the engine (a single server's, walked by a forked
    child) or, for a cluster's leader, its cluster's etcd URL (``cluster``, read by a
    process ``spawn`` starts, :func:`tenure.server._cluster.state_process.spawn`,
    given by the caller: this module runs no cluster's code), with ``max_nodes``; the
    server's instance id, and version."""

    engine: Engine
    instance_id: bytes
    version: str
    cluster: str | None = None
    #: The leader's ``--cell`` and ``--cell-etcd`` (where its cell's state is).
    cell: tuple[str, str] = ("default", "")
    max_nodes: int = 0
    spawn: Callable[[dict[str, object]], Awaitable[Spawned]] | None = None


class BackupStream:
    """One backup being taken: its bytes, a chunk at a time (module docstring).

    Made, a single server's child is forked at once. :meth:`next` gives the next
    bytes, None after the digest; :meth:`close` gives up what still runs (a child is
    killed and reaped, a process killed), and is called however the reading ends.
    """

    def __init__(self, source: BackupSource) -> None:
        self._digest = hashlib.sha256()
        self._waiting: list[bytes] = []  # bytes to give before reading more
        self._ended = False  # the digest was given
        #: Chunks relayed of the state (not the header, not the digest).
        self.chunks = 0
        #: The highest fencing token the backup's state had handed out.
        self.last_token = 0
        self._child: tuple[int, int] | None = None  # a forked child's pid, pipe
        self._asked: dict[str, object] | None = None  # a cluster's process, to spawn
        self._process: Spawned | None = None
        self._said: asyncio.Future[bytes] | None = None  # its standard error
        self._spawn = source.spawn
        #: Whether its clock ran out (:meth:`watch`): it was given up.
        self.stalled = False
        self._timer: asyncio.TimerHandle | None = None
        #: ``--backup-timeout``, once :meth:`watch` started its clock.
        self.timeout = 0.0
        self._on_stall: Callable[[], object] = _nothing
        self._since = 0  # bytes given since the clock last started again
        if source.cluster:
            self._asked = {
                "act": "backup",
                "cluster": source.cluster,
                "cell": source.cell[0],
                "cell_etcd": source.cell[1],
                "version": source.version,
                "max_nodes": source.max_nodes,
            }
            return
        engine = source.engine
        # Taken here, before any await: the header's token and the snapshot are of one
        # instant (a command served during an await would come between them).
        header = BackupHeader(
            created_at=time.time(),
            instance_id=source.instance_id.hex(),
            version=source.version,
            role="standalone",
            last_token=engine.last_token,
        )
        self.last_token = header.last_token
        self._child = fork_dump(engine)
        self._waiting.append(preamble(header))

    def watch(self, timeout: float, stalled: Callable[[], object]) -> None:
        """Start the clock of ``--backup-timeout`` (module docstring): ``stalled`` is
        called once, by the loop, if the stream gives less than :data:`CHUNK` bytes in
        ``timeout`` seconds (counted again from each chunk), until it is closed."""
        self.timeout = timeout
        self._on_stall = stalled
        self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(self.timeout, self._stall)

    def _stall(self) -> None:
        self._timer = None
        self.stalled = True
        self._on_stall()

    @property
    def done(self) -> bool:
        """Whether every byte, the digest last, was given."""
        return self._ended and not self._waiting

    async def next(self) -> bytes | None:
        """The next bytes of the file (at most :data:`CHUNK`), None after the digest.

        Raises:
            BackupFailedError: the child or process failed (logged; nothing follows).
        """
        if self._waiting:
            return self._hashed(self._waiting.pop(0))
        if self._ended:
            return None
        part = await (self._from_child() if self._child is not None else self._from_process())
        if part:
            self.chunks += 1
            return self._hashed(part)
        self._ended = True
        return self._digest.digest()

    def _hashed(self, part: bytes) -> bytes:
        self._digest.update(part)
        self._since += len(part)
        if self._since >= CHUNK and self._timer is not None:  # it moves: start again
            self._since = 0
            self._arm()
        return part

    async def _from_child(self) -> bytes:
        """The next bytes of the forked child's pipe; b"" once it closed and the child
        exited 0."""
        assert self._child is not None
        pid, read_fd = self._child
        loop = asyncio.get_running_loop()
        while True:
            readable = loop.create_future()
            loop.add_reader(read_fd, readable.set_result, None)
            try:
                await readable
            finally:
                loop.remove_reader(read_fd)
            try:
                data = os.read(read_fd, CHUNK)
            except BlockingIOError:
                continue
            if data:
                return data
            break
        self._child = None
        os.close(read_fd)
        status = await loop.run_in_executor(None, _reap, pid)
        if status != 0:
            raise BackupFailedError("the backup's child failed (the server's log says why)")
        return b""

    async def _from_process(self) -> bytes:
        """The next bytes the cluster's backup process writes; b"" once it exited 0."""
        if self._process is None:
            if self._asked is None:
                return b""
            asked, self._asked = self._asked, None
            assert self._spawn is not None, "a cluster's backup needs its spawn"
            self._process = await self._spawn(asked)
            self._said = asyncio.ensure_future(self._process.stderr.read())
        process = self._process
        part = await process.stdout.read(CHUNK)
        if part:
            return part
        code = await process.wait()
        assert self._said is not None
        why = (await self._said).decode(errors="replace").strip()
        self._process = self._said = None
        if code != 0:
            log.warning("a cluster backup failed: %s", why or f"exit code {code}")
            raise BackupFailedError("the backup's process failed (the server's log says why)")
        self.last_token = _last_token(why)
        return b""

    async def close(self) -> None:
        """Give up what still runs: a child killed and reaped, a process killed and
        waited for; its clock stopped. Idempotent; nothing to do once the stream ended."""
        if self._timer is not None:  # (first, before any await: it cannot stall now)
            self._timer.cancel()
            self._timer = None
        self._asked = None
        if self._child is not None:
            (pid, read_fd), self._child = self._child, None
            # Killed before its pipe is closed: else a child still writing could
            # first log a BrokenPipeError, as if it had failed on its own.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.close(read_fd)
            await asyncio.get_running_loop().run_in_executor(None, _reap, pid)
        if self._process is not None:
            process, self._process = self._process, None
            process.kill()
            await process.wait()
            if self._said is not None:
                self._said.cancel()
                self._said = None


def _nothing() -> None:
    """What a stream no door watches does when it stalls: it is never called."""


def _last_token(said: str) -> int:
    """The highest token the backup process's standard error names (its last JSON
    line: anything an interpreter writes there as it exits comes after, and is passed).

    Raises:
        BackupFailedError: no line names it.
    """
    for line in reversed(said.splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and isinstance(found.get("last_token"), int):
            return int(found["last_token"])
    raise BackupFailedError("the backup's process did not say its highest token")


def _reap(pid: int) -> int:
    """The child's exit code; 0 if something else reaped it first (a child watcher):
    the reader's check of the snapshot then tells a cut one from a whole one."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return 0
    return os.waitstatus_to_exitcode(status)


class BackupSlots:
    """The backups being taken on one server now, at most ``most`` (``--max-backups``),
    over the HTTP endpoint and the native protocol together."""

    def __init__(self, most: int) -> None:
        self.most = most
        #: How many are being taken.
        self.taking = 0

    def take(self) -> str | None:
        """Count one more in, or say why not (``max_backups`` are being taken)."""
        if self.taking >= self.most:
            # Each holds a child's copy-on-write view of the state (or a process
            # reading etcd): a burst of them would hold as many.
            return f"max_backups ({self.most}) backups are being taken; try again later"
        self.taking += 1
        return None

    def give_back(self) -> None:
        """One backup ended, however it did."""
        self.taking -= 1


def log_backup(stream: BackupStream) -> dict[str, object]:
    """Log a backup taken whole (event ``backup``); the fields its audit line has too."""
    fields: dict[str, object] = {
        "chunks": stream.chunks,
        "loop_items": 0,  # (the engine's items walked on the loop: none, module docstring)
        "last_token": stream.last_token,
    }
    log.info("backup taken", extra={"event": "backup", "fields": fields})
    return fields


def log_stalled(stream: BackupStream, peer: str, door: str, sent: int) -> str:
    """Log a backup its clock gave up (event ``backup_timeout``: ``peer``, ``door``,
    ``http`` or ``native``, ``bytes``: the ``sent`` to its client, ``backup_timeout``);
    why, in words for its client and its audit line."""
    timeout = stream.timeout
    why = (
        f"the backup moved less than {CHUNK // 1024} KiB in {timeout:g} s "
        f"(--backup-timeout): given up after {sent} bytes; take it again"
    )
    fields = {"peer": peer, "door": door, "bytes": sent, "backup_timeout": timeout}
    log.warning("backup given up: %s", why, extra={"event": "backup_timeout", "fields": fields})
    return why
