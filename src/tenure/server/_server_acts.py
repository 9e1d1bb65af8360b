"""The server's own acts for its native clients: a backup read, its files reloaded.

``tenure backup`` and ``tenure reload`` reach a server at the URL every other command
takes (ReadBackup and ReloadFiles, protocol version 8: :mod:`tenure._protocol.admin`),
as ``etcdctl snapshot save`` reads etcd's client URL; the HTTP endpoint's
``/admin/backup`` and ``/admin/reload`` go on answering too. :class:`NativeActs`
answers them for the native face (:class:`tenure.server._net.acts.ServerActs`).

**Who may.** An admin token (read-write, every node): who may touch every node may
read all of them and change who gets in (the HTTP endpoint's rule,
:mod:`tenure.server._http.admin`). A server without an auth file has no token to ask
for, and already lets any client that reaches it do anything to its state (drop its
nodes, end its sessions); what a backup adds is every session's resume secret (the
state's), and what a reload adds is nothing anyone chose. Such a server acts for a
client on its own host, one whose connection comes from a loopback address: the
operator of that host, who may read its data directory anyway. A client from
elsewhere is told so, and what to do (run the command there, or give the server an
auth file). A proxy on the server's host (a TLS terminator, a service mesh's sidecar)
makes every client look local: give such a server an auth file.

**A backup read** (:class:`BackupReading`): ReadBackup at offset 0 begins one, a
:class:`~tenure.server._backups.BackupStream` (a single server forks at once: the
state as the request is served); the reads that follow are answered in order, each
with exactly its ``max_bytes`` of the file but at its end, then an empty bin, when
the backup is logged (event ``backup``), audited and over. The stream is read only as
far as the reads ask: a client that stops reading leaves the rest in the child's
pipe. A connection reads one backup at a time; a backup holds one of the server's
``--max-backups`` places (shared with the HTTP endpoint's) until it is read to its
end, fails, its connection goes, or it stalls: one that moves less than 256 KiB in
``--backup-timeout`` seconds (:mod:`tenure.server._backups`; its client asks no
more, or too little, or does not read its answers, so that the server stops reading
its requests) is given up, its reads still queued answered TIMEOUT, and its
connection sent away (GoingAway TIMEOUT, the reason; reset after ``--shutdown-grace``
if its client does not read even that); logged (event ``backup_timeout``) and
audited (``outcome``: ``timeout``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from tenure._protocol import Failure, Reply, Request, State
from tenure._protocol.admin import FilesReloaded, ReadBackup, ReloadFiles
from tenure.errors import ErrorCode, LimitExceededError
from tenure.server._backups import (
    BackupFailedError,
    BackupSource,
    BackupStream,
    log_backup,
    log_stalled,
)
from tenure.server._net.auth import Access
from tenure.server._net.gate import Conn
from tenure.server._reload import Prepare, reload_logged

if TYPE_CHECKING:
    from tenure.server._serve import Server

__all__ = ["READ_OVERHEAD", "BackupReading", "NativeActs", "backup_source", "on_own_host"]

log = logging.getLogger("tenure.server")

#: What a Reply frame adds to the bytes of a ReadBackup's answer, at most (its array,
#: type, request id and bin headers): ``max_bytes`` may be the reader's
#: ``max_frame_size`` less this.
READ_OVERHEAD: Final = 64
#: What each act is called in words, and in the audit log.
_ACTS: Final = {ReadBackup: ("take a backup", "backup"), ReloadFiles: ("reload", "reload")}


def backup_source(server: Server, version: str) -> BackupSource:
    """What a backup of ``server`` is taken of: its engine, or its cluster's state in
    etcd (a leader's: read by a process of its own)."""
    config = server.config
    engine, max_nodes = server.host.engine, config.max_nodes
    if not server.role.name or config.cluster is None:
        return BackupSource(engine, server.instance_id, version, max_nodes=max_nodes)
    # (Imported here, and only for a cluster: it needs the etcd extra, which a lone
    # server's install lacks; and the cluster's package imports this module.)
    from tenure.server._cluster.state_process import spawn

    return BackupSource(
        engine,
        server.instance_id,
        version,
        cluster=config.cluster,
        cell=(config.cell, config.cell_etcd),
        max_nodes=max_nodes,
        spawn=spawn,
    )


def on_own_host(address: str) -> bool:
    """Whether a peer's ``address`` is a loopback one (the server's own host)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


class NativeActs:
    """ReadBackup and ReloadFiles for one server's native clients (module docstring).

    ``also``: what a reload reads besides the server's own files (the HTTP port's TLS
    files, as SIGHUP reads them); ``version``: the server's, stated in each backup.
    """

    def __init__(self, server: Server, also: Sequence[Prepare] = (), version: str = "") -> None:
        self.server = server
        self.also = also
        self.version = version
        #: Each connection's backup being read.
        self.reading: dict[Conn, BackupReading] = {}
        #: The reloads asked and not answered yet (each a task: kept until it ends).
        self.reloads: set[asyncio.Task[None]] = set()

    def answer(self, conn: Conn, request: Request) -> None:
        """Answer ReadBackup or ReloadFiles (:class:`tenure.server._net.acts.ServerActs`)."""
        command = request.command
        words, act = _ACTS[type(command)]
        refusal = self.refusal(conn, words)
        if refusal is not None:
            self.record(conn, act, "permission_denied", why=refusal)
            self.fail(conn, request, ErrorCode.PERMISSION_DENIED, refusal)
            return
        if conn.token is not None:
            try:
                self.server.host.admit_request(conn.token.name)  # (a request like any other)
            except LimitExceededError as error:
                self.fail(conn, request, ErrorCode.LIMIT_EXCEEDED, str(error))
                return
        if isinstance(command, ReloadFiles):
            self._reload(conn, request)
        elif isinstance(command, ReadBackup):
            self._read(conn, request, command)

    def refusal(self, conn: Conn, words: str) -> str | None:
        """Why ``conn`` may not ``words`` (module docstring, "Who may"), or None."""
        token = conn.token
        if self.server.gate.tokens is None:
            if on_own_host(conn.host):
                return None
            return (
                f"this server has no auth file: it lets only a client on its own host "
                f"{words} (a loopback address; {conn.host} is not): run the command there "
                f"(tenure://127.0.0.1:PORT), or start the server with --auth-file and use an "
                "admin token"
            )
        if token is not None and token.access is Access.READ_WRITE and token.nodes is None:
            return None
        name = "no token" if token is None else f"token {token.name!r}"
        return f"{name} is not an admin token (read-write, on every node): it may not {words}"

    def fail(self, conn: Conn, request: Request, code: ErrorCode, why: str) -> None:
        """Answer ``request`` with a Failure."""
        self.server.out.emit(conn, Failure(request.request_id, code, why))

    def record(self, conn: Conn, act: str, outcome: str, **fields: object) -> None:
        """An audit line of ``act`` asked by ``conn``'s token (``--audit-log``)."""
        token = conn.token.name if conn.token is not None else None
        self.server.audit.record(act, token=token, address=conn.host, outcome=outcome, **fields)

    def forget(self, conn: Conn) -> None:
        """``conn`` is gone: its backup, if one was being read, is given up."""
        reading = self.reading.pop(conn, None)
        if reading is not None:
            reading.give_up()

    # -- reload --------------------------------------------------------------------------

    def _reload(self, conn: Conn, request: Request) -> None:
        # A task: the files load in a thread (seconds for a large auth file), the loop
        # serving everyone meanwhile; this connection's later frames once it is answered
        # (Conn.answering: its end of stream read first would leave the answer owed).
        task = asyncio.get_running_loop().create_task(self._reload_answered(conn, request))
        self.reloads.add(task)
        task.add_done_callback(self.reloads.discard)
        conn.answering = task

    async def _reload_answered(self, conn: Conn, request: Request) -> None:
        try:
            await self._reload_answer(conn, request)
        finally:
            conn.answering = None

    async def _reload_answer(self, conn: Conn, request: Request) -> None:
        token = conn.token.name if conn.token is not None else None
        done = await reload_logged(self.server, self.also, token=token, address=conn.host)
        # Gone meanwhile (its end of stream read, or closed): nobody to answer, and its
        # codec, closed, would refuse the answer.
        if conn.closing or conn.codec.state is State.CLOSED or conn.transport.is_closing():
            return
        if isinstance(done, Exception):
            self.fail(conn, request, ErrorCode.PRECONDITION_FAILED, str(done))
            return
        reloaded = FilesReloaded(
            done.tls,
            done.added,
            done.removed,
            done.rotated,
            done.changed,
            done.closed,
            done.others,
        )
        self.server.out.emit(conn, Reply(request.request_id, reloaded))

    # -- backups -------------------------------------------------------------------------

    def _read(self, conn: Conn, request: Request, command: ReadBackup) -> None:
        room = (conn.codec.peer_max_frame_size or 0) - READ_OVERHEAD
        if not 1 <= command.max_bytes <= room:
            why = (
                f"max_bytes must be 1 to {room} (your max_frame_size less {READ_OVERHEAD}), "
                f"got {command.max_bytes}"
            )
            self.fail(conn, request, ErrorCode.INVALID_ARGUMENT, why)
            return
        reading = self.reading.get(conn)
        if command.offset == 0:
            if reading is not None:  # a new backup: this connection's earlier one is over
                del self.reading[conn]
                reading.give_up("given up: this connection began another backup")
            full = self.server.backup_slots.take()
            if full is not None:
                self.record(conn, "backup", "limit_exceeded", why=full)
                self.fail(conn, request, ErrorCode.LIMIT_EXCEEDED, full)
                return
            try:
                # (Made before any await: a single server's child is forked now.)
                stream = BackupStream(backup_source(self.server, self.version))
            except OSError as error:
                self.server.backup_slots.give_back()
                log.warning("a backup could not begin: %s", error)
                why = "the backup could not begin (the server's log says why)"
                self.fail(conn, request, ErrorCode.INTERNAL, why)
                return
            reading = self.reading[conn] = BackupReading(self, conn, stream)
        elif reading is None:
            why = (
                f"no backup is being read on this connection (at offset {command.offset}): "
                "begin one at offset 0"
            )
            self.fail(conn, request, ErrorCode.PRECONDITION_FAILED, why)
            return
        reading.ask(request)

    def ended(self, reading: BackupReading) -> None:
        """``reading`` is over (read to its end, failed, or given up): forget it."""
        if self.reading.get(reading.conn) is reading:
            del self.reading[reading.conn]


class BackupReading:
    """One connection's backup being read: its reads answered in order (module docstring)."""

    def __init__(self, acts: NativeActs, conn: Conn, stream: BackupStream) -> None:
        self.acts = acts
        self.conn = conn
        self.stream = stream
        #: The bytes answered so far: the next read's offset.
        self.offset = 0
        self._asked: deque[Request] = deque()
        self._ready = bytearray()  # read from the stream, not yet answered
        self._task: asyncio.Task[None] | None = None
        self._over = False
        stream.watch(acts.server.config.backup_timeout, self._stalled)

    def ask(self, request: Request) -> None:
        """Queue a read; answered in order, as the stream gives its bytes."""
        self._asked.append(request)
        if self._task is None:
            self._task = asyncio.ensure_future(self._answer())
            # The connection's later frames wait for the answers (Conn.answering), as
            # a reload's do: its end of stream, read first, would close it with them
            # owed (a later request answered at once, then the read never).
            self.conn.answering = self._task

    async def _answer(self) -> None:
        """Answer the queued reads (a task while there are some)."""
        try:
            while self._asked and not self._over:
                request = self._asked[0]
                command = request.command
                assert isinstance(command, ReadBackup)
                if command.offset != self.offset:
                    self._asked.popleft()
                    why = (
                        f"the backup being read is at offset {self.offset}, not "
                        f"{command.offset}: read on from there, or begin again at 0"
                    )
                    self.acts.fail(self.conn, request, ErrorCode.PRECONDITION_FAILED, why)
                    continue
                while len(self._ready) < command.max_bytes and not self.stream.done:
                    part = await self.stream.next()
                    if part is None:
                        break
                    self._ready += part
                part = bytes(self._ready[: command.max_bytes])
                del self._ready[: command.max_bytes]
                self.offset += len(part)
                self._asked.popleft()
                self.acts.server.out.emit(self.conn, Reply(request.request_id, part))
                if not part:  # read to its end
                    fields = log_backup(self.stream)
                    self.acts.record(self.conn, "backup", "ok", **fields)
                    self._stop(ErrorCode.INTERNAL, None)
                    await self.stream.close()
        except (BackupFailedError, OSError) as error:
            log.warning("a backup read over the native protocol failed: %s", error)
            self._stop(ErrorCode.INTERNAL, "the backup failed (the server's log says why)")
            await self.stream.close()
        finally:
            if self.conn.answering is self._task:
                self.conn.answering = None
            self._task = None

    def _stop(self, code: ErrorCode, why: str | None) -> None:
        """Over: its place given back at once, forgotten; the reads still queued answered
        ``code`` and ``why`` (None: nobody to tell)."""
        if self._over:
            return
        self._over = True
        self.acts.server.backup_slots.give_back()
        self.acts.ended(self)
        while self._asked:
            request = self._asked.popleft()
            if why is not None:
                self.acts.fail(self.conn, request, code, why)

    def give_up(self, why: str | None = None, code: ErrorCode = ErrorCode.CANCELLED) -> None:
        """Stop it: its connection went (``why`` None: nobody to tell), began another
        backup, or it stalled (its reads still queued are answered ``code``, ``why``).
        Its child or process is stopped in a task of its own."""
        if self._over:
            return
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            if self.conn.answering is task:
                self.conn.answering = None  # (its later frames are read again)
        self._stop(code, why)
        closing = asyncio.ensure_future(self.stream.close())
        closing.add_done_callback(_retrieved)

    def _stalled(self) -> None:
        """Its clock ran out (module docstring): given up, logged, audited, and its
        connection sent away with the reason."""
        if self._over:
            return
        conn = self.conn
        why = log_stalled(self.stream, conn.peer, "native", self.offset)
        self.acts.record(conn, "backup", "timeout", why=why)
        self.give_up(why, ErrorCode.TIMEOUT)
        if not conn.closing:
            # Closed, not only ended: a client that does not read its answers keeps
            # them (and the connection) on the server for as long as it likes.
            self.acts.server.gate.send_away(conn, ErrorCode.TIMEOUT, why)


def _retrieved(task: asyncio.Future[None]) -> None:
    """Log what stopping a backup raised (nobody else waits for it)."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("stopping a backup failed: %r", task.exception())
