"""``POST /admin/backup``: a backup of the running server's state, streamed (``tenure backup``).

An admin act: it needs ``--auth-file`` and, as ``Authorization: Bearer``, the secret of
a read-write token limited to no nodes (a backup reads every node); guesses count
against the address as every bearer secret does (:mod:`tenure.server._http.guessing`).
A cluster's standby answers 421 with the leader's HTTP address in ``Tenure-Leader``
(the CLI asks it there).

The body is a backup file (:mod:`tenure.server._durability.backup`). A single
server's loop pays for one ``fork`` only: the child walks and encodes its
copy-on-write view of the engine, and the loop relays the pipe in chunks of
:data:`CHUNK` bytes, one per turn, hashing as it goes. A cluster's leader cannot
fork (gRPC's threads: :mod:`tenure.server._cluster.journal`): it starts a process of
its own (:mod:`tenure.server._cluster.state_process`) that reads the cluster's state
from etcd as a starting standby does, and relays what it writes the same way; its
loop walks none of the state either. Each backup is logged (event ``backup``:
``loop_items``, the engine's items walked on the loop, now always 0; ``chunks``;
``last_token``) and audited.
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
from typing import Final

from aiohttp import web

from tenure.server._durability.backup import BackupHeader, fork_dump, preamble
from tenure.server._http.admin import admin_token
from tenure.server._http.application import SERVING
from tenure.server._serve import Server

__all__ = ["CHUNK", "LEADER_HEADER", "add_backup_routes"]

log = logging.getLogger("tenure.server")

#: Bytes relayed to the client per turn of the loop.
CHUNK: Final = 256 * 1024
#: The response header a standby names the leader's HTTP address in.
LEADER_HEADER: Final = "Tenure-Leader"
#: The server's version as a backup's header states it (the endpoint's metrics know it).
_VERSION_KEY: Final = web.AppKey("backup_version", str)


class _Taking:
    """The backups being taken now (``max_backups`` bounds them)."""

    count: int = 0


#: The backups being taken now.
_TAKING: Final = web.AppKey("backups_taking", _Taking)


def _text(status: int, why: str) -> web.Response:
    return web.Response(status=status, text=f"{why}\n")


async def backup(request: web.Request) -> web.StreamResponse:
    """Stream a backup of the state (module docstring)."""
    server = request.app[SERVING].server
    if server is None:
        return web.Response(status=503, text="not serving yet\n")
    without = "a backup needs an admin token: start the server with --auth-file"
    admin = admin_token(request, server.gate.tokens, "take a backup", _text, without)
    if isinstance(admin, web.Response):
        return admin
    if not server.role.leading:
        leader = server.role.leader("http")
        headers = {LEADER_HEADER: leader} if leader else {}
        where = f"; the leader is at {leader}" if leader else "; no leader is known"
        return web.Response(status=421, text=f"not the leader{where}\n", headers=headers)
    taking = request.app[_TAKING]
    if taking.count >= server.config.max_backups:
        # Each backup forks a child holding its copy-on-write view of the state: a
        # burst of them would hold as many views (and the leader's loop, as many walks).
        why = f"max_backups ({server.config.max_backups}) backups are being taken; try again later"
        server.audit.record(
            "backup", token=admin.name, address=request.remote, outcome="limit_exceeded", why=why
        )
        return _text(429, why)
    taking.count += 1
    try:
        return await _stream(request, server, admin.name)
    finally:
        taking.count -= 1


async def _stream(request: web.Request, server: Server, admin: str) -> web.StreamResponse:
    """Take the backup and stream it (the caller counted it in)."""
    version = request.app.get(_VERSION_KEY, "")
    digest = hashlib.sha256()
    response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})

    async def send(part: bytes) -> None:
        digest.update(part)
        await response.write(part)

    if server.role.name:  # a cluster's leader: a process of its own reads etcd
        last_token, chunks = await _from_etcd(server, version, response, request, send)
    else:
        last_token, chunks = await _forked(server, version, response, request, send)
    await response.write(digest.digest())
    await response.write_eof()
    fields = {"chunks": chunks, "loop_items": 0, "last_token": last_token}
    log.info("backup taken", extra={"event": "backup", "fields": fields})
    server.audit.record("backup", token=admin, address=request.remote, outcome="ok", **fields)
    return response


Send = Callable[[bytes], Awaitable[None]]


async def _forked(
    server: Server, version: str, response: web.StreamResponse, request: web.Request, send: Send
) -> tuple[int, int]:
    """A lone server's backup: a forked child walks its copy-on-write view of the
    engine; the highest token and the chunks relayed."""
    engine = server.host.engine
    # The state is taken here, before any await: the header's token and the snapshot
    # are of one instant (a command served during an await would come between them).
    header = BackupHeader(
        created_at=time.time(),
        instance_id=server.instance_id.hex(),
        version=version,
        role="standalone",
        last_token=engine.last_token,
    )
    child: tuple[int, int] | None = fork_dump(engine)
    try:
        await response.prepare(request)
        await send(preamble(header))
        assert child is not None
        (pid, read_fd), child = child, None  # (_relay closes and reaps it)
        return header.last_token, await _relay(pid, read_fd, send)
    finally:
        if child is not None:  # the client went before the relay began
            await _abandon(*child)


async def _from_etcd(
    server: Server, version: str, response: web.StreamResponse, request: web.Request, send: Send
) -> tuple[int, int]:
    """A cluster's backup: a new process reads the cluster's state from etcd
    (:mod:`tenure.server._cluster.state_process`) and writes the whole file but its
    digest; the highest token and the chunks relayed.

    Raises:
        RuntimeError: the process failed (its reason logged; the client gets no digest).
    """
    # Here, not at the top: the cluster's process reads etcd (grpc, aetcd: the etcd
    # extra), which a lone server's --http-port must not need (issue 57).
    from tenure.server._cluster.state_process import spawn

    asked = {
        "act": "backup",
        "cluster": server.config.cluster,
        "version": version,
        "max_nodes": server.config.max_nodes,
    }
    process = await spawn(asked)
    assert process.stdout is not None
    assert process.stderr is not None
    chunks, done = 0, False
    try:
        failed = asyncio.ensure_future(process.stderr.read())
        await response.prepare(request)
        while part := await process.stdout.read(CHUNK):
            await send(part)
            chunks += 1
        code = await process.wait()
        why = (await failed).decode(errors="replace").strip()
        if code != 0:
            log.warning("a cluster backup failed: %s", why or f"exit code {code}")
            raise RuntimeError("the backup's process failed (the server's log says why)")
        done = True
        return _last_token(why), chunks
    finally:
        if not done and process.returncode is None:  # the client went: stop it
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


def _last_token(said: str) -> int:
    """The highest token the backup process's standard error names (its last JSON
    line: anything an interpreter writes there as it exits comes after, and is passed).

    Raises:
        RuntimeError: no line names it.
    """
    for line in reversed(said.splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and isinstance(found.get("last_token"), int):
            return int(found["last_token"])
    raise RuntimeError("the backup's process did not say its highest token")


async def _relay(pid: int, read_fd: int, send: Callable[[bytes], Awaitable[None]]) -> int:
    """Relay a forked child's pipe to ``send``, a chunk per turn of the loop, then reap
    the child; the chunks relayed. A child that failed: RuntimeError (the client gets
    no digest, and its file no good checksum)."""
    loop = asyncio.get_running_loop()
    chunks = 0
    try:
        os.set_blocking(read_fd, False)
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
            if not data:
                break
            await send(data)
            chunks += 1
    finally:
        os.close(read_fd)  # (a child still writing gets EPIPE, and exits)
        status = await loop.run_in_executor(None, _reap, pid)
    if status != 0:
        raise RuntimeError("the backup's child failed (the server's log says why)")
    return chunks


async def _abandon(pid: int, read_fd: int) -> None:
    """Stop a child whose backup nobody will read, and reap it."""
    os.close(read_fd)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    await asyncio.get_running_loop().run_in_executor(None, _reap, pid)


def _reap(pid: int) -> int:
    """The child's exit code; 0 if something else reaped it first (a child watcher):
    the client's check of the snapshot then tells a cut one from a whole one."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return 0
    return os.waitstatus_to_exitcode(status)


def add_backup_routes(app: web.Application, version: str = "") -> None:
    """``POST /admin/backup``; ``version``: the server's, stated in each backup."""
    app[_VERSION_KEY] = version
    app[_TAKING] = _Taking()
    app.router.add_post("/admin/backup", backup)
